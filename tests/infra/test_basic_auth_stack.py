"""Pulsar's basic authentication on the deployed stack (stack prop / context `basicAuthSecretArn`):
the authorizer, and of the functions only it, reads the operator's htpasswd secret, and so does the
binary protocol proxy's task when the stack has one; without the setting nothing changes (no
variable, no grant)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from infra_helpers import synthesis_inputs

pytest.importorskip("aws_cdk")

from aws_cdk import App
from aws_cdk.assertions import Template

pytestmark = pytest.mark.cdk
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:magnetar-basic-auth-AbCdEf"


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory, config: ModuleType) -> Any:
    layer_dir, stack_module, base_context = synthesis_inputs(tmp_path_factory, "layer-basic")

    def make(extra_context: dict[str, str] | None = None, **kwargs: Any) -> Template:
        app = App(context={**base_context, **(extra_context or {})},
                  outdir=str(tmp_path_factory.mktemp("cdk.out-basic")))
        return Template.from_stack(stack_module.MagnetarStack(app, "Magnetar", layer_dir=layer_dir, **kwargs))

    return make


def _readers_of(template: Template, arn: str) -> set[str]:
    """The functions whose role may read `arn`."""
    roles = {ref["Ref"] for policy in template.find_resources("AWS::IAM::Policy").values()
             for statement in policy["Properties"]["PolicyDocument"]["Statement"]
             if arn in (statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]])
             and "secretsmanager:GetSecretValue" in statement["Action"]
             for ref in policy["Properties"]["Roles"]}
    return {logical_id for logical_id, function in template.find_resources("AWS::Lambda::Function").items()
            if function["Properties"]["Role"]["Fn::GetAtt"][0] in roles}


def test_the_authorizer_reads_the_users_secret(synth: Any, config: ModuleType) -> None:
    template = synth({"basicAuthSecretArn": SECRET_ARN})
    functions = template.find_resources("AWS::Lambda::Function")
    env = functions[config.AUTHORIZER_FUNCTION_ID]["Properties"]["Environment"]["Variables"]
    assert env[config.ENV_BASIC_AUTH_SECRET] == SECRET_ARN
    assert _readers_of(template, SECRET_ARN) == {config.AUTHORIZER_FUNCTION_ID}
    for function_id, function in functions.items():  # no other function learns of it
        if function_id != config.AUTHORIZER_FUNCTION_ID:
            variables = (function["Properties"].get("Environment") or {}).get("Variables") or {}
            assert config.ENV_BASIC_AUTH_SECRET not in variables, function_id


def test_off_by_default_and_the_argument_wins(synth: Any, config: ModuleType) -> None:
    env = synth().find_resources("AWS::Lambda::Function")[config.AUTHORIZER_FUNCTION_ID]["Properties"][
        "Environment"]["Variables"]
    assert config.ENV_BASIC_AUTH_SECRET not in env
    other = SECRET_ARN.replace("AbCdEf", "XyZ123")
    template = synth({"basicAuthSecretArn": SECRET_ARN}, basic_auth_secret_arn=other)
    assert _readers_of(template, other) == {config.AUTHORIZER_FUNCTION_ID}


def test_the_binary_protocol_proxy_checks_basic_credentials_too(synth: Any, config: ModuleType) -> None:
    template = synth({"basicAuthSecretArn": SECRET_ARN, "pulsarProtocol": "true"})
    [task] = template.find_resources("AWS::ECS::TaskDefinition").values()
    [container] = task["Properties"]["ContainerDefinitions"]
    assert {"Name": config.ENV_BASIC_AUTH_SECRET, "Value": SECRET_ARN} in container["Environment"]
    task_role = {"Ref": task["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0]}
    readers = [policy for policy in template.find_resources("AWS::IAM::Policy").values()
               if task_role in policy["Properties"]["Roles"]
               for statement in policy["Properties"]["PolicyDocument"]["Statement"]
               if SECRET_ARN in (statement["Resource"] if isinstance(statement["Resource"], list)
                                 else [statement["Resource"]])]
    assert readers, "the proxy's task role may not read the users' secret"
