"""The Magnetar stack: metadata table, segment bucket, journal stream and the five functions.

Broker (HTTP API), journal consumer (Kinesis), WebSocket function (WebSocket API, fronted by
CloudFront so Pulsar's `/ws/v2/...` paths work), maintenance function (EventBridge schedule) and
the authorizer (API Gateway Lambda authorizer: Pulsar tokens, keys in Secrets Manager).

Authentication is on: the HTTP API and the WebSocket $connect run the token authorizer, a second
HTTP API takes SigV4-signed requests from AWS principals (IAM authorization), and the broker
decides what each role may do (`magnetar.core.authz`). Hardening (checked by cdk-nag's
AwsSolutions pack in tests/infra; every acknowledged finding is acknowledged here, with its
reason): encryption at rest, TLS only, least-privilege roles without managed policies, stage
throttling, access logs, log retention and alarms. docs/security.md has the operator's side.

Logical ids, environment variable names and the event-source settings come from
`magnetar.config`, the module the handlers and the local emulator read too, so the deployed
system and `magnetar local up` cannot drift apart. The ids are pinned as the CloudFormation
logical ids (no hash suffix) so tooling can find the resources by the names in config.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from aws_cdk import (
    Acknowledgment,
    Annotations,
    ArnFormat,
    CfnOutput,
    CfnResource,
    CustomResource,
    Duration,
    RemovalPolicy,
    Stack,
    Validations,
)
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as apigwv2_authorizers
from aws_cdk import aws_apigatewayv2_integrations as apigwv2_integrations
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct

from magnetar.config import (
    AUTHORIZER_FUNCTION_ID,
    BOOTSTRAP_ITEMS,
    BROKER_FUNCTION_ID,
    CORE_LAYER_ID,
    DEFAULT_SUPERUSER_ROLE,
    ENV_AUTH_ENABLED,
    ENV_BUCKET,
    ENV_STREAM,
    ENV_SUPERUSER_ROLES,
    ENV_TABLE,
    ENV_TOKEN_KEYS_SECRET,
    ENV_WS_ENDPOINT,
    HTTP_API_ID,
    IAM_HTTP_API_ID,
    JOURNAL_BATCH_SIZE,
    JOURNAL_CONSUMER_FUNCTION_ID,
    JOURNAL_MAX_BATCHING_WINDOW_S,
    JOURNAL_STREAM_ID,
    MAINTENANCE_FUNCTION_ID,
    MAINTENANCE_INTERVAL_S,
    MAINTENANCE_SCHEDULE_ID,
    METADATA_TABLE_ID,
    PUBLIC_ROUTES,
    SEGMENT_BUCKET_ID,
    TOKEN_KEYS_SECRET_ID,
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
TOKEN_KEYS_GENERATOR_ID = "TokenKeysGenerator"  # the function writing the first key into the secret
TOKEN_KEYS_INITIAL_KEY_ID = "TokenKeysInitialKey"  # the custom resource invoking it (on create only)
API_GATEWAY_ACCOUNT_ID = "ApiGatewayAccount"
API_GATEWAY_LOGS_ROLE_ID = "ApiGatewayCloudWatchRole"
ITERATOR_AGE_ALARM_ID = "JournalIteratorAgeAlarm"
LATE_AFTER_HOLE_ALARM_ID = "LateAfterHoleAlarm"
HTTP_API_ACCESS_LOGS_ID = "HttpApiAccessLogs"
IAM_HTTP_API_ACCESS_LOGS_ID = "IamHttpApiAccessLogs"
WEBSOCKET_ACCESS_LOGS_ID = "WebSocketAccessLogs"

# Defaults of the stack's settings (constructor arguments, else `-c` context keys, else these).
DEFAULT_AUTHORIZER_CACHE_TTL_S = 300  # context authorizerCacheTtlSeconds (0 turns caching off)
DEFAULT_THROTTLE_RATE_LIMIT = 1000  # context throttleRateLimit: steady requests/s per stage
DEFAULT_THROTTLE_BURST_LIMIT = 2000  # context throttleBurstLimit: the token bucket's size
DEFAULT_LOG_RETENTION_DAYS = 30  # context logRetentionDays: function and access log groups
# context iteratorAgeAlarmSeconds. A hole legitimately holds a shard for up to HOLE_GRACE_MS (60 s)
# plus the write deadline, so the alarm starts well above that: only a shard that stopped sealing
# (a poison record; the mapping retries it forever by design) stays this far behind.
DEFAULT_ITERATOR_AGE_ALARM_S = 300
# CloudWatch accepts only these retention periods (days).
LOG_RETENTION_DAYS = frozenset(
    {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}
)

# The journal consumer's metric (functions/journal_consumer: EphemeralMetrics in METRICS_NAMESPACE,
# dimension `service`): an entry whose record reached the sealer after its id had been declared a
# hole, i.e. an acknowledged message consumers will never see. It must never happen; one is an incident.
LATE_AFTER_HOLE_METRIC = "LateAfterHole"
JOURNAL_CONSUMER_SERVICE = "magnetar-journal-consumer"

# Access log lines (JSON). No query strings: a browser's WebSocket token travels in `?token=`.
HTTP_ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "path": "$context.path",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "latency": "$context.responseLatency",
    "integrationError": "$context.integrationErrorMessage",
    "authorizerError": "$context.authorizer.error",
    "role": "$context.authorizer.role",  # the token authorizer's answer
    "userArn": "$context.identity.userArn",  # the SigV4 caller (IAM API)
}
WEBSOCKET_ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "eventType": "$context.eventType",
    "routeKey": "$context.routeKey",
    "connectionId": "$context.connectionId",
    "status": "$context.status",
    "principalId": "$context.authorizer.principalId",
    "authorizerError": "$context.authorizer.error",
    "error": "$context.error.message",
    "integrationError": "$context.integration.error",
}

# The key generator (inline, no layer): on stack creation it replaces the secret's placeholder with
# `{"keys": [{"algorithm": "HS256", "key": <base64 of 32 random bytes>}]}`, the document
# magnetar.security.identity reads. Only on Create, and never over a document that already holds
# keys, so a rotation (docs/security.md) is never undone by a deploy. The key is never logged or
# returned to CloudFormation. It answers CloudFormation itself (no cfn-response module, no provider
# framework): one PUT to the pre-signed ResponseURL.
TOKEN_KEYS_GENERATOR_CODE = """\
import base64, json, secrets, urllib.request
import boto3


def _holds_keys(text):
    try:
        keys = json.loads(text).get("keys")
    except (ValueError, AttributeError):
        return False
    return isinstance(keys, list) and len(keys) > 0


def handler(event, context):
    status, reason = "SUCCESS", "ok"
    try:
        if event["RequestType"] == "Create":
            arn = event["ResourceProperties"]["SecretArn"]
            client = boto3.client("secretsmanager")
            if not _holds_keys(client.get_secret_value(SecretId=arn)["SecretString"]):
                key = base64.b64encode(secrets.token_bytes(32)).decode()
                document = {"keys": [{"algorithm": "HS256", "key": key}]}
                client.put_secret_value(SecretId=arn, SecretString=json.dumps(document))
    except Exception as exc:  # report the failure, never hang the stack
        status, reason = "FAILED", type(exc).__name__ + ": " + str(exc)[:300]
    print(json.dumps({"requestType": event.get("RequestType"), "status": status, "reason": reason}))
    body = json.dumps({
        "Status": status,
        "Reason": reason,
        "PhysicalResourceId": event.get("PhysicalResourceId") or "magnetar-token-keys-initial-key",
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "Data": {},
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    urllib.request.urlopen(request, timeout=30).close()
"""

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


def context_flag(value: Any) -> bool:
    """A context flag: `-c flag=false` arrives as the string "false"."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _pin_logical_id(construct: IConstruct, logical_id: str) -> None:
    """Give the construct's CloudFormation resource exactly `logical_id` instead of a hashed one."""
    default_child = construct.node.default_child
    assert isinstance(default_child, CfnResource), f"{construct.node.path} has no CfnResource"
    default_child.override_logical_id(logical_id)


class MagnetarStack(Stack):
    """One Magnetar cluster. Environment-agnostic: synthesizes without AWS credentials.

    Every setting below may also come from the CDK context (`cdk deploy -c superuserRoles=admin,arn:...`);
    an argument given here wins over the context, the context over the default.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        layer_dir: Path = DEFAULT_LAYER_DIR,
        superuser_roles: str | None = None,
        authorizer_cache_ttl: Duration | None = None,
        throttle_rate_limit: float | None = None,
        throttle_burst_limit: int | None = None,
        log_retention_days: int | None = None,
        iterator_age_alarm_threshold: Duration | None = None,
        alarm_topic_arn: str | None = None,
        api_gateway_cloudwatch_role: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # comma-separated roles (token subjects or IAM role ARNs) that may do everything
        self.superuser_roles = self._setting(superuser_roles, "superuserRoles", DEFAULT_SUPERUSER_ROLE, str)
        self.authorizer_cache_ttl = authorizer_cache_ttl or Duration.seconds(
            self._setting(None, "authorizerCacheTtlSeconds", DEFAULT_AUTHORIZER_CACHE_TTL_S, int)
        )
        self.throttle = apigwv2.ThrottleSettings(
            rate_limit=self._setting(
                throttle_rate_limit, "throttleRateLimit", DEFAULT_THROTTLE_RATE_LIMIT, float
            ),
            burst_limit=self._setting(
                throttle_burst_limit, "throttleBurstLimit", DEFAULT_THROTTLE_BURST_LIMIT, int
            ),
        )
        self.log_retention_days = self._setting(
            log_retention_days, "logRetentionDays", DEFAULT_LOG_RETENTION_DAYS, int
        )
        if self.log_retention_days not in LOG_RETENTION_DAYS:
            raise ValueError(
                f"log retention {self.log_retention_days} days: CloudWatch accepts {sorted(LOG_RETENTION_DAYS)}"
            )
        self.iterator_age_alarm_threshold = iterator_age_alarm_threshold or Duration.seconds(
            self._setting(None, "iteratorAgeAlarmSeconds", DEFAULT_ITERATOR_AGE_ALARM_S, int)
        )
        alarm_topic_arn = self._setting(alarm_topic_arn, "alarmTopicArn", "", str)
        api_gateway_cloudwatch_role = self._setting(
            api_gateway_cloudwatch_role, "apiGatewayCloudWatchRole", True, context_flag
        )

        # Topic, subscription and cursor metadata. Data the cluster cannot rebuild: RETAIN + PITR.
        # Encrypted at rest with DynamoDB's default (AWS owned) key: DynamoDB always encrypts, and a
        # KMS key would add a KMS request to the table's hottest path for no access-control gain
        # (the table is reachable only through the roles granted below).
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
            encryption=dynamodb.TableEncryption.DEFAULT,
            removal_policy=RemovalPolicy.RETAIN,
        )
        _pin_logical_id(self.table, METADATA_TABLE_ID)

        # Sealed ledger segments: the durable copy of every message once the journal is trimmed.
        # SSE-S3, TLS only (a Deny on aws:SecureTransport=false), no public access. Not versioned:
        # a segment is written once (If-None-Match) and only the maintenance run deletes it, when
        # retention says nobody needs it; versioning would keep every trimmed segment (and bill it)
        # until a lifecycle rule expired it, and would not protect the ledger's consistency anyway
        # (the segment list lives in DynamoDB, which has point-in-time recovery).
        self.bucket = s3.Bucket(
            self,
            SEGMENT_BUCKET_ID,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            encryption=s3.BucketEncryption.S3_MANAGED,
            versioned=False,
            removal_policy=RemovalPolicy.RETAIN,
        )
        _pin_logical_id(self.bucket, SEGMENT_BUCKET_ID)
        self._acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "Server access logs would write one log record per ranged segment read, i.e. per consumer "
            "receive, roughly doubling the S3 request bill the cost model counts; only the stack's own "
            "function roles can reach the bucket (no public access, TLS only). Enable CloudTrail S3 data "
            "events for the bucket when an object-level audit trail is required.",
        )

        # Write-ahead journal; 24 h is ample since the consumer seals records into S3 within seconds.
        # On-demand by default (scales by itself); `-c journalShards=N` picks provisioned mode, which
        # is what brings a steady workload under batched SQS's price (docs/cost-model.md).
        # Encrypted at rest with the AWS managed key aws/kinesis.
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
        if not all((layer_dir / "python" / name).is_dir() for name in ("pydantic", "jwt", "cryptography")):
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
            throttle=self.throttle,
        )
        _pin_logical_id(self.websocket_stage, WEBSOCKET_STAGE_ID)
        self._access_logs(self.websocket_stage, WEBSOCKET_ACCESS_LOGS_ID, WEBSOCKET_ACCESS_LOG_FORMAT)
        if api_gateway_cloudwatch_role:
            self._api_gateway_cloudwatch_role(self.websocket_stage)

        resource_env = {
            ENV_TABLE: self.table.table_name,
            ENV_BUCKET: self.bucket.bucket_name,
            ENV_STREAM: self.stream.stream_name,
            # https://{apiId}.execute-api.{region}.amazonaws.com/{stage}
            ENV_WS_ENDPOINT: self.websocket_stage.callback_url,
        }
        # The functions that answer callers: every request needs a role (docs/security.md).
        auth_env = {ENV_AUTH_ENABLED: "true", ENV_SUPERUSER_ROLES: self.superuser_roles}

        self._token_keys()

        self.broker = self._function(
            BROKER_FUNCTION_ID,
            "broker",
            # Just under API Gateway's 30 s integration limit, so the function ends first.
            timeout=Duration.seconds(29),
            environment={**resource_env, **auth_env, "POWERTOOLS_SERVICE_NAME": "magnetar-broker"},
        )
        self._grant_broker_access(self.broker)

        self.journal_consumer = self._function(
            JOURNAL_CONSUMER_FUNCTION_ID,
            "journal_consumer",
            timeout=Duration.seconds(120),
            environment={**resource_env, "POWERTOOLS_SERVICE_NAME": JOURNAL_CONSUMER_SERVICE},
        )
        self.table.grant_read_write_data(self.journal_consumer)
        self._grant_segments(self.journal_consumer, "s3:GetObject", "s3:PutObject")  # seals segments
        self.stream.grant_read_write(self.journal_consumer)
        self._grant_manage_connections(self.journal_consumer)
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
                # alarm (below) makes visible; skipping would lose data silently.
            )
        )

        self._http_apis()

        self.websocket_function = self._function(
            WEBSOCKET_FUNCTION_ID,
            "websocket",
            timeout=Duration.seconds(29),  # API Gateway's integration limit, as for the broker
            environment={**resource_env, **auth_env, "POWERTOOLS_SERVICE_NAME": "magnetar-websocket"},
        )
        self._grant_broker_access(self.websocket_function)
        # $connect runs the token authorizer. No identity source: API Gateway would refuse a
        # connection lacking the named parameter before the authorizer ran, and the token may come
        # either as `Authorization: Bearer` (SDKs) or as `?token=` (browsers cannot set headers on a
        # WebSocket). WebSocket authorizers are not cached: one invocation per connection.
        self.connect_authorizer = apigwv2_authorizers.WebSocketLambdaAuthorizer(
            "ConnectAuthorizer", self.authorizer, authorizer_name="magnetar-connect", identity_source=[]
        )
        for route_key in ("$connect", "$disconnect", "$default"):
            route = self.websocket_api.add_route(
                route_key,
                integration=apigwv2_integrations.WebSocketLambdaIntegration(
                    f"WebSocket{route_key.lstrip('$').capitalize()}Integration",
                    self.websocket_function,
                ),
                authorizer=self.connect_authorizer if route_key == "$connect" else None,
                # producer receipts, error frames and answers go back as the route's response
                return_response=route_key == "$default",
            )
            if route_key != "$connect":
                self._acknowledge(
                    route,
                    "AwsSolutions-APIG4",
                    "API Gateway runs WebSocket authorizers on $connect only; $default and $disconnect "
                    "frames arrive on a connection whose $connect was authorized, and the function checks "
                    "the role recorded with the connection.",
                )
        for authorizer in self.websocket_api.node.find_all():
            if isinstance(authorizer, apigwv2.CfnAuthorizer):
                # CloudFormation gets no IdentitySource at all (optional for WebSocket REQUEST
                # authorizers), not an empty list.
                authorizer.add_property_deletion_override("IdentitySource")
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
        assert self.websocket_function.role is not None
        self._acknowledge(
            self.websocket_function.role,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:"
            f"function:{self.stack_name}-{WEBSOCKET_FUNCTION_ID}-*]",
            "The WebSocket function invokes itself (backlog push after $connect); its own ARN cannot "
            "appear in its role (circular dependency), so the statement names the function by the stack "
            "name and its pinned logical id, the random suffix CloudFormation adds being the only wildcard.",
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
        self._grant_segments(self.maintenance, "s3:DeleteObject")  # retention trims sealed segments
        self.maintenance_schedule = events.Rule(
            self,
            MAINTENANCE_SCHEDULE_ID,
            description="Magnetar ledger maintenance (TTL, backlog quotas, retention)",
            schedule=events.Schedule.rate(Duration.seconds(MAINTENANCE_INTERVAL_S)),
            targets=[targets.LambdaFunction(self.maintenance)],
        )
        _pin_logical_id(self.maintenance_schedule, MAINTENANCE_SCHEDULE_ID)

        self._bootstrap_items()
        self._alarms(alarm_topic_arn)

    # --- settings -------------------------------------------------------------------------------
    def _setting(self, value: Any, context_key: str, default: Any, cast: Any) -> Any:
        """The argument if given, else the context value `context_key` (cast), else `default`."""
        if value is not None:
            return value
        raw = self.node.try_get_context(context_key)
        return default if raw is None or raw == "" else cast(raw)

    # --- authentication ------------------------------------------------------------------------
    def _token_keys(self) -> None:
        """The token verification keys (Secrets Manager) and the authorizer reading them.

        CloudFormation's secret generator writes one random string at the top level of a JSON
        template, and the key document nests the key in a list (`{"keys": [{...}]}`), so the secret
        starts with a generated placeholder and a small custom resource replaces it, once, with a
        real key: 32 random bytes from the function's CSPRNG, base64, as `pulsar tokens
        create-secret-key` makes them. CloudFormation never sees the key (not in the template, not in
        the custom resource's response).
        """
        self.token_keys = secretsmanager.Secret(
            self,
            TOKEN_KEYS_SECRET_ID,
            description='Magnetar token verification keys: {"keys": [{"algorithm", "key"}]} '
            "(docs/security.md, Key rotation)",
            # encrypted with the AWS managed key aws/secretsmanager
        )
        _pin_logical_id(self.token_keys, TOKEN_KEYS_SECRET_ID)
        self._acknowledge(
            self.token_keys,
            "AwsSolutions-SMG4",
            "Token keys are rotated by the documented add-then-drop procedure (docs/security.md, Key "
            "rotation): validators accept every key in the list, so tokens signed with the old key stay "
            "valid until they are re-issued. A Secrets Manager rotation function replacing the key would "
            "invalidate every issued token at once.",
        )

        role, log_group = self._execution_role(TOKEN_KEYS_GENERATOR_ID)
        generator = lambda_.Function(
            self,
            TOKEN_KEYS_GENERATOR_ID,
            runtime=lambda_.Runtime.PYTHON_3_14,  # no layer: the newest Python (cdk-nag L1)
            architecture=ARCHITECTURE,
            code=lambda_.Code.from_inline(TOKEN_KEYS_GENERATOR_CODE),
            handler="index.handler",
            timeout=Duration.seconds(60),
            memory_size=256,
            role=role,
            log_group=log_group,
            description="Magnetar: writes the first token key into the key secret (stack creation only)",
        )
        _pin_logical_id(generator, TOKEN_KEYS_GENERATOR_ID)
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue"],
                resources=[self.token_keys.secret_arn],
            )
        )
        initial_key = CustomResource(
            self,
            TOKEN_KEYS_INITIAL_KEY_ID,
            service_token=generator.function_arn,
            resource_type="Custom::MagnetarTokenKey",
            properties={"SecretArn": self.token_keys.secret_arn},
        )
        _pin_logical_id(initial_key, TOKEN_KEYS_INITIAL_KEY_ID)
        initial_key.node.add_dependency(role)  # the grant must exist before the function runs

        self.authorizer = self._function(
            AUTHORIZER_FUNCTION_ID,
            "authorizer",
            timeout=Duration.seconds(10),
            environment={
                ENV_TOKEN_KEYS_SECRET: self.token_keys.secret_arn,
                "POWERTOOLS_SERVICE_NAME": "magnetar-authorizer",
            },
        )
        self.token_keys.grant_read(self.authorizer)  # the authorizer only: GetSecretValue, DescribeSecret
        self.authorizer.node.add_dependency(initial_key)  # never serve the placeholder

    def _http_apis(self) -> None:
        """The token-authenticated HTTP API and its SigV4 twin, both in front of the broker."""
        # Simple responses, cached per Authorization header for `authorizer_cache_ttl`. Caching is
        # safe for expiring tokens: the answer carries the token's `exp` in its context and the broker
        # refuses the token once `exp` has passed, whatever API Gateway still caches. A token whose
        # key was dropped in a rotation stays accepted for at most the TTL (plus the authorizer's own
        # 5-minute key cache). Requests without an Authorization header are refused by API Gateway
        # (401) before the authorizer runs.
        self.token_authorizer = apigwv2_authorizers.HttpLambdaAuthorizer(
            "TokenAuthorizer",
            self.authorizer,
            authorizer_name="magnetar-token",
            identity_source=["$request.header.Authorization"],
            response_types=[apigwv2_authorizers.HttpLambdaResponseType.SIMPLE],
            results_cache_ttl=self.authorizer_cache_ttl,
        )
        broker_integration = apigwv2_integrations.HttpLambdaIntegration(
            "BrokerIntegration",
            self.broker,
            payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
        )
        self.http_api = apigwv2.HttpApi(
            self,
            HTTP_API_ID,
            description="Magnetar broker (Pulsar admin and messaging REST API)",
            default_integration=broker_integration,
            default_authorizer=self.token_authorizer,
            create_default_stage=False,  # added below with throttling and access logs (same logical id)
        )
        _pin_logical_id(self.http_api, HTTP_API_ID)
        self.http_stage = self._http_stage(self.http_api, HTTP_API_ACCESS_LOGS_ID)
        # The few routes the broker serves to anyone (the OpenAPI document): no authorizer.
        for public_route in sorted(PUBLIC_ROUTES):
            method, path = public_route.split(" ", 1)
            for route in self.http_api.add_routes(
                path=path,
                methods=[apigwv2.HttpMethod[method]],
                integration=broker_integration,
                authorizer=apigwv2.HttpNoneAuthorizer(),
            ):
                self._acknowledge(
                    route,
                    "AwsSolutions-APIG4",
                    f"{public_route} is public on purpose (magnetar.config.PUBLIC_ROUTES): the API's "
                    "OpenAPI description, no data.",
                )
        CfnOutput(self, "HttpApiUrl", value=self.http_stage.url)

        # AWS workloads (an EMR job role, a Lambda function's role) sign with SigV4 instead of
        # holding a token; the broker reads the caller from requestContext.authorizer.iam and grants
        # by role ARN. Which principals may call at all is their IAM policies' say
        # (execute-api:Invoke on IamHttpApiExecuteArn).
        self.iam_http_api = apigwv2.HttpApi(
            self,
            IAM_HTTP_API_ID,
            description="Magnetar broker for AWS principals (SigV4, IAM authorization)",
            create_default_stage=False,
        )
        _pin_logical_id(self.iam_http_api, IAM_HTTP_API_ID)
        self.iam_http_stage = self._http_stage(self.iam_http_api, IAM_HTTP_API_ACCESS_LOGS_ID)
        self.iam_http_api.add_routes(
            path="/{proxy+}",
            methods=[apigwv2.HttpMethod.ANY],
            integration=apigwv2_integrations.HttpLambdaIntegration(
                "IamBrokerIntegration",
                self.broker,
                payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
            ),
            authorizer=apigwv2_authorizers.HttpIamAuthorizer(),
        )
        CfnOutput(
            self,
            "IamHttpApiUrl",
            value=self.iam_http_stage.url,
            description="Broker URL for SigV4-signed requests (AWS principals; roles are their ARNs)",
        )
        CfnOutput(
            self,
            "IamHttpApiExecuteArn",
            value=Stack.of(self).format_arn(
                service="execute-api", resource=self.iam_http_api.api_id, resource_name="*"
            ),
            description="Resource for execute-api:Invoke in the policies of roles that call IamHttpApiUrl",
        )
        CfnOutput(self, "TokenKeysSecretArn", value=self.token_keys.secret_arn)

    def _http_stage(self, api: apigwv2.HttpApi, access_logs_id: str) -> apigwv2.HttpStage:
        """The API's `$default` stage, auto-deployed, throttled and access-logged.

        Its construct id is the one HttpApi gives the stage it creates itself, so the stage keeps
        its logical id (a replaced `$default` stage would collide with the old one)."""
        stage = api.add_stage("DefaultStage", stage_name="$default", auto_deploy=True, throttle=self.throttle)
        self._access_logs(stage, access_logs_id, HTTP_ACCESS_LOG_FORMAT)
        return stage

    def _access_logs(self, stage: IConstruct, log_group_id: str, line: dict[str, str]) -> None:
        log_group = self._log_group(log_group_id)
        cfn_stage = stage.node.default_child
        assert isinstance(cfn_stage, apigwv2.CfnStage)
        cfn_stage.access_log_settings = apigwv2.CfnStage.AccessLogSettingsProperty(
            destination_arn=log_group.log_group_arn, format=json.dumps(line, separators=(",", ":"))
        )

    def _api_gateway_cloudwatch_role(self, websocket_stage: apigwv2.WebSocketStage) -> None:
        """The account's API Gateway logging role, which WebSocket (not HTTP) access logs require.

        It is a per-region account setting: `-c apiGatewayCloudWatchRole=false` leaves an existing
        one alone. The role is retained when the stack is deleted, as other APIs of the account may
        log through it."""
        role = iam.Role(
            self,
            API_GATEWAY_LOGS_ROLE_ID,
            assumed_by=iam.ServicePrincipal("apigateway.amazonaws.com"),
            description="API Gateway (account setting): writes access logs to CloudWatch Logs",
        )
        role.apply_removal_policy(RemovalPolicy.RETAIN)
        log_groups = Stack.of(self).format_arn(
            service="logs", resource="log-group", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:DescribeLogGroups",
                    "logs:DescribeLogStreams",
                    "logs:PutLogEvents",
                    "logs:GetLogEvents",
                    "logs:FilterLogEvents",
                ],
                resources=[log_groups],
            )
        )
        self._acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:*]",
            "API Gateway's CloudWatch role is one per account and region and serves the logs of every "
            "API there (the same actions as the managed AmazonAPIGatewayPushToCloudWatchLogs, scoped to "
            "this account's and region's log groups instead of `*`).",
        )
        account = apigw.CfnAccount(self, API_GATEWAY_ACCOUNT_ID, cloud_watch_role_arn=role.role_arn)
        account.override_logical_id(API_GATEWAY_ACCOUNT_ID)
        account.node.add_dependency(role)
        websocket_stage.node.add_dependency(account)  # logging needs the role set first

    # --- functions -----------------------------------------------------------------------------
    def _grant_broker_access(self, function: lambda_.Function) -> None:
        """The broker's access, shared by the functions that run broker code (all but the consumer)."""
        self.table.grant_read_write_data(function)
        self._grant_segments(function, "s3:GetObject")  # reads sealed segments; the consumer writes them
        self.stream.grant_read_write(function)  # appends to the journal, tails its unsealed part
        self._grant_manage_connections(function)  # pushes to WebSocket connections

    def _grant_segments(self, function: lambda_.Function, *object_actions: str) -> None:
        """Exactly the S3 calls the adapter makes (get_object, put_object, delete_objects), on the
        segment bucket's objects, plus ListBucket on the bucket (so a missing key reads as 404, not 403).

        Instead of CDK's bucket grants, whose wildcard actions (s3:GetObject*, s3:List*,
        s3:DeleteObject*, s3:Abort*) allow more than the adapter needs."""
        function.add_to_role_policy(
            iam.PolicyStatement(actions=sorted(object_actions), resources=[self.bucket.arn_for_objects("*")])
        )
        function.add_to_role_policy(
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.bucket.bucket_arn])
        )
        assert function.role is not None
        self._acknowledge(
            function.role,
            f"AwsSolutions-IAM5[Resource::<{SEGMENT_BUCKET_ID}.Arn>/*]",
            "Segment objects of the one segment bucket: their keys name topics and ledgers created at run time.",
        )

    def _grant_manage_connections(self, function: lambda_.Function) -> None:
        """execute-api:ManageConnections on the WebSocket API's stage's connections, nothing else.

        Tighter than CDK's grant_manage_connections (any stage): `<api>/ws/<method>/@connections/<id>`."""
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["execute-api:ManageConnections"],
                resources=[
                    Stack.of(self).format_arn(
                        service="execute-api",
                        resource=self.websocket_api.api_id,
                        resource_name=f"{WEBSOCKET_STAGE_NAME}/*/@connections/*",
                    )
                ],
            )
        )
        assert function.role is not None
        self._acknowledge(
            function.role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:"
            f"<{WEBSOCKET_API_ID}>/{WEBSOCKET_STAGE_NAME}/*/@connections/*]",
            "Connections of this WebSocket API's stage only; connection ids exist per connection, and the "
            "method (POST to push, DELETE to close, GET to inspect) is the only other wildcard.",
        )

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
                # Every viewer header (Upgrade, Sec-WebSocket-*) but Host, which must name the
                # execute-api domain; all query parameters (`path`, `token`, ...) and cookies as well.
                # Authorization too: CloudFront strips it unless it is in the cache key or, as here
                # with caching disabled, an all-viewer-headers origin request policy forwards it.
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
        for rule, reason in (
            (
                "AwsSolutions-CFR4",
                "The distribution uses CloudFront's default certificate (*.cloudfront.net), whose "
                "minimum viewer protocol CloudFront fixes; a TLSv1.2_2021 policy needs a custom domain "
                "with an ACM certificate. Origin requests use TLS 1.2 (HTTPS only).",
            ),
            (
                "AwsSolutions-CFR3",
                "Each connection is a single upgrade request, which the WebSocket stage's access log "
                "(WebSocketAccessLogs) records with the authorizer's principal; CloudFront standard logs "
                "would need an ACL-enabled S3 bucket for no additional information.",
            ),
            (
                "AwsSolutions-CFR1",
                "Pulsar clients connect from anywhere the operator's tenants run; no geographic restriction "
                "is part of the service. Add one per deployment if policy requires it.",
            ),
            (
                "AwsSolutions-CFR2",
                "Connections are authenticated at $connect (token authorizer) and the stage is throttled; "
                "a CloudFront WAF web ACL must live in us-east-1 while this stack is region-agnostic, so "
                "operators who need one attach it to the distribution.",
            ),
        ):
            self._acknowledge(self.websocket_distribution, rule, reason)
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

    def _log_group(self, construct_id: str) -> logs.LogGroup:
        """A log group with the stack's retention (kept when the stack is deleted)."""
        log_group = logs.LogGroup(self, construct_id, removal_policy=RemovalPolicy.RETAIN)
        cfn_log_group = log_group.node.default_child
        assert isinstance(cfn_log_group, logs.CfnLogGroup)
        cfn_log_group.retention_in_days = self.log_retention_days
        # Encrypted at rest by CloudWatch Logs with its own keys. No KMS key: the logs hold topic
        # names, roles and outcomes, never message payloads or tokens, and a key would need a key
        # policy for the logs service and a KMS charge for little gain.
        return log_group

    def _execution_role(self, construct_id: str) -> tuple[iam.Role, logs.LogGroup]:
        """A function's own role and log group: it may write its logs there and nothing else yet.

        Instead of the managed AWSLambdaBasicExecutionRole, which allows every log group."""
        log_group = self._log_group(f"{construct_id}Logs")
        role = iam.Role(
            self,
            f"{construct_id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Magnetar {construct_id}: its log group and the grants the stack gives it",
        )
        log_group.grant_write(role)  # logs:CreateLogStream, logs:PutLogEvents on this group only
        return role, log_group

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
        role, log_group = self._execution_role(construct_id)
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
            role=role,
            log_group=log_group,
            environment={**environment, "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE},
            **options,
        )
        _pin_logical_id(function, construct_id)
        self._acknowledge(
            function,
            "AwsSolutions-L1",
            "python3.12 on purpose: the core layer's compiled wheels are built for CPython 3.12 "
            "(layers/build.py --python-version 3.12); the runtime and the layer move together.",
        )
        return function

    def _bootstrap_items(self) -> None:
        """Write BOOTSTRAP_ITEMS once; attribute_not_exists keeps later user changes intact."""
        bootstrap = Construct(self, "Bootstrap")
        policy = cr.AwsCustomResourcePolicy.from_sdk_calls(resources=[self.table.table_arn])
        # The custom resources' shared provider function gets a role of ours (its log group only, no
        # managed policy) and a log group with the stack's retention.
        role, log_group = self._execution_role("BootstrapProvider")
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
                role=role,
                log_group=log_group,
                install_latest_aws_sdk=False,
            )

    # --- alarms --------------------------------------------------------------------------------
    def _alarms(self, alarm_topic_arn: str) -> None:
        """The two signals that the ledger is in trouble; `alarmTopicArn` (SNS) receives them."""
        iterator_age = cloudwatch.Alarm(
            self,
            ITERATOR_AGE_ALARM_ID,
            alarm_description=(
                "A journal shard stopped sealing: the journal consumer's iterator age has been above the "
                "threshold for 3 minutes (a poison record is retried forever by design; unsealed entries "
                "are lost when they outlive the stream's 24 h retention)."
            ),
            metric=self.journal_consumer.metric(
                "IteratorAge", statistic=cloudwatch.Stats.MAXIMUM, period=Duration.minutes(1)
            ),
            threshold=self.iterator_age_alarm_threshold.to_milliseconds(),
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=3,
            datapoints_to_alarm=3,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,  # no records, no metric
        )
        _pin_logical_id(iterator_age, ITERATOR_AGE_ALARM_ID)
        late_after_hole = cloudwatch.Alarm(
            self,
            LATE_AFTER_HOLE_ALARM_ID,
            alarm_description=(
                "An acknowledged entry reached the sealer after its id had been declared a hole "
                "(LateAfterHole): consumers will never see it. Investigate the writer's deadline."
            ),
            metric=cloudwatch.Metric(
                namespace=METRICS_NAMESPACE,
                metric_name=LATE_AFTER_HOLE_METRIC,
                dimensions_map={"service": JOURNAL_CONSUMER_SERVICE},
                statistic=cloudwatch.Stats.SUM,
                period=Duration.minutes(1),
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,  # emitted only when it happens
        )
        _pin_logical_id(late_after_hole, LATE_AFTER_HOLE_ALARM_ID)
        if alarm_topic_arn:
            action = cloudwatch_actions.SnsAction(
                sns.Topic.from_topic_arn(self, "AlarmTopic", alarm_topic_arn)
            )
            for alarm in (iterator_age, late_after_hole):
                alarm.add_alarm_action(action)
                alarm.add_ok_action(action)

    # --- cdk-nag acknowledgements ----------------------------------------------------------------
    def _acknowledge(self, construct: IConstruct, rule: str, reason: str) -> None:
        """Acknowledge one cdk-nag finding on `construct` (and its children), with its reason."""
        Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))
