"""How `make test` shares the files between its two workers (tests/scheduling.py): the longest
unit of work first, a file's tests together and in their order, the Spark files one unit."""

from __future__ import annotations

from pathlib import Path

from scheduling import DEFAULT_S, DURATIONS, ROOT, from_junit, load_durations, ordered, unit_of


def test_the_longest_units_are_queued_first_and_a_units_tests_stay_together_in_order() -> None:
    nodeids = ["tests/e2e/test_a.py::one", "tests/e2e/test_a.py::two", "tests/e2e/test_fuzz.py::fuzz",
               "tests/unit/test_new.py::x", "tests/unit/test_z.py::p", "tests/unit/test_z.py::q"]
    durations = {"tests/e2e/test_a.py": 10.0, "tests/e2e/test_fuzz.py": 300.0, "tests/unit/test_z.py": 0.5}
    order = [nodeids[i] for i in ordered(nodeids, durations)]
    assert order == ["tests/e2e/test_fuzz.py::fuzz", "tests/e2e/test_a.py::one", "tests/e2e/test_a.py::two",
                     "tests/unit/test_new.py::x",  # not measured yet: DEFAULT_S
                     "tests/unit/test_z.py::p", "tests/unit/test_z.py::q"]
    assert 0.5 < DEFAULT_S < 10


def test_the_spark_files_are_one_unit_and_their_unit_tests_files_of_their_own() -> None:
    assert unit_of("tests/spark/test_read.py::test_x") == unit_of("tests/spark/test_sink.py::test_y") == "tests/spark"
    assert unit_of("tests/spark/test_reader_unit.py::test_z") == "tests/spark/test_reader_unit.py"
    assert unit_of("tests/e2e/test_fuzz.py::test_fuzz_every_operation") == "tests/e2e/test_fuzz.py"
    nodeids = ["tests/spark/test_read.py::a", "tests/e2e/test_b.py::b", "tests/spark/test_sink.py::c"]
    durations = {"tests/spark/test_read.py": 30.0, "tests/spark/test_sink.py": 30.0, "tests/e2e/test_b.py": 50.0}
    # the unit weighs what its files do together (60 s), so it goes before a 50 s file
    assert [nodeids[i] for i in ordered(nodeids, durations)] == [
        "tests/spark/test_read.py::a", "tests/spark/test_sink.py::c", "tests/e2e/test_b.py::b"]


def test_the_durations_are_read_from_a_junit_report_per_file(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.unit.test_suite_scheduling" name="a" time="1.25"/>'
        '<testcase classname="tests.unit.test_suite_scheduling" name="b" time="0.5"/>'
        '<testcase classname="tests.unit.test_suite_scheduling.SomeClass" name="c" time="2"/>'
        "</testsuite></testsuites>")
    assert from_junit(junit) == {"tests/unit/test_suite_scheduling.py": 3.8}


def test_the_checked_in_durations_name_test_files() -> None:
    durations = load_durations(DURATIONS)
    assert len(durations) > 100 and all(seconds >= 0 for seconds in durations.values())
    assert all(f.startswith("tests/") and f.endswith(".py") for f in durations)
    assert (ROOT / "tests" / "e2e" / "test_fuzz.py").is_file()
    assert load_durations(Path("/nonexistent/durations.json")) == {}
