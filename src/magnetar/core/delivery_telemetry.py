"""What a delivery tells the telemetry: messages handed out per namespace, the end-to-end latency
of first deliveries, and, while a trace is recorded, the producers' traces the messages name."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from magnetar.core import metrics as m
from magnetar.core.claims import DeliveredEntry
from magnetar.core.compression import decompress
from magnetar.core.entry import Entry, decode_message_columns
from magnetar.core.naming import TopicName
from magnetar.core.ports.telemetry import Span, Telemetry, Unit
from magnetar.core.tracecontext import producer_trace_ids

log = logging.getLogger(__name__)

LATENCY_SAMPLES = 100  # values of one metric in one EMF line (CloudWatch's limit): the first ones count
TRACED_ENTRIES = 10  # entries decoded for their producers' trace context, while a trace is recorded


def namespace_of(topic: str | TopicName) -> str:
    name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
    return str(name.namespace_name)


def record_delivery(telemetry: Telemetry, topic: str | TopicName, delivered: Iterable[DeliveredEntry],
                    metric: str, now_ms: int, span: Span | None = None) -> int:
    """Count `delivered` as `metric` (DispatchedMessages, PushedMessages) for the topic's namespace,
    with the latency of each entry delivered for the first time; the messages counted."""
    entries = [d for d in delivered if not d.entry.hole]
    if not entries:
        return 0
    namespace = namespace_of(topic)
    messages = sum(max(0, d.entry.num_messages - len(d.acked_indexes)) for d in entries)
    metrics = telemetry.metrics
    metrics.add(metric, messages, namespace=namespace)
    for d in [d for d in entries if d.redelivery_count == 0][:LATENCY_SAMPLES]:
        metrics.add(m.END_TO_END_LATENCY, max(0, now_ms - d.entry.publish_time), Unit.MILLISECONDS,
                    namespace=namespace)
    if span is not None and telemetry.tracer.active:
        link_producers(span, [d.entry for d in entries])
    return messages


def link_producers(span: Span, entries: list[Entry]) -> None:
    """Annotate `span` with the trace ids of the producers of `entries` (their messages'
    `traceparent`): X-Ray finds the consumer's span from the producer's trace id and back."""
    properties: list[dict[str, str]] = []
    for entry in entries[:TRACED_ENTRIES]:
        if entry.chunk is not None or entry.num_messages <= 0:
            continue
        try:
            data = decompress(entry.compression, entry.payload, entry.uncompressed_size)
            properties += decode_message_columns(data)[2]
        except Exception as exc:  # an encrypted or odd batch: no link, the delivery goes on
            log.debug("no trace context read from %s/%d: %s", entry.topic, entry.entry_id, exc)
    ids = producer_trace_ids(properties)
    if ids:
        span.annotate("producer_trace_id", ids[0])
        if len(ids) > 1:
            span.annotate("producer_trace_ids", ",".join(ids))
