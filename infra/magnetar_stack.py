"""The Magnetar stack: metadata table, segment bucket, journal stream and the four functions.

Broker (HTTP API), journal consumer (Kinesis), WebSocket function (WebSocket API, fronted by
CloudFront so Pulsar's `/ws/v2/...` paths work) and maintenance function (EventBridge schedule).

Logical ids, environment variable names and the event-source settings come from
`magnetar.config`, the module the handlers and the local emulator read too, so the deployed
system and `magnetar local up` cannot drift apart. The ids are pinned as the CloudFormation
logical ids (no hash suffix) so tooling can find the resources by the names in config.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from aws_cdk import (
    Annotations,
    ArnFormat,
    CfnOutput,
    CfnResource,
    Duration,
    RemovalPolicy,
    Stack,
)
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as apigwv2_integrations
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_s3 as s3
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct

from magnetar.config import (
    BOOTSTRAP_ITEMS,
    BROKER_FUNCTION_ID,
    CORE_LAYER_ID,
    ENV_BUCKET,
    ENV_STREAM,
    ENV_TABLE,
    ENV_WS_ENDPOINT,
    HTTP_API_ID,
    JOURNAL_BATCH_SIZE,
    JOURNAL_CONSUMER_FUNCTION_ID,
    JOURNAL_MAX_BATCHING_WINDOW_S,
    JOURNAL_STREAM_ID,
    MAINTENANCE_FUNCTION_ID,
    MAINTENANCE_INTERVAL_S,
    MAINTENANCE_SCHEDULE_ID,
    METADATA_TABLE_ID,
    SEGMENT_BUCKET_ID,
    WEBSOCKET_API_ID,
    WEBSOCKET_FUNCTION_ID,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS_DIR = REPO_ROOT / "functions"
DEFAULT_LAYER_DIR = REPO_ROOT / "layers" / "core" / "build"

RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
METRICS_NAMESPACE = "Magnetar"
# Kept out of asset hashes so a local test run does not force a new function version.
ASSET_EXCLUDES = ["**/__pycache__", "**/*.pyc", "tests"]

# The WebSocket API's stage; CloudFront sends every connection to it (origin path `/ws`).
WEBSOCKET_STAGE_NAME = "ws"
# Logical ids of resources config.py does not name (pinned all the same).
WEBSOCKET_STAGE_ID = "WebSocketStage"
WEBSOCKET_DISTRIBUTION_ID = "WebSocketDistribution"
WEBSOCKET_PATH_FUNCTION_ID = "WebSocketPathRewrite"

# CloudFront Function (viewer request): API Gateway WebSocket APIs have a single URL and do not route
# by path, so the Pulsar path (`/ws/v2/consumer/persistent/t/ns/topic/sub`) moves into the query
# parameter `path` (the other parameters stay) and the request goes to the stage root. The path is
# decoded then encoded once, so API Gateway hands `queryStringParameters["path"]` to the $connect
# handler decoded (`/ws/v2/.../my topic`, not `my%20topic`); the local emulation must do the same.
WEBSOCKET_PATH_REWRITE_JS = """\
function handler(event) {
    var request = event.request;
    var path = request.uri;
    try {
        path = decodeURIComponent(path);
    } catch (e) {
        // malformed percent-encoding: pass the path on as received
    }
    request.querystring['path'] = { value: encodeURIComponent(path) };
    request.uri = '/';
    return request;
}
"""


def _pin_logical_id(construct: IConstruct, logical_id: str) -> None:
    """Give the construct's CloudFormation resource exactly `logical_id` instead of a hashed one."""
    default_child = construct.node.default_child
    assert isinstance(default_child, CfnResource), f"{construct.node.path} has no CfnResource"
    default_child.override_logical_id(logical_id)


class MagnetarStack(Stack):
    """One Magnetar cluster. Environment-agnostic: synthesizes without AWS credentials."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        layer_dir: Path = DEFAULT_LAYER_DIR,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)

        # Topic, subscription and cursor metadata. Data the cluster cannot rebuild: RETAIN + PITR.
        self.table = dynamodb.Table(
            self,
            METADATA_TABLE_ID,
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute="expiresAt",
            removal_policy=RemovalPolicy.RETAIN,
        )
        _pin_logical_id(self.table, METADATA_TABLE_ID)

        # Sealed ledger segments: the durable copy of every message once the journal is trimmed.
        self.bucket = s3.Bucket(
            self,
            SEGMENT_BUCKET_ID,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            encryption=s3.BucketEncryption.S3_MANAGED,
            removal_policy=RemovalPolicy.RETAIN,
        )
        _pin_logical_id(self.bucket, SEGMENT_BUCKET_ID)

        # Write-ahead journal; 24 h is ample since the consumer seals records into S3 within seconds.
        # On-demand by default (scales by itself); `-c journalShards=N` picks provisioned mode, which
        # is what brings a steady workload under batched SQS's price (docs/cost-model.md).
        shards = int(self.node.try_get_context("journalShards") or 0)
        self.stream = kinesis.Stream(
            self,
            JOURNAL_STREAM_ID,
            stream_mode=kinesis.StreamMode.PROVISIONED if shards else kinesis.StreamMode.ON_DEMAND,
            shard_count=shards or None,
            retention_period=Duration.hours(24),
            encryption=kinesis.StreamEncryption.MANAGED,
        )
        _pin_logical_id(self.stream, JOURNAL_STREAM_ID)

        self.layer = lambda_.LayerVersion(
            self,
            CORE_LAYER_ID,
            code=lambda_.Code.from_asset(str(layer_dir), exclude=ASSET_EXCLUDES),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="magnetar core package and its runtime dependencies",
        )
        _pin_logical_id(self.layer, CORE_LAYER_ID)
        if not (layer_dir / "python" / "pydantic").is_dir():
            Annotations.of(self.layer).add_warning_v2(
                "magnetar:layerWithoutDependencies",
                f"{layer_dir} has no pip dependencies (built with --no-deps); "
                "run `python layers/build.py` before deploying.",
            )

        # WebSocket API first (routes are added once its function exists): every function pushes to
        # WebSocket connections through the stage's management endpoint.
        self.websocket_api = apigwv2.WebSocketApi(
            self,
            WEBSOCKET_API_ID,
            description="Magnetar WebSocket API (Pulsar's /ws/v2 producer, consumer and reader)",
        )
        _pin_logical_id(self.websocket_api, WEBSOCKET_API_ID)
        self.websocket_stage = apigwv2.WebSocketStage(
            self,
            WEBSOCKET_STAGE_ID,
            web_socket_api=self.websocket_api,
            stage_name=WEBSOCKET_STAGE_NAME,
            auto_deploy=True,
        )
        _pin_logical_id(self.websocket_stage, WEBSOCKET_STAGE_ID)

        resource_env = {
            ENV_TABLE: self.table.table_name,
            ENV_BUCKET: self.bucket.bucket_name,
            ENV_STREAM: self.stream.stream_name,
            # https://{apiId}.execute-api.{region}.amazonaws.com/{stage}
            ENV_WS_ENDPOINT: self.websocket_stage.callback_url,
        }

        self.broker = self._function(
            BROKER_FUNCTION_ID,
            "broker",
            # Just under API Gateway's 30 s integration limit, so the function ends first.
            timeout=Duration.seconds(29),
            environment={**resource_env, "POWERTOOLS_SERVICE_NAME": "magnetar-broker"},
        )
        self._grant_broker_access(self.broker)

        self.journal_consumer = self._function(
            JOURNAL_CONSUMER_FUNCTION_ID,
            "journal_consumer",
            timeout=Duration.seconds(120),
            environment={**resource_env, "POWERTOOLS_SERVICE_NAME": "magnetar-journal-consumer"},
        )
        self.table.grant_read_write_data(self.journal_consumer)
        self.bucket.grant_read_write(self.journal_consumer)
        self.stream.grant_read_write(self.journal_consumer)
        self.websocket_api.grant_manage_connections(self.journal_consumer)
        self.journal_consumer.add_event_source(
            event_sources.KinesisEventSource(
                self.stream,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=JOURNAL_BATCH_SIZE,
                max_batching_window=Duration.seconds(JOURNAL_MAX_BATCHING_WINDOW_S),
                # One batch in flight per shard keeps each shard's records sealed in order.
                parallelization_factor=1,
                # The handler reports the first record it could not seal; Lambda retries from there.
                report_batch_item_failures=True,
                bisect_batch_on_error=False,
                # retry_attempts and max_record_age are deliberately left unset (unlimited): a sealer
                # must never skip a record, or acknowledged messages would vanish from the ledger.
                # A poison record blocks its shard until the handler is fixed, which the iterator-age
                # metric makes visible; skipping would lose data silently.
            )
        )

        self.http_api = apigwv2.HttpApi(
            self,
            HTTP_API_ID,
            description="Magnetar broker (Pulsar admin and messaging REST API)",
            default_integration=apigwv2_integrations.HttpLambdaIntegration(
                "BrokerIntegration",
                self.broker,
                payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
            ),
        )
        _pin_logical_id(self.http_api, HTTP_API_ID)
        CfnOutput(self, "HttpApiUrl", value=self.http_api.url or self.http_api.api_endpoint)

        self.websocket_function = self._function(
            WEBSOCKET_FUNCTION_ID,
            "websocket",
            timeout=Duration.seconds(29),  # API Gateway's integration limit, as for the broker
            environment={**resource_env, "POWERTOOLS_SERVICE_NAME": "magnetar-websocket"},
        )
        self._grant_broker_access(self.websocket_function)
        for route_key in ("$connect", "$disconnect", "$default"):
            self.websocket_api.add_route(
                route_key,
                integration=apigwv2_integrations.WebSocketLambdaIntegration(
                    f"WebSocket{route_key.lstrip('$').capitalize()}Integration",
                    self.websocket_function,
                ),
                # producer receipts, error frames and answers go back as the route's response
                return_response=route_key == "$default",
            )
        # After $connect the function invokes itself asynchronously to push the backlog (API Gateway
        # refuses pushes until $connect has returned). The ARN is built from the stack name and the
        # pinned logical id (CloudFormation names the function `<stack>-<logical id>-<suffix>`):
        # naming the function's own ARN in its role would be a circular dependency.
        self.websocket_function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["lambda:InvokeFunction"],
                resources=[
                    Stack.of(self).format_arn(
                        service="lambda",
                        resource="function",
                        resource_name=f"{Stack.of(self).stack_name}-{WEBSOCKET_FUNCTION_ID}-*",
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                ],
            )
        )
        self._websocket_distribution()

        self.maintenance = self._function(
            MAINTENANCE_FUNCTION_ID,
            "maintenance",
            timeout=Duration.minutes(5),
            environment={**resource_env, "POWERTOOLS_SERVICE_NAME": "magnetar-maintenance"},
            # One run at a time: a tick that arrives while a run is still going is throttled, and
            # Lambda drops it once it is older than the interval (the next tick comes anyway).
            reserved_concurrent_executions=1,
            max_event_age=Duration.seconds(max(MAINTENANCE_INTERVAL_S, 60)),
            retry_attempts=0,
        )
        self._grant_broker_access(self.maintenance)
        self.bucket.grant_delete(self.maintenance)  # retention trims sealed segments
        self.maintenance_schedule = events.Rule(
            self,
            MAINTENANCE_SCHEDULE_ID,
            description="Magnetar ledger maintenance (TTL, backlog quotas, retention)",
            schedule=events.Schedule.rate(Duration.seconds(MAINTENANCE_INTERVAL_S)),
            targets=[targets.LambdaFunction(self.maintenance)],
        )
        _pin_logical_id(self.maintenance_schedule, MAINTENANCE_SCHEDULE_ID)

        self._bootstrap_items()

    def _grant_broker_access(self, function: lambda_.Function) -> None:
        """The broker's access, shared by the functions that run broker code (all but the consumer)."""
        self.table.grant_read_write_data(function)
        self.bucket.grant_read(function)  # reads sealed segments (and lists them); the consumer writes them
        self.stream.grant_read_write(function)  # appends to the journal, tails its unsealed part
        self.websocket_api.grant_manage_connections(function)  # pushes to WebSocket connections

    def _websocket_distribution(self) -> None:
        """CloudFront in front of the WebSocket API, so clients connect with Pulsar's `/ws/v2/...` paths."""
        path_rewrite = cloudfront.Function(
            self,
            WEBSOCKET_PATH_FUNCTION_ID,
            code=cloudfront.FunctionCode.from_inline(WEBSOCKET_PATH_REWRITE_JS),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
            comment="Magnetar: move the Pulsar WebSocket path into the query parameter path",
        )
        _pin_logical_id(path_rewrite, WEBSOCKET_PATH_FUNCTION_ID)
        api_domain = f"{self.websocket_api.api_id}.execute-api.{self.region}.{self.url_suffix}"
        self.websocket_distribution = cloudfront.Distribution(
            self,
            WEBSOCKET_DISTRIBUTION_ID,
            comment="Magnetar WebSocket endpoint (Pulsar /ws/v2 paths)",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.HttpOrigin(
                    api_domain,
                    origin_path=f"/{WEBSOCKET_STAGE_NAME}",
                    protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
                ),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
                cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
                # Every viewer header (Upgrade, Sec-WebSocket-*, auth) but Host, which must name
                # the execute-api domain; all query parameters and cookies as well.
                origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
                function_associations=[
                    cloudfront.FunctionAssociation(
                        function=path_rewrite,
                        event_type=cloudfront.FunctionEventType.VIEWER_REQUEST,
                    )
                ],
            ),
        )
        _pin_logical_id(self.websocket_distribution, WEBSOCKET_DISTRIBUTION_ID)
        CfnOutput(
            self,
            "WebSocketUrl",
            value=f"wss://{self.websocket_distribution.distribution_domain_name}",
            description="Pulsar WebSocket endpoint: wss://<this>/ws/v2/...",
        )
        CfnOutput(
            self,
            "WebSocketApiUrl",
            value=self.websocket_stage.url,
            description="The WebSocket API's own URL (no path routing; the Pulsar path goes in ?path=)",
        )

    def _function(
        self,
        construct_id: str,
        asset: str,
        *,
        timeout: Duration,
        environment: dict[str, str],
        **options: Any,
    ) -> lambda_.Function:
        """A handler function: thin code asset on top of the shared core layer."""
        function = lambda_.Function(
            self,
            construct_id,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            code=lambda_.Code.from_asset(str(FUNCTIONS_DIR / asset), exclude=ASSET_EXCLUDES),
            handler="handler.handler",
            memory_size=1024,
            timeout=timeout,
            layers=[self.layer],
            environment={**environment, "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE},
            **options,
        )
        _pin_logical_id(function, construct_id)
        return function

    def _bootstrap_items(self) -> None:
        """Write BOOTSTRAP_ITEMS once; attribute_not_exists keeps later user changes intact."""
        bootstrap = Construct(self, "Bootstrap")
        policy = cr.AwsCustomResourcePolicy.from_sdk_calls(resources=[self.table.table_arn])
        for item in BOOTSTRAP_ITEMS:
            key = f"{item['pk']['S']}/{item['sk']['S']}"
            put_item = cr.AwsSdkCall(
                service="DynamoDB",
                action="putItem",
                parameters={
                    "TableName": self.table.table_name,
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
                install_latest_aws_sdk=False,
            )
