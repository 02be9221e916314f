"""docs/cost-model.md's figures are what bench/report.py computes from the cost model (a hand edit,
or a change of the model or of a workload file without `make bench-report`, fails here); the
sensitivity rows are the variants defined in bench/reporting/cost_model.py, and the parameter and
price tables list every field of magnetar.cost.Parameters and every price."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path
from types import ModuleType

import pytest

from magnetar.cost import DEFAULT_PARAMETERS, PRICES, Parameters
from report_helpers import load_report

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cost-model.md"
RESULTS = ROOT / "bench" / "results"


@pytest.fixture(scope="module")
def report() -> Iterator[ModuleType]:
    yield load_report("bench_report_cost")


def block(doc: str, name: str) -> str:
    return doc.split(f"<!-- bench-report:{name} -->", 1)[1].split("<!-- /bench-report -->", 1)[0]


def test_the_committed_document_is_what_the_model_computes(report: ModuleType) -> None:
    doc = DOC.read_text()
    generated = report.render(doc, report.Results(RESULTS), report.blocks_of(DOC))
    assert generated == doc, "docs/cost-model.md is stale or edited by hand between its markers: make bench-report"


def test_a_changed_default_makes_the_page_stale(report: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """The figures follow the model: with the old default (platform log lines on) every figure moves."""
    import magnetar.cost.workload as workload

    doc = DOC.read_text()
    monkeypatch.setattr(workload, "DEFAULT_PARAMETERS", replace(DEFAULT_PARAMETERS, log_bytes_per_invocation=300.0))
    generated = report.render(doc, report.Results(RESULTS), report.blocks_of(DOC))
    assert generated != doc
    results = block(generated, "cost-results")
    assert "| **USD per million messages** | **0.2095** | **0.0493** |" in results  # the figures before WARN
    assert "| **USD per million messages** | **0.2095** | **0.0493** |" not in block(doc, "cost-results")


def test_a_hand_edit_is_rewritten_and_fails_the_check(report: ModuleType, tmp_path: Path) -> None:
    doc = DOC.read_text()
    edited = doc.replace("| x86_64 Lambdas |", "| x86_64 Lambdas (edited) |", 1)
    assert edited != doc
    assert report.render(edited, report.Results(RESULTS), report.blocks_of(DOC)) == doc
    stale = tmp_path / "cost-model.md"
    stale.write_text(edited)
    check = [sys.executable, str(ROOT / "bench" / "report.py"), "--check", "--doc", str(stale)]
    assert subprocess.run(check, capture_output=True, text=True).returncode == 1
    assert subprocess.run([*check[:2], "--doc", str(stale)], capture_output=True, text=True).returncode == 0
    assert stale.read_text() == doc


def test_every_sensitivity_variant_is_a_row_and_the_observability_rows_are_there(report: ModuleType) -> None:
    from reporting.cost_model import VARIANTS  # bench/ is on the path while the module loads its blocks

    rows = [line for line in block(DOC.read_text(), "cost-sensitivity").splitlines() if line.startswith("| ")][1:]
    assert [row.split(" | ")[0].lstrip("| ").removesuffix(" (infeasible: warnings)") for row in rows] == [
        v.label for v in VARIANTS]
    labels = "\n".join(v.label for v in VARIANTS)
    assert "Lambda platform logs (logLevel INFO, 300 B per invocation)" in labels
    assert "X-Ray active tracing (xray_active 1)" in labels
    assert "no Lambda platform logs" not in DOC.read_text()
    baseline, logs, xray = (next(r for r in rows if r.startswith(f"| {label}")) for label in
                            ("baseline", "Lambda platform logs", "X-Ray active tracing"))

    def monthly(row: str) -> float:
        return float(row.rstrip(" |").rsplit("| ", 1)[1].replace(",", ""))

    assert monthly(baseline) < monthly(logs) < monthly(xray)  # both cost more than the default stack


def test_the_parameter_and_price_tables_list_every_field_and_price() -> None:
    doc = DOC.read_text()
    params = block(doc, "cost-parameters")
    assert [m.group(1) for m in re.finditer(r"^\| `(\w+)` \|", params, re.MULTILINE)] == [f.name for f in fields(Parameters)]
    assert "| `log_bytes_per_invocation` | 0.0 |" in params and "| `xray_active` | 0.0 |" in params
    prices = block(doc, "cost-prices")
    assert [m.group(1) for m in re.finditer(r"^\| `([\w.]+)` \|", prices, re.MULTILINE)] == list(PRICES)


def test_no_figure_of_the_old_defaults_is_left_in_the_prose() -> None:
    doc = DOC.read_text()
    prose = re.sub(r"<!-- bench-report:[a-z0-9-]+ -->.*?<!-- /bench-report -->", "", doc, flags=re.DOTALL)
    for stale in ("0.0493", "0.2095", "129.48", "550.66", "40.16", "0.0562", "0.2075"):
        assert stale not in prose, stale
