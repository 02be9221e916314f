"""Pulsar Functions in the stack: the dispatcher function and who may start it, the execution role
registered functions' Lambda functions share (and nothing more), the broker's grants to create them
(names under the stack's prefix, PassRole to Lambda only), and the MagnetarFunction construct in a
team's own stack; cdk-nag finds nothing unacknowledged in either."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from infra_helpers import load_module, synthesis_inputs

pytest.importorskip("aws_cdk")

from aws_cdk import App, Duration, Stack
from aws_cdk.assertions import Match, Template

REPO_ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    layer_dir, stack_module, context = synthesis_inputs(tmp_path_factory)
    code = tmp_path_factory.mktemp("team") / "exclamation.py"
    code.write_text("def process(x):\n    return x + '!'\n")
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = App(context=context, outdir=str(outdir))
    stack = stack_module.MagnetarStack(app, "Magnetar", layer_dir=layer_dir)
    construct_module = load_module("magnetar_cdk.magnetar_function",
                                   REPO_ROOT / "infra" / "magnetar_cdk" / "magnetar_function.py")
    team = Stack(app, "TeamFunctions")
    function = construct_module.MagnetarFunction(team, "Exclamation", magnetar=stack, code=code, memory_size=512,
                                                 timeout=Duration.seconds(30), reserved_concurrency=2)
    return {"app": app, "outdir": outdir, "stack": stack, "team": team, "function": function, "code": code,
            "stage_package": construct_module.stage_package,
            "template": Template.from_stack(stack), "team_template": Template.from_stack(team)}


def _policy_statements(template: Template, role_id: str) -> list[dict[str, Any]]:
    """The statements of the role whose logical id is `role_id` (CDK may add a hash to it)."""
    roles = [k for k in template.find_resources("AWS::IAM::Role") if k == role_id
             or (k.startswith(role_id) and len(k) == len(role_id) + 8)]
    assert len(roles) == 1, (role_id, roles)
    policies = template.find_resources("AWS::IAM::Policy")
    return [s for p in policies.values() for r in p["Properties"]["Roles"] if r == {"Ref": roles[0]}
            for s in p["Properties"]["PolicyDocument"]["Statement"]]


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


def _resolved(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def test_the_dispatcher_runs_the_handler_for_fifteen_minutes(synthesized: dict[str, Any], config: ModuleType) -> None:
    template: Template = synthesized["template"]
    function = template.find_resources("AWS::Lambda::Function")[config.FUNCTION_DISPATCHER_FUNCTION_ID]
    props = function["Properties"]
    assert props["Handler"] == "handler.handler" and props["Timeout"] == config.FUNCTION_DISPATCHER_TIMEOUT_S
    assert props["Environment"]["Variables"][config.ENV_FUNCTION_PREFIX] == "Magnetar-fn-"
    statements = _policy_statements(template, f"{config.FUNCTION_DISPATCHER_FUNCTION_ID}Role")
    invokes = [_resolved(s["Resource"]) for s in statements if "lambda:InvokeFunction" in _actions(s)]
    assert any(":function:Magnetar-fn-*" in r for r in invokes)  # the registered functions' Lambda functions
    assert any(f":function:Magnetar-{config.FUNCTION_DISPATCHER_FUNCTION_ID}-*" in r for r in invokes)  # itself


@pytest.mark.parametrize("starter", ["JOURNAL_CONSUMER_FUNCTION_ID", "MAINTENANCE_FUNCTION_ID"])
def test_the_journal_consumer_and_maintenance_start_the_dispatcher_only(synthesized: dict[str, Any],
                                                                        config: ModuleType, starter: str) -> None:
    template: Template = synthesized["template"]
    logical_id = getattr(config, starter)
    function = template.find_resources("AWS::Lambda::Function")[logical_id]
    assert function["Properties"]["Environment"]["Variables"][config.ENV_FUNCTION_DISPATCHER] == {
        "Ref": config.FUNCTION_DISPATCHER_FUNCTION_ID}
    invokes = [s for s in _policy_statements(template, f"{logical_id}Role") if "lambda:InvokeFunction" in _actions(s)]
    assert [s["Resource"] for s in invokes] == [{"Fn::GetAtt": [config.FUNCTION_DISPATCHER_FUNCTION_ID, "Arn"]}]


def test_registered_functions_share_a_role_limited_to_code_state_schemas_and_logs(synthesized: dict[str, Any]) -> None:
    template: Template = synthesized["template"]
    template.has_resource_properties("AWS::IAM::Role", {"AssumeRolePolicyDocument": Match.object_like({
        "Statement": [Match.object_like({"Principal": {"Service": "lambda.amazonaws.com"}})]})})
    statements = _policy_statements(template, "FunctionRuntimeRole")
    actions = sorted(a for s in statements for a in _actions(s))
    assert actions == ["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem",
                       "logs:CreateLogStream", "logs:PutLogEvents", "s3:GetObject"]
    by_action = {a: s for s in statements for a in _actions(s)}
    assert by_action["dynamodb:UpdateItem"]["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["FNSTATE#*"]}}
    assert by_action["dynamodb:Query"]["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["SCHEMA#*"]}}
    assert "/functions/*" in _resolved(by_action["s3:GetObject"]["Resource"])


def test_the_broker_may_create_functions_under_its_prefix_and_pass_only_that_role(synthesized: dict[str, Any],
                                                                                  config: ModuleType) -> None:
    template: Template = synthesized["template"]
    broker = template.find_resources("AWS::Lambda::Function")[config.BROKER_FUNCTION_ID]
    env = broker["Properties"]["Environment"]["Variables"]
    assert env[config.ENV_FUNCTION_ROLE] == {"Fn::GetAtt": ["FunctionRuntimeRole", "Arn"]}
    assert env[config.ENV_FUNCTION_PREFIX] == "Magnetar-fn-"
    assert env[config.ENV_FUNCTION_LAYERS] == {"Ref": config.CORE_LAYER_ID}
    assert env[config.ENV_FUNCTION_LOG_GROUP] == {"Ref": "FunctionLogs"}
    statements = _policy_statements(template, f"{config.BROKER_FUNCTION_ID}Role")
    [manage] = [s for s in statements if "lambda:CreateFunction" in _actions(s)]
    assert ":function:Magnetar-fn-*" in _resolved(manage["Resource"])
    assert "lambda:InvokeFunction" not in _actions(manage)
    [passing] = [s for s in statements if "iam:PassRole" in _actions(s)]
    assert passing["Resource"] == {"Fn::GetAtt": ["FunctionRuntimeRole", "Arn"]}
    assert passing["Condition"] == {"StringEquals": {"iam:PassedToService": "lambda.amazonaws.com"}}
    reads = [r for s in statements if "s3:GetObject" in _actions(s)
             for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])]
    [package] = [r for r in reads if "cdk-" in _resolved(r)]
    assert _resolved(package).endswith('.zip"]]}') and "*" not in _resolved(package)  # that one object


def test_the_construct_packages_the_code_and_lets_the_dispatcher_invoke_it(synthesized: dict[str, Any],
                                                                           config: ModuleType) -> None:
    team: Template = synthesized["team_template"]
    [function] = team.find_resources("AWS::Lambda::Function").values()
    props = function["Properties"]
    assert (props["Handler"], props["MemorySize"], props["Timeout"], props["ReservedConcurrentExecutions"]) == (
        "handler.handler", 512, 30, 2)
    assert props["Environment"]["Variables"][config.ENV_FUNCTION_PACKAGED_CODE] == "function/exclamation.py"
    assert config.ENV_TABLE in props["Environment"]["Variables"]
    assert "CoreLayer" in _resolved(props["Layers"])  # the Magnetar stack's layer
    [permission] = team.find_resources("AWS::Lambda::Permission").values()
    assert permission["Properties"]["Action"] == "lambda:InvokeFunction"
    assert f"{config.FUNCTION_DISPATCHER_FUNCTION_ID}Role" in _resolved(permission["Properties"]["Principal"])
    package = synthesized["stage_package"](synthesized["code"])  # the asset's directory: the same inputs, the same one
    assert (package / "handler.py").read_text() == (REPO_ROOT / "functions/function_runtime/handler.py").read_text()
    assert (package / "function" / "exclamation.py").read_text() == "def process(x):\n    return x + '!'\n"


def test_cdk_nag_finds_nothing_unacknowledged(synthesized: dict[str, Any],
                                              nag_report: Callable[[Any, Path], list[dict[str, Any]]]) -> None:
    findings = nag_report(synthesized["app"], synthesized["outdir"])
    assert findings == [], json.dumps(findings, indent=1)
