"""The core's telemetry on in-memory ports, the trace context helpers and the EMF adapter's output."""

from __future__ import annotations

import json
from typing import Any

import pytest

from magnetar.adapters.aws import telemetry as aws_telemetry
from magnetar.adapters.aws.clients import RequestCounter
from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.adapters.memory_telemetry import in_memory_telemetry
from magnetar.core import metrics as m
from magnetar.core.acks import Acks
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import PayloadTooLarge
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.policies import BACKLOG_QUOTA
from magnetar.core.ports.telemetry import Unit
from magnetar.core.tracecontext import (
    TRACEPARENT,
    parse_traceparent,
    traceparent_from_xray_header,
    with_trace_context,
    xray_to_w3c_trace_id,
)

TOPIC = TopicName.parse("persistent://public/default/orders")
NS = "public/default"


def _broker():  # type: ignore[no-untyped-def]
    telemetry, metrics, tracer = in_memory_telemetry()
    clock = ManualClock()
    return memory_broker(clock, telemetry=telemetry), metrics, tracer, clock


def _publish(broker, n: int, properties: dict[str, str] | None = None, topic: TopicName = TOPIC) -> None:  # type: ignore[no-untyped-def]
    for i in range(n):
        broker.writer.append(topic, Batch.of([Message(f"m{i}".encode(), properties=properties or {})],
                                             batched=False), "p")


def test_publish_dispatch_and_seal_are_counted_per_namespace() -> None:
    broker, metrics, tracer, clock = _broker()
    broker.subscriptions.subscribe(TOPIC, "s", "c", "Exclusive", "Earliest")
    _publish(broker, 3)
    assert metrics.total(m.PUBLISHED_MESSAGES, NS) == 3
    assert metrics.total(m.PUBLISHED_BYTES, NS) > 0
    outcome = broker.sealer.seal(list(broker.journal.records))
    assert metrics.total(m.SEALED_ENTRIES) == outcome.sealed_entries == 3
    assert metrics.total(m.SEGMENTS_WRITTEN) == 1
    assert metrics.values(m.HOLES) == []  # emitted only when there are some
    clock.advance(250)
    received = broker.subscriptions.receive(TOPIC, "s", "c", max_messages=10)
    assert len(received.entries) == 3
    assert metrics.total(m.DISPATCHED_MESSAGES, NS) == 3
    assert metrics.values(m.END_TO_END_LATENCY) == [250, 250, 250]
    broker.subscriptions.acknowledge(TOPIC, "s", Acks(cumulative=(2, 1, -1)))
    names = [s.name for s in tracer.spans]
    assert names[:2] == ["publish", "journal.write"]
    assert {"seal", "dispatch", "acknowledge"} <= set(names)
    publish = tracer.named("publish")[0]
    assert tracer.named("journal.write")[0].parent_id == publish.span_id
    assert publish.annotations == {"namespace": NS, "messages": 1}


def test_redeliveries_count_as_dispatched_without_latency() -> None:
    broker, metrics, _, clock = _broker()
    broker.subscriptions.subscribe(TOPIC, "s", "c", "Shared", "Earliest")
    _publish(broker, 1)
    broker.sealer.seal(list(broker.journal.records))
    broker.subscriptions.receive(TOPIC, "s", "c")
    broker.subscriptions.acknowledge(TOPIC, "s", Acks(nacks=(0,), nack_delay_ms=0, consumer="c"))
    clock.advance(10)
    again = broker.subscriptions.receive(TOPIC, "s", "c")
    assert again.entries and again.entries[0].redelivery_count == 1
    assert metrics.total(m.DISPATCHED_MESSAGES, NS) == 2
    assert len(metrics.values(m.END_TO_END_LATENCY)) == 1  # the first delivery only


def test_refusals_and_errors_are_told_apart() -> None:
    broker, metrics, _, _ = _broker()
    with pytest.raises(PayloadTooLarge):
        broker.writer.append(TOPIC, Batch.of([Message(b"x" * (6 * 1024 * 1024))], batched=False), "p")
    assert metrics.total(m.PUBLISH_REFUSED, NS) == 1
    assert metrics.total(m.PUBLISH_ERRORS, NS) == 0
    assert metrics.total(m.PUBLISHED_MESSAGES, NS) == 0


def test_dead_letter_topics_count_what_arrives() -> None:
    broker, metrics, _, _ = _broker()
    _publish(broker, 2, topic=TopicName.parse("persistent://public/default/orders-sub-DLQ"))
    assert metrics.total(m.DEAD_LETTERED_MESSAGES, NS) == 2
    _publish(broker, 1)
    assert metrics.total(m.DEAD_LETTERED_MESSAGES, NS) == 2


def test_maintenance_reports_backlog_and_quota_ratio_per_namespace() -> None:
    broker, metrics, _, _ = _broker()
    broker.admin.set_policy(NamespaceName("public", "default"), BACKLOG_QUOTA,
                            {"destination_storage": {"limitSize": 1000, "limitTime": -1, "policy": "producer_exception"}})
    broker.subscriptions.subscribe(TOPIC, "s", "c", "Exclusive", "Earliest")
    for _ in range(4):
        broker.writer.append(TOPIC, Batch.of([Message(b"x" * 100)], batched=False), "p")
    broker.sealer.seal(list(broker.journal.records))
    broker.maintenance.run()
    assert metrics.values(m.BACKLOG_ENTRIES) == [4]
    [ratio] = [r for r in metrics.recorded if r.name == m.BACKLOG_QUOTA_RATIO]
    assert ratio.namespace == NS and ratio.unit is Unit.NONE
    assert 0.3 < ratio.value < 1.0  # four ~100-byte entries of a 1,000-byte quota
    assert metrics.total(m.TOPICS_MAINTAINED) == 1


def test_a_dispatch_span_names_its_producers_traces() -> None:
    broker, _, tracer, _ = _broker()
    parent = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
    broker.subscriptions.subscribe(TOPIC, "s", "c", "Exclusive", "Earliest")
    _publish(broker, 1, {TRACEPARENT: parent})
    broker.sealer.seal(list(broker.journal.records))
    broker.subscriptions.receive(TOPIC, "s", "c")
    [dispatch] = tracer.named("dispatch")
    assert dispatch.annotations["producer_trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"


# --- trace context ---------------------------------------------------------------------------
def test_trace_context_conversions() -> None:
    header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    assert traceparent_from_xray_header(header) == "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
    assert traceparent_from_xray_header(header.replace("Sampled=1", "Sampled=0")) is None
    assert traceparent_from_xray_header("Root=1-5759e988-bd862e3fe1be46a994272793") is None  # no parent
    assert xray_to_w3c_trace_id("1-bad") is None
    assert parse_traceparent("00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01") == (
        "5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8", True)
    assert parse_traceparent("00-" + "0" * 32 + "-53995c3f42cd8ad8-01") is None
    assert parse_traceparent("not a traceparent") is None
    assert with_trace_context({"a": "1"}, "tp") == {"a": "1", TRACEPARENT: "tp"}
    assert with_trace_context({TRACEPARENT: "mine"}, "tp") == {TRACEPARENT: "mine"}  # the client's wins
    assert with_trace_context({"a": "1"}, None) == {"a": "1"}


# --- the EMF adapter -------------------------------------------------------------------------
class _Context:
    function_name = "magnetar-broker"


def test_an_invocation_writes_one_emf_line_per_dimension_set(capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "magnetar-broker")
    instrumented = aws_telemetry.LambdaTelemetry()
    metrics = aws_telemetry.EmfMetrics()

    @instrumented.instrument
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        metrics.add(m.PUBLISHED_MESSAGES, 2, namespace="public/a")
        metrics.add(m.PUBLISHED_MESSAGES, 3, namespace="public/a")
        metrics.add(m.END_TO_END_LATENCY, 12, Unit.MILLISECONDS, namespace="public/a")
        metrics.add(m.END_TO_END_LATENCY, 30, Unit.MILLISECONDS, namespace="public/a")
        metrics.add(m.PUBLISHED_MESSAGES, 1, namespace="public/b")
        aws_telemetry.record_aws(m.AWS_THROTTLES, "dynamodb")
        return {}

    handler({}, _Context())
    metrics.add(m.PUBLISHED_MESSAGES, 99, namespace="public/a")  # outside an invocation: nowhere
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_key = {(d.get("namespace"), d.get("AwsService")): d for d in docs}
    a = by_key[("public/a", None)]
    assert a["PublishedMessages"] == [5.0] and a["EndToEndLatency"] == [12.0, 30.0]
    assert a["service"] == "magnetar-broker"
    [directive] = a["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Magnetar"
    assert directive["Dimensions"] == [["namespace", "service"], ["service"]]
    assert {"Name": "EndToEndLatency", "Unit": "Milliseconds"} in directive["Metrics"]
    assert by_key[("public/b", None)]["PublishedMessages"] == [1.0]
    assert by_key[(None, "dynamodb")]["AwsThrottles"] == [1.0]
    assert by_key[(None, None)]["ColdStart"] == [1.0]  # the first invocation of this environment
    handler({}, _Context())
    again = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert all("ColdStart" not in d for d in again)


def test_throttling_answers_are_counted_once_for_both_sinks_and_left_to_botocore() -> None:
    counter = RequestCounter()
    invocation = aws_telemetry.Invocation()
    token = aws_telemetry._CURRENT.set(invocation)
    try:
        throttled = (None, {"Error": {"Code": "ProvisionedThroughputExceededException"}})
        assert counter.attempted("needs-retry.kinesis.PutRecord", response=throttled) is None
        counter.attempted("needs-retry.kinesis.PutRecord", response=(None, {"Error": {"Code": "ValidationException"}}))
        counter.throttled("dynamodb", "BatchWriteItem")  # a batch's unprocessed items

        class Request:
            context = {"retries": {"attempt": 2}}

        aws_telemetry.on_request_created(Request(), "request-created.s3.GetObject")
    finally:
        aws_telemetry._CURRENT.reset(token)
    assert invocation.sets[(None, "kinesis")]["AwsThrottles"].values == [1]
    assert invocation.sets[(None, "dynamodb")]["AwsThrottles"].values == [1]
    assert counter.by_operation()["throttles"] == {("kinesis", "PutRecord"): 1, ("dynamodb", "BatchWriteItem"): 1}
    assert invocation.sets[(None, "s3")]["AwsRetries"].values == [1]
    assert invocation.sets[(None, None)]["S3GetRequests"].values == [1]
