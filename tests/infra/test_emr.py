"""The optional EMR Serverless part of the stack (infra/magnetar_cdk/emr.py): `MagnetarStack(emr=True)`.

One synthesis with cdk-nag's AwsSolutions pack (as `cdk synth -c emr=true` runs it), the packaged
environment built without dependencies in a temporary directory (a real build pip-installs them
for arm64 from PyPI)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from infra_helpers import REPO_ROOT, synthesis_inputs

pytest.importorskip("aws_cdk")

from aws_cdk import App
from aws_cdk.assertions import Match, Template

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module")
def emr_module() -> ModuleType:
    import importlib
    import sys

    for path in (REPO_ROOT / "src", REPO_ROOT / "infra"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    return importlib.import_module("magnetar_cdk.emr")


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory, emr_module: ModuleType,
                nag_report: Callable[[App, Path], list[dict[str, Any]]]) -> tuple[Template, list[Any]]:
    """(the template, cdk-nag's unacknowledged findings) of a stack with EMR on."""
    layer_dir, stack_module, context = synthesis_inputs(tmp_path_factory, "layer-emr")
    env_dir = emr_module.build_environment(tmp_path_factory.mktemp("emr") / "env", no_deps=True)
    outdir = tmp_path_factory.mktemp("cdk.out-emr")
    app = App(context={**context, "emrEnvironmentDir": str(env_dir)}, outdir=str(outdir))
    stack_module.MagnetarStack(app, "MagnetarEmr", layer_dir=layer_dir, emr=True)
    findings = nag_report(app, outdir)
    template = Template.from_json(json.loads((outdir / "MagnetarEmr.template.json").read_text()))
    return template, findings


def test_the_application_is_spark_4_on_arm64(synthesized: tuple[Template, list[Any]], emr_module: ModuleType) -> None:
    template, _ = synthesized
    template.resource_count_is("AWS::EMRServerless::Application", 1)
    template.has_resource_properties("AWS::EMRServerless::Application", {
        "Type": "SPARK", "ReleaseLabel": "emr-spark-8.0.0", "Architecture": "ARM64",
        "AutoStartConfiguration": {"Enabled": True},
        "AutoStopConfiguration": {"Enabled": True, "IdleTimeoutMinutes": emr_module.IDLE_MINUTES},
        "MaximumCapacity": {"Cpu": Match.any_value(), "Memory": Match.any_value()},
    })
    assert emr_module.EMR_RELEASE_LABEL == "emr-spark-8.0.0"


def _job_role(template: Template) -> tuple[str, dict[str, Any]]:
    roles = {k: v for k, v in template.find_resources("AWS::IAM::Role").items()
             if "emr-serverless.amazonaws.com" in json.dumps(v["Properties"]["AssumeRolePolicyDocument"])}
    assert len(roles) == 1, sorted(roles)
    return next(iter(roles.items()))


def test_the_job_role_has_least_privilege(synthesized: tuple[Template, list[Any]]) -> None:
    template, _ = synthesized
    role_id, role = _job_role(template)
    trust = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert len(trust) == 1 and trust[0]["Principal"] == {"Service": "emr-serverless.amazonaws.com"}
    assert set(trust[0]["Condition"]) == {"StringEquals", "ArnLike"}  # this account, this application only
    assert "ManagedPolicyArns" not in role["Properties"]
    policies = [p for p in template.find_resources("AWS::IAM::Policy").values()
                if {"Ref": role_id} in p["Properties"]["Roles"]]
    assert len(policies) == 1
    statements = policies[0]["Properties"]["PolicyDocument"]["Statement"]
    assert all(st["Effect"] == "Allow" and "Condition" not in st for st in statements)
    pairs = {(action, json.dumps(resource))  # (CDK merges statements of the same actions)
             for st in statements
             for action in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
             for resource in ([st["Resource"]] if isinstance(st["Resource"], (str, dict)) else st["Resource"])}
    assert {a for a, _ in pairs} == {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket",
                                     "execute-api:Invoke"}
    assert not any(r == '"*"' or a.endswith("*") for a, r in pairs)
    on_segments = {a for a, r in pairs if "SegmentBucket" in r}
    assert on_segments == {"s3:GetObject"}  # read only
    assert all("/segments/*" in r for a, r in pairs if "SegmentBucket" in r)  # the segments, nothing else there
    (invoke,) = [r for a, r in pairs if a == "execute-api:Invoke"]
    assert "IamHttpApi" in invoke and '"HttpApi"' not in invoke  # the SigV4 API, not the token one
    writes = {r for a, r in pairs if a in ("s3:PutObject", "s3:DeleteObject")}
    assert len(writes) == 1 and "EmrJobsBucket" in next(iter(writes))  # its own jobs bucket only
    assert any("cdk-" in r and ".zip" in r for a, r in pairs if a == "s3:GetObject")  # the environment asset


def test_the_outputs_name_what_spark_submit_needs(synthesized: tuple[Template, list[Any]]) -> None:
    template, _ = synthesized
    outputs = template.find_outputs("*")
    from magnetar.cli.spark import OUTPUTS

    assert set(OUTPUTS.values()) <= set(outputs)
    assert "EmrPythonVersion" in outputs
    assert "s3://" in json.dumps(outputs["EmrEnvironmentArchive"]["Value"])


def test_the_environment_is_an_asset_with_the_connector(synthesized: tuple[Template, list[Any]],
                                                       tmp_path: Path, emr_module: ModuleType) -> None:
    env = emr_module.build_environment(tmp_path / "env", no_deps=True)
    for package in ("magnetar/core/ledger/plan.py", "magnetar_spark/direct.py", "pyspark_magnetar/__init__.py"):
        assert (env / package).is_file(), package
    assert not (env / "magnetar" / "local").exists()  # the developer-machine parts stay out
    stamp = (env / ".magnetar-environment").read_text()
    assert emr_module.build_environment(tmp_path / "env", no_deps=True) == env  # unchanged sources: no rebuild
    assert (env / ".magnetar-environment").read_text() == stamp


def test_cdk_nag_is_clean_with_emr(synthesized: tuple[Template, list[Any]]) -> None:
    _, findings = synthesized
    assert findings == [], json.dumps(findings, indent=1)


def test_emr_is_off_unless_asked(emr_module: ModuleType) -> None:
    from aws_cdk import Stack

    assert not emr_module.enabled(Stack(App(), "Off"), None)
    assert emr_module.enabled(Stack(App(context={"emr": "true"}), "On"), None)
    assert not emr_module.enabled(Stack(App(context={"emr": "true"}), "ArgWins"), False)
