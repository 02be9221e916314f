"""The HTTP API fuzzed from its own contract: schemathesis against the local stack.

    .venv/bin/python bench/fuzz_api.py --max-examples 30 --seed 8

Starts its own `magnetar local up` (unless given `--url`), reads the OpenAPI document the broker
serves (`GET /openapi.json`), points the path parameters' examples at a tenant, namespace, topic
and subscription it creates (so the explicit examples reach real resources), and runs `st run`
over every operation with every phase (examples, coverage, fuzzing, stateful) and the checks: no
response >= 500, every status code, content type and body as documented. The fuzzer's requests may
change anything (`public/default` deleted, the cluster's registration rewritten): give it a
cluster nothing else needs. Prints and writes (bench/results/fuzz-api.json) the
operations, the requests the broker served (the local runtime's Lambda invocation count), the
failures and the duration. tests/e2e/test_fuzz.py runs the same with few examples.
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
ST = Path(sys.executable).parent / "st"
RESULTS = Path(__file__).resolve().parent / "results" / "fuzz-api.json"


@dataclass
class FuzzResult:
    operations: int
    test_cases: int
    requests: int  # what the broker function served (its invocations), or -1 when unknown
    failures: int
    errors: int
    duration_s: float
    failed_operations: list[str] = field(default_factory=list)
    output: str = ""

    @property
    def ok(self) -> bool:
        return self.failures == 0 and self.errors == 0

    def summary(self) -> str:
        return (f"{self.operations} operations, {self.test_cases} test cases, {self.requests} requests, "
                f"{self.failures} failures, {self.errors} errors in {self.duration_s:.1f} s")


def _headers(token: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"} if token else {}


def prepare(url: str, token: str | None = None) -> dict[str, str]:
    """A tenant, namespace, topic (with a message), subscription and consumer for the examples."""
    suffix = uuid.uuid4().hex[:8]
    names = {"tenant": f"fuzz-{suffix}", "namespace": "ns", "topic": "orders", "subscription": "sub",
             "consumer": "c1", "producer": "p1", "role": "fuzz-role"}
    tenant, ns, topic = names["tenant"], names["namespace"], names["topic"]
    with httpx.Client(base_url=url, headers=_headers(token), timeout=30) as http:
        for method, path, body in [
            ("PUT", f"/admin/v2/tenants/{tenant}", {}),
            ("PUT", f"/admin/v2/namespaces/{tenant}/{ns}", None),
            ("PUT", f"/magnetar/v1/consumer/persistent/{tenant}/{ns}/{topic}/sub/c1", {"initialPosition": "Earliest"}),
            ("POST", f"/topics/persistent/{tenant}/{ns}/{topic}",
             {"messages": [{"payload": base64.b64encode(b"fuzz").decode()}]}),
        ]:
            response = http.request(method, path, json=body)
            assert response.status_code < 300, (method, path, response.status_code, response.text)
    return names


def contract(url: str, examples: dict[str, str]) -> dict[str, Any]:
    """The served document, its path parameters' examples replaced by `examples`."""
    document: dict[str, Any] = httpx.get(f"{url}/openapi.json", timeout=30).raise_for_status().json()
    for name, parameter in document["components"]["parameters"].items():
        if name in examples:
            parameter["example"] = examples[name]
    return document


def broker_invocations(url: str) -> int:
    try:
        stats = httpx.get(f"{url}/_magnetar/local/stats", timeout=10).json()
        return int(stats["lambda"]["magnetar-broker"]["invocations"])
    except (httpx.HTTPError, KeyError, TypeError, ValueError):
        return -1


def run(url: str, workdir: Path, *, max_examples: int, seed: int, token: str | None = None,
        phases: str | None = None, examples: dict[str, str] | None = None, timeout_s: float = 1800) -> FuzzResult:
    """`st run` over the served contract; the result from its JSON report."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec, report = workdir / "openapi.json", workdir / "report.json"
    spec.write_text(json.dumps(contract(url, examples or prepare(url, token))))
    cmd = [str(ST), "run", str(spec), "--url", url, "--checks", CHECKS, "--max-examples", str(max_examples),
           "--seed", str(seed), "--generation-with-security-parameters", "false", "--request-timeout", "30",
           "--workers", "1",  # CPython 3.11's ast is not thread-safe: parallel workers crash hypothesis
           "--report", "json", "--report-json-path", str(report), "--no-color"]
    if phases:
        cmd += ["--phases", phases]
    if token:
        cmd += ["--header", f"Authorization: Bearer {token}"]
    before, started = broker_invocations(url), time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    duration, after = time.monotonic() - started, broker_invocations(url)
    if not report.exists():
        raise RuntimeError(f"schemathesis wrote no report (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    data = json.loads(report.read_text())
    failures = data.get("failures") or []
    return FuzzResult(
        operations=data["operations"]["tested"],
        test_cases=data["test_cases"]["generated"],
        requests=after - before if before >= 0 and after >= 0 else -1,
        failures=sum(f.get("count", 1) for f in failures),
        errors=sum(e.get("count", 1) for e in data.get("errors") or []),
        duration_s=round(duration, 1),
        failed_operations=sorted({op for f in failures for op in f.get("operations", [])}),
        output=proc.stdout[-20000:],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="an already running broker (default: start `magnetar local up`)")
    parser.add_argument("--max-examples", type=int, default=30, help="per operation and phase (the test: 3)")
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--token", help="a bearer token for every request (a cluster with --auth)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/magnetar-fuzz"))
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args()

    def go(url: str) -> FuzzResult:
        return run(url, args.workdir, max_examples=args.max_examples, seed=args.seed, token=args.token)

    if args.url:
        result = go(args.url)
    else:
        from magnetar.local.cluster import LocalUpProcess

        with LocalUpProcess(maintenance_interval_s=0) as stack:
            result = go(stack.url)
    print(result.output if not result.ok else "")
    print(result.summary())
    if result.failed_operations:
        print("failing operations:\n  " + "\n  ".join(result.failed_operations))
    out = {**{k: v for k, v in asdict(result).items() if k != "output"}, "max_examples": args.max_examples,
           "seed": args.seed, "command": " ".join(sys.argv)}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
