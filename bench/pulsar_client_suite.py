"""pulsar-client's own test suite (its tests/pulsar_test.py, which imports schema_test.py) against a
local cluster, through two doors:

- `sdk`: Magnetar's SDK under pulsar's names (bench/pulsar_shim first on the path: `import pulsar`
  is the SDK), the suite's service URL set to the HTTP API's (the SDK's deliberate difference);
- `proxy`: the official pulsar-client through the binary protocol proxy, at the suite's own URLs.

    .venv/bin/python bench/pulsar_client_suite.py --suite ~/src/pulsar-client-python/tests \\
        [--door sdk --door proxy] [--json bench/results/pulsar-client-suite.json]

The suite is not part of this repository: give the `tests/` folder of a pulsar-client-python
checkout. The suite expects Pulsar standalone at its fixed addresses, so `magnetar local up` runs
on them (HTTP API 8080, binary protocol 6650; both must be free), with the namespace Pulsar's test
service creates (`public/default-2`). The tests that need what that service also sets up and a
local cluster has not (TLS certificates, tokens, the `private/auth` namespace with basic
authentication) fail, in both doors alike. Not run: `test_connect_timeout`, which connects to an
address outside this machine. Each test gets `--test-timeout` seconds (a receive without a timeout
that never returns fails it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
SHIM = BENCH / "pulsar_shim"
HTTP_PORT, PULSAR_PORT = 8080, 6650
ADMIN_URL = f"http://localhost:{HTTP_PORT}"
SUITE_FILES = ("pulsar_test.py", "schema_test.py")
NOT_RUN = {"test_connect_timeout": "connects to 192.0.2.1, an address outside this machine"}
NAMESPACES = ("public/default-2",)  # what Pulsar's test service creates besides public/default


# --- one door, in a process of its own (`--run-door`) -------------------------------------------
class _Outcomes(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.outcomes: dict[str, dict[str, Any]] = {}
        self._started = 0.0

    def startTest(self, test: unittest.TestCase) -> None:
        super().startTest(test)
        self._started = time.monotonic()

    def _record(self, test: unittest.TestCase, outcome: str, detail: str = "") -> None:
        self.outcomes[_name(test)] = {"outcome": outcome, "seconds": round(time.monotonic() - self._started, 2),
                                      "detail": detail}

    def addSuccess(self, test: unittest.TestCase) -> None:
        self._record(test, "passed")

    def addFailure(self, test: unittest.TestCase, err: Any) -> None:
        self._record(test, "failed", _last_line(err))

    def addError(self, test: unittest.TestCase, err: Any) -> None:
        self._record(test, "error", _last_line(err))

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        self._record(test, "not run", reason)


def _name(test: unittest.TestCase) -> str:
    """`Class.test_method`."""
    return ".".join(test.id().rsplit(".", 2)[-2:])


def _last_line(err: Any) -> str:
    lines = "".join(traceback.format_exception_only(err[0], err[1])).strip().splitlines()
    return (lines[-1] if lines else repr(err[1]))[:300]


class _TestTimeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _TestTimeout("the test ran out of its time")


def run_door(door: str, suite: Path, test_timeout_s: int, out: Path) -> None:
    """Run the suite in this process (its path set by `main`), writing the outcomes to `out` after
    each test (the tests already there are not run again) and the test under way to `out.current`."""
    os.chdir(suite)  # the suite opens test-conf/... relative to its folder
    import pulsar  # the shim or the official client, as the path says

    expected_shim = door == "sdk"
    if Path(pulsar.__file__).resolve().is_relative_to(SHIM) != expected_shim:
        raise SystemExit(f"door {door}: `import pulsar` found {pulsar.__file__}")
    module = __import__("pulsar_test")
    if door == "sdk":  # the SDK's service URL is the HTTP API's
        for case in (module.PulsarTest, module.SchemaTest):
            case.serviceUrl = ADMIN_URL
    for name, reason in NOT_RUN.items():
        setattr(module.PulsarTest, name, unittest.skip(reason)(getattr(module.PulsarTest, name)))
    tests = list(_flatten(unittest.defaultTestLoader.loadTestsFromModule(module)))
    result = _Outcomes()
    if out.is_file():
        result.outcomes = json.loads(out.read_text())
    signal.signal(signal.SIGALRM, _alarm)
    for test in tests:
        if _name(test) in result.outcomes:
            continue
        Path(f"{out}.current").write_text(_name(test))
        signal.alarm(test_timeout_s)
        try:
            test.run(result)
        except _TestTimeout:  # raised outside the test's own try (setUp/tearDown's)
            result._record(test, "error", "the test ran out of its time")
        finally:
            signal.alarm(0)
        out.write_text(json.dumps(result.outcomes, indent=1))
    sys.stdout.flush()
    os._exit(0)  # clients the suite left open (it closes few) must not hold the process


def _flatten(suite: unittest.TestSuite) -> list[unittest.TestCase]:
    out: list[unittest.TestCase] = []
    for item in suite:
        out.extend(_flatten(item) if isinstance(item, unittest.TestSuite) else [item])
    return out


# --- the runner ----------------------------------------------------------------------------------
def _free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _door(door: str, suite: Path, test_timeout_s: int) -> dict[str, Any]:
    paths = ([str(SHIM)] if door == "sdk" else []) + [str(suite)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as tmp:
        out, current = Path(tmp) / "outcomes.json", Path(tmp) / "outcomes.json.current"
        started = time.monotonic()
        for _attempt in range(20):  # a test stuck where the alarm cannot reach (a native call): the process
            proc = subprocess.Popen([sys.executable, __file__, "--run-door", door, "--suite", str(suite),  # goes,
                                     "--out", str(out), "--test-timeout", str(test_timeout_s)],  # the rest runs on
                                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while proc.poll() is None:
                time.sleep(1)
                if current.is_file() and time.time() - current.stat().st_mtime > test_timeout_s + 30:
                    proc.kill()
                    proc.wait()
                    done = json.loads(out.read_text()) if out.is_file() else {}
                    done[current.read_text()] = {"outcome": "error", "seconds": test_timeout_s + 30,
                                                 "detail": "hung past its time (in a native call): its process killed"}
                    out.write_text(json.dumps(done))
                    current.unlink()
            if proc.returncode == 0:
                break
        if not out.is_file():
            raise SystemExit(f"door {door}: the suite wrote no outcomes")
        outcomes: dict[str, dict[str, Any]] = json.loads(out.read_text())
    counts = {k: sum(1 for o in outcomes.values() if o["outcome"] == k) for k in ("passed", "failed", "error", "not run")}
    return {"door": door, "tests": len(outcomes), **counts, "seconds": round(time.monotonic() - started, 1),
            "outcomes": dict(sorted(outcomes.items()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", type=Path, required=True, help="the tests/ folder of a pulsar-client-python checkout")
    parser.add_argument("--door", action="append", choices=("sdk", "proxy"), help="default: both")
    parser.add_argument("--json", type=Path, help="where to write the results")
    parser.add_argument("--test-timeout", type=int, default=30, help="seconds each test may take")
    parser.add_argument("--run-door", choices=("sdk", "proxy"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    suite = args.suite.expanduser().resolve()
    missing = [f for f in SUITE_FILES if not (suite / f).is_file()]
    if missing:
        parser.error(f"--suite {suite}: no {', '.join(missing)} (give the tests/ folder of pulsar-client-python)")
    if args.run_door:
        run_door(args.run_door, suite, args.test_timeout, args.out)
        return
    busy = [p for p in (HTTP_PORT, PULSAR_PORT) if not _free(p)]
    if busy:
        parser.error(f"port {', '.join(map(str, busy))} in use: the suite needs 8080 and 6650 for the local cluster")
    from importlib.metadata import version

    import httpx

    from magnetar.local.cluster import LocalUpProcess

    runs = []
    for door in args.door or ["sdk", "proxy"]:  # a new cluster each: the suite reuses topic and subscription names
        with LocalUpProcess(maintenance_interval_s=0, port=HTTP_PORT, pulsar_port=PULSAR_PORT) as up:
            for namespace in NAMESPACES:
                httpx.put(f"{up.url}/admin/v2/namespaces/{namespace}", timeout=30)
            runs.append(_door(door, suite, args.test_timeout))
        print(f"{door:>6}: {runs[-1]['passed']}/{runs[-1]['tests']} passed, {runs[-1]['failed']} failed, "
              f"{runs[-1]['error']} errors, {runs[-1]['not run']} not run ({runs[-1]['seconds']} s)")
        while not (_free(HTTP_PORT) and _free(PULSAR_PORT)):  # the next door's cluster takes the same ports
            time.sleep(0.5)
    result = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "suite": {f: hashlib.sha256((suite / f).read_bytes()).hexdigest()[:16] for f in SUITE_FILES},
        "pulsar_client": version("pulsar-client"), "not_run": NOT_RUN, "runs": runs,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
