"""Fixtures of the CDK tests."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from infra_helpers import REPO_ROOT


@pytest.fixture(scope="module")
def config() -> ModuleType:
    if str(REPO_ROOT / "src") not in sys.path:
        sys.path.insert(0, str(REPO_ROOT / "src"))
    return importlib.import_module("magnetar.config")


def _nag_report(app: Any, outdir: Path) -> list[dict[str, Any]]:
    """Synthesize `app` (an aws_cdk.App writing to `outdir`) with cdk-nag's AwsSolutions pack; the
    unacknowledged findings.

    cdk-nag 3 is a CDK policy-validation plugin: findings go to validation-report.json (not to
    annotations), acknowledgements are `Validations.of(construct).acknowledge(...)`, and an error
    fails the synthesis."""
    from aws_cdk import Validations
    from cdk_nag import AwsSolutionsChecks

    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
    except RuntimeError as exc:
        assert "ValidationFailed" in str(exc), exc
    report_file = outdir / "validation-report.json"
    if not report_file.exists():
        return []
    report = json.loads(report_file.read_text())
    return [
        {
            "rule": v["ruleName"],
            "severity": v["severity"],
            "paths": [c["constructPath"] for c in v["violatingConstructs"]],
        }
        for plugin in report["pluginReports"]
        for v in plugin["violations"]
    ]


@pytest.fixture(scope="session")
def nag_report() -> Callable[[Any, Path], list[dict[str, Any]]]:
    """`nag_report(app, outdir)`: synthesizes the app with cdk-nag's AwsSolutions pack, returns its
    unacknowledged findings ({rule, severity, paths})."""
    return _nag_report
