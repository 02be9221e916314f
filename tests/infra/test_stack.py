"""Synthesis tests for MagnetarStack: the resource settings the handlers and the ledger rely on.

The stack is synthesized once per module, in-process, with the feature flags of cdk.json (so the
template matches `cdk synth`) and a --no-deps layer built in a temporary directory (so the test
never overwrites a full layer build in layers/core/build).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
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
    ],
)
def test_functions(
    template: Template, config: ModuleType, function_id_name: str, service: str, timeout: int
) -> None:
    function_id = getattr(config, function_id_name)
    _resource(template, function_id, "AWS::Lambda::Function")
    template.has_resource_properties(
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
                            "POWERTOOLS_SERVICE_NAME": service,
                            "POWERTOOLS_METRICS_NAMESPACE": "Magnetar",
                        }
                    )
                },
            }
        ),
    )


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
