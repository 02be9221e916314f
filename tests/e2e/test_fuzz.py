"""The HTTP API fuzzed from its own contract: schemathesis over every operation of /openapi.json.

No response >= 500, and every status code, content type and body as the document declares.
bench/fuzz_api.py runs the same longer (docs/benchmarks.md, "Fuzzing"); test_fuzz_auth.py runs it
with authentication on. The fuzzer's requests may change anything (delete `public/default`, rewrite
the cluster's registration), so it gets a `magnetar local up` of its own, not the session's cluster
the next test files of this worker use.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fuzz_helpers import SEED, load_bench
from magnetar.api.access import ROUTE_TABLE
from magnetar.api.app import app  # noqa: F401  (registers every route)

MAX_EXAMPLES = 3  # per operation and phase; bench/fuzz_api.py runs 30

fuzz = load_bench()


@pytest.fixture(scope="module")
def stack() -> Iterator[str]:
    """`magnetar local up` in its own process: its URL."""
    from magnetar.local.cluster import LocalUpProcess

    with LocalUpProcess(maintenance_interval_s=0) as up:
        yield up.url


@pytest.mark.timeout(900)  # ~200 operations x 3 examples x phases: minutes, more on a loaded machine
def test_fuzz_every_operation(stack: str, tmp_path: Path) -> None:
    result = fuzz.run(stack, tmp_path, max_examples=MAX_EXAMPLES, seed=SEED)
    print(result.summary())
    assert result.operations == len(ROUTE_TABLE)
    assert result.ok, f"{result.summary()}\n{result.failed_operations}\n{result.output}"
