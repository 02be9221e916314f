"""The Magnetar stack: metadata table, segment bucket, journal stream and the five functions.

Broker (HTTP API), journal consumer (Kinesis), WebSocket function (WebSocket API, fronted by
CloudFront so Pulsar's `/ws/v2/...` paths work), maintenance function (EventBridge schedule) and
the authorizer (API Gateway Lambda authorizer: Pulsar tokens, keys in Secrets Manager; Pulsar's
basic provider with `basicAuthSecretArn`, the operator's htpasswd file in Secrets Manager).

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

This module composes the stack; the resources are made in `magnetar_cdk` (storage, functions,
apis, observability, nag), always in the stack's own scope so their logical ids never change.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# Loaded by path (tests) as well as imported (app.py): the parts package sits next to this file.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from magnetar.config import (
    AUTHORIZER_FUNCTION_ID,
    BROKER_FUNCTION_ID,
    ENV_AUTH_ENABLED,
    ENV_BASIC_AUTH_SECRET,
    ENV_BUCKET,
    ENV_SEAL_LATENCY_MS,
    ENV_STREAM,
    ENV_SUPERUSER_ROLES,
    ENV_TABLE,
    ENV_TAIL_READS,
    ENV_TOKEN_KEYS_SECRET,
    ENV_WS_ENDPOINT,
    JOURNAL_CONSUMER_FUNCTION_ID,
    JOURNAL_CONSUMER_MEMORY_MB,
    MAINTENANCE_FUNCTION_ID,
    MAINTENANCE_INTERVAL_S,
    WEBSOCKET_FUNCTION_ID,
)
from magnetar_cdk import apis, functions, observability, storage
from magnetar_cdk import emr as emr_part
from magnetar_cdk import pulsar_protocol as pulsar_protocol_proxy
from magnetar_cdk.observability import JOURNAL_CONSUMER_SERVICE
from magnetar_cdk.settings import DEFAULT_LAYER_DIR, context_flag, resolve_settings

__all__ = ["DEFAULT_LAYER_DIR", "MagnetarStack", "context_flag"]
BASIC_AUTH_SECRET_ID = "BasicAuthUsers"  # the imported secret (no resource of the stack's own)


class MagnetarStack(Stack):
    """One Magnetar cluster. Environment-agnostic: synthesizes without AWS credentials.

    Every setting below may also come from the CDK context (`cdk deploy -c superuserRoles=admin,arn:...`);
    an argument given here wins over the context, the context over the default.

    The order of the calls below is the order of the resources in the template; keep it.
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
        journal_fan_out: bool | None = None,
        journal_batching_window_s: int | None = None,
        seal_latency_ms: int | None = None,
        basic_auth_secret_arn: str | None = None,
        emr: bool | None = None,  # Spark on EMR Serverless (context emr): magnetar_cdk/emr.py
        pulsar_protocol: bool | None = None,  # the binary protocol proxy on Fargate (context pulsarProtocol)
        pulsar_protocol_certificate_arn: str | None = None,  # its TLS listener's (pulsarProtocolCertificateArn)
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        settings = resolve_settings(
            self,
            superuser_roles=superuser_roles,
            authorizer_cache_ttl=authorizer_cache_ttl,
            throttle_rate_limit=throttle_rate_limit,
            throttle_burst_limit=throttle_burst_limit,
            log_retention_days=log_retention_days,
            iterator_age_alarm_threshold=iterator_age_alarm_threshold,
            alarm_topic_arn=alarm_topic_arn,
            api_gateway_cloudwatch_role=api_gateway_cloudwatch_role,
            journal_fan_out=journal_fan_out,
            journal_batching_window_s=journal_batching_window_s,
            seal_latency_ms=seal_latency_ms,
            basic_auth_secret_arn=basic_auth_secret_arn,
        )
        self.settings = settings
        self.superuser_roles = settings.superuser_roles
        self.authorizer_cache_ttl = settings.authorizer_cache_ttl
        self.throttle = settings.throttle
        self.log_retention_days = retention = settings.log_retention_days
        self.iterator_age_alarm_threshold = settings.iterator_age_alarm_threshold
        self.journal_fan_out = settings.journal_fan_out

        # --- storage and the shared layer ------------------------------------------------------
        self.table = storage.metadata_table(self)
        self.bucket = storage.segment_bucket(self)
        self.stream = storage.journal_stream(self)
        self.layer = functions.core_layer(self, layer_dir)

        # WebSocket API first (routes are added once its function exists): every function pushes to
        # WebSocket connections through the stage's management endpoint.
        self.websocket_api, self.websocket_stage = apis.websocket_api(self, settings.throttle, retention)
        if settings.api_gateway_cloudwatch_role:
            observability.api_gateway_cloudwatch_role(self, self.websocket_stage)

        resource_env = {
            ENV_TABLE: self.table.table_name,
            ENV_BUCKET: self.bucket.bucket_name,
            ENV_STREAM: self.stream.stream_name,
            # https://{apiId}.execute-api.{region}.amazonaws.com/{stage}
            ENV_WS_ENDPOINT: self.websocket_stage.callback_url,
        }
        # The functions that answer callers: every request needs a role (docs/security.md).
        auth_env = {ENV_AUTH_ENABLED: "true", ENV_SUPERUSER_ROLES: self.superuser_roles}
        # The functions serving consumers: with the journal on enhanced fan-out, sealing follows
        # publishing closely enough that consumers read sealed entries only and the journal
        # consumer stays the stream's one reader (Kinesis: 5 GetRecords/s per shard for all readers).
        tail_env = {ENV_TAIL_READS: "off" if settings.journal_fan_out else "on"}

        # --- authentication: token keys and the authorizer reading them -------------------------
        self.token_keys, initial_key = storage.token_keys(self, retention)
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
        self.basic_auth_users: secretsmanager.ISecret | None = None
        basic_env: dict[str, str] = {}
        if settings.basic_auth_secret_arn:  # Pulsar's basic provider: the operator's htpasswd secret
            self.basic_auth_users = secretsmanager.Secret.from_secret_complete_arn(
                self, BASIC_AUTH_SECRET_ID, settings.basic_auth_secret_arn)
            basic_env = {ENV_BASIC_AUTH_SECRET: self.basic_auth_users.secret_arn}
            self.authorizer.add_environment(ENV_BASIC_AUTH_SECRET, self.basic_auth_users.secret_arn)
            self.basic_auth_users.grant_read(self.authorizer)

        # --- broker and journal consumer ----------------------------------------------------------
        self.broker = self._function(
            BROKER_FUNCTION_ID,
            "broker",
            # Just under API Gateway's 30 s integration limit, so the function ends first.
            timeout=Duration.seconds(29),
            environment={
                **resource_env,
                **auth_env,
                **tail_env,
                "POWERTOOLS_SERVICE_NAME": "magnetar-broker",
            },
        )
        self._grant_broker_access(self.broker)

        self.journal_consumer = self._function(
            JOURNAL_CONSUMER_FUNCTION_ID,
            "journal_consumer",
            timeout=Duration.seconds(120),
            memory_mb=JOURNAL_CONSUMER_MEMORY_MB,
            environment={**resource_env, ENV_SEAL_LATENCY_MS: str(settings.seal_latency_ms),
                         "POWERTOOLS_SERVICE_NAME": JOURNAL_CONSUMER_SERVICE},
        )
        self.table.grant_read_write_data(self.journal_consumer)
        functions.grant_segments(self.journal_consumer, self.bucket, "s3:GetObject", "s3:PutObject")  # seals
        self.stream.grant_read_write(self.journal_consumer)
        functions.grant_manage_connections(self.journal_consumer, self.websocket_api)
        # Enhanced fan-out (context journalFanOut, on by default): its own consumer on the stream.
        self.journal_stream_consumer = (
            storage.journal_stream_consumer(self, self.stream) if settings.journal_fan_out else None
        )
        functions.journal_event_source(self.journal_consumer, self.stream, self.journal_stream_consumer,
                                       settings.journal_batching_window_s)

        # --- HTTP APIs ------------------------------------------------------------------------------
        http = apis.http_apis(
            self,
            broker=self.broker,
            authorizer=self.authorizer,
            authorizer_cache_ttl=settings.authorizer_cache_ttl,
            throttle=settings.throttle,
            log_retention_days=retention,
        )
        self.token_authorizer = http.token_authorizer
        self.http_api, self.http_stage = http.http_api, http.http_stage
        self.iam_http_api, self.iam_http_stage = http.iam_http_api, http.iam_http_stage
        CfnOutput(self, "TokenKeysSecretArn", value=self.token_keys.secret_arn)

        # --- WebSocket function, routes and CloudFront ------------------------------------------------
        self.websocket_function = self._function(
            WEBSOCKET_FUNCTION_ID,
            "websocket",
            timeout=Duration.seconds(29),  # API Gateway's integration limit, as for the broker
            environment={
                **resource_env,
                **auth_env,
                **tail_env,
                "POWERTOOLS_SERVICE_NAME": "magnetar-websocket",
            },
        )
        self._grant_broker_access(self.websocket_function)
        self.connect_authorizer = apis.websocket_routes(
            self.websocket_api, self.websocket_function, self.authorizer
        )
        functions.grant_self_invoke(self.websocket_function)
        self.websocket_distribution = apis.websocket_distribution(
            self, self.websocket_api, self.websocket_stage
        )

        # --- maintenance ------------------------------------------------------------------------------
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
        functions.grant_segments(self.maintenance, self.bucket, "s3:DeleteObject")  # retention trims segments
        self.maintenance_schedule = functions.maintenance_schedule(self, self.maintenance)

        functions.bootstrap_items(self, self.table, retention)
        self.alarms = observability.alarms(
            self, self.journal_consumer, settings.iterator_age_alarm_threshold, settings.alarm_topic_arn
        )
        # --- optional: Spark on EMR Serverless (emr=True or -c emr=true) --------------------------------
        self.emr = emr_part.spark_on_emr(self, emr, segment_bucket=self.bucket, iam_http_api=self.iam_http_api)
        # --- optional: Pulsar's binary protocol, the proxy on ECS Fargate (magnetar_cdk/pulsar_protocol.py) ---
        self.pulsar_protocol = pulsar_protocol_proxy.add_if_enabled(
            self, pulsar_protocol, pulsar_protocol_certificate_arn,
            {**resource_env, **auth_env, **tail_env, ENV_TOKEN_KEYS_SECRET: self.token_keys.secret_arn, **basic_env})
        if self.pulsar_protocol is not None and self.basic_auth_users is not None:
            self.basic_auth_users.grant_read(self.pulsar_protocol.task.task_role)  # CONNECT's basic credentials

    def _function(self, construct_id: str, asset: str, **options: Any) -> lambda_.Function:
        """A handler function on the core layer, with the stack's log retention (functions.function)."""
        return functions.function(
            self, construct_id, asset, layer=self.layer, log_retention_days=self.log_retention_days, **options
        )

    def _grant_broker_access(self, handler: lambda_.Function) -> None:
        """The broker's access (functions.grant_broker_access) to this stack's resources."""
        functions.grant_broker_access(
            handler,
            table=self.table,
            bucket=self.bucket,
            stream=self.stream,
            websocket_api=self.websocket_api,
        )
