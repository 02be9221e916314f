"""Null values (tombstones), end to end: `send(None)` through the SDK, `"payload": null` through
the REST producer and the WebSocket producer; consumers tell them from empty bytes."""

from __future__ import annotations

import json
import logging
import uuid

import httpx
import pytest

import magnetar
from ws_helpers import b64, open_ws, receive, topic_path


def test_sdk_null_value_is_distinct_from_a_value(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    producer.send(b"v1", partition_key="k")
    producer.send(None, partition_key="k")
    done: list[object] = []
    producer.send_async(None, lambda result, mid: done.append(result), partition_key="j")
    producer.flush()
    got = [consumer.receive(timeout_millis=10_000) for _ in range(3)]
    assert [m.has_null_value() for m in got] == [False, True, True]
    assert got[0].data() == b"v1" and got[1].data() == b"" and got[1].value() == b""
    assert got[1].partition_key() == "k" and got[2].partition_key() == "j"
    assert done == [magnetar.Result.Ok]


def test_empty_bytes_are_a_message_not_a_null_value(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    producer.send(b"", partition_key="k")
    producer.send(None, partition_key="k")
    consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
    empty, null = (consumer.receive(timeout_millis=10_000) for _ in range(2))
    assert (empty.data(), empty.has_null_value()) == (b"", False)
    assert (null.data(), null.has_null_value()) == (b"", True)


def test_rest_null_value_and_rest_read_render_it(cluster, client: magnetar.Client, topic: str) -> None:  # type: ignore[no-untyped-def]
    path = topic_path(topic)
    with httpx.Client(base_url=cluster.url, timeout=30) as http:
        sent = http.post(f"/topics/{path}", json={"messages": [
            {"payload": b64("x"), "key": "a"}, {"payload": None, "key": "a"}, {"nullValue": True, "key": "b"}]})
        assert sent.status_code == 200, sent.text
        bad = http.post(f"/topics/{path}", json={"messages": [{"payload": b64("x"), "nullValue": True}]})
        assert bad.status_code == 400 and "reason" in bad.json()
        empty = http.post(f"/topics/{path}", json={"messages": [{"payload": ""}]})
        assert empty.status_code == 200, "an empty payload is a message (not a null value)"
        consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
        got = [consumer.receive(timeout_millis=10_000) for _ in range(4)]
        assert [m.has_null_value() for m in got] == [False, True, True, False]
        assert got[3].data() == b""
        messages = http.post(f"/magnetar/v1/reader/{path}/read", json={"startEntryId": 0}).json()["messages"]
        assert [m.get("nullValue", False) for m in messages] == [False, True, True, False]
        assert [m["payload"] for m in messages] == [b64("x"), "", "", ""]


def test_websocket_null_value_round_trip(cluster, client: magnetar.Client) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://public/default/ws-null-{uuid.uuid4().hex[:10]}"
    path = topic_path(topic)
    with open_ws(cluster, f"/ws/v2/consumer/{path}/s") as consumer, \
            open_ws(cluster, f"/ws/v2/producer/{path}") as producer:
        for frame in ({"payload": b64("v"), "key": "k"}, {"payload": None, "key": "k"}, {"nullValue": True}):
            producer.send(json.dumps(frame))
            assert json.loads(producer.recv(timeout=10))["result"] == "ok"
        pushed = receive(consumer, 3)
        assert [m.get("nullValue", False) for m in pushed] == [False, True, True]
        assert [m["payload"] for m in pushed] == [b64("v"), "", ""]
    sdk = client.subscribe(topic, "sdk", initial_position=magnetar.InitialPosition.Earliest, delivery="push")
    got = [sdk.receive(timeout_millis=10_000) for _ in range(3)]
    assert [m.has_null_value() for m in got] == [False, True, True]


def test_null_values_as_the_official_client_sees_them(cluster, client: magnetar.Client, topic: str) -> None:  # type: ignore[no-untyped-def]
    """pulsar-client 3.x (unmodified, through the binary protocol proxy) and the SDK agree: a null
    value has has_null_value() True and data()/value() b"", whichever of the two sent it."""
    pulsar = pytest.importorskip("pulsar")
    from magnetar.protocol import ProxySettings, ProxyThread

    proxy = ProxyThread(ProxySettings(port=0)).start()
    official = pulsar.Client(proxy.service_url, operation_timeout_seconds=15, logger=logging.getLogger("pulsar-quiet"))
    try:
        theirs = official.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
        ours = client.subscribe(topic, "sdk", initial_position=magnetar.InitialPosition.Earliest)
        official.create_producer(topic, batching_enabled=False).send(None, partition_key="from-official")
        client.create_producer(topic, batching_enabled=False).send(None, partition_key="from-sdk")
        for _ in range(2):
            m = theirs.receive(20_000)
            assert (m.has_null_value(), m.data(), m.value()) == (True, b"", b""), m.partition_key()
            n = ours.receive(20_000)
            assert (n.has_null_value(), n.data(), n.value()) == (True, b"", b""), n.partition_key()
    finally:
        official.close()
        proxy.stop()
