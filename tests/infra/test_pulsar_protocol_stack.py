"""The optional Pulsar binary protocol proxy on AWS (infra/magnetar_cdk/pulsar_protocol.py): ECS
Fargate on ARM64 behind a Network Load Balancer with a TLS listener on 6651, scaling on CPU and on
connections per task, the broker function's permissions, an image built from the repository's
Dockerfile at deploy time only (synthesis fingerprints its context, offline); off by default."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from infra_helpers import synthesis_inputs

pytest.importorskip("aws_cdk")

from aws_cdk import App
from aws_cdk.assertions import Template

pytestmark = pytest.mark.cdk
DOCKERFILE = "infra/pulsar_protocol/Dockerfile"
CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/0f3c1c6e-0000-4000-8000-000000000000"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return synthesis_inputs(tmp_path_factory, "layer-pulsar")


def _app(inputs: Any, tmp_path_factory: pytest.TempPathFactory, context: dict[str, str] | None = None,
         **kwargs: Any) -> tuple[App, Any, Path]:
    layer_dir, stack_module, base_context = inputs
    outdir = tmp_path_factory.mktemp("cdk.out-pulsar")
    app = App(context={**base_context, **(context or {})}, outdir=str(outdir))
    return app, stack_module.MagnetarStack(app, "Magnetar", layer_dir=layer_dir, **kwargs), outdir


def _statements(template: Template, role_ref: dict[str, Any]) -> set[str]:
    """A role's policy statements, each as canonical JSON (actions sorted)."""
    out = set()
    for policy in template.find_resources("AWS::IAM::Policy").values():
        if role_ref in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                out.add(json.dumps({**statement, "Action": sorted(actions)}, sort_keys=True))
    return out


def test_the_proxy_on_fargate_behind_a_tls_network_load_balancer(
        inputs: Any, tmp_path_factory: pytest.TempPathFactory, config: ModuleType) -> None:
    pytest.importorskip("cdk_nag")
    from aws_cdk import Validations
    from cdk_nag import AwsSolutionsChecks

    app, stack, outdir = _app(inputs, tmp_path_factory, pulsar_protocol=True,
                              pulsar_protocol_certificate_arn=CERTIFICATE)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()  # cdk-nag's AwsSolutions pack: an unacknowledged finding fails the synthesis
    report = outdir / "validation-report.json"
    if report.exists():
        violations = [v for p in json.loads(report.read_text())["pluginReports"] for v in p["violations"]]
        assert violations == [], json.dumps(violations, indent=1)[:3000]
    template = Template.from_stack(stack)

    [task] = template.find_resources("AWS::ECS::TaskDefinition").values()
    props = task["Properties"]
    assert props["RequiresCompatibilities"] == ["FARGATE"]
    assert props["RuntimePlatform"] == {"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"}
    [container] = props["ContainerDefinitions"]
    assert container["PortMappings"] == [{"ContainerPort": 6650, "Protocol": "tcp"}]
    assert "cdk-hnb659fds-container-assets" in json.dumps(container["Image"])  # the image asset, pushed at deploy
    env = {v["Name"]: v["Value"] for v in container["Environment"]}
    assert {config.ENV_TABLE, config.ENV_BUCKET, config.ENV_STREAM, config.ENV_WS_ENDPOINT,
            config.ENV_AUTH_ENABLED, config.ENV_TOKEN_KEYS_SECRET} <= env.keys()
    assert env[config.ENV_AUTH_ENABLED] == "true"

    [service] = template.find_resources("AWS::ECS::Service").values()
    assert service["Properties"]["LaunchType"] == "FARGATE"
    assert service["Properties"]["DesiredCount"] == 2
    template.has_resource_properties("AWS::ElasticLoadBalancingV2::LoadBalancer",
                                     {"Type": "network", "Scheme": "internet-facing"})
    template.has_resource_properties("AWS::ElasticLoadBalancingV2::Listener", {
        "Port": 6651, "Protocol": "TLS", "Certificates": [{"CertificateArn": CERTIFICATE}]})
    template.has_resource_properties("AWS::ElasticLoadBalancingV2::TargetGroup",
                                     {"Port": 6650, "Protocol": "TCP", "TargetType": "ip"})
    assert "PulsarServiceUrl" in template.find_outputs("*")
    assert "pulsar+ssl://" in json.dumps(template.find_outputs("PulsarServiceUrl"))
    # the cluster records itself with the proxy's URL (Pulsar's TLS field), which the HTTP lookup answers
    puts = [json.dumps(r["Properties"]["Create"]) for r in template.find_resources("Custom::AWS").values()
            if "magnetar-cluster:standalone" in json.dumps(r["Properties"]["Create"])]
    assert len(puts) == 1 and "brokerServiceUrlTls" in puts[0] and "pulsar+ssl://" in puts[0]
    assert puts[0].count("brokerServiceUrl") == 1  # TLS only: not also as brokerServiceUrl

    # scaling: CPU (target tracking) and connections per task (NLB active flows / running tasks)
    [target] = template.find_resources("AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert (target["Properties"]["MinCapacity"], target["Properties"]["MaxCapacity"]) == (2, 10)
    policies = template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
    kinds = {p["Properties"]["PolicyType"] for p in policies}
    assert kinds == {"TargetTrackingScaling", "StepScaling"}
    assert any(p["Properties"].get("TargetTrackingScalingPolicyConfiguration", {}).get(
        "PredefinedMetricSpecification", {}).get("PredefinedMetricType") == "ECSServiceAverageCPUUtilization"
        for p in policies)
    alarms = json.dumps(template.find_resources("AWS::CloudWatch::Alarm"))
    assert "ActiveFlowCount" in alarms and "RunningTaskCount" in alarms

    # the task role: exactly the broker function's statements (but its own log group's, which the
    # task's execution role has for the container's logs, and its management of registered functions'
    # Lambda functions, which the admin API does), plus reading the token keys
    broker = template.find_resources("AWS::Lambda::Function")[config.BROKER_FUNCTION_ID]
    broker_role = {"Ref": broker["Properties"]["Role"]["Fn::GetAtt"][0]}
    task_role = {"Ref": props["TaskRoleArn"]["Fn::GetAtt"][0]}
    # (nor X-Ray's: the function's active tracing; the proxy is not traced)
    management = template.find_resources("AWS::IAM::Policy")["BrokerFunctionManagementPolicy"]
    managing = {json.dumps({**s, "Action": sorted(s["Action"] if isinstance(s["Action"], list) else [s["Action"]])},
                           sort_keys=True) for s in management["Properties"]["PolicyDocument"]["Statement"]}
    brokers = {s for s in _statements(template, broker_role) if '"logs:' not in s and '"xray:' not in s} - managing
    extra = _statements(template, task_role) - brokers
    assert brokers and brokers <= _statements(template, task_role)
    assert [json.loads(s)["Action"] for s in extra] == [["secretsmanager:DescribeSecret",
                                                         "secretsmanager:GetSecretValue"]]

    # the image: a Dockerfile asset of the repository, ARM64, not built by the synthesis
    manifest = json.loads(next(outdir.glob("Magnetar.assets.json")).read_text())
    [image] = manifest["dockerImages"].values()
    assert image["source"]["dockerFile"] == "infra/pulsar_protocol/Dockerfile"
    assert image["source"]["platform"] == "linux/arm64"
    staged = outdir / image["source"]["directory"]  # only what the Dockerfile copies
    assert (staged / "src/magnetar/protocol/server.py").is_file() and (staged / DOCKERFILE).is_file()
    assert sorted(p.name for p in staged.iterdir()) == ["README.md", "infra", "pyproject.toml", "src"]


def test_off_by_default_and_on_from_the_context(inputs: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    _, stack, _ = _app(inputs, tmp_path_factory)
    assert stack.pulsar_protocol is None
    _, stack, _ = _app(inputs, tmp_path_factory, {"pulsarProtocol": "true"})
    template = Template.from_stack(stack)
    # without a certificate: plain TCP on 6650, and a warning saying how to get TLS
    template.has_resource_properties("AWS::ElasticLoadBalancingV2::Listener", {"Port": 6650, "Protocol": "TCP"})
    warnings = [m for m in stack.pulsar_protocol.node.metadata if m.type == "aws:cdk:warning"]
    assert any("pulsarProtocolCertificateArn" in str(m.data) for m in warnings)
