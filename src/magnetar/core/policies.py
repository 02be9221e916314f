"""Namespace and topic policies: Pulsar's names, JSON shapes and defaults.

Policies are stored as Pulsar's `Policies` JSON fields (`retention_policies`,
`message_ttl_in_seconds`, `backlog_quota_map`, `deduplicationEnabled`, ...) on the namespace,
and the same fields as topic-level overrides on a topic. `effective_policies` merges the two:
a topic's value wins over its namespace's, which wins over the broker default.
"""

from __future__ import annotations

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
class TopicPolicies:
    retention: Retention = Retention()
    message_ttl_s: int = 0  # 0: messages never expire
    backlog_quota: BacklogQuota = BacklogQuota()
    deduplication: bool = False
    max_producers: int = 0  # 0: no limit
    max_consumers: int = 0
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE

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
