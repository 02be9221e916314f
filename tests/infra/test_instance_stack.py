"""Synthesis tests for an instance across regions (infra/magnetar_cdk/instance.py): one stack per
region, the configuration store as a global table in the first, replication grants and superusers,
each cluster's registration, the replication alarms; and the single-region stack's cluster name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from infra_helpers import REPO_ROOT, synthesis_inputs

pytest.importorskip("aws_cdk")

from aws_cdk import App, Duration
from aws_cdk.assertions import Template

pytestmark = pytest.mark.cdk

HOME, OTHER = "us-east-1", "eu-west-1"
FUNCTION_IDS = ("BROKER_FUNCTION_ID", "JOURNAL_CONSUMER_FUNCTION_ID", "WEBSOCKET_FUNCTION_ID",
                "MAINTENANCE_FUNCTION_ID", "AUTHORIZER_FUNCTION_ID")
CONFIG_FUNCTION_IDS = FUNCTION_IDS[:4]  # the functions running broker code (not the authorizer)


@pytest.fixture(scope="module")
def stack_module(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ModuleType, dict[str, Any]]:
    return synthesis_inputs(tmp_path_factory, "layer-instance")


@pytest.fixture(scope="module")
def templates(
    stack_module: tuple[Path, ModuleType, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    """The two stacks of an instance east (us-east-1, home) and west (eu-west-1), by region."""
    layer_dir, module, context = stack_module
    app = App(context=context, outdir=str(tmp_path_factory.mktemp("cdk.out-instance")))
    instance = module.Instance((HOME, OTHER), ("east", "west"))
    stacks = module.instance_stacks(app, "Magnetar", instance, layer_dir=layer_dir,
                                    replication_delay_alarm_threshold=Duration.seconds(90))
    assert [s.stack_name for s in stacks] == [f"Magnetar-{HOME}", f"Magnetar-{OTHER}"]
    assert [s.region for s in stacks] == [HOME, OTHER]
    assert stacks[0] in stacks[1].dependencies and not stacks[0].dependencies
    return {s.region: dict(Template.from_stack(s).to_json()) for s in stacks}


def _of_type(template: Mapping[str, Any], type_: str) -> dict[str, Mapping[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == type_}


def _variables(template: Mapping[str, Any], function_id: str) -> Mapping[str, Any]:
    variables: Mapping[str, Any] = template["Resources"][function_id]["Properties"]["Environment"]["Variables"]
    return variables


def _statements(template: Mapping[str, Any], role_fragment: str) -> list[Mapping[str, Any]]:
    return [
        statement
        for logical_id, policy in _of_type(template, "AWS::IAM::Policy").items()
        if logical_id.startswith(role_fragment)
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _text(value: Any) -> str:
    """A resolved value as text, references as `<Id>` or `<Id.Attr>` (Fn::Join of literals, Refs, GetAtts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        return "".join(_text(v) for v in value["Fn::Join"][1])
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    if isinstance(value, list):
        return " ".join(_text(v) for v in value)
    return json.dumps(value)


def test_the_global_table_lives_in_the_home_stack_with_a_replica_elsewhere(
    templates: dict[str, dict[str, Any]],
) -> None:
    assert not _of_type(templates[OTHER], "AWS::DynamoDB::GlobalTable")
    (table,) = _of_type(templates[HOME], "AWS::DynamoDB::GlobalTable").values()
    props = table["Properties"]
    assert table["DeletionPolicy"] == "Retain"
    assert props["TableName"] == "magnetar-config-default"
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"},
                                  {"AttributeName": "sk", "KeyType": "RANGE"}]
    assert sorted(r["Region"] for r in props["Replicas"]) == sorted([HOME, OTHER])
    for replica in props["Replicas"]:
        assert replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert replica["DeletionProtectionEnabled"] is True
    # each stack keeps its own metadata table as before
    for template in templates.values():
        assert len(_of_type(template, "AWS::DynamoDB::Table")) == 1


@pytest.mark.parametrize(("region", "cluster"), [(HOME, "east"), (OTHER, "west")])
def test_every_function_knows_its_cluster_and_the_configuration_store(
    templates: dict[str, dict[str, Any]], config: ModuleType, region: str, cluster: str
) -> None:
    for name in FUNCTION_IDS:
        variables = _variables(templates[region], getattr(config, name))
        assert variables[config.ENV_CLUSTER_NAME] == cluster
    for name in CONFIG_FUNCTION_IDS:
        variables = _variables(templates[region], getattr(config, name))
        assert variables[config.ENV_CONFIG_TABLE] == "magnetar-config-default"
        assert variables[config.ENV_CONFIG_REGION] == HOME


@pytest.mark.parametrize("region", [HOME, OTHER])
def test_functions_read_and_write_the_config_table_at_home_and_here_only(
    templates: dict[str, dict[str, Any]], config: ModuleType, region: str
) -> None:
    expected = sorted({f"arn:<AWS::Partition>:dynamodb:{r}:<AWS::AccountId>:table/magnetar-config-default"
                       for r in (HOME, region)})
    for name in CONFIG_FUNCTION_IDS:
        function_id = getattr(config, name)
        statements = [s for s in _statements(templates[region], f"{function_id}Role")
                      if "magnetar-config-default" in _text(s["Resource"])]
        assert len(statements) == 1, statements
        (statement,) = statements
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        assert sorted(_text(r) for r in resources) == expected
        assert "dynamodb:PutItem" in statement["Action"] and "dynamodb:Query" in statement["Action"]
        assert not any("*" in a for a in statement["Action"])
        assert "dynamodb:Scan" not in statement["Action"]


@pytest.mark.parametrize(("region", "remote_region", "remote"), [(HOME, OTHER, "west"), (OTHER, HOME, "east")])
def test_the_journal_consumer_and_maintenance_may_replicate_to_the_other_region_and_are_superusers_there(
    templates: dict[str, dict[str, Any]], config: ModuleType, region: str, remote_region: str, remote: str
) -> None:
    routes = [f"arn:<AWS::Partition>:execute-api:{remote_region}:<AWS::AccountId>:*/$default/POST/topics/*",
              f"arn:<AWS::Partition>:execute-api:{remote_region}:<AWS::AccountId>:*/$default/POST/magnetar/v1/"
              "replicated-subscriptions/*"]
    for caller in ("JOURNAL_CONSUMER_FUNCTION_ID", "MAINTENANCE_FUNCTION_ID"):
        statements = _statements(templates[region], f"{getattr(config, caller)}Role")
        invoke = [s for s in statements if s["Action"] == "execute-api:Invoke"]
        assert sorted(_text(r) for s in invoke for r in s["Resource"]) == sorted(routes)
    # no other function may call another cluster
    for name in ("BROKER_FUNCTION_ID", "WEBSOCKET_FUNCTION_ID"):
        statements = _statements(templates[region], f"{getattr(config, name)}Role")
        assert not [s for s in statements if s["Action"] == "execute-api:Invoke"]
    # their roles are named, and the remote cluster's callers list the names as superusers
    roles = {r["Properties"].get("RoleName") for r in _of_type(templates[region], "AWS::IAM::Role").values()}
    cluster = "east" if region == HOME else "west"
    assert {f"magnetar-default-{cluster}-replicator", f"magnetar-default-{cluster}-maintenance"} <= roles
    for name in ("BROKER_FUNCTION_ID", "WEBSOCKET_FUNCTION_ID"):
        superusers = _text(_variables(templates[remote_region], getattr(config, name))[config.ENV_SUPERUSER_ROLES])
        assert superusers.split(",") == [
            "admin", f"arn:<AWS::Partition>:iam::<AWS::AccountId>:role/magnetar-default-{cluster}-replicator",
            f"arn:<AWS::Partition>:iam::<AWS::AccountId>:role/magnetar-default-{cluster}-maintenance"]
    assert remote != cluster


def _calls(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The custom resources' SDK calls on create (their JSON, resolved as text), by logical id."""
    calls = {}
    for logical_id, resource in _of_type(template, "Custom::AWS").items():
        create = resource["Properties"]["Create"]
        assert resource["Properties"]["Update"] == create
        calls[logical_id] = json.loads(_text(create))
    return calls


def test_bootstrap_items_only_in_the_home_stack_and_into_the_config_table(
    templates: dict[str, dict[str, Any]], config: ModuleType
) -> None:
    home = [c for c in _calls(templates[HOME]).values() if "bootstrap" in c["physicalResourceId"]["id"]]
    assert len(home) == len(config.BOOTSTRAP_ITEMS)
    for call in home:
        assert call["parameters"]["TableName"] == "<ConfigTable>"
        assert call["parameters"]["ConditionExpression"] == "attribute_not_exists(pk)"
    tenant = next(c["parameters"]["Item"] for c in home if c["parameters"]["Item"]["pk"]["S"] == "TENANTS")
    assert tenant["allowedClusters"] == {"L": []}  # each cluster adds itself
    assert not [c for c in _calls(templates[OTHER]).values() if "bootstrap" in c["physicalResourceId"]["id"]]


@pytest.mark.parametrize(("region", "cluster"), [(HOME, "east"), (OTHER, "west")])
def test_each_cluster_registers_itself_in_the_configuration_store(
    templates: dict[str, dict[str, Any]], region: str, cluster: str
) -> None:
    calls = list(_calls(templates[region]).values())
    (put,) = [c for c in calls if c["physicalResourceId"]["id"] == f"magnetar-cluster:{cluster}"]
    assert put["action"] == "putItem" and put["region"] == HOME
    item = put["parameters"]["Item"]
    assert put["parameters"]["TableName"] == "magnetar-config-default"
    assert (item["pk"], item["sk"]) == ({"S": "CLUSTERS"}, {"S": cluster})
    data = json.loads(item["data"]["S"])
    assert data == {
        "serviceUrl": f"https://<IamHttpApi>.execute-api.{region}.<AWS::URLSuffix>/",
        "authenticationPlugin": "aws-iam",
    }
    (allow,) = [c for c in calls if c["physicalResourceId"]["id"] == f"magnetar-allowed-cluster:public/{cluster}"]
    assert allow["action"] == "updateItem" and allow["region"] == HOME
    params = allow["parameters"]
    assert params["Key"] == {"pk": {"S": "TENANTS"}, "sk": {"S": "public"}}
    assert "list_append(if_not_exists(allowedClusters, :none), :c)" in params["UpdateExpression"]
    assert params["ConditionExpression"] == "NOT contains(allowedClusters, :name)"  # idempotent
    assert params["ExpressionAttributeValues"][":name"] == {"S": cluster}
    assert allow["ignoreErrorCodesMatching"] == "ConditionalCheckFailedException"


def test_registration_follows_the_tenant_in_the_home_stack(templates: dict[str, dict[str, Any]]) -> None:
    resources = templates[HOME]["Resources"]
    registrations = [logical_id for logical_id, call in _calls(templates[HOME]).items()
                     if call["physicalResourceId"]["id"].startswith(("magnetar-allowed-cluster", "magnetar-cluster"))]
    assert len(registrations) == 2
    for logical_id in registrations:
        depends = resources[logical_id].get("DependsOn", [])
        assert "ConfigTable" in depends
        assert any(d.startswith("BootstrapTENANTSpublic") for d in depends)


@pytest.mark.parametrize(("region", "remote"), [(HOME, "west"), (OTHER, "east")])
def test_replication_alarms_per_remote_cluster_notify_the_alarm_topic(
    templates: dict[str, dict[str, Any]], region: str, remote: str
) -> None:
    template = templates[region]
    alarms = [a["Properties"] for a in _of_type(template, "AWS::CloudWatch::Alarm").values()
              if a["Properties"].get("Namespace") == "Magnetar"
              and a["Properties"].get("MetricName", "").startswith("Replication")]
    by_metric = {a["MetricName"]: a for a in alarms}
    assert sorted(by_metric) == ["ReplicationBacklog", "ReplicationDelay"]
    for alarm in alarms:
        assert {"Name": "RemoteCluster", "Value": remote} in alarm["Dimensions"]
        assert {"Name": "service", "Value": "magnetar-journal-consumer"} in alarm["Dimensions"]
        assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == 5
        assert alarm["Period"] == 60
        assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]
    assert by_metric["ReplicationDelay"]["Threshold"] == 90_000  # the argument (ms)
    assert by_metric["ReplicationBacklog"]["Threshold"] == 10_000  # the default
    (topic,) = _of_type(template, "AWS::SNS::Topic")
    assert topic == "AlarmTopic"
    assert "AlarmTopicArn" in template["Outputs"]
    # the ledger's alarms go to the same topic
    assert template["Resources"]["JournalIteratorAgeAlarm"]["Properties"]["AlarmActions"] == [{"Ref": "AlarmTopic"}]


def test_an_operators_alarm_topic_is_used_instead(
    stack_module: tuple[Path, ModuleType, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    layer_dir, module, context = stack_module
    topic = "arn:aws:sns:us-east-1:111122223333:ops"
    app = App(context={**context, "alarmTopicArn": topic}, outdir=str(tmp_path_factory.mktemp("cdk.out-topic")))
    stacks = module.instance_stacks(app, "M", module.Instance((HOME, OTHER)), layer_dir=layer_dir)
    template = dict(Template.from_stack(stacks[1]).to_json())
    assert not _of_type(template, "AWS::SNS::Topic")
    replication = [a for a in _of_type(template, "AWS::CloudWatch::Alarm").values()
                   if a["Properties"].get("MetricName", "").startswith("Replication")]
    assert replication and all(a["Properties"]["AlarmActions"] == [topic] for a in replication)
    # default cluster names: the regions
    assert _text(_variables(template, "BrokerFunction")["MAGNETAR_CLUSTER_NAME"]) == OTHER


def test_instance_settings_are_checked() -> None:
    from magnetar_cdk.instance import Instance

    assert Instance.parse(" us-east-1, eu-west-1 ", "east,west", "prod").config_table_name == "magnetar-config-prod"
    assert Instance.parse("us-east-1,eu-west-1").cluster_names == ("us-east-1", "eu-west-1")
    assert Instance.parse("a,b", remote_api_ids="b=abc123").remote_api_ids == {"b": "abc123"}
    with pytest.raises(ValueError, match="cluster names"):
        Instance.parse("us-east-1,eu-west-1", "east")
    with pytest.raises(ValueError, match="unique"):
        Instance.parse("us-east-1,us-east-1")
    with pytest.raises(ValueError, match="64"):
        Instance.parse("us-east-1", "c" * 60)


def test_a_pinned_remote_api_id_replaces_the_wildcard(
    stack_module: tuple[Path, ModuleType, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory,
    nag_report: Callable[[App, Path], list[dict[str, Any]]],
) -> None:
    pytest.importorskip("cdk_nag")
    layer_dir, module, context = stack_module
    outdir = tmp_path_factory.mktemp("cdk.out-api-ids")
    app = App(context=context, outdir=str(outdir))
    instance = module.Instance((HOME, OTHER), ("east", "west"), remote_api_ids={"west": "abc123"})
    stacks = module.instance_stacks(app, "Magnetar", instance, layer_dir=layer_dir)
    statements = _statements(Template.from_stack(stacks[0]).to_json(), "JournalConsumerFunctionRole")
    invoke = sorted(_text(r) for s in statements if s["Action"] == "execute-api:Invoke" for r in s["Resource"])
    assert invoke == sorted([f"arn:<AWS::Partition>:execute-api:{OTHER}:<AWS::AccountId>:abc123/$default/POST/topics/*",
                             f"arn:<AWS::Partition>:execute-api:{OTHER}:<AWS::AccountId>:abc123/$default/POST/"
                             "magnetar/v1/replicated-subscriptions/*"])
    assert nag_report(app, outdir) == []


def test_cdk_nag_has_no_unacknowledged_findings_on_an_instance(
    stack_module: tuple[Path, ModuleType, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory,
    nag_report: Callable[[App, Path], list[dict[str, Any]]],
) -> None:
    pytest.importorskip("cdk_nag")
    layer_dir, module, context = stack_module
    outdir = tmp_path_factory.mktemp("cdk.out-instance-nag")
    app = App(context=context, outdir=str(outdir))
    module.instance_stacks(app, "Magnetar", module.Instance((HOME, OTHER), ("east", "west")), layer_dir=layer_dir,
                           pulsar_protocol=True, pulsar_protocol_certificate_arn=(
                               "arn:aws:acm:us-east-1:111122223333:certificate/abc"), emr=True)
    findings = nag_report(app, outdir)
    assert findings == [], json.dumps(findings, indent=1)
    # with the binary protocol proxy, ClusterData has its (TLS) service URL
    west = json.loads((outdir / f"Magnetar-{OTHER}.template.json").read_text())
    (put,) = [c for c in _calls(west).values() if c["physicalResourceId"]["id"] == "magnetar-cluster:west"]
    data = json.loads(put["parameters"]["Item"]["data"]["S"])
    assert data["brokerServiceUrlTls"].startswith("pulsar+ssl://") and data["brokerServiceUrlTls"].endswith(":6651")
    assert "brokerServiceUrl" not in data  # TLS only: Pulsar's field for pulsar+ssl:// is brokerServiceUrlTls
    assert data["serviceUrl"].startswith("https://<IamHttpApi>.execute-api.eu-west-1.")


def test_a_stack_of_an_instance_needs_one_of_its_regions(
    stack_module: tuple[Path, ModuleType, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    layer_dir, module, context = stack_module
    app = App(context=context, outdir=str(tmp_path_factory.mktemp("cdk.out-bad")))
    with pytest.raises(ValueError, match="regions"):
        module.MagnetarStack(app, "Agnostic", layer_dir=layer_dir, instance=module.Instance((HOME,)))


# --- a single cluster -------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "context", "expected"), [
    ({}, {}, "standalone"),  # environment-agnostic
    ({}, {"clusterName": "blue"}, "blue"),
    ({"cluster_name": "green"}, {"clusterName": "blue"}, "green"),
    ({"env": {"region": "ap-south-1"}}, {}, "ap-south-1"),
])
def test_a_single_cluster_is_named(
    stack_module: tuple[Path, ModuleType, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory,
    config: ModuleType, kwargs: dict[str, Any], context: dict[str, str], expected: str,
) -> None:
    layer_dir, module, base = stack_module
    app = App(context={**base, **context}, outdir=str(tmp_path_factory.mktemp("cdk.out-single")))
    template = Template.from_stack(module.MagnetarStack(app, "Single", layer_dir=layer_dir, **kwargs)).to_json()
    for name in FUNCTION_IDS:
        variables = _variables(template, getattr(config, name))
        assert variables[config.ENV_CLUSTER_NAME] == expected
        assert config.ENV_CONFIG_TABLE not in variables and config.ENV_CONFIG_REGION not in variables
    assert not _of_type(template, "AWS::DynamoDB::GlobalTable") and not _of_type(template, "AWS::SNS::Topic")
    calls = list(_calls(template).values())
    assert len(calls) == len(config.BOOTSTRAP_ITEMS)  # no registration
    tenant = next(c["parameters"]["Item"] for c in calls if c["parameters"]["Item"]["pk"]["S"] == "TENANTS")
    assert tenant["allowedClusters"] == {"L": [{"S": expected}]}
    assert all(c["parameters"]["TableName"] == "<MetadataTable>" for c in calls)


def test_cdk_synth_with_regions_context_makes_one_stack_per_region(tmp_path: Path) -> None:
    """`python infra/app.py` (what `cdk synth` runs) with `-c regions=... -c clusterNames=...`."""
    context = {"regions": f"{HOME},{OTHER}", "clusterNames": "east,west", "instanceName": "prod", "nag": "false"}
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path), "CDK_CONTEXT_JSON": json.dumps(context),
           "CDK_DEFAULT_ACCOUNT": "111122223333", "PYTHONPATH": os.pathsep.join(
               [str(REPO_ROOT / "src"), str(REPO_ROOT / "infra"), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, str(REPO_ROOT / "infra" / "app.py")], env=env, check=True, cwd=REPO_ROOT,
                   capture_output=True, timeout=300)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    stacks = {k: a for k, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"}
    assert {k: a["environment"] for k, a in stacks.items()} == {
        f"Magnetar-{HOME}": f"aws://111122223333/{HOME}", f"Magnetar-{OTHER}": f"aws://111122223333/{OTHER}"}
    assert f"Magnetar-{HOME}" in stacks[f"Magnetar-{OTHER}"]["dependencies"]
    west = json.loads((tmp_path / f"Magnetar-{OTHER}.template.json").read_text())
    assert _variables(west, "BrokerFunction")["MAGNETAR_CLUSTER_NAME"] == "west"
    assert _variables(west, "BrokerFunction")["MAGNETAR_CONFIG_TABLE"] == "magnetar-config-prod"
