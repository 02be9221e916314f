"""The core layer, the function factory (own role and log group per function) and the grants.

Also the journal consumer's event source, the maintenance schedule and the bootstrap items, the
function-side wiring the stack composes (infra/magnetar_stack.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from aws_cdk import Annotations, ArnFormat, Duration, Names, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import custom_resources as cr
from constructs import Construct

from magnetar.config import (
    BOOTSTRAP_ITEMS,
    CLUSTER_NAME,
    CORE_LAYER_ID,
    JOURNAL_BATCH_SIZE,
    LAMBDA_MEMORY_MB,
    MAINTENANCE_INTERVAL_S,
    MAINTENANCE_SCHEDULE_ID,
    SEGMENT_BUCKET_ID,
    WEBSOCKET_API_ID,
    WEBSOCKET_FUNCTION_ID,
    journal_batching_window_s,
)

from .nag import acknowledge, region_account
from .observability import log_group
from .settings import (
    ARCHITECTURE,
    ASSET_EXCLUDES,
    FUNCTIONS_DIR,
    METRICS_NAMESPACE,
    RUNTIME,
    WEBSOCKET_STAGE_NAME,
    pin_logical_id,
)


def core_layer(scope: Construct, layer_dir: Path) -> lambda_.LayerVersion:
    """The shared layer: the magnetar package and its runtime dependencies (layers/build.py)."""
    layer = lambda_.LayerVersion(
        scope,
        CORE_LAYER_ID,
        code=lambda_.Code.from_asset(str(layer_dir), exclude=ASSET_EXCLUDES),
        compatible_runtimes=[RUNTIME],
        compatible_architectures=[ARCHITECTURE],
        description="magnetar core package and its runtime dependencies",
    )
    pin_logical_id(layer, CORE_LAYER_ID)
    if not all((layer_dir / "python" / name).is_dir() for name in ("pydantic", "jwt", "cryptography")):
        Annotations.of(layer).add_warning_v2(
            "magnetar:layerWithoutDependencies",
            f"{layer_dir} has no pip dependencies (built with --no-deps); "
            "run `python layers/build.py` before deploying.",
        )
    return layer


def execution_role(
    scope: Construct, construct_id: str, log_retention_days: int, role_name: str | None = None
) -> tuple[iam.Role, logs.LogGroup]:
    """A function's own role and log group: it may write its logs there and nothing else yet.

    Instead of the managed AWSLambdaBasicExecutionRole, which allows every log group."""
    group = log_group(scope, f"{construct_id}Logs", log_retention_days)
    role = iam.Role(
        scope,
        f"{construct_id}Role",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=f"Magnetar {construct_id}: its log group and the grants the stack gives it",
        role_name=role_name,
    )
    group.grant_write(role)  # logs:CreateLogStream, logs:PutLogEvents on this group only
    return role, group


def function(
    scope: Construct,
    construct_id: str,
    asset: str,
    *,
    layer: lambda_.ILayerVersion,
    log_retention_days: int,
    timeout: Duration,
    environment: dict[str, str],
    memory_mb: int = LAMBDA_MEMORY_MB,
    role_name: str | None = None,
    tracing: lambda_.Tracing = lambda_.Tracing.PASS_THROUGH,
    log_level: str = "WARN",
    **options: Any,
) -> lambda_.Function:
    """A handler function: thin code asset on top of the shared core layer (`role_name`: its role's
    name, for a role other accounts' or regions' policies name; else CloudFormation's)."""
    role, group = execution_role(scope, construct_id, log_retention_days, role_name)
    handler = lambda_.Function(
        scope,
        construct_id,
        runtime=RUNTIME,
        architecture=ARCHITECTURE,
        code=lambda_.Code.from_asset(str(FUNCTIONS_DIR / asset), exclude=ASSET_EXCLUDES),
        handler="handler.handler",
        memory_size=memory_mb,
        timeout=timeout,
        layers=[layer],
        role=role,
        log_group=group,
        environment={**environment, "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE},
        # X-Ray (settings.TRACING_MODES): a traced invocation's spans are recorded by the handlers'
        # Powertools Tracer (adapters/aws/telemetry.py)
        tracing=tracing,
        # JSON lines at the stack's level: below INFO, Lambda writes no START/END/REPORT lines
        logging_format=lambda_.LoggingFormat.JSON,
        application_log_level_v2=getattr(lambda_.ApplicationLogLevel, log_level),
        system_log_level_v2=getattr(lambda_.SystemLogLevel, log_level),
        **options,
    )
    pin_logical_id(handler, construct_id)
    acknowledge(
        role,
        "AwsSolutions-IAM5[Resource::*]",
        "Active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords, which X-Ray grants on no "
        "resource narrower than `*` (CDK adds them with Tracing.ACTIVE).",
    )
    acknowledge(
        handler,
        "AwsSolutions-L1",
        "python3.12 on purpose: the core layer's compiled wheels are built for CPython 3.12 "
        "(layers/build.py --python-version 3.12); the runtime and the layer move together.",
    )
    return handler


# --- grants ------------------------------------------------------------------------------------
def grant_broker_access(
    handler: lambda_.Function,
    *,
    table: dynamodb.ITable,
    bucket: s3.IBucket,
    stream: kinesis.IStream,
    websocket_api: apigwv2.IWebSocketApi,
) -> None:
    """The broker's access, shared by the functions that run broker code (all but the consumer)."""
    table.grant_read_write_data(handler)
    grant_segments(handler, bucket, "s3:GetObject")  # reads sealed segments; the consumer writes them
    stream.grant_read_write(handler)  # appends to the journal, tails its unsealed part
    grant_manage_connections(handler, websocket_api)  # pushes to WebSocket connections


def grant_segments(handler: lambda_.Function, bucket: s3.IBucket, *object_actions: str) -> None:
    """Exactly the S3 calls the adapter makes (get_object, put_object, delete_objects), on the
    segment bucket's objects, plus ListBucket on the bucket (so a missing key reads as 404, not 403).

    Instead of CDK's bucket grants, whose wildcard actions (s3:GetObject*, s3:List*,
    s3:DeleteObject*, s3:Abort*) allow more than the adapter needs."""
    handler.add_to_role_policy(
        iam.PolicyStatement(actions=sorted(object_actions), resources=[bucket.arn_for_objects("*")])
    )
    handler.add_to_role_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn]))
    assert handler.role is not None
    acknowledge(
        handler.role,
        f"AwsSolutions-IAM5[Resource::<{SEGMENT_BUCKET_ID}.Arn>/*]",
        "Segment objects of the one segment bucket: their keys name topics and ledgers created at run time.",
    )


def grant_manage_connections(handler: lambda_.Function, websocket_api: apigwv2.IWebSocketApi) -> None:
    """execute-api:ManageConnections on the WebSocket API's stage's connections, nothing else.

    Tighter than CDK's grant_manage_connections (any stage): `<api>/ws/<method>/@connections/<id>`."""
    handler.add_to_role_policy(
        iam.PolicyStatement(
            actions=["execute-api:ManageConnections"],
            resources=[
                Stack.of(handler).format_arn(
                    service="execute-api",
                    resource=websocket_api.api_id,
                    resource_name=f"{WEBSOCKET_STAGE_NAME}/*/@connections/*",
                )
            ],
        )
    )
    assert handler.role is not None
    acknowledge(
        handler.role,
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:{region_account(handler)}:"
        f"<{WEBSOCKET_API_ID}>/{WEBSOCKET_STAGE_NAME}/*/@connections/*]",
        "Connections of this WebSocket API's stage only; connection ids exist per connection, and the "
        "method (POST to push, DELETE to close, GET to inspect) is the only other wildcard.",
    )


def grant_self_invoke(websocket_function: lambda_.Function) -> None:
    """After $connect the WebSocket function invokes itself asynchronously to push the backlog (API
    Gateway refuses pushes until $connect has returned). The ARN is built from the stack name and the
    pinned logical id (CloudFormation names the function `<stack>-<logical id>-<suffix>`): naming the
    function's own ARN in its role would be a circular dependency."""
    stack = Stack.of(websocket_function)
    websocket_function.add_to_role_policy(
        iam.PolicyStatement(
            actions=["lambda:InvokeFunction"],
            resources=[
                stack.format_arn(
                    service="lambda",
                    resource="function",
                    resource_name=f"{stack.stack_name}-{WEBSOCKET_FUNCTION_ID}-*",
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                )
            ],
        )
    )
    assert websocket_function.role is not None
    acknowledge(
        websocket_function.role,
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:{region_account(stack)}:"
        f"function:{stack.stack_name}-{WEBSOCKET_FUNCTION_ID}-*]",
        "The WebSocket function invokes itself (backlog push after $connect); its own ARN cannot "
        "appear in its role (circular dependency), so the statement names the function by the stack "
        "name and its pinned logical id, the random suffix CloudFormation adds being the only wildcard.",
    )


# --- triggers ----------------------------------------------------------------------------------
# Lambda's reads of the journal for an enhanced fan-out mapping ("Process Amazon Kinesis Data Streams
# records with Lambda", https://docs.aws.amazon.com/lambda/latest/dg/services-kinesis-create.html):
# the stream's shards and records (DescribeStream, DescribeStreamSummary, ListShards, GetShardIterator,
# GetRecords) and, on the registered consumer, DescribeStreamConsumer and SubscribeToShard (the
# consumer-scoped pair CDK's StreamConsumer.grant_read gives too).
FAN_OUT_STREAM_ACTIONS = (
    "kinesis:DescribeStream",
    "kinesis:DescribeStreamSummary",
    "kinesis:GetRecords",
    "kinesis:GetShardIterator",
    "kinesis:ListShards",
)
FAN_OUT_CONSUMER_ACTIONS = ("kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard")


def grant_fan_out_read(
    handler: lambda_.Function, stream: kinesis.IStream, stream_consumer: kinesis.CfnStreamConsumer
) -> None:
    """What Lambda needs to run an enhanced fan-out mapping for `handler`: on the stream and on the
    consumer by their ARNs, no wildcard."""
    handler.add_to_role_policy(
        iam.PolicyStatement(actions=list(FAN_OUT_STREAM_ACTIONS), resources=[stream.stream_arn])
    )
    handler.add_to_role_policy(
        iam.PolicyStatement(
            actions=list(FAN_OUT_CONSUMER_ACTIONS), resources=[stream_consumer.attr_consumer_arn]
        )
    )


def journal_event_source(
    journal_consumer: lambda_.Function,
    stream: kinesis.IStream,
    stream_consumer: kinesis.CfnStreamConsumer | None = None,
    batching_window_s: int | None = None,
) -> None:
    """The journal consumer reads the stream: in order per shard, never skipping a record.

    With `stream_consumer` (enhanced fan-out) the mapping subscribes on the consumer's ARN and
    invokes as soon as records arrive (no batching window), so sealing follows publishing by
    ~0.1-0.2 s and the broker functions can leave the tail alone (MAGNETAR_TAIL_READS=off).
    Without it, the shared-throughput mapping on the stream, polled once a second.
    `batching_window_s` (the `journalBatchingWindow` context) overrides either's batching window:
    with fan-out, N s trades N s of latency for fewer, larger seals (config.journal_batching_window_s)."""
    window = Duration.seconds(journal_batching_window_s(stream_consumer is not None, batching_window_s))
    settings: dict[str, Any] = dict(
        starting_position=lambda_.StartingPosition.TRIM_HORIZON,
        batch_size=JOURNAL_BATCH_SIZE,
        # One batch in flight per shard keeps each shard's records sealed in order.
        parallelization_factor=1,
        # The handler reports the first record it could not seal; Lambda retries from there.
        report_batch_item_failures=True,
        bisect_batch_on_error=False,
        # retry_attempts and max_record_age are deliberately left unset (unlimited): a sealer
        # must never skip a record, or acknowledged messages would vanish from the ledger.
        # A poison record blocks its shard until the handler is fixed, which the iterator-age
        # alarm (observability.alarms) makes visible; skipping would lose data silently.
    )
    if stream_consumer is None:
        journal_consumer.add_event_source(
            event_sources.KinesisEventSource(stream, max_batching_window=window, **settings)
        )
        return
    grant_fan_out_read(journal_consumer, stream, stream_consumer)
    # The construct id KinesisEventSource would give (the function's scope, the stream's unique id),
    # so the mapping keeps its logical id whichever way it reads the stream.
    lambda_.EventSourceMapping(
        journal_consumer,
        f"KinesisEventSource:{Names.node_unique_id(stream.node)}",
        target=journal_consumer,
        event_source_arn=stream_consumer.attr_consumer_arn,
        max_batching_window=window,
        **settings,
    )


def maintenance_schedule(scope: Construct, maintenance: lambda_.Function) -> events.Rule:
    """The EventBridge rule running the maintenance function every MAINTENANCE_INTERVAL_S."""
    schedule = events.Rule(
        scope,
        MAINTENANCE_SCHEDULE_ID,
        description="Magnetar ledger maintenance (TTL, backlog quotas, retention)",
        schedule=events.Schedule.rate(Duration.seconds(MAINTENANCE_INTERVAL_S)),
        targets=[targets.LambdaFunction(maintenance)],
    )
    pin_logical_id(schedule, MAINTENANCE_SCHEDULE_ID)
    return schedule


def bootstrap_items(
    scope: Construct,
    table: dynamodb.ITable | None,
    log_retention_days: int,
    *,
    cluster_name: str = CLUSTER_NAME,
    items: list[dict[str, dict[str, object]]] | None = None,
    table_name: str | None = None,
    table_arn: str | None = None,
) -> tuple[Construct, iam.Role, logs.LogGroup]:
    """Write BOOTSTRAP_ITEMS once; attribute_not_exists keeps later user changes intact.

    Into `table`, or the table named `table_name` (ARN `table_arn`: the instance's configuration
    table). Tenant `public` allows `cluster_name` (as Pulsar's standalone, which allows its own
    cluster); `items` replaces BOOTSTRAP_ITEMS (an instance's home stack: the clusters add
    themselves). Returns the custom resources' scope and their provider's role and log group."""
    bootstrap = Construct(scope, "Bootstrap")
    name = table_name or (table.table_name if table else None)
    arn = table_arn or (table.table_arn if table else None)
    # The custom resources' shared provider function gets a role of ours (its log group only, no
    # managed policy) and a log group with the stack's retention.
    role, group = execution_role(scope, "BootstrapProvider", log_retention_days)
    if name is None or arn is None:  # nothing to write here (an instance's other regions)
        return bootstrap, role, group
    policy = cr.AwsCustomResourcePolicy.from_sdk_calls(resources=[arn])
    for item in bootstrap_item_list(cluster_name) if items is None else items:
        key = f"{item['pk']['S']}/{item['sk']['S']}"
        put_item = cr.AwsSdkCall(
            service="DynamoDB",
            action="putItem",
            parameters={
                "TableName": name,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(pk)",
            },
            physical_resource_id=cr.PhysicalResourceId.of(f"magnetar-bootstrap:{key}"),
            # The item already exists: a previous deploy or the user created it. Keep theirs.
            ignore_error_codes_matching="ConditionalCheckFailedException",
        )
        cr.AwsCustomResource(
            bootstrap,
            re.sub(r"[^A-Za-z0-9]+", "-", key),
            on_create=put_item,
            on_update=put_item,
            policy=policy,
            role=role,
            log_group=group,
            install_latest_aws_sdk=False,
        )
    return bootstrap, role, group


def bootstrap_item_list(cluster_name: str, allowed_clusters: list[str] | None = None) -> list[dict[str, dict[str, object]]]:
    """BOOTSTRAP_ITEMS with tenant `public` allowing `allowed_clusters` (default: `cluster_name`)."""
    clusters = [cluster_name] if allowed_clusters is None else allowed_clusters
    out: list[dict[str, dict[str, object]]] = []
    for item in BOOTSTRAP_ITEMS:
        if "allowedClusters" in item:
            item = {**item, "allowedClusters": {"L": [{"S": c} for c in clusters]}}
        out.append(item)
    return out
