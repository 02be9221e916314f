"""Namespace and topic policies: Pulsar's names, JSON shapes and defaults.

Policies are stored as Pulsar's `Policies` JSON fields (`retention_policies`,
`message_ttl_in_seconds`, `backlog_quota_map`, `deduplicationEnabled`, ...) on the namespace,
and the same fields as topic-level overrides on a topic. `effective_policies` merges the two:
a topic's value wins over its namespace's, which wins over the broker default.

Noisy neighbours (issue #8): `publishMaxMessageRate` and `topicDispatchRate` hold Pulsar's
`PublishRate` and `DispatchRate` bodies. Pulsar keys both by cluster name; Magnetar has one
cluster and stores the body itself. `max_topics_per_namespace` (namespace only) and
`max_subscriptions_per_topic` are bare integers (0: no limit), as in Pulsar.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from magnetar.core.errors import InvalidInput

RETENTION = "retention_policies"
MESSAGE_TTL = "message_ttl_in_seconds"
BACKLOG_QUOTA = "backlog_quota_map"
DEDUPLICATION = "deduplicationEnabled"
MAX_PRODUCERS = "max_producers_per_topic"
MAX_CONSUMERS = "max_consumers_per_topic"
MAX_MESSAGE_SIZE = "max_message_size"
PUBLISH_RATE = "publishMaxMessageRate"  # Pulsar's PublishRate body
DISPATCH_RATE = "topicDispatchRate"  # Pulsar's DispatchRate body
MAX_TOPICS = "max_topics_per_namespace"  # namespace only
MAX_SUBSCRIPTIONS = "max_subscriptions_per_topic"
COMPACTION_THRESHOLD = "compaction_threshold"  # bytes past the compaction horizon that start a run (0: never)
REPLICATION_CLUSTERS = "replication_clusters"  # the clusters a namespace's or topic's messages are replicated to

BACKLOG_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")
BACKLOG_QUOTA_TYPES = ("destination_storage", "message_age")
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # Pulsar's maxMessageSize default


@dataclass(frozen=True)
class BacklogQuota:
    """Pulsar's BacklogQuota: limitSize in bytes, limitTime in seconds (-1 or 0: no limit)."""

    limit_size: int = -1
    limit_time: int = -1
    policy: str = "producer_request_hold"

    @property
    def active(self) -> bool:
        return self.limit_size > 0 or self.limit_time > 0


@dataclass(frozen=True)
class Retention:
    """Acknowledged data is kept while younger than `minutes` and within `size_mb` (-1: no limit
    on that dimension); Pulsar deletes it once it exceeds either limit. (0, 0) keeps nothing."""

    minutes: int = 0
    size_mb: int = 0

    @property
    def keeps_everything(self) -> bool:
        return self.minutes == -1 and self.size_mb == -1


@dataclass(frozen=True)
class PublishRate:
    """Pulsar's PublishRate: messages and bytes per second a topic partition accepts (-1 or 0:
    no limit on that dimension)."""

    msgs: int = -1
    bytes: int = -1

    @property
    def active(self) -> bool:
        return self.msgs > 0 or self.bytes > 0


@dataclass(frozen=True)
class DispatchRate:
    """Pulsar's DispatchRate: messages and bytes handed out per `period_s` (-1 or 0: no limit);
    `relative` adds the topic's current publish rate to the message limit."""

    msgs: int = -1
    bytes: int = -1
    period_s: int = 1
    relative: bool = False

    @property
    def active(self) -> bool:
        return self.msgs > 0 or self.bytes > 0


@dataclass(frozen=True)
class TopicPolicies:
    retention: Retention = Retention()
    message_ttl_s: int = 0  # 0: messages never expire
    backlog_quota: BacklogQuota = BacklogQuota()
    deduplication: bool = False
    max_producers: int = 0  # 0: no limit
    max_consumers: int = 0
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    publish_rate: PublishRate = PublishRate()
    dispatch_rate: DispatchRate = DispatchRate()
    max_topics: int = 0  # 0: no limit (a namespace policy)
    max_subscriptions: int = 0
    compaction_threshold: int = 0  # 0: no automatic compaction

    @classmethod
    def of(cls, policies: dict[str, Any]) -> TopicPolicies:
        retention = policies.get(RETENTION) or {}
        quotas = policies.get(BACKLOG_QUOTA) or {}
        size_quota = quotas.get("destination_storage") or {}
        age_quota = quotas.get("message_age") or {}
        quota = BacklogQuota(
            limit_size=int(size_quota.get("limitSize", -1)),
            limit_time=int(age_quota.get("limitTime", size_quota.get("limitTime", -1))),
            policy=str(size_quota.get("policy") or age_quota.get("policy") or "producer_request_hold"),
        )
        return cls(
            retention=Retention(int(retention.get("retentionTimeInMinutes", 0)), int(retention.get("retentionSizeInMB", 0))),
            message_ttl_s=int(policies.get(MESSAGE_TTL) or 0),
            backlog_quota=quota,
            deduplication=bool(policies.get(DEDUPLICATION, False)),
            max_producers=int(policies.get(MAX_PRODUCERS) or 0),
            max_consumers=int(policies.get(MAX_CONSUMERS) or 0),
            max_message_size=int(policies.get(MAX_MESSAGE_SIZE) or DEFAULT_MAX_MESSAGE_SIZE),
            publish_rate=_publish_rate(policies.get(PUBLISH_RATE)),
            dispatch_rate=_dispatch_rate(policies.get(DISPATCH_RATE)),
            max_topics=int(policies.get(MAX_TOPICS) or 0),
            max_subscriptions=int(policies.get(MAX_SUBSCRIPTIONS) or 0),
            compaction_threshold=int(policies.get(COMPACTION_THRESHOLD) or 0),
        )


def _publish_rate(value: Any) -> PublishRate:
    if not isinstance(value, dict):
        return PublishRate()
    return PublishRate(int(value.get("publishThrottlingRateInMsg", -1)), int(value.get("publishThrottlingRateInByte", -1)))


def _dispatch_rate(value: Any) -> DispatchRate:
    if not isinstance(value, dict):
        return DispatchRate()
    return DispatchRate(
        int(value.get("dispatchThrottlingRateInMsg", -1)), int(value.get("dispatchThrottlingRateInByte", -1)),
        max(1, int(value.get("ratePeriodInSecond", 1))), bool(value.get("relativeToPublishRate", False)),
    )


def effective_policies(namespace: dict[str, Any], topic: dict[str, Any]) -> dict[str, Any]:
    """Topic-level values override the namespace's, field by field."""
    merged = dict(namespace)
    for name, value in topic.items():
        if name == BACKLOG_QUOTA and isinstance(value, dict):
            merged[name] = {**(namespace.get(name) or {}), **value}
        else:
            merged[name] = value
    return merged


def replication_clusters(policies: Mapping[str, Any], local_cluster: str) -> tuple[str, ...]:
    """The clusters a topic's messages are replicated to, from its effective (merged) policies:
    the topic's own list, else its namespace's, else only this cluster (Pulsar's default for a
    namespace whose list was never set)."""
    value = policies.get(REPLICATION_CLUSTERS)
    if not value:
        return (local_cluster,)
    return tuple(str(cluster) for cluster in value)


# --- validation of admin input (the shapes are checked by pydantic at the boundary) ----------
def check_retention(minutes: int, size_mb: int) -> dict[str, int]:
    if minutes < -1 or size_mb < -1:
        raise InvalidInput("Retention time and size must be -1 (infinite), 0 or positive")
    if (minutes == 0) != (size_mb == 0) and -1 not in (minutes, size_mb):
        # Pulsar refuses a retention with one limit 0 and the other positive: it would retain nothing
        raise InvalidInput("Retention time and size must both be 0, or both be set (-1 for infinite)")
    return {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb}


def check_backlog_quota(limit_size: int, limit_time: int, policy: str, quota_type: str) -> dict[str, Any]:
    if policy not in BACKLOG_POLICIES:
        raise InvalidInput(f"Invalid backlog quota policy {policy!r}; one of {', '.join(BACKLOG_POLICIES)}")
    if quota_type not in BACKLOG_QUOTA_TYPES:
        raise InvalidInput(f"Invalid backlogQuotaType {quota_type!r}; one of {', '.join(BACKLOG_QUOTA_TYPES)}")
    if limit_size < -1 or limit_time < -1:
        raise InvalidInput("limitSize and limitTime must be -1 (no limit) or positive")
    return {"limitSize": limit_size, "limitTime": limit_time, "policy": policy}


def check_non_negative(name: str, value: int) -> int:
    if value < 0:
        raise InvalidInput(f"{name} must be 0 or positive")
    return value


def check_limit(name: str, value: int) -> int:
    """A topic or subscription limit: 0 (none) or positive, within Pulsar's Java int."""
    if not 0 <= value <= 2**31 - 1:
        raise InvalidInput(f"{name} must be between 0 and {2**31 - 1}")
    return value


def check_publish_rate(msgs: int, size: int) -> dict[str, int]:
    """Pulsar's PublishRate body; -1 or 0 means no limit on that dimension."""
    if msgs < -1 or size < -1:
        raise InvalidInput("publishThrottlingRateInMsg and publishThrottlingRateInByte must be -1, 0 or positive")
    return {"publishThrottlingRateInMsg": msgs, "publishThrottlingRateInByte": size}


def check_dispatch_rate(msgs: int, size: int, period_s: int, relative: bool) -> dict[str, Any]:
    """Pulsar's DispatchRate body; -1 or 0 means no limit on that dimension."""
    if msgs < -1 or size < -1:
        raise InvalidInput("dispatchThrottlingRateInMsg and dispatchThrottlingRateInByte must be -1, 0 or positive")
    if not 1 <= period_s <= 3600:
        raise InvalidInput("ratePeriodInSecond must be between 1 and 3600")
    return {"dispatchThrottlingRateInMsg": msgs, "dispatchThrottlingRateInByte": size,
            "ratePeriodInSecond": period_s, "relativeToPublishRate": relative}


# --- noisy neighbours: limits and rates ----------------------------------------------------------

TOPIC_LIMIT_REASON = "Exceed maximum number of topics in namespace."


def subscription_limit_reason(topic: object) -> str:
    return f"Exceed the maximum number of subscriptions of the topic: {topic}"


PUBLISH_BURST_S = 1  # a topic partition may run this far ahead of its rate (Pulsar's token bucket holds one period)


def rate_cost_ns(amount: int, per_second: int) -> int:
    """What `amount` messages (or bytes) cost on a virtual clock that runs at `per_second` of
    them per second, in nanoseconds; 0 when the dimension has no limit."""
    if per_second <= 0:
        return 0
    return -(-amount * 1_000_000_000 // per_second)  # ceil: a cost is never 0 under a limit


def admit(tat_ns: int, now_ns: int, cost_ns: int, burst_ns: int) -> int | None:
    """The publish-rate rule (GCRA, a token bucket on a virtual clock): `tat_ns` is the time at
    which everything admitted so far would have been sent at exactly the rate. A publish is
    admitted while that time is at most `burst_ns` ahead of now (so a batch may overshoot, and a
    large one leaves a debt the next publishes wait out, as Pulsar's token bucket does); an idle
    topic does not save up more than the burst. The new time, or None when refused."""
    if tat_ns > now_ns + burst_ns:
        return None
    return max(tat_ns, now_ns) + cost_ns


def dispatch_budget(rate: DispatchRate, window: tuple[int, int, int], now_ms: int,
                    publish_rate: tuple[float, float] = (0.0, 0.0)) -> tuple[int, int, int]:
    """What a subscription may still hand out in the current period of its dispatch rate:
    (messages, bytes, the period's start in ms); -1 for a dimension without a limit, 0 when the
    period is used up. `window` is the cursor's (period start, messages, bytes) so far;
    `publish_rate` the topic's in-rate (messages/s, bytes/s), which `relativeToPublishRate`
    adds to the limits, as Pulsar does."""
    period_ms = rate.period_s * 1000
    start = now_ms - now_ms % period_ms
    used_msgs, used_bytes = (window[1], window[2]) if window[0] == start else (0, 0)
    extra_msgs, extra_bytes = (int(publish_rate[0]), int(publish_rate[1])) if rate.relative else (0, 0)
    msgs = max(0, rate.msgs + extra_msgs - used_msgs) if rate.msgs > 0 else -1
    size = max(0, rate.bytes + extra_bytes - used_bytes) if rate.bytes > 0 else -1
    return msgs, size, start


def has_overrides(policies: dict[str, Any]) -> bool:
    """Whether a topic's policies override anything (a removed policy may be kept as null)."""
    return any(value is not None for value in policies.values())

