"""Names and settings shared by the CDK stack, the local runtime and the Lambda handlers.

The CDK stack (infra/) declares the resources with these logical ids and hands their physical
names to the functions through the environment variables below; `magnetar local up` creates the
same resources on the emulator and sets the same variables, so the handlers cannot tell the two
apart.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from magnetar.core.authz import AuthSettings

# Logical ids of the stack's resources (CloudFormation) and their local physical names.
METADATA_TABLE_ID = "MetadataTable"
SEGMENT_BUCKET_ID = "SegmentBucket"
JOURNAL_STREAM_ID = "JournalStream"
BROKER_FUNCTION_ID = "BrokerFunction"
JOURNAL_CONSUMER_FUNCTION_ID = "JournalConsumerFunction"
HTTP_API_ID = "HttpApi"
MAINTENANCE_FUNCTION_ID = "MaintenanceFunction"
MAINTENANCE_SCHEDULE_ID = "MaintenanceSchedule"
WEBSOCKET_FUNCTION_ID = "WebSocketFunction"
WEBSOCKET_API_ID = "WebSocketApi"
CORE_LAYER_ID = "CoreLayer"
AUTHORIZER_FUNCTION_ID = "AuthorizerFunction"
IAM_HTTP_API_ID = "IamHttpApi"  # the SigV4 (IAM-authorized) twin of the HTTP API, for AWS workloads
TOKEN_KEYS_SECRET_ID = "TokenKeysSecret"  # Secrets Manager: the token verification keys (ENV_TOKEN_KEYS_SECRET)

LOCAL_TABLE_NAME = "magnetar-metadata"
LOCAL_BUCKET_NAME = "magnetar-segments"
LOCAL_STREAM_NAME = "magnetar-journal"
LOCAL_SHARD_COUNT = 2
MAX_LOCAL_SHARD_COUNT = 64  # local up --journal-shards

# Environment variables read by the handlers.
ENV_TABLE = "MAGNETAR_TABLE"
ENV_BUCKET = "MAGNETAR_BUCKET"
ENV_STREAM = "MAGNETAR_STREAM"
# The WebSocket API's management endpoint (https://{apiId}.execute-api.{region}.amazonaws.com/{stage};
# locally the HTTP API's own address): the functions push to WebSocket connections through it.
ENV_WS_ENDPOINT = "MAGNETAR_WS_ENDPOINT"

# Authentication and authorization (docs/security.md). Off by default, as Pulsar standalone.
ENV_AUTH_ENABLED = "MAGNETAR_AUTH_ENABLED"  # "true": every route checks its caller's role
ENV_SUPERUSER_ROLES = "MAGNETAR_SUPERUSER_ROLES"  # comma-separated roles (token subjects or IAM ARNs)
# Token verification keys, as Pulsar's tokenSecretKey / tokenPublicKey (file:///path or data:;base64,...)
ENV_TOKEN_SECRET_KEY = "MAGNETAR_TOKEN_SECRET_KEY"
ENV_TOKEN_PUBLIC_KEY = "MAGNETAR_TOKEN_PUBLIC_KEY"
# On AWS: a Secrets Manager secret holding every valid key (JSON, see magnetar.security.identity)
ENV_TOKEN_KEYS_SECRET = "MAGNETAR_TOKEN_KEYS_SECRET"
# Pulsar's basic authentication provider (basicAuthConf): an htpasswd file (file:///path, a path,
# data:;base64,... or its contents in base64); on AWS a Secrets Manager secret holding its text
ENV_BASIC_AUTH_CONF = "MAGNETAR_AUTH_BASIC_CONF"
ENV_BASIC_AUTH_SECRET = "MAGNETAR_AUTH_BASIC_SECRET"
DEFAULT_SUPERUSER_ROLE = "admin"
# Roles that may scrape GET /metrics besides the superusers (comma-separated; docs/metrics.md)
ENV_METRICS_ROLES = "MAGNETAR_METRICS_ROLES"
# GET /metrics at topic level (Pulsar's exposeTopicLevelMetricsInPrometheus) unless the scrape asks
# otherwise (?topics=true|false); namespace level by default
ENV_TOPIC_LEVEL_METRICS = "MAGNETAR_TOPIC_LEVEL_METRICS"
# "off": consumers read sealed entries only and the journal consumer is the journal's one reader
# (Kinesis allows 5 reads/s per shard for all readers together); "on": they also read its tail.
ENV_TAIL_READS = "MAGNETAR_TAIL_READS"
# The journal consumer holds a batch of a busy shard until its oldest record has waited this long
# (ms) before sealing it, so that seals follow the load: magnetar.core.ledger.pacing.
ENV_SEAL_LATENCY_MS = "MAGNETAR_SEAL_LATENCY_MS"
# The instance: this deployment's cluster name, and the configuration store shared by every cluster
# of the instance (a DynamoDB global table; its home replica, in MAGNETAR_CONFIG_REGION, takes the
# writes). Unset: the cluster is its own instance and keeps its configuration in its metadata table.
ENV_CLUSTER_NAME = "MAGNETAR_CLUSTER_NAME"
ENV_CONFIG_TABLE = "MAGNETAR_CONFIG_TABLE"
ENV_CONFIG_REGION = "MAGNETAR_CONFIG_REGION"
# Pulsar Functions: the dispatcher's function name (journal consumer, maintenance), the prefix of every
# registered function's Lambda function name, and what the broker creates those Lambda functions with
# (magnetar.adapters.aws.function_deployer): the execution role they share, the runtime's code
# package ("<bucket>/<key>" in S3), the layers (comma-separated ARNs), the log group they write to.
# Without ENV_FUNCTION_ROLE the broker deploys nothing (registered functions are stored only).
ENV_FUNCTION_DISPATCHER = "MAGNETAR_FUNCTION_DISPATCHER"
ENV_FUNCTION_PREFIX = "MAGNETAR_FUNCTION_PREFIX"
ENV_FUNCTION_ROLE = "MAGNETAR_FUNCTION_ROLE"
ENV_FUNCTION_CODE = "MAGNETAR_FUNCTION_CODE"
ENV_FUNCTION_LAYERS = "MAGNETAR_FUNCTION_LAYERS"
ENV_FUNCTION_LOG_GROUP = "MAGNETAR_FUNCTION_LOG_GROUP"
# Set on a registered function's Lambda function: its fqfn; and, on a MagnetarFunction's, the code
# file its package holds (relative to the package's root)
ENV_FUNCTION_FQFN = "MAGNETAR_FUNCTION_FQFN"
ENV_FUNCTION_PACKAGED_CODE = "MAGNETAR_FUNCTION_PACKAGED_CODE"
DEFAULT_FUNCTION_DISPATCHER = "magnetar-function-dispatcher"
DEFAULT_FUNCTION_PREFIX = "magnetar-fn-"
FUNCTION_DISPATCHER_FUNCTION_ID = "FunctionDispatcherFunction"
FUNCTION_DISPATCHER_TIMEOUT_S = 900
# The header naming the cluster a replicator's request comes from (logs; the local runtime's
# network emulation partitions by it)
SOURCE_CLUSTER_HEADER = "X-Magnetar-Source-Cluster"
# where a cluster tells another what a replicated subscription acknowledged (superusers only)
REPLICATED_SUBSCRIPTIONS_PATH = "/magnetar/v1/replicated-subscriptions"
# Routes served without authentication (the stack attaches no authorizer to them)
PUBLIC_ROUTES = frozenset({"GET /openapi.json"})


def _env_flag(name: str, default: bool) -> bool:
    """An on/off setting: 1/true/yes/on or 0/false/no/off, anything else (or unset) the default."""
    value = os.environ.get(name, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return default


def tail_reads_from_env() -> bool:
    return _env_flag(ENV_TAIL_READS, default=True)


def seal_latency_ms_from_env() -> int:
    """The seal latency target (ms) from the environment, else the default."""
    from magnetar.core.ledger.pacing import DEFAULT_SEAL_LATENCY_MS, check_seal_latency

    value = os.environ.get(ENV_SEAL_LATENCY_MS, "").strip()
    return check_seal_latency(int(value)) if value else DEFAULT_SEAL_LATENCY_MS


def cluster_name_from_env() -> str:
    """This deployment's cluster name (Pulsar's clusterName), `standalone` when unset."""
    return os.environ.get(ENV_CLUSTER_NAME, "").strip() or CLUSTER_NAME


def _roles(name: str) -> frozenset[str]:
    return frozenset(r.strip() for r in os.environ.get(name, "").split(",") if r.strip())


def auth_settings_from_env() -> AuthSettings:
    """The broker's authorization settings from its environment."""
    from magnetar.core.authz import AuthSettings

    enabled = _env_flag(ENV_AUTH_ENABLED, default=False)
    return AuthSettings(enabled, _roles(ENV_SUPERUSER_ROLES), _roles(ENV_METRICS_ROLES))


def topic_level_metrics_from_env() -> bool:
    """Whether GET /metrics reports topics (and subscriptions) by default, rather than namespaces."""
    return _env_flag(ENV_TOPIC_LEVEL_METRICS, default=False)


# The maintenance function (ledger lifecycle: TTL, backlog quotas, retention) runs on this schedule.
MAINTENANCE_INTERVAL_S = 60

# Lambda memory (MB): what the stack gives each function and the cost model prices (`measured`).
# The journal consumer waits on S3 and DynamoDB and holds busy shards' batches (ledger.pacing):
# half the memory halves what its wait costs.
LAMBDA_MEMORY_MB = 1024
JOURNAL_CONSUMER_MEMORY_MB = 512
FUNCTION_MEMORY_MB = {"magnetar-journal-consumer": JOURNAL_CONSUMER_MEMORY_MB}  # by function name; else LAMBDA_MEMORY_MB

# Kinesis event-source mapping of the journal consumer (the same values drive the local emulation).
JOURNAL_BATCH_SIZE = 500
JOURNAL_MAX_BATCHING_WINDOW_S = 1  # the shared-throughput (polling) mapping
# Enhanced fan-out invokes as records arrive (0: latency first: each invocation seals what came,
# ~5 requests a seal). A window of N s (whole seconds, up to 300, as Lambda takes it) gathers a
# shard's records for up to N s: fewer, larger seals (fewer requests per message), N s more latency.
JOURNAL_FAN_OUT_BATCHING_WINDOW_S = 0
MAX_JOURNAL_BATCHING_WINDOW_S = 300


def journal_batching_window_s(fan_out: bool, window_s: int | None = None) -> int:
    """The journal mapping's batching window: `window_s` if given (checked), else the default of
    the mapping's kind."""
    if window_s is None:
        return JOURNAL_FAN_OUT_BATCHING_WINDOW_S if fan_out else JOURNAL_MAX_BATCHING_WINDOW_S
    if not 0 <= window_s <= MAX_JOURNAL_BATCHING_WINDOW_S:
        raise ValueError(f"the journal batching window is 0 to {MAX_JOURNAL_BATCHING_WINDOW_S} s, not {window_s}")
    return window_s


@dataclass(frozen=True)
class ResourceNames:
    table: str
    bucket: str
    stream: str
    config_table: str = ""  # the instance's configuration store ("": the metadata table)
    config_region: str = ""  # the region of its home replica ("": this region)

    @classmethod
    def from_env(cls) -> ResourceNames:
        return cls(
            table=os.environ.get(ENV_TABLE, LOCAL_TABLE_NAME),
            bucket=os.environ.get(ENV_BUCKET, LOCAL_BUCKET_NAME),
            stream=os.environ.get(ENV_STREAM, LOCAL_STREAM_NAME),
            config_table=os.environ.get(ENV_CONFIG_TABLE, ""),
            config_region=os.environ.get(ENV_CONFIG_REGION, ""),
        )

    def as_env(self) -> dict[str, str]:
        env = {ENV_TABLE: self.table, ENV_BUCKET: self.bucket, ENV_STREAM: self.stream}
        if self.config_table:
            env[ENV_CONFIG_TABLE] = self.config_table
        if self.config_region:
            env[ENV_CONFIG_REGION] = self.config_region
        return env


LOCAL_RESOURCES = ResourceNames(LOCAL_TABLE_NAME, LOCAL_BUCKET_NAME, LOCAL_STREAM_NAME)

# Items every cluster starts with: tenant `public` and namespace `public/default` (as Pulsar's).
# DynamoDB JSON, written with attribute_not_exists so re-running never overwrites user changes.
# Used by the local provisioning and by the CDK stack's bootstrap custom resource.
DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"
CLUSTER_NAME = "standalone"
BOOTSTRAP_ITEMS: list[dict[str, dict[str, object]]] = [
    {
        "pk": {"S": "TENANTS"},
        "sk": {"S": DEFAULT_TENANT},
        "adminRoles": {"L": []},
        "allowedClusters": {"L": [{"S": CLUSTER_NAME}]},
    },
    {
        "pk": {"S": f"NAMESPACES#{DEFAULT_TENANT}"},
        "sk": {"S": DEFAULT_NAMESPACE},
        "policies": {"M": {}},
        "policy_index": {"N": "1"},  # its topics_with_policies is kept (dynamodb/catalog.py)
    },
]
