"""docs/benchmarks.md's tables are what bench/report.py generates from bench/results/ (a hand edit
or a result file changed without `make bench-report` fails here), every result file is cited by the
document or read by something else, and the generator refuses a document it cannot fill."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from report_helpers import load_report

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "benchmarks.md"
RESULTS = ROOT / "bench" / "results"


@pytest.fixture(scope="module")
def report() -> Iterator[ModuleType]:
    yield load_report("bench_report")


def test_the_committed_document_is_what_the_results_generate(report: ModuleType) -> None:
    doc = DOC.read_text()
    generated = report.render(doc, report.Results(RESULTS))
    assert generated == doc, "docs/benchmarks.md is stale or edited by hand between its markers: make bench-report"


def test_every_result_file_is_cited_or_read_elsewhere(report: ModuleType) -> None:
    results = report.Results(RESULTS)
    for doc in report.DOCS:
        report.render(doc.read_text(), results, report.blocks_of(doc))
    assert report.unused(results) == [], "bench/results holds runs nothing cites: delete them or cite them"
    for name in report.OTHER_READERS:
        assert (RESULTS / name).is_file(), name


def test_the_message_cost_section_comes_first_and_its_prose_quotes_no_figure() -> None:
    doc = DOC.read_text()
    sections = [line for line in doc.splitlines() if line.startswith("## ")]
    assert sections[0] == "## What a message costs at the defaults"
    section = doc.split("## What a message costs at the defaults", 1)[1].split("\n## ", 1)[0]
    prose = "\n".join(part.split("<!-- /bench-report -->", 1)[-1] for part in section.split("<!-- bench-report:"))
    measured = json.loads((RESULTS / "message-cost-summary.json").read_text())["steady-300"]
    for key in ("requests_per_1000", "requests_per_1000_without_fan_out", "usd_per_million_provisioned", "e2e_p99_ms"):
        assert str(measured[key]) not in prose, f"the message-cost prose quotes {measured[key]} ({key})"


def test_a_table_edited_by_hand_is_rewritten(report: ModuleType, tmp_path: Path) -> None:
    doc = DOC.read_text()
    start = doc.index("<!-- bench-report:message-cost -->")
    edited = doc[:start] + doc[start:].replace("| steady 300 msg/s |", "| steady 300 msg/s (edited) |", 1)
    assert edited != doc
    assert report.render(edited, report.Results(RESULTS)) == doc


def test_the_generator_refuses_what_it_cannot_fill(report: ModuleType, tmp_path: Path) -> None:
    results = report.Results(RESULTS)
    doc = DOC.read_text()
    with pytest.raises(report.ReportError, match="unknown: no-such-table"):
        report.render(doc + "\n<!-- bench-report:no-such-table -->\n<!-- /bench-report -->\n", results)
    with pytest.raises(report.ReportError, match="not in the document: headline-verify"):
        start = doc.index("<!-- bench-report:headline-verify -->")
        end = doc.index("<!-- /bench-report -->", start) + len("<!-- /bench-report -->")
        report.render(doc[:start] + doc[end:], results)
    with pytest.raises(report.ReportError, match="unbalanced"):
        report.render(doc + "\n<!-- bench-report:headline-verify -->\n", results)
    # a cited run that is missing names itself
    copy = tmp_path / "results"
    shutil.copytree(RESULTS, copy)
    (copy / "push-vs-poll.json").unlink()
    with pytest.raises(report.ReportError, match=r"push-vs-poll\.json is missing"):
        report.render(doc, report.Results(copy))


def test_a_new_run_replaces_its_figures_and_says_what_it_was_measured_at(report: ModuleType, tmp_path: Path) -> None:
    copy = tmp_path / "results"
    shutil.copytree(RESULTS, copy)
    run = json.loads((copy / "perf-protocol-pulsar.json").read_text())
    run["msgs_per_s"], run["when"] = 123456.0, "2099-01-01T00:00:00Z"
    run["config"]["batch_max_delay_ms"] = 100  # the default: nothing to add to the label
    (copy / "perf-protocol-pulsar.json").write_text(json.dumps(run))
    doc = report.render(DOC.read_text(), report.Results(copy))
    block = doc.split("<!-- bench-report:headline-protocol -->", 1)[1].split("<!-- /bench-report -->", 1)[0]
    proxy_row = next(line for line in block.splitlines() if line.startswith("| pulsar-client"))
    assert "| 123,456 |" in proxy_row and proxy_row.endswith("| today's defaults |")


def test_a_run_is_labelled_with_the_defaults_of_its_time(report: ModuleType) -> None:
    """A `magnetar perf` run made under earlier defaults says which; a run that set something
    otherwise says that too."""
    base = sys.modules["reporting.base"]
    config = {"batch_max_delay_ms": 100, "receive_wait_ms": 100}
    assert base.measured_at({"when": "2099-01-01T00:00:00Z", "config": config}, "x") == "today's defaults"
    assert base.measured_at({"when": "2026-11-29T12:00:00Z", "config": config}, "x") == "seal target 250 ms"
    assert base.measured_at({"when": "2026-11-29T12:00:00Z", "config": config, "seal_latency_ms": 300},
                            "x") == "256 KiB requests, seal latency target 300 ms"  # its own target
    assert base.measured_at({"when": "2026-11-30T07:00:00Z", "config": config}, "x") == "256 KiB requests"
    assert base.measured_at({"when": "2026-11-28T18:00:00Z", "config": {**config, "batch_max_delay_ms": 50}},
                            "x") == "producer delay 50 ms"
    assert base.measured_at({"when": "2026-11-20T00:00:00Z"}, "unpaced seals") == "unpaced seals"


def test_make_bench_report_checks_from_the_command_line(tmp_path: Path) -> None:
    stale = tmp_path / "benchmarks.md"
    stale.write_text(DOC.read_text().replace("| steady 300 msg/s |", "| hand-edited |", 1))
    check = [sys.executable, str(ROOT / "bench" / "report.py"), "--check", "--doc", str(stale)]
    assert subprocess.run(check, capture_output=True, text=True).returncode == 1
    assert subprocess.run([*check[:-3], "--doc", str(stale)], capture_output=True, text=True).returncode == 0
    assert subprocess.run(check, capture_output=True, text=True).returncode == 0
    assert stale.read_text() == DOC.read_text()


def test_a_runs_dollars_split_by_step_add_up_to_what_it_was_priced_at(report: ModuleType) -> None:
    """The steps of the unmet price goals' runs (bench/reporting/message_cost_budget.py) sum to the
    run's priced total, each step costs something, and a run without publishes costs less by them."""
    budget = sys.modules["reporting.message_cost_budget"]
    for workload in budget.GOALS:
        run = json.loads((RESULTS / f"message-cost-{workload}.json").read_text())
        split = budget.split(run)
        assert split.total == pytest.approx(run["cost_usd_per_million_msgs"]["provisioned_kinesis"], rel=1e-9)
        assert min(split.publish, split.seal_and_consume, split.rest) > 0, split
        assert split.per_seal() > split.per_publish() > 0  # a seal is an S3 object, a commit and a poll
        quiet = {**run, "aws_requests": {k: v for k, v in run["aws_requests"].items() if k not in budget.PUBLISH}}
        assert budget.split(quiet).total < split.total
