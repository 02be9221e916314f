"""The HTTP API fuzzed from its own contract: schemathesis over every operation of /openapi.json.

No response >= 500, and every status code, content type and body as the document declares.
bench/fuzz_api.py runs the same longer (docs/benchmarks.md, "Fuzzing"); test_fuzz_auth.py runs it
with authentication on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz_helpers import SEED, load_bench
from magnetar.api.access import ROUTE_TABLE
from magnetar.api.app import app  # noqa: F401  (registers every route)

MAX_EXAMPLES = 3  # per operation and phase; bench/fuzz_api.py runs 30

fuzz = load_bench()


@pytest.mark.timeout(900)  # ~200 operations x 3 examples x phases: minutes, more on a loaded machine
def test_fuzz_every_operation(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = fuzz.run(cluster.url, tmp_path, max_examples=MAX_EXAMPLES, seed=SEED)
    print(result.summary())
    assert result.operations == len(ROUTE_TABLE)
    assert result.ok, f"{result.summary()}\n{result.failed_operations}\n{result.output}"
