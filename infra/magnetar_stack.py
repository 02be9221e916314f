"""The Magnetar stack: metadata table, segment bucket, journal stream and the six functions.

Broker (HTTP API), journal consumer (Kinesis), WebSocket function (WebSocket API, fronted by
CloudFront so Pulsar's `/ws/v2/...` paths work), maintenance function (EventBridge schedule) and
the authorizer (API Gateway Lambda authorizer: Pulsar tokens, keys in Secrets Manager; Pulsar's
basic provider with `basicAuthSecretArn`, the operator's htpasswd file in Secrets Manager), and
Pulsar Functions' dispatcher (started by the journal consumer and the maintenance function), with
what the broker creates registered functions' own Lambda functions with.

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

from aws_cdk import CfnOutput, Duration, Environment, Stack, Token
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from magnetar.config import (
    AUTHORIZER_FUNCTION_ID,
    BROKER_FUNCTION_ID,
    CLUSTER_NAME,
    ENV_AUTH_ENABLED,
    ENV_BASIC_AUTH_SECRET,
    ENV_BUCKET,
    ENV_CLUSTER_NAME,
    ENV_CONFIG_REGION,
    ENV_CONFIG_TABLE,
    ENV_METRICS_ROLES,
    ENV_SEAL_LATENCY_MS,
    ENV_STREAM,
    ENV_SUPERUSER_ROLES,
    ENV_TABLE,
    ENV_TAIL_READS,
    ENV_TOKEN_KEYS_SECRET,
    ENV_TOPIC_LEVEL_METRICS,
    ENV_WS_ENDPOINT,
    JOURNAL_CONSUMER_FUNCTION_ID,
    JOURNAL_CONSUMER_MEMORY_MB,
    LAMBDA_MEMORY_MB,
    MAINTENANCE_FUNCTION_ID,
    MAINTENANCE_INTERVAL_S,
    WEBSOCKET_FUNCTION_ID,
)
from magnetar_cdk import alarms as alarms_part
from magnetar_cdk import apis, functions, observability, storage
from magnetar_cdk import console as console_part
from magnetar_cdk import dashboard as dashboard_part
from magnetar_cdk import emr as emr_part
from magnetar_cdk import instance as instance_part
from magnetar_cdk import pulsar_functions as pulsar_functions_part
from magnetar_cdk import pulsar_protocol as pulsar_protocol_proxy
from magnetar_cdk.instance import (
    DEFAULT_REPLICATION_BACKLOG_ALARM,
    DEFAULT_REPLICATION_DELAY_ALARM_S,
    Instance,
)
from magnetar_cdk.observability import JOURNAL_CONSUMER_SERVICE
from magnetar_cdk.settings import (
    AUTHORIZER_SERVICE,
    BROKER_SERVICE,
    DEFAULT_LAYER_DIR,
    JOURNAL_STREAM_CONSUMER_NAME,
    MAINTENANCE_SERVICE,
    TRACING_MODES,
    WEBSOCKET_SERVICE,
    context_flag,
    resolve_settings,
)

__all__ = ["DEFAULT_LAYER_DIR", "Instance", "MagnetarStack", "context_flag", "instance_stacks"]
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
        metrics_roles: str | None = None,  # context metricsRoles: who may scrape GET /metrics besides superusers
        topic_level_metrics: bool | None = None,  # context topicLevelMetrics: GET /metrics per topic by default
        emr: bool | None = None,  # Spark on EMR Serverless (context emr): magnetar_cdk/emr.py
        pulsar_protocol: bool | None = None,  # the binary protocol proxy on Fargate (context pulsarProtocol)
        pulsar_protocol_certificate_arn: str | None = None,  # its TLS listener's (pulsarProtocolCertificateArn)
        cluster_name: str | None = None,  # context clusterName; default: the region, else "standalone"
        instance: Instance | None = None,  # one cluster of an instance across regions (instance_stacks)
        replication_backlog_alarm_threshold: int | None = None,  # messages (replicationBacklogAlarm)
        replication_delay_alarm_threshold: Duration | None = None,  # (replicationDelayAlarmSeconds)
        console: bool | None = None,  # the web console on S3 + CloudFront (context console): magnetar_cdk/console.py
        tracing: str | None = None,  # context tracing: "passthrough" (default) or "active" (X-Ray samples)
        log_level: str | None = None,  # context logLevel: the functions' log level (default WARN)
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.instance = instance
        self.cluster_name = self._cluster_name(cluster_name, instance)
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
            metrics_roles=metrics_roles,
            topic_level_metrics=topic_level_metrics,
            tracing=tracing,
            log_level=log_level,
        )
        self.settings = settings
        # An instance's clusters replicate to each other as superusers (their journal consumers' roles).
        self.superuser_roles = (instance_part.superuser_roles(instance, self.region, settings.superuser_roles)
                                if instance else settings.superuser_roles)
        self.authorizer_cache_ttl = settings.authorizer_cache_ttl
        self.throttle = settings.throttle
        self.log_retention_days = retention = settings.log_retention_days
        self.iterator_age_alarm_threshold = settings.iterator_age_alarm_threshold
        self.journal_fan_out = settings.journal_fan_out

        # --- storage and the shared layer ------------------------------------------------------
        self.table = storage.metadata_table(self)
        # The instance's configuration store: the global table lives in the home stack.
        self.config_table = (instance_part.config_table(self, instance)
                             if instance and self.region == instance.home_region else None)
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
        if instance:
            resource_env[ENV_CONFIG_TABLE] = instance.config_table_name
            resource_env[ENV_CONFIG_REGION] = instance.home_region
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
                "POWERTOOLS_SERVICE_NAME": AUTHORIZER_SERVICE,
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
                **self._metrics_env(settings),
                "POWERTOOLS_SERVICE_NAME": BROKER_SERVICE,
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
            # other clusters of the instance name it: superuser there, execute-api:Invoke here
            role_name=instance.replicator_role_name(self.cluster_name) if instance else None,
        )
        self.table.grant_read_write_data(self.journal_consumer)
        self._grant_config(self.journal_consumer)
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
                "POWERTOOLS_SERVICE_NAME": WEBSOCKET_SERVICE,
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
            environment={**resource_env, "POWERTOOLS_SERVICE_NAME": MAINTENANCE_SERVICE},
            # One run at a time: a tick that arrives while a run is still going is throttled, and
            # Lambda drops it once it is older than the interval (the next tick comes anyway).
            reserved_concurrent_executions=1,
            max_event_age=Duration.seconds(max(MAINTENANCE_INTERVAL_S, 60)),
            retry_attempts=0,
            # other clusters of the instance name it (superuser there): it sends replicators' backlogs
            role_name=instance.maintenance_role_name(self.cluster_name) if instance else None,
        )
        self._grant_broker_access(self.maintenance)
        functions.grant_segments(self.maintenance, self.bucket, "s3:DeleteObject")  # retention trims segments
        self.maintenance_schedule = functions.maintenance_schedule(self, self.maintenance)

        # --- Pulsar Functions: the dispatcher, registered functions' Lambda functions (magnetar_cdk/pulsar_functions.py) ---
        self.function_environment = {**resource_env, ENV_CLUSTER_NAME: self.cluster_name}
        self.function_environment.pop(ENV_WS_ENDPOINT)
        self.pulsar_functions = pulsar_functions_part.pulsar_functions(
            self, make_function=self._function, table=self.table, schema_table_arns=self.config_table_arns(),
            bucket=self.bucket, layer=self.layer, environment={**resource_env, **tail_env},
            log_retention_days=retention)
        self.function_dispatcher = self.pulsar_functions.dispatcher
        self.table.grant_read_write_data(self.function_dispatcher)  # inputs' cursors, outputs, stats
        functions.grant_segments(self.function_dispatcher, self.bucket, "s3:GetObject")
        self.stream.grant_read_write(self.function_dispatcher)  # appends the outputs to the journal
        self._grant_config(self.function_dispatcher)
        for starter in (self.journal_consumer, self.maintenance):
            pulsar_functions_part.grant_start_dispatcher(starter, self.function_dispatcher)
        pulsar_functions_part.grant_manage_functions(self.broker, self.pulsar_functions, self.layer)

        bootstrap, provider_role, provider_logs = self._bootstrap(retention)
        self.alarm_topic = observability.alarm_topic(self, settings.alarm_topic_arn, create=instance is not None)
        self.alarms = observability.alarms(
            self, self.journal_consumer, settings.iterator_age_alarm_threshold, self.alarm_topic
        )
        self._operations(settings)
        # --- optional: Spark on EMR Serverless (emr=True or -c emr=true) --------------------------------
        self.emr = emr_part.spark_on_emr(self, emr, segment_bucket=self.bucket, iam_http_api=self.iam_http_api)
        # --- optional: Pulsar's binary protocol, the proxy on ECS Fargate (magnetar_cdk/pulsar_protocol.py) ---
        self.pulsar_protocol = pulsar_protocol_proxy.add_if_enabled(
            self, pulsar_protocol, pulsar_protocol_certificate_arn,
            {**resource_env, **auth_env, **tail_env, ENV_TOKEN_KEYS_SECRET: self.token_keys.secret_arn, **basic_env})
        if self.pulsar_protocol is not None and self.basic_auth_users is not None:
            self.basic_auth_users.grant_read(self.pulsar_protocol.task.task_role)  # CONNECT's basic credentials
        if self.pulsar_protocol is not None:
            self._grant_config(self.pulsar_protocol.task.task_role)
            if instance is None:  # recorded as an instance's clusters record themselves: the HTTP lookup's answer
                instance_part.record_cluster(bootstrap, self.table, self.cluster_name, instance_part.cluster_data(
                    self, self.iam_http_stage.url, self.pulsar_protocol.service_url), provider_role, provider_logs)
        # --- optional: the web console, static files on S3 behind CloudFront (magnetar_cdk/console.py) ---
        self.console = console_part.add_if_enabled(self, console, http_api=self.http_api, http_stage=self.http_stage,
                                                   broker=self.broker)
        # --- an instance across regions: replication, registration, replication alarms (magnetar_cdk/instance.py) ---
        self.replication_alarms: list[Any] = []
        if instance:
            self._join_instance(instance, bootstrap, provider_role, provider_logs,
                                replication_backlog_alarm_threshold, replication_delay_alarm_threshold)

    def _operations(self, settings: Any) -> None:
        """The operations dashboard and the operational alarms (magnetar_cdk/dashboard.py, alarms.py)."""
        handlers = [(BROKER_SERVICE, self.broker, LAMBDA_MEMORY_MB),
                    (JOURNAL_CONSUMER_SERVICE, self.journal_consumer, JOURNAL_CONSUMER_MEMORY_MB),
                    (WEBSOCKET_SERVICE, self.websocket_function, LAMBDA_MEMORY_MB),
                    (MAINTENANCE_SERVICE, self.maintenance, LAMBDA_MEMORY_MB),
                    (AUTHORIZER_SERVICE, self.authorizer, LAMBDA_MEMORY_MB)]
        self.dashboard = dashboard_part.operations_dashboard(self, dashboard_part.DashboardSources(
            functions=[dashboard_part.DashboardFunction(*h) for h in handlers],
            journal_consumer=self.journal_consumer, table=self.table, stream=self.stream,
            stream_consumer_name=JOURNAL_STREAM_CONSUMER_NAME if self.journal_stream_consumer is not None else None,
            http_apis=[self.http_api, self.iam_http_api], websocket_api=self.websocket_api,
        ), settings.backlog_quota_alarm_ratio)
        self.operational_alarms = alarms_part.operational_alarms(self, alarms_part.AlarmSources(
            broker_service=BROKER_SERVICE, websocket_service=WEBSOCKET_SERVICE, maintenance_service=MAINTENANCE_SERVICE,
            authorizer_service=AUTHORIZER_SERVICE, table=self.table, stream=self.stream,
            serving_functions=[self.broker, self.websocket_function, self.journal_consumer, self.authorizer],
        ), alarms_part.AlarmThresholds(settings.backlog_quota_alarm_ratio, settings.authorizer_denials_alarm))
        observability.notify(self.alarm_topic, *self.operational_alarms)

    @staticmethod
    def _metrics_env(settings: Any) -> dict[str, str]:
        """GET /metrics' settings for the broker (docs/metrics.md), only those set."""
        env = {ENV_METRICS_ROLES: settings.metrics_roles} if settings.metrics_roles else {}
        if settings.topic_level_metrics:
            env[ENV_TOPIC_LEVEL_METRICS] = "true"
        return env

    def _cluster_name(self, cluster_name: str | None, instance: Instance | None) -> str:
        """The argument, else the instance's name for this region, else the context clusterName,
        else the region (standalone when the stack is environment-agnostic)."""
        if instance is not None:
            if Token.is_unresolved(self.region) or self.region not in instance.regions:
                raise ValueError(f"a stack of an instance needs one of its regions {list(instance.regions)} "
                                 "as env region")
            name = instance.cluster_of(self.region)
            if cluster_name not in (None, name):
                raise ValueError(f"cluster {cluster_name!r} in {self.region}: the instance names it {name!r}")
            return name
        default = CLUSTER_NAME if Token.is_unresolved(self.region) else self.region
        return str(cluster_name or self.node.try_get_context("clusterName") or default)

    def _bootstrap(self, retention: int) -> tuple[Any, Any, Any]:
        """The default tenant and namespace: in the metadata table, or an instance's configuration
        table (its home stack only), where each cluster then adds itself to the tenant."""
        if self.instance is None:
            return functions.bootstrap_items(self, self.table, retention, cluster_name=self.cluster_name)
        if self.config_table is None:
            return functions.bootstrap_items(self, None, retention)
        return functions.bootstrap_items(self, self.config_table, retention,
                                         items=functions.bootstrap_item_list(self.cluster_name, []))

    def _join_instance(self, instance: Instance, bootstrap: Any, provider_role: Any, provider_logs: Any,
                       backlog_threshold: int | None, delay_threshold: Duration | None) -> None:
        """Replication permissions, this cluster's registration and the replication alarms."""
        instance_part.grant_replication([self.journal_consumer, self.maintenance], instance, self.region)
        broker_service_url = self.pulsar_protocol.service_url if self.pulsar_protocol is not None else None
        data = instance_part.cluster_data(self, self.iam_http_stage.url, broker_service_url)
        registration = Construct(self, "Instance")
        instance_part.register_cluster(registration, instance, self.cluster_name, data, provider_role, provider_logs)
        registration.node.add_dependency(bootstrap)  # the tenant first (home stack)
        if self.config_table is not None:
            registration.node.add_dependency(self.config_table)
        backlog = backlog_threshold if backlog_threshold is not None else int(self.node.try_get_context(
            "replicationBacklogAlarm") or DEFAULT_REPLICATION_BACKLOG_ALARM)
        delay = delay_threshold or Duration.seconds(int(self.node.try_get_context(
            "replicationDelayAlarmSeconds") or DEFAULT_REPLICATION_DELAY_ALARM_S))
        self.replication_alarms = instance_part.replication_alarms(self, instance, self.region, backlog, delay)
        observability.notify(self.alarm_topic, *self.replication_alarms)

    def _function(self, construct_id: str, asset: str, *, environment: dict[str, str],
                  **options: Any) -> lambda_.Function:
        """A handler function on the core layer, with the stack's log retention (functions.function)
        and the cluster's name."""
        return functions.function(
            self, construct_id, asset, layer=self.layer, log_retention_days=self.log_retention_days,
            tracing=TRACING_MODES[self.settings.tracing], log_level=self.settings.log_level,
            environment={**environment, ENV_CLUSTER_NAME: self.cluster_name}, **options
        )

    def config_table_arns(self) -> list[str]:
        """The configuration store's ARNs: the metadata table's, or the instance's home and local replicas'."""
        if self.instance is None:
            return [self.table.table_arn]
        return list(dict.fromkeys([self.instance.config_table_arn(self.instance.home_region),
                                   self.instance.config_table_arn(self.region)]))

    def _grant_config(self, grantee: Any) -> None:
        """Read/write on the instance's configuration table (nothing without an instance)."""
        if self.instance is not None:
            instance_part.grant_config(grantee, self.instance, self.region)

    def _grant_broker_access(self, handler: lambda_.Function) -> None:
        """The broker's access (functions.grant_broker_access) to this stack's resources."""
        functions.grant_broker_access(
            handler,
            table=self.table,
            bucket=self.bucket,
            stream=self.stream,
            websocket_api=self.websocket_api,
        )
        self._grant_config(handler)


def instance_stacks(scope: Construct, base_id: str, instance: Instance, *, account: str | None = None,
                    **kwargs: Any) -> list[MagnetarStack]:
    """One stack per region of `instance`, `<base_id>-<region>`, in `account` (None: the CLI's).

    The first region's stack holds the configuration table and writes the default tenant: every
    other stack depends on it, so `cdk deploy --all` deploys it first. `kwargs`: MagnetarStack's."""
    stacks: list[MagnetarStack] = []
    for region in instance.regions:
        stack = MagnetarStack(scope, f"{base_id}-{region}", env=Environment(account=account, region=region),
                              instance=instance, **kwargs)
        if stacks:
            stack.add_stack_dependency(stacks[0], "the home stack holds the configuration table")
        stacks.append(stack)
    return stacks
