"""Non-persistent topics end to end: never journaled or stored, fanned out at once to the
WebSocket consumers attached at publish time; `-1:-1` for a message delivered nowhere."""

from __future__ import annotations

import base64
import json
import struct

from http_helpers import HTTP
from ws_helpers import b64, new_topic, open_ws, quiet, receive, send, text_of, topic_path

DROPPED = base64.b64encode(struct.pack(">qqqq", -1, -1, -1, -1)).decode()


def rest_produce(cluster, topic: str, *payloads: str) -> list[str]:  # type: ignore[no-untyped-def]
    response = HTTP.post(f"{cluster.url}/topics/{topic_path(topic)}",
                          json={"messages": [{"payload": b64(p)} for p in payloads]}, timeout=30)
    assert response.status_code == 200, response.text
    return [r["messageId"] for r in response.json()["messagePublishResults"]]


def test_a_message_reaches_the_attached_consumer(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("non-persistent")
    with open_ws(cluster, f"/ws/v2/consumer/{topic_path(topic)}/live") as consumer:
        (mid,) = rest_produce(cluster, topic, "over http")
        assert mid != "-1:-1:-1:-1"
        assert [text_of(m) for m in receive(consumer, 1, timeout_s=5)] == ["over http"]
        with open_ws(cluster, f"/ws/v2/producer/{topic_path(topic)}") as producer:
            receipt = send(producer, "over ws", context="1")
            assert receipt["result"] == "ok" and receipt["messageId"] != DROPPED
        (m,) = receive(consumer, 1, timeout_s=5)
        assert text_of(m) == "over ws" and m["messageId"] == receipt["messageId"]


def test_without_a_consumer_the_producer_gets_minus_one(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("non-persistent")
    assert rest_produce(cluster, topic, "nobody", "listens") == ["-1:-1:-1:-1"] * 2
    with open_ws(cluster, f"/ws/v2/producer/{topic_path(topic)}") as producer:
        assert send(producer, "lost")["messageId"] == DROPPED
    with open_ws(cluster, f"/ws/v2/consumer/{topic_path(topic)}/late") as consumer:
        assert quiet(consumer, 1.0) == []  # nothing was kept for a later consumer


def test_a_consumer_without_permits_drops_the_message(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("non-persistent")
    with open_ws(cluster, f"/ws/v2/consumer/{topic_path(topic)}/pull?pullMode=true") as consumer:
        assert rest_produce(cluster, topic, "dropped") == ["-1:-1:-1:-1"]
        assert quiet(consumer, 1.0) == []
        consumer.send(json.dumps({"type": "permit", "permitMessages": 1}))
        quiet(consumer, 0.3)  # the permit frame is handled
        (kept, dropped) = rest_produce(cluster, topic, "kept", "over the permits")
        assert kept != "-1:-1:-1:-1" and dropped == "-1:-1:-1:-1"
        assert [text_of(m) for m in receive(consumer, 1, timeout_s=5)] == ["kept"]
        assert quiet(consumer, 1.0) == []


def test_each_subscription_gets_its_copy(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("non-persistent")
    base = f"/ws/v2/consumer/{topic_path(topic)}"
    with open_ws(cluster, f"{base}/one") as one, open_ws(cluster, f"{base}/two?subscriptionType=Shared") as a, \
            open_ws(cluster, f"{base}/two?subscriptionType=Shared") as b:
        rest_produce(cluster, topic, *[str(i) for i in range(10)])
        assert [text_of(m) for m in receive(one, 10, timeout_s=5)] == [str(i) for i in range(10)]
        shared = quiet(a, 0.5) + quiet(b, 0.5)
        assert sorted(text_of(m) for m in shared) == sorted(str(i) for i in range(10))


def test_http_long_poll_is_refused_on_non_persistent_topics(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("non-persistent")
    base = f"{cluster.url}/magnetar/v1/consumer/{topic_path(topic)}/sub/c1"
    for response in (HTTP.put(base, json={}), HTTP.post(f"{base}/receive", json={})):
        assert response.status_code == 405
        assert "WebSocket" in response.json()["reason"]
