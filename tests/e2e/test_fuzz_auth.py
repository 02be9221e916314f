"""The HTTP API's contract with authentication on (`magnetar local up --auth`, a process of its own):
without credentials every operation but the public ones answers 401, as documented; with a
superuser's token the whole contract holds (schemathesis, as in test_fuzz.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fuzz_helpers import SEED, load_bench
from magnetar.api.access import ROUTE_TABLE
from magnetar.api.app import app  # noqa: F401  (registers every route)

fuzz = load_bench()

SUPERUSER = "fuzz-admin"


@pytest.fixture(scope="module")
def auth_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """`magnetar local up --auth` in its own process: (url, a superuser's token)."""
    from magnetar.local.cluster import LocalUpProcess
    from magnetar.security.tokens import create_token, new_secret_key

    if "extra_args" not in inspect.signature(LocalUpProcess).parameters:
        pytest.skip("LocalUpProcess(extra_args=...) is not there yet")
    key = new_secret_key()
    key_file = tmp_path_factory.mktemp("auth") / "secret.key"
    key_file.write_bytes(key)
    args = ["--auth", "--token-secret-key", str(key_file), "--superuser-role", SUPERUSER]
    with LocalUpProcess(maintenance_interval_s=0, extra_args=args) as stack:
        yield stack.url, create_token(SUPERUSER, secret_key=key)


def _example_request(path: str, op: dict[str, Any], document: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The operation's path with its parameters' examples, and a body its schema may accept."""
    for ref in op.get("parameters", []):
        parameter = document["components"]["parameters"][ref["$ref"].rsplit("/", 1)[-1]] if "$ref" in ref else ref
        if parameter["in"] == "path":
            path = path.replace("{" + parameter["name"] + "}", str(parameter["example"]))
    return path, ({"content": b"{}", "headers": {"content-type": "application/json"}} if "requestBody" in op else {})


def test_without_credentials_every_operation_but_the_public_ones_answers_401(auth_stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    url, token = auth_stack
    examples = fuzz.prepare(url, token)  # real resources: 401 must come before any lookup
    document = fuzz.contract(url, examples)
    answered: dict[str, int] = {}
    with httpx.Client(base_url=url, timeout=30) as http:
        for path, item in document["paths"].items():
            for method, op in item.items():
                concrete, kwargs = _example_request(path, op, document)
                answered[f"{method.upper()} {path}"] = http.request(method.upper(), concrete, **kwargs).status_code
                if op["security"] == []:
                    assert answered[f"{method.upper()} {path}"] < 400, (method, path)
    refused = {k: v for k, v in answered.items() if v == 401}
    assert len(refused) == len(answered) - 1, {k: v for k, v in answered.items() if v != 401}
    # and those refusals are the documented ones
    result = fuzz.run(url, tmp_path, max_examples=1, seed=SEED, phases="examples", examples=examples)
    assert result.ok, f"{result.summary()}\n{result.output}"


def test_fuzz_every_operation_as_a_superuser(auth_stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    url, token = auth_stack
    result = fuzz.run(url, tmp_path, max_examples=2, seed=SEED, token=token, phases="examples,fuzzing")
    print(result.summary())
    assert result.operations == len(ROUTE_TABLE)
    assert result.ok, f"{result.summary()}\n{result.failed_operations}\n{result.output}"
