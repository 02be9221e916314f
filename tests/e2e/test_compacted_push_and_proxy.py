"""`is_read_compacted` and `start_message_id_inclusive` on the doors other than long polling: the
SDK's pushed (WebSocket) consumers, the WebSocket API's own reader and consumer parameters, and the
official pulsar-client through the binary protocol proxy (consumers, readers, TableView)."""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

import magnetar
from http_helpers import HTTP
from magnetar.adapters.aws.dynamodb import DynamoMetadataStore
from magnetar.core.naming import TopicName
from ws_helpers import open_ws, receive, refusal, text_of

HISTORY: list[tuple[str | None, bytes | None]] = [
    ("a", b"a1"), ("b", b"b1"), (None, b"no key"), ("a", b"a2"), ("c", b"c1"), ("b", None), ("d", b"d1")]
COMPACTED = [("a", b"a2"), ("c", b"c1"), ("d", b"d1"), ("c", b"c2")]  # the view, then the tail


def wait_sealed(cluster: Any, topic: str) -> None:
    """Until everything published to the topic is sealed (compaction reads sealed entries)."""
    metadata = DynamoMetadataStore(cluster.names.table)
    name = TopicName.parse(topic)
    deadline = time.monotonic() + 20
    while (state := metadata.get_topic_state(name))[0].next_entry < state[1].next_entry:
        assert time.monotonic() < deadline, "the journal consumer did not seal in time"
        time.sleep(0.1)


def compacted_topic(cluster: Any, client: magnetar.Client, topic: str, batched: bool) -> None:
    """HISTORY, compacted, then ("c", "c2") in the tail."""
    producer = client.create_producer(topic, batching_enabled=batched, batching_max_publish_delay_ms=50)
    for key, value in HISTORY:
        producer.send_async(value, None, partition_key=key)
    producer.flush()
    producer.close()
    wait_sealed(cluster, topic)
    path = "/admin/v2/" + topic.replace("://", "/", 1) + "/compaction"
    assert HTTP.put(cluster.url + path, timeout=60).status_code == 204
    assert HTTP.get(cluster.url + path).json()["status"] == "SUCCESS"
    tail = client.create_producer(topic, batching_enabled=False)
    tail.send(b"c2", partition_key="c")
    tail.close()


def publish(client: magnetar.Client, topic: str, count: int) -> list[magnetar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(count)]
    producer.close()
    return ids


# --- the SDK's pushed consumers --------------------------------------------------------------
@pytest.mark.parametrize("batched", [False, True])
def test_a_pushed_consumer_reads_compacted(cluster: Any, client: magnetar.Client, topic: str, batched: bool) -> None:
    compacted_topic(cluster, client, topic, batched)
    consumer = client.subscribe(topic, "pushed", initial_position=magnetar.InitialPosition.Earliest,
                                is_read_compacted=True, delivery="push")
    got = []
    for _ in range(len(COMPACTED)):
        message = consumer.receive(10_000)
        got.append((message.partition_key(), message.data()))
        consumer.acknowledge(message)
    assert got == COMPACTED
    with pytest.raises(magnetar.Timeout):
        consumer.receive(1_500)
    consumer.close()
    plain = client.subscribe(topic, "plain", initial_position=magnetar.InitialPosition.Earliest, delivery="push")
    assert len([plain.receive(10_000) for _ in range(len(HISTORY) + 1)]) == len(HISTORY) + 1
    plain.close()


def test_a_pushed_consumer_starts_inclusive(cluster: Any, client: magnetar.Client, topic: str) -> None:
    publish(client, topic, 3)
    wait_sealed(cluster, topic)
    inclusive = client.subscribe(topic, "inclusive", delivery="push", start_message_id_inclusive=True)
    exclusive = client.subscribe(topic, "exclusive", delivery="push")
    assert inclusive.receive(10_000).data() == b"m2"  # the last message, as it was at subscribe
    with pytest.raises(magnetar.Timeout):
        exclusive.receive(1_500)
    inclusive.close()
    exclusive.close()


def test_websocket_reader_and_consumer_take_start_message_id_inclusive(cluster: Any, client: magnetar.Client,
                                                                       topic: str) -> None:
    ids = publish(client, topic, 3)
    wait_sealed(cluster, topic)
    path = topic.replace("://", "/", 1)
    mid = quote(base64.b64encode(ids[1].serialize()).decode(), safe="")  # Pulsar's id: base64 of its protobuf
    with open_ws(cluster, f"/ws/v2/reader/{path}?messageId={mid}&startMessageIdInclusive=true") as ws:
        assert [text_of(m) for m in receive(ws, 2)] == ["m1", "m2"]
    with open_ws(cluster, f"/ws/v2/reader/{path}?messageId={mid}") as ws:
        assert [text_of(m) for m in receive(ws, 1)] == ["m2"]  # Pulsar's reader start: after the id
    with open_ws(cluster, f"/ws/v2/reader/{path}?messageId=latest&startMessageIdInclusive=true") as ws:
        assert [text_of(m) for m in receive(ws, 1)] == ["m2"]
    with open_ws(cluster, f"/ws/v2/consumer/{path}/raw?startMessageIdInclusive=true") as ws:
        assert [text_of(m) for m in receive(ws, 1)] == ["m2"]
    status, body = refusal(cluster, f"/ws/v2/consumer/{path}/bad?startMessageIdInclusive=maybe")
    assert status == 400 and "startMessageIdInclusive" in body["reason"]


# --- the official client through the binary protocol proxy ---------------------------------------
pulsar = pytest.importorskip("pulsar")


@pytest.fixture(scope="module")
def official(cluster: Any) -> Iterator[Any]:
    from magnetar.protocol import ProxySettings, ProxyThread

    proxy = ProxyThread(ProxySettings(port=0)).start()
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    c = pulsar.Client(proxy.service_url, operation_timeout_seconds=15, logger=logger)
    yield c
    c.close()
    proxy.stop()


def _drain(consumer: Any, count: int, ack: bool = True) -> list[tuple[str, bytes]]:
    out = []
    for _ in range(count):
        message = consumer.receive(timeout_millis=10_000)
        if ack:
            consumer.acknowledge(message)
        out.append((message.partition_key(), message.data()))
    return out


@pytest.mark.parametrize("batched", [False, True])
def test_official_consumer_reader_and_table_view_read_compacted(cluster: Any, client: magnetar.Client,
                                                                 official: Any, topic: str, batched: bool) -> None:
    compacted_topic(cluster, client, topic, batched)
    consumer = official.subscribe(topic, "compacted", initial_position=pulsar.InitialPosition.Earliest,
                                  is_read_compacted=True)
    assert _drain(consumer, len(COMPACTED)) == COMPACTED
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=1_500)
    consumer.close()
    reader = official.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert [(m.partition_key(), m.data()) for m in (reader.read_next(10_000) for _ in COMPACTED)] == COMPACTED
    assert not reader.has_message_available()
    reader.close()
    view = official.create_table_view(topic)
    deadline = time.monotonic() + 10
    while view.get("c") != b"c2" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert {k: view.get(k) for k in ("a", "b", "c", "d")} == {"a": b"a2", "b": None, "c": b"c2", "d": b"d1"}
    view.close()


def test_official_start_message_id_inclusive(cluster: Any, client: magnetar.Client, official: Any,
                                             topic: str) -> None:
    publish(client, topic, 3)
    wait_sealed(cluster, topic)
    first = official.create_reader(topic, pulsar.MessageId.earliest)
    ids = [first.read_next(10_000).message_id() for _ in range(3)]
    first.close()
    inclusive = official.create_reader(topic, ids[1], start_message_id_inclusive=True)
    assert inclusive.read_next(10_000).data() == b"m1"
    inclusive.close()
    exclusive = official.create_reader(topic, ids[1])
    assert exclusive.read_next(10_000).data() == b"m2"
    exclusive.close()
    # MessageId.latest, inclusive: the C++ client asks the last message id and seeks to it
    latest = official.create_reader(topic, pulsar.MessageId.latest, start_message_id_inclusive=True)
    assert latest.has_message_available()
    assert latest.read_next(10_000).data() == b"m2"
    latest.close()
