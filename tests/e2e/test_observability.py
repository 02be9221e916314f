"""Operating Magnetar: the functions' EMF metrics in their logs, a message's trace context end to end.

The local runtime writes each function's stdout to its own log file, as Lambda sends it to the
function's log group; the metrics are EMF lines there (magnetar.adapters.aws.telemetry). Each test
works in a namespace of its own, so the counts it reads are its own traffic's.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import magnetar
from http_helpers import HTTP
from magnetar.core import metrics as m


class LogReader:
    """The EMF documents a function wrote to its log since the reader was made."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.start = path.stat().st_size if path.exists() else 0

    def documents(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as f:
            f.seek(self.start)
            text = f.read().decode("utf-8", errors="replace")
        docs = []
        for line in text.splitlines():
            if line.startswith("{") and '"_aws"' in line:
                docs.append(json.loads(line))
        return docs

    def total(self, metric: str, namespace: str | None = None) -> float:
        found = 0.0
        for doc in self.documents():
            if metric not in doc or (namespace is not None and doc.get(m.NAMESPACE_DIMENSION) != namespace):
                continue
            value = doc[metric]
            found += sum(value) if isinstance(value, list) else value
        return found

    def values(self, metric: str, namespace: str) -> list[float]:
        out: list[float] = []
        for doc in self.documents():
            if metric in doc and doc.get(m.NAMESPACE_DIMENSION) == namespace:
                value = doc[metric]
                out += value if isinstance(value, list) else [value]
        return out


@pytest.fixture
def logs(cluster: Any) -> Callable[[str], LogReader]:
    def reader(function: str) -> LogReader:
        assert cluster.function_logs is not None
        return LogReader(cluster.function_logs.path(function))

    return reader


@pytest.fixture
def namespace(admin: Any) -> Iterator[str]:
    name = f"public/obs-{uuid.uuid4().hex[:8]}"
    admin.create_namespace(name)
    yield name


def _eventually(check: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("not within the time")
        time.sleep(0.2)


def test_functions_write_emf_metrics_to_their_logs(cluster: Any, client: magnetar.Client, namespace: str,
                                                   logs: Callable[[str], LogReader]) -> None:
    broker, sealer = logs("magnetar-broker"), logs("magnetar-journal-consumer")
    topic = f"persistent://{namespace}/orders"
    consumer = client.subscribe(topic, "sub", initial_position=magnetar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"m{i}".encode())
    received = []
    while len(received) < 5:
        msg = consumer.receive(timeout_millis=10_000)
        received.append(msg)
        consumer.acknowledge(msg)
    assert broker.total(m.PUBLISHED_MESSAGES, namespace) == 5
    assert broker.total(m.PUBLISHED_BYTES, namespace) > 0
    assert broker.total(m.DISPATCHED_MESSAGES, namespace) == 5
    latencies = broker.values(m.END_TO_END_LATENCY, namespace)
    assert len(latencies) == 5 and all(0 <= v < 60_000 for v in latencies)
    # every line is EMF CloudWatch reads: the namespace, the dimension sets, the metric's unit
    doc = next(d for d in broker.documents() if m.PUBLISHED_MESSAGES in d and d.get("namespace") == namespace)
    [directive] = doc["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == m.CLOUDWATCH_NAMESPACE
    assert directive["Dimensions"] == [["namespace", "service"], ["service"]]
    assert {"Name": m.PUBLISHED_BYTES, "Unit": "Bytes"} in directive["Metrics"]
    assert doc["service"] == "magnetar-broker"  # the function, as its POWERTOOLS_SERVICE_NAME on AWS
    _eventually(lambda: sealer.total(m.SEALED_ENTRIES) >= 5)


def test_maintenance_emits_backlogs_per_namespace(cluster: Any, client: magnetar.Client, admin: Any, namespace: str,
                                                  logs: Callable[[str], LogReader]) -> None:
    topic = f"persistent://{namespace}/slow"
    admin.set_backlog_quota(namespace, limit_size=10_000, policy="producer_request_hold")
    client.subscribe(topic, "lagging", initial_position=magnetar.InitialPosition.Earliest).close()
    producer = client.create_producer(topic, batching_enabled=False)
    for _ in range(4):
        producer.send(b"x" * 1000)
    maintenance = logs("magnetar-maintenance")

    def run_has_backlog() -> bool:
        response = HTTP.post(f"{cluster.url}/_magnetar/local/schedules/maintenance",
                              json={"topics": [topic]}, timeout=120)
        assert response.status_code == 200, response.text
        return maintenance.values(m.BACKLOG_ENTRIES, namespace)[-1:] == [4]

    _eventually(run_has_backlog, 30)
    ratios = maintenance.values(m.BACKLOG_QUOTA_RATIO, namespace)
    assert ratios and 0.3 < ratios[-1] < 1.0  # ~4 KB of a 10 KB quota


# --- a message's trace context ------------------------------------------------------------------
XRAY_HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
PRODUCER_TRACEPARENT = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
BROKER_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class _TracedInvocation:
    """A tracer whose invocation is always traced (as a sampled Lambda invocation's X-Ray segment)."""

    active = True

    def span(self, name: str) -> Any:
        from magnetar.core.ports.telemetry import NoTracer

        return NoTracer().span(name)

    def traceparent(self) -> str:
        return BROKER_TRACEPARENT


@pytest.fixture
def traced_broker(cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The local functions' broker traces its invocations (the runtime is this process)."""
    from magnetar.adapters.aws import build_broker
    from magnetar.core.ports.telemetry import Telemetry

    broker = build_broker()
    monkeypatch.setattr(broker, "telemetry", Telemetry(broker.telemetry.metrics, _TracedInvocation()))


def _receive_properties(client: magnetar.Client, topic: str, count: int) -> list[dict[str, str]]:
    consumer = client.subscribe(topic, "traced", initial_position=magnetar.InitialPosition.Earliest)
    out = []
    for _ in range(count):
        msg = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge(msg)
        out.append(msg.properties())
    consumer.close()
    return out


def test_the_sdk_producer_sends_the_active_trace_and_the_consumer_gets_it(
        client: magnetar.Client, topic: str, monkeypatch: pytest.MonkeyPatch) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    monkeypatch.setenv("_X_AMZN_TRACE_ID", XRAY_HEADER)  # as in a traced Lambda invocation
    producer.send(b"traced", properties={"k": "v"})
    producer.send(b"its own", properties={"traceparent": BROKER_TRACEPARENT})  # the message's own wins
    monkeypatch.delenv("_X_AMZN_TRACE_ID")
    producer.send(b"untraced")
    first, own, untraced = _receive_properties(client, topic, 3)
    assert first == {"k": "v", "traceparent": PRODUCER_TRACEPARENT}
    assert own == {"traceparent": BROKER_TRACEPARENT}
    assert untraced == {}


def test_the_rest_producer_keeps_a_trace_context_and_a_traced_broker_sets_one(
        cluster: Any, client: magnetar.Client, topic: str, traced_broker: None) -> None:
    path = f"{cluster.url}/topics/{topic.replace('://', '/', 1)}"
    given = HTTP.post(path, json={"messages": [{"payload": "YQ==", "properties": {"traceparent": PRODUCER_TRACEPARENT}}]},
                       timeout=30)
    assert given.status_code == 200, given.text
    plain = HTTP.post(path, json={"messages": [{"payload": "Yg=="}]}, timeout=30)
    assert plain.status_code == 200, plain.text
    own, set_by_broker = _receive_properties(client, topic, 2)
    assert own == {"traceparent": PRODUCER_TRACEPARENT}
    assert set_by_broker == {"traceparent": BROKER_TRACEPARENT}


def test_a_traced_websocket_producer_door_sets_the_trace_context(
        cluster: Any, client: magnetar.Client, topic: str, traced_broker: None) -> None:
    from ws_helpers import open_ws, send, topic_path

    with open_ws(cluster, f"/ws/v2/producer/{topic_path(topic)}") as ws:
        assert send(ws, "hello")["result"] == "ok"
    [properties] = _receive_properties(client, topic, 1)
    assert properties == {"traceparent": BROKER_TRACEPARENT}
