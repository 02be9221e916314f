"""Synthesis tests for MagnetarStack: the resource settings the handlers and the ledger rely on.

The stack is synthesized once per module, in-process, with the feature flags of cdk.json (so the
template matches `cdk synth`) and a --no-deps layer built in a temporary directory (so the test
never overwrites a full layer build in layers/core/build).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("aws_cdk")

from aws_cdk import App
from aws_cdk.assertions import Match, Template

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.cdk


def _load_module(name: str, path: Path) -> ModuleType:
    """Import a script by path: neither infra/ nor layers/ is a package."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def config() -> ModuleType:
    if str(REPO_ROOT / "src") not in sys.path:
        sys.path.insert(0, str(REPO_ROOT / "src"))
    return importlib.import_module("magnetar.config")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, config: ModuleType) -> Template:
    layer_builder = _load_module("magnetar_layer_build", REPO_ROOT / "layers" / "build.py")
    layer_dir = layer_builder.build(tmp_path_factory.mktemp("layer") / "build", no_deps=True)
    stack_module = _load_module("magnetar_stack", REPO_ROOT / "infra" / "magnetar_stack.py")
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    app = App(context=context, outdir=str(tmp_path_factory.mktemp("cdk.out")))
    stack = stack_module.MagnetarStack(app, "MagnetarTest", layer_dir=layer_dir)
    return Template.from_stack(stack)


def _resource(template: Template, logical_id: str, type_: str) -> Mapping[str, Any]:
    resources = template.find_resources(type_)
    assert logical_id in resources, f"{type_} {logical_id} not in {sorted(resources)}"
    return resources[logical_id]


def test_metadata_table(template: Template, config: ModuleType) -> None:
    template.resource_count_is("AWS::DynamoDB::Table", 1)
    table = _resource(template, config.METADATA_TABLE_ID, "AWS::DynamoDB::Table")
    assert table["DeletionPolicy"] == "Retain"
    assert table["Properties"]["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": Match.array_equals(
                [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ]
            ),
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "TimeToLiveSpecification": {"AttributeName": "expiresAt", "Enabled": True},
        },
    )


def test_journal_stream(template: Template, config: ModuleType) -> None:
    stream = _resource(template, config.JOURNAL_STREAM_ID, "AWS::Kinesis::Stream")
    assert stream["Properties"]["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}
    assert stream["Properties"]["RetentionPeriodHours"] == 24
    assert stream["Properties"]["StreamEncryption"]["EncryptionType"] == "KMS"
    assert "ShardCount" not in stream["Properties"]


def test_segment_bucket(template: Template, config: ModuleType) -> None:
    bucket = _resource(template, config.SEGMENT_BUCKET_ID, "AWS::S3::Bucket")
    assert bucket["DeletionPolicy"] == "Retain"
    assert bucket["Properties"]["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                ]
            }
        },
    )
    # enforce_ssl: a Deny on aws:SecureTransport=false.
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": {"Ref": config.SEGMENT_BUCKET_ID},
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                        )
                    ]
                )
            },
        },
    )


def test_journal_event_source_mapping(template: Template, config: ModuleType) -> None:
    template.resource_count_is("AWS::Lambda::EventSourceMapping", 1)
    mapping = next(iter(template.find_resources("AWS::Lambda::EventSourceMapping").values()))
    props = mapping["Properties"]
    assert props["FunctionName"] == {"Ref": config.JOURNAL_CONSUMER_FUNCTION_ID}
    assert props["EventSourceArn"] == {"Fn::GetAtt": [config.JOURNAL_STREAM_ID, "Arn"]}
    assert props["StartingPosition"] == "TRIM_HORIZON"
    assert props["BatchSize"] == config.JOURNAL_BATCH_SIZE
    assert props["MaximumBatchingWindowInSeconds"] == config.JOURNAL_MAX_BATCHING_WINDOW_S
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BisectBatchOnFunctionError"] is False
    assert props["ParallelizationFactor"] == 1
    # Unset means unlimited: the sealer must never skip a record.
    assert "MaximumRetryAttempts" not in props
    assert "MaximumRecordAgeInSeconds" not in props


@pytest.mark.parametrize(
    ("function_id_name", "service", "timeout"),
    [
        ("BROKER_FUNCTION_ID", "magnetar-broker", 29),
        ("JOURNAL_CONSUMER_FUNCTION_ID", "magnetar-journal-consumer", 120),
        ("WEBSOCKET_FUNCTION_ID", "magnetar-websocket", 29),
        ("MAINTENANCE_FUNCTION_ID", "magnetar-maintenance", 300),
    ],
)
def test_functions(
    template: Template, config: ModuleType, function_id_name: str, service: str, timeout: int
) -> None:
    function_id = getattr(config, function_id_name)
    function = _resource(template, function_id, "AWS::Lambda::Function")
    Template.from_json({"Resources": {function_id: function}}).has_resource_properties(
        "AWS::Lambda::Function",
        Match.object_like(
            {
                "Handler": "handler.handler",
                "Runtime": "python3.12",
                "Architectures": ["arm64"],
                "MemorySize": 1024,
                "Timeout": timeout,
                "Layers": [{"Ref": config.CORE_LAYER_ID}],
                "Environment": {
                    "Variables": Match.object_like(
                        {
                            config.ENV_TABLE: {"Ref": config.METADATA_TABLE_ID},
                            config.ENV_BUCKET: {"Ref": config.SEGMENT_BUCKET_ID},
                            config.ENV_STREAM: {"Ref": config.JOURNAL_STREAM_ID},
                            config.ENV_WS_ENDPOINT: _WS_CALLBACK_URL,
                            "POWERTOOLS_SERVICE_NAME": service,
                            "POWERTOOLS_METRICS_NAMESPACE": "Magnetar",
                        }
                    )
                },
            }
        ),
    )


def _policy_statements(template: Template, function_id: str) -> list[Mapping[str, Any]]:
    """The statements of the default policy attached to `function_id`'s execution role."""
    function = _resource(template, function_id, "AWS::Lambda::Function")
    role_ref = {"Ref": function["Properties"]["Role"]["Fn::GetAtt"][0]}
    statements: list[Mapping[str, Any]] = []
    for policy in template.find_resources("AWS::IAM::Policy").values():
        if role_ref in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    assert statements, f"no policy attached to {function_id}'s role"
    return statements


def _allowed(statements: list[Mapping[str, Any]], action: str) -> list[Any]:
    """Resources of the Allow statements listing exactly `action` (or a wildcard matching it)."""
    resources: list[Any] = []
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if statement["Effect"] == "Allow" and any(
            a == action or (a.endswith("*") and action.startswith(a[:-1])) for a in actions
        ):
            found = statement["Resource"]
            resources += found if isinstance(found, list) else [found]
    return resources


# The stage's management (callback) endpoint, as the template spells it.
_WS_CALLBACK_URL = {
    "Fn::Join": [
        "",
        [
            "https://",
            {"Ref": "WebSocketApi"},
            ".execute-api.",
            {"Ref": "AWS::Region"},
            ".",
            {"Ref": "AWS::URLSuffix"},
            "/ws",
        ],
    ]
}


@pytest.mark.parametrize(
    "function_id_name",
    [
        "BROKER_FUNCTION_ID",
        "JOURNAL_CONSUMER_FUNCTION_ID",
        "WEBSOCKET_FUNCTION_ID",
        "MAINTENANCE_FUNCTION_ID",
    ],
)
def test_functions_may_manage_websocket_connections(
    template: Template, config: ModuleType, function_id_name: str
) -> None:
    statements = _policy_statements(template, getattr(config, function_id_name))
    resources = _allowed(statements, "execute-api:ManageConnections")
    assert resources, f"{function_id_name} may not call execute-api:ManageConnections"
    for resource in resources:
        parts = json.dumps(resource)
        assert json.dumps({"Ref": config.WEBSOCKET_API_ID}) in parts, resource
        assert "@connections" in parts, resource


@pytest.mark.parametrize("function_id_name", ["WEBSOCKET_FUNCTION_ID", "MAINTENANCE_FUNCTION_ID"])
def test_new_functions_have_broker_access(
    template: Template, config: ModuleType, function_id_name: str
) -> None:
    statements = _policy_statements(template, getattr(config, function_id_name))
    table_arn = {"Fn::GetAtt": [config.METADATA_TABLE_ID, "Arn"]}
    stream_arn = {"Fn::GetAtt": [config.JOURNAL_STREAM_ID, "Arn"]}
    bucket_arn = {"Fn::GetAtt": [config.SEGMENT_BUCKET_ID, "Arn"]}
    for action in ("dynamodb:UpdateItem", "dynamodb:BatchGetItem", "dynamodb:Query"):
        assert table_arn in _allowed(statements, action), action
    for action in ("kinesis:PutRecord", "kinesis:GetRecords"):
        assert stream_arn in _allowed(statements, action), action
    assert bucket_arn in _allowed(statements, "s3:ListBucket")
    assert any(
        "Fn::Join" in r and bucket_arn in r["Fn::Join"][1] for r in _allowed(statements, "s3:GetObject")
    )


def test_maintenance_may_delete_segments_and_only_it(template: Template, config: ModuleType) -> None:
    bucket_arn = {"Fn::GetAtt": [config.SEGMENT_BUCKET_ID, "Arn"]}
    objects = {"Fn::Join": ["", [bucket_arn, "/*"]]}
    maintenance = _policy_statements(template, config.MAINTENANCE_FUNCTION_ID)
    assert objects in _allowed(maintenance, "s3:DeleteObject")
    assert bucket_arn in _allowed(maintenance, "s3:ListBucket")
    for function_id in (config.BROKER_FUNCTION_ID, config.WEBSOCKET_FUNCTION_ID):
        assert not _allowed(_policy_statements(template, function_id), "s3:DeleteObject"), function_id


def test_maintenance_schedule(template: Template, config: ModuleType) -> None:
    assert config.MAINTENANCE_INTERVAL_S == 60
    rule = _resource(template, config.MAINTENANCE_SCHEDULE_ID, "AWS::Events::Rule")
    assert rule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    assert rule["Properties"]["State"] == "ENABLED"
    assert [t["Arn"] for t in rule["Properties"]["Targets"]] == [
        {"Fn::GetAtt": [config.MAINTENANCE_FUNCTION_ID, "Arn"]}
    ]
    template.has_resource_properties(
        "AWS::Lambda::Permission",
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": {"Fn::GetAtt": [config.MAINTENANCE_FUNCTION_ID, "Arn"]},
            "Principal": "events.amazonaws.com",
            "SourceArn": {"Fn::GetAtt": [config.MAINTENANCE_SCHEDULE_ID, "Arn"]},
        },
    )
    # Runs never overlap; a tick throttled behind a running one is dropped, not queued for hours.
    function = _resource(template, config.MAINTENANCE_FUNCTION_ID, "AWS::Lambda::Function")
    assert function["Properties"]["ReservedConcurrentExecutions"] == 1
    template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {
            "FunctionName": {"Ref": config.MAINTENANCE_FUNCTION_ID},
            "MaximumEventAgeInSeconds": 60,
            "MaximumRetryAttempts": 0,
        },
    )


def test_websocket_api(template: Template, config: ModuleType) -> None:
    api = _resource(template, config.WEBSOCKET_API_ID, "AWS::ApiGatewayV2::Api")
    assert api["Properties"]["ProtocolType"] == "WEBSOCKET"
    assert api["Properties"]["RouteSelectionExpression"] == "$request.body.action"
    api_ref = {"Ref": config.WEBSOCKET_API_ID}
    routes = [r["Properties"] for r in template.find_resources("AWS::ApiGatewayV2::Route").values()]
    ws_routes = {r["RouteKey"]: r for r in routes if r["ApiId"] == api_ref}
    assert set(ws_routes) == {"$connect", "$disconnect", "$default"}
    # producer receipts and error frames are the $default route's response
    assert ws_routes["$default"].get("RouteResponseSelectionExpression") == "$default"
    assert "RouteResponseSelectionExpression" not in ws_routes["$connect"]
    integrations = template.find_resources("AWS::ApiGatewayV2::Integration")
    for route in ws_routes.values():
        target = route["Target"]["Fn::Join"][1]
        assert target[0] == "integrations/"
        integration = integrations[target[1]["Ref"]]["Properties"]
        assert integration["ApiId"] == api_ref
        assert integration["IntegrationType"] == "AWS_PROXY"
        assert json.dumps({"Fn::GetAtt": [config.WEBSOCKET_FUNCTION_ID, "Arn"]}) in json.dumps(
            integration["IntegrationUri"]
        )
    permissions = [
        p["Properties"]
        for p in template.find_resources("AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == {"Fn::GetAtt": [config.WEBSOCKET_FUNCTION_ID, "Arn"]}
    ]
    assert len(permissions) == 3
    assert all(p["Principal"] == "apigateway.amazonaws.com" for p in permissions)
    stages = [
        s["Properties"]
        for s in template.find_resources("AWS::ApiGatewayV2::Stage").values()
        if s["Properties"]["ApiId"] == api_ref
    ]
    assert len(stages) == 1
    assert stages[0]["StageName"] == "ws"
    assert stages[0]["AutoDeploy"] is True


def test_websocket_distribution(template: Template, config: ModuleType) -> None:
    template.resource_count_is("AWS::CloudFront::Distribution", 1)
    distribution = next(iter(template.find_resources("AWS::CloudFront::Distribution").values()))
    conf = distribution["Properties"]["DistributionConfig"]
    [origin] = conf["Origins"]
    assert origin["OriginPath"] == "/ws"
    assert origin["CustomOriginConfig"]["OriginProtocolPolicy"] == "https-only"
    assert origin["DomainName"] == {
        "Fn::Join": [
            "",
            [
                {"Ref": config.WEBSOCKET_API_ID},
                ".execute-api.",
                {"Ref": "AWS::Region"},
                ".",
                {"Ref": "AWS::URLSuffix"},
            ],
        ]
    }
    behavior = conf["DefaultCacheBehavior"]
    assert behavior["TargetOriginId"] == origin["Id"]
    assert behavior["ViewerProtocolPolicy"] == "https-only"
    # Managed policies: CachingDisabled and AllViewerExceptHostHeader.
    assert behavior["CachePolicyId"] == "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
    assert behavior["OriginRequestPolicyId"] == "b689b0a8-53d0-40ab-baf2-68738e2966ac"
    [association] = behavior["FunctionAssociations"]
    assert association["EventType"] == "viewer-request"
    [function_id] = template.find_resources("AWS::CloudFront::Function")
    assert association["FunctionARN"] == {"Fn::GetAtt": [function_id, "FunctionARN"]}
    [distribution_id] = template.find_resources("AWS::CloudFront::Distribution")
    outputs = template.to_json()["Outputs"]
    assert outputs["WebSocketUrl"]["Value"] == {
        "Fn::Join": ["", ["wss://", {"Fn::GetAtt": [distribution_id, "DomainName"]}]]
    }
    assert json.dumps({"Ref": config.WEBSOCKET_API_ID}) in json.dumps(outputs["WebSocketApiUrl"]["Value"])


def _path_rewrite_code(template: Template) -> str:
    [function] = template.find_resources("AWS::CloudFront::Function").values()
    assert function["Properties"]["FunctionConfig"]["Runtime"] == "cloudfront-js-2.0"
    assert function["Properties"]["AutoPublish"] is True
    code = function["Properties"]["FunctionCode"]
    assert isinstance(code, str)
    return code


def test_websocket_path_rewrite_code(template: Template) -> None:
    code = _path_rewrite_code(template)
    assert "function handler(event)" in code
    assert "request.querystring['path']" in code
    assert "request.uri = '/'" in code


@pytest.mark.parametrize(
    ("uri", "querystring", "expected_path"),
    [
        ("/ws/v2/consumer/persistent/t/ns/topic/sub", {}, "/ws/v2/consumer/persistent/t/ns/topic/sub"),
        (
            "/ws/v2/producer/persistent/public/default/my%20topic",
            {"token": {"value": "abc"}, "path": {"value": "spoofed"}},
            "/ws/v2/producer/persistent/public/default/my topic",
        ),
        ("/ws/v2/reader/persistent/t/ns/a&b=c", {}, "/ws/v2/reader/persistent/t/ns/a&b=c"),
        ("/ws/v2/bad%zz", {}, "/ws/v2/bad%zz"),
    ],
)
def test_websocket_path_rewrite_runs(
    template: Template, uri: str, querystring: dict[str, Any], expected_path: str
) -> None:
    """Run the CloudFront Function under node (its JS is plain ES5 plus try/catch)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    event = {
        "version": "1.0",
        "request": {"method": "GET", "uri": uri, "querystring": querystring, "headers": {}},
    }
    script = _path_rewrite_code(template) + f"\nconsole.log(JSON.stringify(handler({json.dumps(event)})));\n"
    result = subprocess.run([node, "-e", script], capture_output=True, text=True, check=True, timeout=30)
    request = json.loads(result.stdout)
    assert request["uri"] == "/"
    # CloudFront hands querystring values on URL-encoded; API Gateway decodes them once.
    assert urllib.parse.unquote(request["querystring"]["path"]["value"]) == expected_path
    for name, value in querystring.items():
        if name != "path":
            assert request["querystring"][name] == value


def test_core_layer(template: Template, config: ModuleType) -> None:
    layer = _resource(template, config.CORE_LAYER_ID, "AWS::Lambda::LayerVersion")
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_http_api(template: Template, config: ModuleType) -> None:
    api = _resource(template, config.HTTP_API_ID, "AWS::ApiGatewayV2::Api")
    assert api["Properties"]["ProtocolType"] == "HTTP"
    template.has_resource_properties(
        "AWS::ApiGatewayV2::Integration",
        {
            "ApiId": {"Ref": config.HTTP_API_ID},
            "IntegrationType": "AWS_PROXY",
            "IntegrationUri": {"Fn::GetAtt": [config.BROKER_FUNCTION_ID, "Arn"]},
            "PayloadFormatVersion": "2.0",
        },
    )
    template.has_resource_properties("AWS::ApiGatewayV2::Route", {"RouteKey": "$default"})
    template.has_output("HttpApiUrl", {})
    template.has_output("WebSocketUrl", {})
    template.has_output("WebSocketApiUrl", {})


def test_bootstrap_custom_resource(template: Template, config: ModuleType) -> None:
    resources = template.find_resources("Custom::AWS")
    assert len(resources) == len(config.BOOTSTRAP_ITEMS)
    # Create is a Fn::Join (the table name is a token): check the serialized calls.
    calls = [json.dumps(r["Properties"]["Create"]) for r in resources.values()]
    for call in calls:
        assert "putItem" in call
        assert "attribute_not_exists(pk)" in call
        assert "ConditionalCheckFailedException" in call
        assert json.dumps({"Ref": config.METADATA_TABLE_ID}) in call
    for item in config.BOOTSTRAP_ITEMS:
        encoded = json.dumps(json.dumps(item, separators=(",", ":")))[1:-1]
        assert sum(encoded in call for call in calls) == 1, f"no single bootstrap call writes {item}"
    for resource in resources.values():
        assert resource["Properties"]["Update"] == resource["Properties"]["Create"]
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": [
                    {
                        "Action": "dynamodb:PutItem",
                        "Effect": "Allow",
                        "Resource": {"Fn::GetAtt": [config.METADATA_TABLE_ID, "Arn"]},
                    }
                ]
            }
        },
    )


def test_journal_shards_context_selects_provisioned_mode(tmp_path_factory: pytest.TempPathFactory) -> None:
    layer_builder = _load_module("magnetar_layer_build", REPO_ROOT / "layers" / "build.py")
    layer_dir = layer_builder.build(tmp_path_factory.mktemp("layer2") / "build", no_deps=True)
    stack_module = _load_module("magnetar_stack", REPO_ROOT / "infra" / "magnetar_stack.py")
    app = App(context={"journalShards": 2}, outdir=str(tmp_path_factory.mktemp("cdk.out2")))
    stack = stack_module.MagnetarStack(app, "Provisioned", layer_dir=layer_dir)
    Template.from_stack(stack).has_resource_properties(
        "AWS::Kinesis::Stream", {"ShardCount": 2, "StreamModeDetails": {"StreamMode": "PROVISIONED"}}
    )


def test_websocket_function_may_invoke_itself(template: Template, config: ModuleType) -> None:
    """After $connect the function invokes itself to push the backlog; its role allows exactly that
    function (by the stack name and the pinned logical id), not every function."""
    policies = json.dumps(template.find_resources("AWS::IAM::Policy"))
    assert "lambda:InvokeFunction" in policies
    assert f"-{config.WEBSOCKET_FUNCTION_ID}-*" in policies
