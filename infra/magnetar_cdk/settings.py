"""Paths, runtime, pinned logical ids and the stack's settings (argument, else context, else default)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import CfnResource, Duration
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_lambda as lambda_
from constructs import Construct, IConstruct

from magnetar.config import DEFAULT_SUPERUSER_ROLE
from magnetar.config import journal_batching_window_s as journal_batching_window
from magnetar.core.ledger.pacing import DEFAULT_SEAL_LATENCY_MS, check_seal_latency

REPO_ROOT = Path(__file__).resolve().parents[2]
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
ALARM_TOPIC_ID = "AlarmTopic"  # the alarms' topic: imported (alarmTopicArn), else an instance stack's own
LATE_AFTER_HOLE_ALARM_ID = "LateAfterHoleAlarm"
# the operations dashboard and alarms (dashboard.py, alarms.py)
OPERATIONS_DASHBOARD_ID = "OperationsDashboard"
BACKLOG_QUOTA_ALARM_ID = "BacklogQuotaAlarm"
DEAD_LETTER_ALARM_ID = "DeadLetterAlarm"
PUBLISH_ERRORS_ALARM_ID = "PublishErrorsAlarm"
DYNAMODB_THROTTLE_ALARM_ID = "DynamoDbThrottleAlarm"
KINESIS_THROTTLE_ALARM_ID = "KinesisThrottleAlarm"
LAMBDA_THROTTLE_ALARM_ID = "LambdaThrottleAlarm"
AUTHORIZER_DENIALS_ALARM_ID = "AuthorizerDenialsAlarm"
# the functions' `service` (POWERTOOLS_SERVICE_NAME): the dimension of their EMF metrics
BROKER_SERVICE = "magnetar-broker"
WEBSOCKET_SERVICE = "magnetar-websocket"
MAINTENANCE_SERVICE = "magnetar-maintenance"
AUTHORIZER_SERVICE = "magnetar-authorizer"
HTTP_API_ACCESS_LOGS_ID = "HttpApiAccessLogs"
IAM_HTTP_API_ACCESS_LOGS_ID = "IamHttpApiAccessLogs"
WEBSOCKET_ACCESS_LOGS_ID = "WebSocketAccessLogs"
# The journal consumer's enhanced fan-out consumer on the journal stream (context journalFanOut).
JOURNAL_STREAM_CONSUMER_ID = "JournalStreamConsumer"
JOURNAL_STREAM_CONSUMER_NAME = "magnetar-journal-consumer"  # unique per stream, so a fixed name is enough

# Defaults of the stack's settings (constructor arguments, else `-c` context keys, else these).
DEFAULT_AUTHORIZER_CACHE_TTL_S = 300  # context authorizerCacheTtlSeconds (0 turns caching off)
DEFAULT_THROTTLE_RATE_LIMIT = 1000  # context throttleRateLimit: steady requests/s per stage
DEFAULT_THROTTLE_BURST_LIMIT = 2000  # context throttleBurstLimit: the token bucket's size
DEFAULT_LOG_RETENTION_DAYS = 30  # context logRetentionDays: function and access log groups
# context iteratorAgeAlarmSeconds. A hole legitimately holds a shard for up to HOLE_GRACE_MS (60 s)
# plus the write deadline, so the alarm starts well above that: only a shard that stopped sealing
# (a poison record; the mapping retries it forever by design) stays this far behind.
DEFAULT_ITERATOR_AGE_ALARM_S = 300
DEFAULT_BACKLOG_QUOTA_ALARM_RATIO = 0.8  # context backlogQuotaAlarmRatio: a namespace's backlog / its quota
DEFAULT_AUTHORIZER_DENIALS_ALARM = 100  # context authorizerDenialsAlarm: refusals per 5 minutes
# context tracing: "passthrough" traces an invocation only when its caller's trace header asks for it
# (X-Ray records cost $5 per million traces: Lambda's own sampling, a request a second and 5 % of the
# rest per function, would cost more than the journal); "active": Lambda samples every function.
TRACING_MODES = {"passthrough": lambda_.Tracing.PASS_THROUGH, "active": lambda_.Tracing.ACTIVE}
DEFAULT_TRACING = "passthrough"
# context logLevel: the functions' application and system log level (Lambda's advanced logging
# controls, JSON lines). At WARN Lambda writes no START/END/REPORT lines (~300 bytes an invocation,
# CloudWatch Logs ingestion is $0.50/GB); INFO brings them and the handlers' info lines back.
LOG_LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")
DEFAULT_LOG_LEVEL = "WARN"
# CloudWatch accepts only these retention periods (days).
LOG_RETENTION_DAYS = frozenset(
    {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}
)


def context_flag(value: Any) -> bool:
    """A context flag: `-c flag=false` arrives as the string "false"."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def pin_logical_id(construct: IConstruct, logical_id: str) -> None:
    """Give the construct's CloudFormation resource exactly `logical_id` instead of a hashed one."""
    default_child = construct.node.default_child
    assert isinstance(default_child, CfnResource), f"{construct.node.path} has no CfnResource"
    default_child.override_logical_id(logical_id)


def setting(scope: Construct, value: Any, context_key: str, default: Any, cast: Any) -> Any:
    """The argument if given, else the context value `context_key` (cast), else `default`."""
    if value is not None:
        return value
    raw = scope.node.try_get_context(context_key)
    return default if raw is None or raw == "" else cast(raw)


@dataclass(frozen=True)
class StackSettings:
    """The stack's settings, resolved (see `resolve_settings`)."""

    superuser_roles: str  # comma-separated roles (token subjects or IAM role ARNs) that may do everything
    authorizer_cache_ttl: Duration
    throttle: apigwv2.ThrottleSettings
    log_retention_days: int
    iterator_age_alarm_threshold: Duration
    alarm_topic_arn: str
    api_gateway_cloudwatch_role: bool
    # The journal consumer reads the stream through enhanced fan-out and the broker functions read
    # sealed entries only (MAGNETAR_TAIL_READS=off); false: the shared-throughput mapping, tail reads on.
    journal_fan_out: bool
    # the journal mapping's batching window in seconds (0: invoke as records arrive, with fan-out)
    journal_batching_window_s: int
    # how long the journal consumer may hold a busy shard's batch before sealing it (ms): seals follow the load
    seal_latency_ms: int
    # Pulsar's basic authentication: the ARN of a Secrets Manager secret holding an htpasswd file's
    # text (the operator's; the authorizer reads it); "" leaves basic authentication off
    basic_auth_secret_arn: str = ""
    # the operational alarms' thresholds (alarms.py)
    backlog_quota_alarm_ratio: float = DEFAULT_BACKLOG_QUOTA_ALARM_RATIO
    authorizer_denials_alarm: int = DEFAULT_AUTHORIZER_DENIALS_ALARM
    # roles that may scrape GET /metrics besides the superusers (comma-separated; MAGNETAR_METRICS_ROLES)
    metrics_roles: str = ""
    # GET /metrics per topic and subscription by default (Pulsar's exposeTopicLevelMetricsInPrometheus)
    topic_level_metrics: bool = False
    tracing: str = DEFAULT_TRACING  # a key of TRACING_MODES
    log_level: str = DEFAULT_LOG_LEVEL  # one of LOG_LEVELS


def _one_of(name: str, value: str, allowed: Any) -> str:
    if value not in allowed:
        raise ValueError(f"{name} {value!r}: one of {', '.join(allowed)}")
    return value


def _ratio(value: float) -> float:
    if not 0 < value <= 1:
        raise ValueError(f"backlogQuotaAlarmRatio {value}: a share of the quota, above 0 and at most 1")
    return value


def resolve_settings(
    scope: Construct,
    *,
    superuser_roles: str | None,
    authorizer_cache_ttl: Duration | None,
    throttle_rate_limit: float | None,
    throttle_burst_limit: int | None,
    log_retention_days: int | None,
    iterator_age_alarm_threshold: Duration | None,
    alarm_topic_arn: str | None,
    api_gateway_cloudwatch_role: bool | None,
    journal_fan_out: bool | None = None,
    journal_batching_window_s: int | None = None,
    basic_auth_secret_arn: str | None = None,
    seal_latency_ms: int | None = None,
    metrics_roles: str | None = None,
    topic_level_metrics: bool | None = None,
    tracing: str | None = None,
    log_level: str | None = None,
) -> StackSettings:
    """Each setting from its argument, else from the context of `scope`, else its default (in this order)."""
    roles = setting(scope, superuser_roles, "superuserRoles", DEFAULT_SUPERUSER_ROLE, str)
    cache_ttl = authorizer_cache_ttl or Duration.seconds(
        setting(scope, None, "authorizerCacheTtlSeconds", DEFAULT_AUTHORIZER_CACHE_TTL_S, int)
    )
    throttle = apigwv2.ThrottleSettings(
        rate_limit=setting(
            scope, throttle_rate_limit, "throttleRateLimit", DEFAULT_THROTTLE_RATE_LIMIT, float
        ),
        burst_limit=setting(
            scope, throttle_burst_limit, "throttleBurstLimit", DEFAULT_THROTTLE_BURST_LIMIT, int
        ),
    )
    fan_out = setting(scope, journal_fan_out, "journalFanOut", True, context_flag)
    retention = setting(scope, log_retention_days, "logRetentionDays", DEFAULT_LOG_RETENTION_DAYS, int)
    if retention not in LOG_RETENTION_DAYS:
        raise ValueError(f"log retention {retention} days: CloudWatch accepts {sorted(LOG_RETENTION_DAYS)}")
    iterator_age = iterator_age_alarm_threshold or Duration.seconds(
        setting(scope, None, "iteratorAgeAlarmSeconds", DEFAULT_ITERATOR_AGE_ALARM_S, int)
    )
    return StackSettings(
        superuser_roles=roles,
        authorizer_cache_ttl=cache_ttl,
        throttle=throttle,
        log_retention_days=retention,
        iterator_age_alarm_threshold=iterator_age,
        alarm_topic_arn=setting(scope, alarm_topic_arn, "alarmTopicArn", "", str),
        api_gateway_cloudwatch_role=setting(
            scope, api_gateway_cloudwatch_role, "apiGatewayCloudWatchRole", True, context_flag
        ),
        journal_fan_out=fan_out,
        journal_batching_window_s=journal_batching_window(
            fan_out, setting(scope, journal_batching_window_s, "journalBatchingWindow", None, int)),
        basic_auth_secret_arn=setting(scope, basic_auth_secret_arn, "basicAuthSecretArn", "", str),
        backlog_quota_alarm_ratio=_ratio(
            setting(scope, None, "backlogQuotaAlarmRatio", DEFAULT_BACKLOG_QUOTA_ALARM_RATIO, float)),
        authorizer_denials_alarm=max(1, setting(scope, None, "authorizerDenialsAlarm",
                                                DEFAULT_AUTHORIZER_DENIALS_ALARM, int)),
        seal_latency_ms=check_seal_latency(
            setting(scope, seal_latency_ms, "sealLatencyMs", DEFAULT_SEAL_LATENCY_MS, int)),
        metrics_roles=setting(scope, metrics_roles, "metricsRoles", "", str),
        topic_level_metrics=setting(scope, topic_level_metrics, "topicLevelMetrics", False, context_flag),
        tracing=_one_of("tracing", setting(scope, tracing, "tracing", DEFAULT_TRACING, str).lower(), TRACING_MODES),
        log_level=_one_of("logLevel", setting(scope, log_level, "logLevel", DEFAULT_LOG_LEVEL, str).upper(),
                          LOG_LEVELS),
    )
