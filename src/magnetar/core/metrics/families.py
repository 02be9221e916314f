"""The metric families of a scrape, from what was read (topic stats, seal states) and what the
container counted, in Prometheus' exposition format (prometheus_client).

Every `pulsar_*` value is a field of `TopicStatsService.brief_stats` (the same code as topic
stats) or a counter of the seal state; nothing is computed twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from magnetar.core.metrics import BY_NAME, CATALOG, COUNTER, LATE_OUTCOMES, TOPIC, scope_labels
from magnetar.core.metrics.buckets import (
    ENTRY_SIZE_BOUNDS,
    ENTRY_SIZE_SUFFIXES,
    WRITE_LATENCY_BOUNDS_MS,
    WRITE_LATENCY_SUFFIXES,
    buckets,
)
from magnetar.core.metrics.container import ContainerSnapshot
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.ports import SealState

Key = tuple[str, str]  # (service, operation)


@dataclass(frozen=True)
class TopicFigures:
    """One topic partition as read: its brief topic stats and its seal state."""

    topic: TopicName
    stats: dict[str, Any]
    seal: SealState


@dataclass(frozen=True)
class NamespaceFigures:
    namespace: NamespaceName
    topics: list[TopicFigures]


@dataclass(frozen=True)
class ContainerFigures:
    """What the answering container counted: its counters, its AWS requests (by service and
    operation: `requests`, `throttles`, `retries`) and their estimated cost (USD by component)."""

    counters: ContainerSnapshot
    aws: dict[str, dict[Key, int]] = field(default_factory=dict)
    cost_dollars: dict[str, float] = field(default_factory=dict)


def topic_values(figures: TopicFigures) -> dict[str, float]:
    """Every topic-scope metric of one topic partition, by name."""
    stats, seal = figures.stats, figures.seal
    subscriptions = stats["subscriptions"].values()
    values: dict[str, float] = {
        "pulsar_subscriptions_count": len(stats["subscriptions"]),
        "pulsar_producers_count": len(stats["publishers"]),
        "pulsar_consumers_count": sum(len(s["consumers"]) for s in subscriptions),
        "pulsar_rate_in": stats["msgRateIn"],
        "pulsar_rate_out": stats["msgRateOut"],
        "pulsar_throughput_in": stats["msgThroughputIn"],
        "pulsar_throughput_out": stats["msgThroughputOut"],
        "pulsar_storage_size": stats["storageSize"],
        "pulsar_msg_backlog": sum(s["msgBacklog"] for s in subscriptions),
        "pulsar_in_messages": stats["msgInCounter"],
        "pulsar_in_bytes": stats["bytesInCounter"],
        "pulsar_out_messages": stats["msgOutCounter"],
        "pulsar_out_bytes": stats["bytesOutCounter"],
        "magnetar_holes": seal.hole_entries,
    }
    for name, counts, suffixes, total in (
        ("pulsar_storage_write_latency", buckets(seal.write_latency, WRITE_LATENCY_BOUNDS_MS), WRITE_LATENCY_SUFFIXES,
         seal.write_latency_ms),
        ("pulsar_entry_size", buckets(seal.entry_sizes, ENTRY_SIZE_BOUNDS), ENTRY_SIZE_SUFFIXES, seal.entry_size_bytes),
    ):
        values.update({f"{name}_le_{suffix}": n for suffix, n in zip(suffixes, counts, strict=True)})
        values[f"{name}_count"] = sum(counts)
        values[f"{name}_sum"] = total
    return values


def subscription_values(stats: dict[str, Any]) -> dict[str, float]:
    """Every subscription-scope metric of one subscription's stats, by name."""
    return {
        "pulsar_subscription_back_log": stats["msgBacklog"],
        "pulsar_subscription_unacked_messages": stats["unackedMessages"],
        "pulsar_subscription_msg_rate_redeliver": stats["msgRateRedeliver"],
        "pulsar_subscription_msg_rate_out": stats["msgRateOut"],
        "pulsar_subscription_msg_throughput_out": stats["msgThroughputOut"],
        "pulsar_subscription_blocked_on_unacked_messages": int(stats["blockedSubscriptionOnUnackedMsgs"]),
    }


class _Families:
    """The scrape's families, made on first use in the catalog's order."""

    def __init__(self, topic_level: bool) -> None:
        self.topic_level = topic_level
        self._made: dict[str, Metric] = {}

    def add(self, name: str, labels: tuple[str, ...], value: float) -> None:
        family = self._made.get(name)
        if family is None:
            spec = BY_NAME[name]
            kind = CounterMetricFamily if spec.kind == COUNTER else GaugeMetricFamily
            family = kind(name, spec.help, labels=[*scope_labels(spec.scope, self.topic_level), *spec.labels])
            self._made[name] = family
        family.add_metric(list(labels), value)  # type: ignore[attr-defined]

    def in_order(self) -> list[Metric]:
        return [self._made[spec.name] for spec in CATALOG if spec.name in self._made]


def scrape_families(namespaces: Iterable[NamespaceFigures], cluster: str, topic_level: bool,
                    container: ContainerFigures | None = None, scrape_requests: dict[Key, int] | None = None,
                    scrape_seconds: float | None = None, now_s: float = 0.0) -> list[Metric]:
    """Every family of a scrape: the namespaces' (or, `topic_level`, their topics') and their
    subscriptions' metrics, then the container's and the scrape's own."""
    out = _Families(topic_level)
    for ns in namespaces:
        name = str(ns.namespace)
        out.add("pulsar_topics_count", (cluster, name), len(ns.topics))
        if topic_level:
            for figures in ns.topics:
                topic = str(figures.topic)
                for metric, value in topic_values(figures).items():
                    out.add(metric, (cluster, name, topic), value)
                for sub, stats in figures.stats["subscriptions"].items():
                    for metric, value in subscription_values(stats).items():
                        out.add(metric, (cluster, name, topic, sub), value)
            continue
        totals: dict[str, float] = {spec.name: 0 for spec in CATALOG if spec.scope == TOPIC}
        for figures in ns.topics:
            for metric, value in topic_values(figures).items():
                totals[metric] += value
        for metric, value in totals.items():
            out.add(metric, (cluster, name), value)
    if container is not None:
        _container(out, cluster, container, now_s)
    for (service, operation), n in sorted((scrape_requests or {}).items()):
        out.add("magnetar_scrape_aws_requests", (cluster, service, operation), n)
    if scrape_seconds is not None:
        out.add("magnetar_scrape_duration_seconds", (cluster,), scrape_seconds)
    return out.in_order()


def _container(out: _Families, cluster: str, figures: ContainerFigures, now_s: float) -> None:
    c = figures.counters
    base = (cluster, c.container)
    for metric, kind in (("magnetar_aws_requests", "requests"), ("magnetar_aws_throttles", "throttles"),
                         ("magnetar_aws_retries", "retries")):
        for (service, operation), n in sorted(figures.aws.get(kind, {}).items()):
            out.add(metric, (*base, service, operation), n)
    for function in sorted(c.invocations):
        out.add("magnetar_lambda_invocations", (*base, function), c.invocations[function])
        out.add("magnetar_lambda_cold_starts", (*base, function), c.cold_starts.get(function, 0))
        out.add("magnetar_lambda_duration_seconds", (*base, function), c.handler_seconds.get(function, 0.0))
    out.add("magnetar_push_deliveries", base, c.pushed)
    for outcome in LATE_OUTCOMES:
        out.add("magnetar_late_records", (*base, outcome), c.late.get(outcome, 0))
    hours = max(now_s - c.started_at, 1.0) / 3600
    for component, dollars in sorted(figures.cost_dollars.items()):
        out.add("magnetar_estimated_cost_dollars", (*base, component), dollars)
        out.add("magnetar_estimated_cost_dollars_per_hour", (*base, component), dollars / hours)
    out.add("magnetar_container_start_time_seconds", base, c.started_at)


class _Fixed(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def render(families: list[Metric], accept: str | None = None) -> tuple[bytes, str]:
    """The exposition the client asked for (`Accept`: OpenMetrics or Prometheus' text format 0.0.4,
    the default) and its content type."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(families))
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type

