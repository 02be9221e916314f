"""Every metric Magnetar exposes, by name, in one place: what `GET /metrics` shows (the catalog)
and what the functions emit to CloudWatch (the EMF names, below the catalog).

Pulsar's names (`pulsar_*`) keep Pulsar's meaning and labels; Magnetar's own (`magnetar_*`) follow
the same style. The scrape (`magnetar.core.metrics.families`), the Grafana dashboard's test and the
documentation (docs/metrics.md) all read this catalog, so a name exists in one place only.

Scopes (which labels a metric carries):
- `topic`: `cluster`, `namespace`, and `topic` when the scrape is at topic level (Pulsar's
  `exposeTopicLevelMetricsInPrometheus`); at namespace level the namespace's topics are summed;
- `subscription`: `cluster`, `namespace`, `topic`, `subscription`; topic level only, as in Pulsar;
- `namespace`: `cluster`, `namespace`, at either level;
- `container`: `cluster`, `container` (the answering Lambda execution environment, or the local
  runtime's process): what that container counted since it started, plus the metric's own labels;
- `scrape`: `cluster`: the scrape itself.

CloudWatch (namespace `Magnetar`): the names the core and the handlers emit in Embedded Metric
Format lines and the stack's dashboard and alarms read (infra/magnetar_cdk/dashboard.py,
alarms.py). Every metric has the dimension `service` (the function: magnetar-broker,
magnetar-journal-consumer, ...); those marked "per namespace" also come with `namespace`
(`tenant/ns`), in the same EMF line under both dimension sets.
"""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.core.metrics.buckets import ENTRY_SIZE_SUFFIXES, WRITE_LATENCY_SUFFIXES

GAUGE, COUNTER = "gauge", "counter"
TOPIC, SUBSCRIPTION, NAMESPACE, CONTAINER, SCRAPE = "topic", "subscription", "namespace", "container", "scrape"


@dataclass(frozen=True)
class MetricSpec:
    name: str  # the family's name; a counter's samples add `_total`
    kind: str  # GAUGE or COUNTER
    scope: str
    help: str
    labels: tuple[str, ...] = ()  # beyond the scope's

    @property
    def sample(self) -> str:
        """The name its samples carry in the exposition."""
        return f"{self.name}_total" if self.kind == COUNTER else self.name


def _histogram(name: str, suffixes: tuple[str, ...], what: str, unit: str) -> list[MetricSpec]:
    """Pulsar's bucket gauges (`<name>_le_<bound>`, each bucket its own range, not cumulative),
    with `_count` and `_sum`: counts since the topic's creation (graph them with increase())."""
    def bound(suffix: str) -> str:
        readable = suffix.replace("_kb", " KB").replace("_mb", " MB").replace("_", ".")
        return readable if " " in readable else f"{readable} {unit}"

    out = [MetricSpec(f"{name}_le_{s}", GAUGE, TOPIC,
                      f"Entries whose {what} was above {bound(suffixes[-2])}" if s == "overflow" else
                      f"Entries whose {what} was at most {bound(s)} (above the previous bound)")
           for s in suffixes]
    out.append(MetricSpec(f"{name}_count", GAUGE, TOPIC, f"Entries counted in the {name}_le_* buckets"))
    out.append(MetricSpec(f"{name}_sum", GAUGE, TOPIC, f"Sum of the {what} of those entries ({unit})"))
    return out


CATALOG: tuple[MetricSpec, ...] = (
    # --- Pulsar's, from topic stats -----------------------------------------------------------
    MetricSpec("pulsar_topics_count", GAUGE, NAMESPACE, "Topics (and topic partitions) of the namespace"),
    MetricSpec("pulsar_subscriptions_count", GAUGE, TOPIC, "Subscriptions (replicators' cursors not counted)"),
    MetricSpec("pulsar_producers_count", GAUGE, TOPIC,
               "Active producers: those that published or connected within the last 5 minutes"),
    MetricSpec("pulsar_consumers_count", GAUGE, TOPIC, "Consumers attached (holding a live lease)"),
    MetricSpec("pulsar_rate_in", GAUGE, TOPIC, "Messages in per second (one-minute moving average of sealed messages)"),
    MetricSpec("pulsar_rate_out", GAUGE, TOPIC, "Messages dispatched per second to subscriptions and replicators"),
    MetricSpec("pulsar_throughput_in", GAUGE, TOPIC, "Bytes in per second (one-minute moving average)"),
    MetricSpec("pulsar_throughput_out", GAUGE, TOPIC, "Bytes dispatched per second"),
    MetricSpec("pulsar_storage_size", GAUGE, TOPIC, "Bytes stored: the segments still listed and the unsealed tail"),
    MetricSpec("pulsar_msg_backlog", GAUGE, TOPIC, "Entries not acknowledged, summed over the subscriptions"),
    MetricSpec("pulsar_in_messages", COUNTER, TOPIC, "Messages published since the topic's creation"),
    MetricSpec("pulsar_in_bytes", COUNTER, TOPIC, "Bytes published since the topic's creation"),
    MetricSpec("pulsar_out_messages", COUNTER, TOPIC, "Messages dispatched to subscriptions since they were created"),
    MetricSpec("pulsar_out_bytes", COUNTER, TOPIC, "Bytes dispatched to subscriptions since they were created"),
    *_histogram("pulsar_storage_write_latency", WRITE_LATENCY_SUFFIXES,
                "storage write latency (reservation to arrival in the journal)", "ms"),
    *_histogram("pulsar_entry_size", ENTRY_SIZE_SUFFIXES, "size", "bytes"),
    MetricSpec("pulsar_subscription_back_log", GAUGE, SUBSCRIPTION, "Entries of the subscription not acknowledged"),
    MetricSpec("pulsar_subscription_unacked_messages", GAUGE, SUBSCRIPTION,
               "Entries handed to consumers and not acknowledged yet"),
    MetricSpec("pulsar_subscription_msg_rate_redeliver", GAUGE, SUBSCRIPTION,
               "Messages redelivered per second (handed out again after a negative ack, an ack timeout "
               "or their consumer leaving)"),
    MetricSpec("pulsar_subscription_msg_rate_out", GAUGE, SUBSCRIPTION, "Messages dispatched per second"),
    MetricSpec("pulsar_subscription_msg_throughput_out", GAUGE, SUBSCRIPTION, "Bytes dispatched per second"),
    MetricSpec("pulsar_subscription_blocked_on_unacked_messages", GAUGE, SUBSCRIPTION,
               "1 when dispatch waits on unacknowledged messages (never: 0)"),
    # --- Magnetar's, from the store ----------------------------------------------------------------
    MetricSpec("magnetar_holes", COUNTER, TOPIC,
               "Entry ids sealed as holes (their writer died or missed its deadline before the journal write)"),
    # --- Magnetar's, counted by the answering container ------------------------------------------
    MetricSpec("magnetar_aws_requests", COUNTER, CONTAINER, "AWS requests (each HTTP attempt)", ("service", "operation")),
    MetricSpec("magnetar_aws_throttles", COUNTER, CONTAINER,
               "AWS requests refused for throttling, or whose batch items were left unprocessed (the SDK or the "
               "caller retries them)", ("service", "operation")),
    MetricSpec("magnetar_aws_retries", COUNTER, CONTAINER, "AWS requests that were the SDK's retries",
               ("service", "operation")),
    MetricSpec("magnetar_lambda_invocations", COUNTER, CONTAINER, "Lambda invocations", ("function",)),
    MetricSpec("magnetar_lambda_cold_starts", COUNTER, CONTAINER,
               "Lambda execution environments started (their first invocation)", ("function",)),
    MetricSpec("magnetar_lambda_duration_seconds", COUNTER, CONTAINER, "Time spent in the handlers", ("function",)),
    MetricSpec("magnetar_push_deliveries", COUNTER, CONTAINER, "Messages pushed to WebSocket consumers and readers"),
    MetricSpec("magnetar_late_records", COUNTER, CONTAINER,
               "Journal records that arrived after their ids were sealed as holes (after_hole), and what became "
               "of them (reappended under new ids, dead_lettered)", ("outcome",)),
    MetricSpec("magnetar_estimated_cost_dollars", COUNTER, CONTAINER,
               "USD of the AWS requests and Lambda time counted here, at on-demand list prices (the cost model)",
               ("component",)),
    MetricSpec("magnetar_estimated_cost_dollars_per_hour", GAUGE, CONTAINER,
               "magnetar_estimated_cost_dollars over the container's uptime, per hour", ("component",)),
    MetricSpec("magnetar_container_start_time_seconds", GAUGE, CONTAINER,
               "When the container started counting (Unix time)"),
    # --- the scrape itself ---------------------------------------------------------------------------
    MetricSpec("magnetar_scrape_aws_requests", GAUGE, SCRAPE, "AWS requests this scrape made",
               ("service", "operation")),
    MetricSpec("magnetar_scrape_duration_seconds", GAUGE, SCRAPE, "How long this scrape took"),
)

BY_NAME: dict[str, MetricSpec] = {spec.name: spec for spec in CATALOG}
LATE_OUTCOMES = ("after_hole", "reappended", "dead_lettered")


def exposed_names() -> frozenset[str]:
    """Every sample name a scrape may carry (counters with `_total`)."""
    return frozenset(spec.sample for spec in CATALOG)


def scope_labels(scope: str, topic_level: bool) -> tuple[str, ...]:
    """The labels of a scope (before the metric's own)."""
    if scope == TOPIC:
        return ("cluster", "namespace", "topic") if topic_level else ("cluster", "namespace")
    if scope == SUBSCRIPTION:
        return ("cluster", "namespace", "topic", "subscription")
    if scope == NAMESPACE:
        return ("cluster", "namespace")
    if scope == CONTAINER:
        return ("cluster", "container")
    return ("cluster",)


# === CloudWatch (EMF) ================================================================================
CLOUDWATCH_NAMESPACE = "Magnetar"
SERVICE_DIMENSION = "service"  # Powertools' dimension: the function's POWERTOOLS_SERVICE_NAME
NAMESPACE_DIMENSION = "namespace"  # tenant/namespace
AWS_SERVICE_DIMENSION = "AwsService"  # dynamodb, kinesis, s3, lambda, ... (AWS calls' throttles and retries)

# --- publishing (broker, WebSocket, per namespace) --------------------------------------------
PUBLISHED_MESSAGES = "PublishedMessages"
PUBLISHED_BYTES = "PublishedBytes"  # payload bytes as stored (compressed by the producer)
PUBLISH_ERRORS = "PublishErrors"  # the broker's failures: journal refused, deadline passed, AWS errors
PUBLISH_REFUSED = "PublishRefused"  # the caller's: rate limits, backlog quotas, sizes, fenced producers
DEAD_LETTERED_MESSAGES = "DeadLetteredMessages"  # published to a dead-letter topic (`...-DLQ`)

# --- dispatching (broker, WebSocket, journal consumer, maintenance, per namespace) -------------
DISPATCHED_MESSAGES = "DispatchedMessages"  # handed to consumers by long polling
PUSHED_MESSAGES = "PushedMessages"  # handed to consumers over WebSocket connections
END_TO_END_LATENCY = "EndToEndLatency"  # publish time -> first delivery, ms (percentiles)

# --- the ledger (journal consumer) ------------------------------------------------------------
SEALED_ENTRIES = "SealedEntries"
SEGMENTS_WRITTEN = "SegmentsWritten"
HOLES = "Holes"
LATE_AFTER_HOLE = "LateAfterHole"  # an acknowledged entry consumers will never see: an incident
LATE_REAPPENDED = "LateReappended"
LATE_DEAD_LETTERED = "LateDeadLettered"

# --- maintenance (per namespace) --------------------------------------------------------------
BACKLOG_ENTRIES = "BacklogEntries"  # entries behind the slowest cursor, summed over the namespace's topics
BACKLOG_BYTES = "BacklogBytes"  # of the topics with a backlog quota (measured for the quota)
BACKLOG_QUOTA_RATIO = "BacklogQuotaRatio"  # the namespace's fullest topic: backlog / quota (1 = at the quota)
TOPICS_MAINTAINED = "TopicsMaintained"  # the run's totals (the function's own)
EXPIRED_ENTRIES = "ExpiredEntries"
EVICTED_ENTRIES = "EvictedEntries"
TRIMMED_SEGMENTS = "TrimmedSegments"
BACKLOG_BLOCKED_TOPICS = "BacklogBlockedTopics"
REDISPATCHED = "Redispatched"  # pushes of the run: due redeliveries, what failed pushes left

# --- the functions ----------------------------------------------------------------------------
COLD_START = "ColdStart"
AUTHORIZER_DENIALS = "AuthorizerDenials"  # requests the authorizer found no role for (bad or expired credentials)
AUTHORIZATIONS = "Authorizations"
AWS_THROTTLES = "AwsThrottles"  # AWS answered a throttling error (per AwsService); the SDK retries
AWS_RETRIES = "AwsRetries"  # AWS requests sent again (throttles, 5xx, timeouts; per AwsService)
S3_GET_REQUESTS = "S3GetRequests"  # the cost model's S3 requests, counted where they are made
S3_PUT_REQUESTS = "S3PutRequests"
