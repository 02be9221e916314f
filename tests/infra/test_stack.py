"""Synthesis tests for MagnetarStack: the resource settings the handlers and the ledger rely on.

The stack is synthesized once per module, in-process, with the feature flags of cdk.json (so the
template matches `cdk synth`) and a --no-deps layer built in a temporary directory (so the test
never overwrites a full layer build in layers/core/build).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from infra_helpers import load_module, synthesis_inputs

pytest.importorskip("aws_cdk")

from aws_cdk import App
from aws_cdk.assertions import Match, Template

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, config: ModuleType) -> Template:
    layer_dir, stack_module, context = synthesis_inputs(tmp_path_factory)
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
    # Enhanced fan-out by default (test_journal_fan_out.py has both settings of journalFanOut).
    assert props["EventSourceArn"] == {"Fn::GetAtt": ["JournalStreamConsumer", "ConsumerARN"]}
    assert props["StartingPosition"] == "TRIM_HORIZON"
    assert props["BatchSize"] == config.JOURNAL_BATCH_SIZE
    assert props["MaximumBatchingWindowInSeconds"] == 0
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BisectBatchOnFunctionError"] is False
    assert props["ParallelizationFactor"] == 1
    # Unset means unlimited: the sealer must never skip a record.
    assert "MaximumRetryAttempts" not in props
    assert "MaximumRecordAgeInSeconds" not in props


@pytest.mark.parametrize(
    ("function_id_name", "service", "timeout", "memory"),
    [
        ("BROKER_FUNCTION_ID", "magnetar-broker", 29, 1024),
        ("JOURNAL_CONSUMER_FUNCTION_ID", "magnetar-journal-consumer", 120, 512),  # waits on S3, DynamoDB and the pacing
        ("WEBSOCKET_FUNCTION_ID", "magnetar-websocket", 29, 1024),
        ("MAINTENANCE_FUNCTION_ID", "magnetar-maintenance", 300, 1024),
    ],
)
def test_functions(
    template: Template, config: ModuleType, function_id_name: str, service: str, timeout: int, memory: int
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
                "MemorySize": memory,
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
    layer_dir, stack_module, _ = synthesis_inputs(tmp_path_factory, "layer2")
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


# --- authentication, authorization and hardening (issue #8) -----------------------------------
def _resources(template: Template, type_: str) -> dict[str, Mapping[str, Any]]:
    return dict(template.find_resources(type_))


def _routes(template: Template, api_id: str) -> dict[str, Mapping[str, Any]]:
    """Route key -> route properties, for the routes of API `api_id`."""
    return {
        r["Properties"]["RouteKey"]: r["Properties"]
        for r in _resources(template, "AWS::ApiGatewayV2::Route").values()
        if r["Properties"]["ApiId"] == {"Ref": api_id}
    }


def _stage(template: Template, api_id: str) -> Mapping[str, Any]:
    [stage] = [
        s["Properties"]
        for s in _resources(template, "AWS::ApiGatewayV2::Stage").values()
        if s["Properties"]["ApiId"] == {"Ref": api_id}
    ]
    return stage


def _authorizer_uri_names(authorizer: Mapping[str, Any], function_id: str) -> bool:
    return json.dumps({"Fn::GetAtt": [function_id, "Arn"]}) in json.dumps(authorizer["AuthorizerUri"])


def test_authorizer_function(template: Template, config: ModuleType) -> None:
    function = _resource(template, config.AUTHORIZER_FUNCTION_ID, "AWS::Lambda::Function")["Properties"]
    assert function["Handler"] == "handler.handler"
    assert function["Runtime"] == "python3.12"
    assert function["Architectures"] == ["arm64"]
    assert function["Layers"] == [{"Ref": config.CORE_LAYER_ID}]
    variables = function["Environment"]["Variables"]
    assert variables[config.ENV_TOKEN_KEYS_SECRET] == {"Ref": config.TOKEN_KEYS_SECRET_ID}
    assert variables["POWERTOOLS_SERVICE_NAME"] == "magnetar-authorizer"
    # it validates tokens, nothing else: no table, bucket, stream or connection access
    assert config.ENV_TABLE not in variables
    actions = {a for s in _policy_statements(template, config.AUTHORIZER_FUNCTION_ID) for a in _actions(s)}
    assert actions == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "secretsmanager:GetSecretValue",
        "secretsmanager:DescribeSecret",
        "xray:PutTraceSegments",  # active tracing
        "xray:PutTelemetryRecords",
    }


def _actions(statement: Mapping[str, Any]) -> list[str]:
    actions = statement["Action"]
    return actions if isinstance(actions, list) else [actions]


def test_every_http_route_runs_the_token_authorizer_but_the_public_ones(
    template: Template, config: ModuleType
) -> None:
    routes = _routes(template, config.HTTP_API_ID)
    assert "$default" in routes
    assert set(config.PUBLIC_ROUTES) <= set(routes)
    authorizers = _resources(template, "AWS::ApiGatewayV2::Authorizer")
    for key, route in routes.items():
        if key in config.PUBLIC_ROUTES:
            assert route["AuthorizationType"] == "NONE", key
            assert "AuthorizerId" not in route
            continue
        assert route["AuthorizationType"] == "CUSTOM", key
        authorizer = authorizers[route["AuthorizerId"]["Ref"]]["Properties"]
        assert authorizer["ApiId"] == {"Ref": config.HTTP_API_ID}
        assert authorizer["AuthorizerType"] == "REQUEST"
        assert authorizer["AuthorizerPayloadFormatVersion"] == "2.0"
        assert authorizer["EnableSimpleResponses"] is True
        assert authorizer["IdentitySource"] == ["$request.header.Authorization"]
        assert authorizer["AuthorizerResultTtlInSeconds"] == 300
        assert _authorizer_uri_names(authorizer, config.AUTHORIZER_FUNCTION_ID)
    # the public routes reach the broker as well
    integrations = _resources(template, "AWS::ApiGatewayV2::Integration")
    for key in config.PUBLIC_ROUTES:
        target = routes[key]["Target"]["Fn::Join"][1][1]["Ref"]
        assert integrations[target]["Properties"]["IntegrationUri"] == {
            "Fn::GetAtt": [config.BROKER_FUNCTION_ID, "Arn"]
        }
    template.has_resource_properties(
        "AWS::Lambda::Permission",
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": {"Fn::GetAtt": [config.AUTHORIZER_FUNCTION_ID, "Arn"]},
            "Principal": "apigateway.amazonaws.com",
        },
    )


def test_websocket_connect_authorizer(template: Template, config: ModuleType) -> None:
    routes = _routes(template, config.WEBSOCKET_API_ID)
    connect = routes["$connect"]
    assert connect["AuthorizationType"] == "CUSTOM"
    authorizer = _resources(template, "AWS::ApiGatewayV2::Authorizer")[connect["AuthorizerId"]["Ref"]]
    props = authorizer["Properties"]
    assert props["ApiId"] == {"Ref": config.WEBSOCKET_API_ID}
    assert props["AuthorizerType"] == "REQUEST"
    # no identity source: `?token=` and `Authorization: Bearer` both reach the authorizer
    assert "IdentitySource" not in props
    assert _authorizer_uri_names(props, config.AUTHORIZER_FUNCTION_ID)
    # API Gateway runs WebSocket authorizers on $connect only
    for key in ("$default", "$disconnect"):
        assert routes[key]["AuthorizationType"] == "NONE"


def test_iam_http_api(template: Template, config: ModuleType) -> None:
    api = _resource(template, config.IAM_HTTP_API_ID, "AWS::ApiGatewayV2::Api")
    assert api["Properties"]["ProtocolType"] == "HTTP"
    routes = _routes(template, config.IAM_HTTP_API_ID)
    assert set(routes) == {"ANY /{proxy+}"}
    assert routes["ANY /{proxy+}"]["AuthorizationType"] == "AWS_IAM"
    template.has_resource_properties(
        "AWS::ApiGatewayV2::Integration",
        {
            "ApiId": {"Ref": config.IAM_HTTP_API_ID},
            "IntegrationType": "AWS_PROXY",
            "IntegrationUri": {"Fn::GetAtt": [config.BROKER_FUNCTION_ID, "Arn"]},
            "PayloadFormatVersion": "2.0",
        },
    )
    outputs = template.to_json()["Outputs"]
    assert json.dumps({"Ref": config.IAM_HTTP_API_ID}) in json.dumps(outputs["IamHttpApiUrl"]["Value"])
    assert json.dumps({"Ref": config.IAM_HTTP_API_ID}) in json.dumps(outputs["IamHttpApiExecuteArn"]["Value"])
    template.has_output("TokenKeysSecretArn", {"Value": {"Ref": config.TOKEN_KEYS_SECRET_ID}})


def test_http_api_stages_keep_their_logical_ids(template: Template) -> None:
    """The `$default` stages are created by the stack (throttling, access logs) under the construct id
    HttpApi gives its own: a new logical id would make CloudFormation create a second `$default`."""
    stages = _resources(template, "AWS::ApiGatewayV2::Stage")
    assert "HttpApiDefaultStage3EEB07D6" in stages
    assert stages["HttpApiDefaultStage3EEB07D6"]["Properties"]["StageName"] == "$default"


@pytest.mark.parametrize("function_id_name", ["BROKER_FUNCTION_ID", "WEBSOCKET_FUNCTION_ID"])
def test_functions_facing_callers_enforce_authorization(
    template: Template, config: ModuleType, function_id_name: str
) -> None:
    function = _resource(template, getattr(config, function_id_name), "AWS::Lambda::Function")
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables[config.ENV_AUTH_ENABLED] == "true"
    assert variables[config.ENV_SUPERUSER_ROLES] == config.DEFAULT_SUPERUSER_ROLE
    assert config.ENV_TOKEN_KEYS_SECRET not in variables  # only the authorizer reads the keys


def test_token_keys_secret_and_its_readers(template: Template, config: ModuleType) -> None:
    secret = _resource(template, config.TOKEN_KEYS_SECRET_ID, "AWS::SecretsManager::Secret")
    assert "KmsKeyId" not in secret["Properties"]  # the AWS managed key aws/secretsmanager
    assert "SecretString" not in secret["Properties"]  # no key material in the template
    [initial_key] = _resources(template, "Custom::MagnetarTokenKey").values()
    assert initial_key["Properties"]["SecretArn"] == {"Ref": config.TOKEN_KEYS_SECRET_ID}
    secret_ref = json.dumps({"Ref": config.TOKEN_KEYS_SECRET_ID})
    readers = set()
    for policy in _resources(template, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if secret_ref in json.dumps(statement["Resource"]):
                readers.update(r["Ref"] for r in policy["Properties"]["Roles"])
                assert not any(a.endswith("*") for a in _actions(statement)), statement
    authorizer_role = _resource(template, config.AUTHORIZER_FUNCTION_ID, "AWS::Lambda::Function")[
        "Properties"
    ]["Role"]["Fn::GetAtt"][0]
    generator_role = _resource(template, "TokenKeysGenerator", "AWS::Lambda::Function")["Properties"]["Role"][
        "Fn::GetAtt"
    ][0]
    assert readers == {authorizer_role, generator_role}
    # the authorizer is never deployed before the first key exists
    assert (
        "TokenKeysInitialKey"
        in _resource(template, config.AUTHORIZER_FUNCTION_ID, "AWS::Lambda::Function")["DependsOn"]
    )


def test_token_keys_generator_writes_a_key_document_identity_reads(
    template: Template, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run the generator's inline code against moto: it replaces the placeholder with a key document
    once, never overwrites keys already there, and always answers CloudFormation."""
    moto = pytest.importorskip("moto")
    import base64

    import boto3

    from magnetar.security import identity

    code = _resource(template, "TokenKeysGenerator", "AWS::Lambda::Function")["Properties"]["Code"]["ZipFile"]
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SECRETS_MANAGER", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    answers: list[dict[str, Any]] = []

    class _Response:
        def close(self) -> None:
            pass

    def urlopen(request: Any, timeout: float) -> _Response:
        assert request.get_method() == "PUT"
        answers.append(json.loads(request.data))
        return _Response()

    with moto.mock_aws():
        client = boto3.client("secretsmanager", region_name="us-east-1")
        arn = client.create_secret(Name="keys", SecretString="placeholder-from-the-generator")["ARN"]
        namespace: dict[str, Any] = {}
        exec(compile(code, "index.py", "exec"), namespace)
        monkeypatch.setattr(namespace["urllib"].request, "urlopen", urlopen)
        event = {
            "RequestType": "Create",
            "ResourceProperties": {"SecretArn": arn},
            "StackId": "stack",
            "RequestId": "req",
            "LogicalResourceId": "TokenKeysInitialKey",
            "ResponseURL": "https://cloudformation-custom-resource-response.example/put",
        }
        namespace["handler"](event, None)
        document = client.get_secret_value(SecretId=arn)["SecretString"]
        [key] = identity.keys_from_secret(document)
        assert key.algorithm == "HS256" and len(key.key) == 32
        assert json.loads(document)["keys"][0]["key"] == base64.b64encode(key.key).decode()
        assert answers[-1]["Status"] == "SUCCESS"
        assert document not in json.dumps(answers)  # the key never goes back to CloudFormation
        # a second Create (e.g. a replaced custom resource) and Update/Delete leave the keys alone
        for request_type in ("Create", "Update", "Delete"):
            namespace["handler"]({**event, "RequestType": request_type, "PhysicalResourceId": "x"}, None)
            assert client.get_secret_value(SecretId=arn)["SecretString"] == document
            assert answers[-1]["Status"] == "SUCCESS"
        # a failure is reported, not left hanging
        namespace["handler"]({**event, "ResourceProperties": {"SecretArn": "missing"}}, None)
        assert answers[-1]["Status"] == "FAILED"


def test_stage_throttling(template: Template, config: ModuleType) -> None:
    for api_id in (config.HTTP_API_ID, config.IAM_HTTP_API_ID, config.WEBSOCKET_API_ID):
        assert _stage(template, api_id)["DefaultRouteSettings"] == {
            "ThrottlingBurstLimit": 2000,
            "ThrottlingRateLimit": 1000,
        }, api_id


def _log_group_retention(template: Template, log_group: Mapping[str, Any]) -> int:
    """Retention of the log group a `Ref` or `Fn::GetAtt [.., Arn]` names."""
    logical_id = log_group["Ref"] if "Ref" in log_group else log_group["Fn::GetAtt"][0]
    group = _resource(template, logical_id, "AWS::Logs::LogGroup")
    retention = group["Properties"]["RetentionInDays"]
    assert isinstance(retention, int)
    return retention


def test_access_logs(template: Template, config: ModuleType) -> None:
    for api_id in (config.HTTP_API_ID, config.IAM_HTTP_API_ID, config.WEBSOCKET_API_ID):
        settings = _stage(template, api_id)["AccessLogSettings"]
        assert _log_group_retention(template, settings["DestinationArn"]) == 30
        line = json.loads(settings["Format"])
        assert line["requestId"] == "$context.requestId"
        assert line["status"] == "$context.status"
        assert "query" not in settings["Format"].lower()  # tokens may travel in ?token=
    # WebSocket access logs need API Gateway's account-level CloudWatch role, set before the stage
    [account] = _resources(template, "AWS::ApiGateway::Account").values()
    role_id = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
    role = _resource(template, role_id, "AWS::IAM::Role")
    assert role["DeletionPolicy"] == "Retain"  # other APIs of the account may log through it
    assert "ManagedPolicyArns" not in role["Properties"]
    stage = _resource(template, "WebSocketStage", "AWS::ApiGatewayV2::Stage")
    assert "ApiGatewayAccount" in stage["DependsOn"]


def test_every_function_has_its_own_log_group_with_retention(template: Template) -> None:
    functions = _resources(template, "AWS::Lambda::Function")
    assert len(functions) == 8  # six handlers, the key generator, the bootstrap provider
    groups = set()
    for logical_id, function in functions.items():
        log_group = function["Properties"]["LoggingConfig"]["LogGroup"]
        assert _log_group_retention(template, log_group) == 30, logical_id
        groups.add(log_group["Ref"])
    assert len(groups) == len(functions)


def test_alarms(template: Template, config: ModuleType) -> None:
    alarms = _resources(template, "AWS::CloudWatch::Alarm")
    iterator_age = alarms["JournalIteratorAgeAlarm"]["Properties"]
    assert iterator_age["Namespace"] == "AWS/Lambda"
    assert iterator_age["MetricName"] == "IteratorAge"
    assert iterator_age["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": config.JOURNAL_CONSUMER_FUNCTION_ID}}
    ]
    assert iterator_age["Statistic"] == "Maximum"
    assert iterator_age["Threshold"] == 300_000  # milliseconds
    assert iterator_age["ComparisonOperator"] == "GreaterThanThreshold"
    assert iterator_age["TreatMissingData"] == "notBreaching"
    late = alarms["LateAfterHoleAlarm"]["Properties"]
    # the journal consumer's EMF metric: namespace Magnetar, dimension service
    assert late["Namespace"] == "Magnetar"
    assert late["MetricName"] == "LateAfterHole"
    consumer = _resource(template, config.JOURNAL_CONSUMER_FUNCTION_ID, "AWS::Lambda::Function")
    service = consumer["Properties"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]
    assert late["Dimensions"] == [{"Name": "service", "Value": service}]
    assert late["Statistic"] == "Sum"
    assert late["Threshold"] == 1
    assert late["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert "AlarmActions" not in late  # no topic unless alarmTopicArn is set


def test_late_after_hole_is_the_consumers_metric_name() -> None:
    """The alarm reads what the sealer emits (core/ledger/sealer.py through the journal consumer's
    EMF lines: adapters/aws/telemetry.py), by the names both take from core/metrics/__init__.py."""
    from magnetar.core import metrics as metric_names

    handler = (REPO_ROOT / "functions" / "journal_consumer" / "handler.py").read_text()
    sealer = (REPO_ROOT / "src" / "magnetar" / "core" / "ledger" / "sealer.py").read_text()
    assert "@telemetry.instrument" in handler
    assert "m.LATE_AFTER_HOLE" in sealer
    assert metric_names.LATE_AFTER_HOLE == "LateAfterHole"
    assert metric_names.CLOUDWATCH_NAMESPACE == "Magnetar"


def _all_policy_statements(template: Template) -> list[tuple[str, Mapping[str, Any]]]:
    """Every statement of every identity policy (IAM::Policy and roles' inline policies)."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    for logical_id, policy in _resources(template, "AWS::IAM::Policy").items():
        found += [(logical_id, s) for s in policy["Properties"]["PolicyDocument"]["Statement"]]
    for logical_id, role in _resources(template, "AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            found += [(logical_id, s) for s in policy["PolicyDocument"]["Statement"]]
    return found


# Statements that must name Resource "*" because AWS offers no resource for the action: action -> why.
# Adding one needs its reason here and an acknowledgement in the stack.
STAR_RESOURCE_EXCEPTIONS: dict[str, str] = {
    "xray:PutTraceSegments": "active tracing: X-Ray has no resource-level permissions",
    "xray:PutTelemetryRecords": "active tracing: X-Ray has no resource-level permissions",
}


def test_no_policy_statement_allows_every_resource(template: Template) -> None:
    for logical_id, statement in _all_policy_statements(template):
        resources = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        if "*" in resources:
            unexplained = [a for a in _actions(statement) if a not in STAR_RESOURCE_EXCEPTIONS]
            assert not unexplained, f"{logical_id}: {unexplained} on Resource '*'"
        for action in _actions(statement):
            assert action != "*" and not action.endswith(":*"), f"{logical_id}: {action}"


def test_no_managed_policies(template: Template) -> None:
    """Every role is the stack's own (e.g. no AWSLambdaBasicExecutionRole, which allows every log group)."""
    for logical_id, role in _resources(template, "AWS::IAM::Role").items():
        assert "ManagedPolicyArns" not in role["Properties"], logical_id


def test_manage_connections_is_scoped_to_the_websocket_stage(template: Template, config: ModuleType) -> None:
    for function_id in (
        config.BROKER_FUNCTION_ID,
        config.JOURNAL_CONSUMER_FUNCTION_ID,
        config.WEBSOCKET_FUNCTION_ID,
        config.MAINTENANCE_FUNCTION_ID,
    ):
        [resource] = _allowed(_policy_statements(template, function_id), "execute-api:ManageConnections")
        parts = resource["Fn::Join"][1]
        assert {"Ref": config.WEBSOCKET_API_ID} in parts
        assert parts[-1] == "/ws/*/@connections/*"


def test_segment_grants_are_exact_actions(template: Template, config: ModuleType) -> None:
    """No s3:GetObject*, s3:List*, s3:DeleteObject*, s3:Abort*: exactly what the S3 adapter calls."""
    expected = {
        config.BROKER_FUNCTION_ID: {"s3:GetObject", "s3:ListBucket"},
        config.WEBSOCKET_FUNCTION_ID: {"s3:GetObject", "s3:ListBucket"},
        config.JOURNAL_CONSUMER_FUNCTION_ID: {"s3:GetObject", "s3:PutObject", "s3:ListBucket"},
        config.MAINTENANCE_FUNCTION_ID: {"s3:GetObject", "s3:DeleteObject", "s3:ListBucket"},
        config.AUTHORIZER_FUNCTION_ID: set(),
    }
    for function_id, actions in expected.items():
        s3_actions = {
            a for s in _policy_statements(template, function_id) for a in _actions(s) if a.startswith("s3:")
        }
        assert s3_actions == actions, function_id


def test_encryption_at_rest(template: Template, config: ModuleType) -> None:
    bucket = _resource(template, config.SEGMENT_BUCKET_ID, "AWS::S3::Bucket")["Properties"]
    assert "VersioningConfiguration" not in bucket  # decided: docs/security.md
    stream = _resource(template, config.JOURNAL_STREAM_ID, "AWS::Kinesis::Stream")["Properties"]
    assert stream["StreamEncryption"] == {"EncryptionType": "KMS", "KeyId": "alias/aws/kinesis"}
    table = _resource(template, config.METADATA_TABLE_ID, "AWS::DynamoDB::Table")["Properties"]
    # DynamoDB's default encryption (AWS owned key) applies when no SSESpecification turns it to KMS
    assert table.get("SSESpecification", {}).get("SSEEnabled", False) is False
    template.resource_count_is("AWS::SQS::Queue", 0)


def test_cloudfront_forwards_credentials_to_the_websocket_origin(template: Template) -> None:
    """Authorization reaches API Gateway: with caching disabled, the all-viewer-headers origin request
    policy forwards it; `?token=` survives the path rewrite (test_websocket_path_rewrite_runs)."""
    [distribution] = _resources(template, "AWS::CloudFront::Distribution").values()
    behavior = distribution["Properties"]["DistributionConfig"]["DefaultCacheBehavior"]
    assert behavior["CachePolicyId"] == "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"  # CachingDisabled
    assert (
        behavior["OriginRequestPolicyId"] == "b689b0a8-53d0-40ab-baf2-68738e2966ac"
    )  # AllViewerExceptHostHeader


# --- settings: constructor arguments and context ----------------------------------------------
@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Template:
    """A stack with every setting changed through constructor arguments."""
    from aws_cdk import Duration

    layer_dir, stack_module, _ = synthesis_inputs(tmp_path_factory, "layer3")
    app = App(outdir=str(tmp_path_factory.mktemp("cdk.out3")))
    stack = stack_module.MagnetarStack(
        app,
        "Tuned",
        layer_dir=layer_dir,
        superuser_roles="admin,arn:aws:iam::111122223333:role/ops",
        authorizer_cache_ttl=Duration.seconds(60),
        throttle_rate_limit=50,
        throttle_burst_limit=100,
        log_retention_days=90,
        iterator_age_alarm_threshold=Duration.minutes(10),
        alarm_topic_arn="arn:aws:sns:us-east-1:111122223333:magnetar-alarms",
        api_gateway_cloudwatch_role=False,
    )
    return Template.from_stack(stack)


def test_settings_from_arguments(tuned: Template, config: ModuleType) -> None:
    broker = _resource(tuned, config.BROKER_FUNCTION_ID, "AWS::Lambda::Function")["Properties"]
    assert broker["Environment"]["Variables"][config.ENV_SUPERUSER_ROLES] == (
        "admin,arn:aws:iam::111122223333:role/ops"
    )
    [authorizer] = [
        a["Properties"]
        for a in _resources(tuned, "AWS::ApiGatewayV2::Authorizer").values()
        if a["Properties"]["ApiId"] == {"Ref": config.HTTP_API_ID}
    ]
    assert authorizer["AuthorizerResultTtlInSeconds"] == 60
    for api_id in (config.HTTP_API_ID, config.IAM_HTTP_API_ID, config.WEBSOCKET_API_ID):
        assert _stage(tuned, api_id)["DefaultRouteSettings"] == {
            "ThrottlingBurstLimit": 100,
            "ThrottlingRateLimit": 50,
        }
    for group in _resources(tuned, "AWS::Logs::LogGroup").values():
        assert group["Properties"]["RetentionInDays"] == 90
    alarms = _resources(tuned, "AWS::CloudWatch::Alarm")
    assert alarms["JournalIteratorAgeAlarm"]["Properties"]["Threshold"] == 600_000
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == ["arn:aws:sns:us-east-1:111122223333:magnetar-alarms"]
    # the account already has API Gateway's logging role: the stack leaves it alone
    tuned.resource_count_is("AWS::ApiGateway::Account", 0)


def test_settings_from_context(tmp_path_factory: pytest.TempPathFactory, config: ModuleType) -> None:
    layer_dir, stack_module, _ = synthesis_inputs(tmp_path_factory, "layer4")
    context = {
        "superuserRoles": "root,arn:aws:iam::111122223333:role/emr",
        "authorizerCacheTtlSeconds": "0",
        "throttleRateLimit": "10",
        "throttleBurstLimit": "20",
        "logRetentionDays": "7",
        "apiGatewayCloudWatchRole": "false",
        "metricsRoles": "prometheus,arn:aws:iam::111122223333:role/amp",
        "topicLevelMetrics": "true",
    }
    app = App(context=context, outdir=str(tmp_path_factory.mktemp("cdk.out4")))
    template = Template.from_stack(stack_module.MagnetarStack(app, "FromContext", layer_dir=layer_dir))
    websocket = _resource(template, config.WEBSOCKET_FUNCTION_ID, "AWS::Lambda::Function")["Properties"]
    assert websocket["Environment"]["Variables"][config.ENV_SUPERUSER_ROLES] == context["superuserRoles"]
    broker = _resource(template, config.BROKER_FUNCTION_ID, "AWS::Lambda::Function")["Properties"]
    assert broker["Environment"]["Variables"][config.ENV_METRICS_ROLES] == context["metricsRoles"]
    assert broker["Environment"]["Variables"][config.ENV_TOPIC_LEVEL_METRICS] == "true"
    template.has_resource_properties(
        "AWS::ApiGatewayV2::Authorizer",
        {"ApiId": {"Ref": config.HTTP_API_ID}, "AuthorizerResultTtlInSeconds": 0},
    )
    assert _stage(template, config.HTTP_API_ID)["DefaultRouteSettings"] == {
        "ThrottlingBurstLimit": 20,
        "ThrottlingRateLimit": 10,
    }
    for group in _resources(template, "AWS::Logs::LogGroup").values():
        assert group["Properties"]["RetentionInDays"] == 7
    template.resource_count_is("AWS::ApiGateway::Account", 0)


def test_invalid_log_retention_is_refused(tmp_path_factory: pytest.TempPathFactory) -> None:
    stack_module = load_module("magnetar_stack", REPO_ROOT / "infra" / "magnetar_stack.py")
    app = App(outdir=str(tmp_path_factory.mktemp("cdk.out5")))
    with pytest.raises(ValueError, match="log retention 31 days"):
        stack_module.MagnetarStack(app, "Bad", log_retention_days=31)


# --- cdk-nag --------------------------------------------------------------------------------
def test_cdk_nag_aws_solutions_has_no_unacknowledged_findings(
    tmp_path_factory: pytest.TempPathFactory, nag_report: Callable[[App, Path], list[dict[str, Any]]],
) -> None:
    pytest.importorskip("cdk_nag")
    layer_dir, stack_module, context = synthesis_inputs(tmp_path_factory, "layer-nag")
    outdir = tmp_path_factory.mktemp("cdk.out-nag")
    app = App(context=context, outdir=str(outdir))
    stack_module.MagnetarStack(app, "Magnetar", layer_dir=layer_dir)
    findings = nag_report(app, outdir)
    assert findings == [], json.dumps(findings, indent=1)  # errors and warnings alike


def test_cdk_nag_reports_findings(
    tmp_path_factory: pytest.TempPathFactory, nag_report: Callable[[App, Path], list[dict[str, Any]]],
) -> None:
    """The check above is not vacuous: the same harness reports a finding the stack would have."""
    pytest.importorskip("cdk_nag")
    from aws_cdk import Stack
    from aws_cdk import aws_s3 as s3

    outdir = tmp_path_factory.mktemp("cdk.out-nag-bad")
    app = App(outdir=str(outdir))
    s3.Bucket(Stack(app, "Bad"), "Plain")
    rules = {f["rule"] for f in nag_report(app, outdir)}
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= rules
