"""How `pytest -n 3 --dist loadfile` (make test) shares the test files between its workers: longest first.

A file is one unit of work (its module fixtures, e.g. a `magnetar local up` of its own, are set up
once), and xdist hands the units out in queue order, a new one to whichever worker is done first.
By default it queues them by their number of tests, which starts a file of three long tests (the
fuzz) last and leaves one worker waiting on it at the end. Queued by what each took in a measured
run (tests/durations.json, `python tests/scheduling.py JUNIT.xml` writes it from
`pytest --junitxml`), the long ones start first and the short ones fill in at the end.

The Spark files are one unit: they share the session's SparkSession (tests/spark/conftest.py), which
is a JVM of a second or more of startup and a few hundred MiB on whichever worker starts one.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from xdist.scheduler import LoadFileScheduling

ROOT = Path(__file__).resolve().parents[1]
DURATIONS = ROOT / "tests" / "durations.json"
SPARK_UNIT = "tests/spark"
DEFAULT_S = 5.0  # a file not measured yet: queued among the short ones


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or the Spark files' unit for one that uses Spark."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(f"{SPARK_UNIT}/") and not path.endswith("_unit.py"):
        return SPARK_UNIT
    return path


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()}


def ordered(nodeids: list[str], durations: dict[str, float]) -> list[int]:
    """The tests' indexes, longest unit first; a unit's tests together, in their order."""
    seconds: Counter[str] = Counter()
    first: dict[str, int] = {}
    for i, nodeid in enumerate(nodeids):
        unit = unit_of(nodeid)
        first.setdefault(unit, i)
    for unit in first:
        files = [f for f in durations if unit_of(f) == unit]
        seconds[unit] = sum(durations[f] for f in files) if files else DEFAULT_S
    return sorted(range(len(nodeids)), key=lambda i: (-seconds[unit_of(nodeids[i])], first[unit_of(nodeids[i])], i))


def from_junit(junit: Path) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown) from `pytest --junitxml`."""
    seconds: Counter[str] = Counter()
    for case in ET.parse(junit).iter("testcase"):
        parts = case.get("classname", "").split(".")  # the module's dotted path, then a class's name if any
        files = ["/".join(parts[:n]) + ".py" for n in range(len(parts), 0, -1)]
        path = next((f for f in files if (ROOT / f).is_file()), files[0])
        seconds[path] += float(case.get("time") or 0)
    return {f: round(s, 1) for f, s in sorted(seconds.items())}


class TimedLoadFile(LoadFileScheduling):
    """`--dist loadfile` with the Spark files as one unit, queued in the order of the workers'
    collection (the `pytest_collection_modifyitems` of tests/conftest.py: `ordered`), not by size."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)


if __name__ == "__main__":
    measured = from_junit(Path(sys.argv[1]))
    DURATIONS.write_text(json.dumps(measured, indent=1) + "\n")
    print(f"{DURATIONS}: {len(measured)} files, {sum(measured.values()):.0f} s")
