"""Pulsar's WebSocket API end to end, with a plain WebSocket client (never the SDK):
local API Gateway WebSocket emulation -> WebSocket function -> core; pushes from the journal
consumer, from frames, and after a connect, through the emulated management API."""

from __future__ import annotations

import base64
import json
import struct
import time

from journal_helpers import journal_shard, spend_shard_writes
from ws_helpers import (
    PUSH_WAIT_S,
    ack,
    new_topic,
    open_ws,
    quiet,
    receive,
    refusal,
    send,
    text_of,
    topic_path,
)

QUIET_S = 1.5  # the journal consumer runs every 0.2 s here: a push that was coming would have come


def consumer_path(topic: str, subscription: str = "sub", **params: object) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"/ws/v2/consumer/{topic_path(topic)}/{subscription}" + (f"?{query}" if query else "")


def producer_path(topic: str) -> str:
    return f"/ws/v2/producer/{topic_path(topic)}"


def entry_of(message_id: str) -> int:
    return int(struct.unpack(">qqqq", base64.b64decode(message_id))[1])


def test_produce_and_consume_over_websocket(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    with open_ws(cluster, consumer_path(topic)) as consumer, open_ws(cluster, producer_path(topic)) as producer:
        receipts = [send(producer, f"m{i}", context=f"c{i}", properties={"i": str(i)}, key=f"k{i}") for i in range(5)]
        assert [r["result"] for r in receipts] == ["ok"] * 5
        assert [r["context"] for r in receipts] == [f"c{i}" for i in range(5)]
        messages = receive(consumer, 5)
        assert [text_of(m) for m in messages] == [f"m{i}" for i in range(5)]
        assert [m["messageId"] for m in messages] == [r["messageId"] for r in receipts]
        assert messages[2]["properties"] == {"i": "2"} and messages[2]["key"] == "k2"
        assert all(m["redeliveryCount"] == 0 and m["publishTime"] for m in messages)
        empty = send(producer, "", context="empty")  # an empty payload is a message, as in Pulsar
        assert empty["result"] == "ok" and empty["context"] == "empty"
        producer.send(json.dumps({"payload": "!!not-base64", "context": "bad"}))
        bad = json.loads(producer.recv(timeout=10))
        assert bad["result"] == "send-error:7" and bad["context"] == "bad" and bad["errorMsg"]
        producer.send("{not json")
        assert json.loads(producer.recv(timeout=10))["result"] == "send-error:3"


def test_acknowledged_messages_do_not_come_back(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    with open_ws(cluster, consumer_path(topic)) as consumer, open_ws(cluster, producer_path(topic)) as producer:
        for i in range(3):
            send(producer, f"a{i}")
        for m in receive(consumer, 3):
            ack(consumer, m)
    with open_ws(cluster, consumer_path(topic)) as again, open_ws(cluster, producer_path(topic)) as producer:
        assert quiet(again, QUIET_S) == []
        send(producer, "fresh")
        assert [text_of(m) for m in receive(again, 1)] == ["fresh"]


def test_unacknowledged_messages_come_back_after_close(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    with open_ws(cluster, consumer_path(topic)) as consumer, open_ws(cluster, producer_path(topic)) as producer:
        for i in range(3):
            send(producer, f"u{i}")
        first = receive(consumer, 3)
        ack(consumer, first[0])
    with open_ws(cluster, consumer_path(topic)) as again:  # the backlog is pushed after the connect
        redelivered = receive(again, 2)
        assert [text_of(m) for m in redelivered] == ["u1", "u2"]
        assert all(m["redeliveryCount"] == 1 for m in redelivered)


def test_shared_subscription_across_two_connections_gets_each_message_once(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    path = consumer_path(topic, "shared", subscriptionType="Shared")
    with open_ws(cluster, path) as a, open_ws(cluster, path) as b, open_ws(cluster, producer_path(topic)) as producer:
        for i in range(20):
            send(producer, str(i))
        got: list[str] = []
        deadline = time.monotonic() + PUSH_WAIT_S  # pushes follow the seal (the mapping's batching window)
        while len(got) < 20:
            batch = quiet(a, 0.5) + quiet(b, 0.5)
            assert batch or time.monotonic() < deadline, f"only {len(got)} of 20 arrived"
            got.extend(text_of(m) for m in batch)
        assert sorted(got, key=int) == [str(i) for i in range(20)]  # each exactly once
        assert quiet(a, 0.5) + quiet(b, 0.5) == []


def test_pull_mode_pushes_no_more_than_the_permits(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    with open_ws(cluster, consumer_path(topic, pullMode="true")) as consumer, \
            open_ws(cluster, producer_path(topic)) as producer:
        for i in range(5):
            send(producer, f"p{i}")
        assert quiet(consumer, QUIET_S) == []  # no permits yet
        consumer.send(json.dumps({"type": "permit", "permitMessages": 2}))
        first = receive(consumer, 2)
        for m in first:
            ack(consumer, m)  # acknowledgements give no permits back in pull mode
        assert quiet(consumer, QUIET_S) == []
        consumer.send(json.dumps({"type": "permit", "permitMessages": 3}))
        rest = receive(consumer, 3)
        assert [text_of(m) for m in first + rest] == [f"p{i}" for i in range(5)]


def test_receiver_queue_size_bounds_the_unacknowledged_messages(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    with open_ws(cluster, consumer_path(topic, receiverQueueSize=2)) as consumer, \
            open_ws(cluster, producer_path(topic)) as producer:
        for i in range(4):
            send(producer, f"q{i}")
        window = receive(consumer, 2)
        assert quiet(consumer, QUIET_S) == []
        ack(consumer, window[0])  # each acknowledgement gives one permit back
        assert [text_of(m) for m in receive(consumer, 1)] == ["q2"]


def test_negative_ack_is_redelivered(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    with open_ws(cluster, consumer_path(topic, negativeAckRedeliveryDelay=0)) as consumer, \
            open_ws(cluster, producer_path(topic)) as producer:
        send(producer, "again")
        (m,) = receive(consumer, 1)
        consumer.send(json.dumps({"type": "negativeAcknowledge", "messageId": m["messageId"]}))
        (redelivered,) = receive(consumer, 1)
        assert redelivered["messageId"] == m["messageId"] and redelivered["redeliveryCount"] == 1
        ack(consumer, redelivered)
        assert quiet(consumer, QUIET_S) == []


def test_reader_from_earliest_and_from_latest(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    with open_ws(cluster, producer_path(topic)) as producer:
        ids = [send(producer, f"r{i}")["messageId"] for i in range(3)]
        reader_base = f"/ws/v2/reader/{topic_path(topic)}"
        with open_ws(cluster, f"{reader_base}?messageId=earliest") as reader, open_ws(cluster, reader_base) as latest:
            messages = receive(reader, 3)
            assert [text_of(m) for m in messages] == ["r0", "r1", "r2"]
            assert [m["messageId"] for m in messages] == ids
            assert quiet(latest, QUIET_S) == []
            send(producer, "r3")
            assert [text_of(m) for m in receive(latest, 1)] == ["r3"]
            assert [text_of(m) for m in receive(reader, 1)] == ["r3"]
        with open_ws(cluster, f"{reader_base}?messageId={ids[0]}") as after:  # exclusive, as Pulsar's
            assert [text_of(m) for m in receive(after, 3)] == ["r1", "r2", "r3"]


def test_bad_paths_and_parameters_are_refused_with_a_reason(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    cases = [
        f"/ws/v2/consumer/{topic_path(topic)}",  # no subscription
        consumer_path(topic, subscriptionType="Bogus"),
        consumer_path(topic, receiverQueueSize="many"),
        f"/ws/v2/listener/{topic_path(topic)}",
        "/ws/v2/producer/bogus-domain/public/default/t",
        f"/ws/v2/reader/{topic_path(topic)}?messageId=nope",
    ]
    for path in cases:
        status, body = refusal(cluster, path)
        assert status == 400 and body["reason"], path
    status, body = refusal(cluster, "/ws/v2/consumer/persistent/public/no-such-ns/t/sub")
    assert status == 404 and "no-such-ns" in body["reason"]
    with open_ws(cluster, consumer_path(topic, "excl")) as consumer:
        status, body = refusal(cluster, consumer_path(topic, "excl"))
        assert status == 409 and "Exclusive" in body["reason"]
        consumer.send(json.dumps({"type": "isEndOfTopic"}))
        assert json.loads(consumer.recv(timeout=10)) == {"endOfTopic": False}


def test_maintenance_redispatch_pushes_due_redeliveries(cluster) -> None:  # type: ignore[no-untyped-def]
    import time

    from magnetar.adapters.aws.connections import build_push

    topic = new_topic()
    with open_ws(cluster, consumer_path(topic, negativeAckRedeliveryDelay=300)) as consumer, \
            open_ws(cluster, producer_path(topic)) as producer:
        send(producer, "later")
        (m,) = receive(consumer, 1)
        consumer.send(json.dumps({"type": "negativeAcknowledge", "messageId": m["messageId"]}))
        assert quiet(consumer, 0.5) == []  # not before its delay
        time.sleep(0.2)
        report = build_push().redispatch()  # what the maintenance run calls every minute
        assert report.pushed >= 1
        (again,) = receive(consumer, 1)
        assert again["messageId"] == m["messageId"] and again["redeliveryCount"] == 1


def test_connection_registry_on_dynamodb(cluster) -> None:  # type: ignore[no-untyped-def]
    from magnetar.adapters.aws.connections import DynamoConnectionRegistry
    from magnetar.config import ResourceNames
    from magnetar.core.ports.push import Connection

    registry = DynamoConnectionRegistry(ResourceNames.from_env().table)
    topic = new_topic()
    conn = Connection("reg-test=", "consumer", topic, 1_000, "ws-reg", "sub", "Shared", True, 10, 0)
    registry.add(conn)
    assert registry.get("reg-test=") == conn and registry.of_topic(topic) == [conn]
    assert topic in registry.topics()
    assert registry.add_permits(conn, 3) is not None and registry.take_permits(conn, 2, 2)
    assert not registry.take_permits(conn, 2, 2)  # one left
    with_acks = registry.add_acks(conn, ["5", "7:10:3"])
    assert with_acks is not None and with_acks.acks == {"5", "7:10:3"} and with_acks.permits == 1
    registry.clear_acks(conn, frozenset({"5"}))
    current = registry.current(conn)
    assert current is not None and current.acks == {"7:10:3"}
    reader = Connection("reg-reader=", "reader", topic, 1_000, "r", position=4)
    registry.add(reader)
    assert registry.advance_reader(reader, 6, -1, 2) and not registry.advance_reader(reader, 8, -1, 2)
    acked = registry.reader_acked(reader, 5)
    assert acked is not None and (acked.position, acked.inflight) == (6, 0)
    last = registry.remove(conn)
    assert last is not None and last.acks == {"7:10:3"} and registry.remove(conn) is None
    assert registry.get("reg-test=") is not None  # frames after $disconnect still find it
    registry.remove(reader)
    registry.forget_topic(topic, 999)  # a later connect happened: kept
    assert topic in registry.topics()
    registry.forget_topic(topic, registry.topics()[topic])
    assert topic not in registry.topics()


def test_a_producer_outrunning_its_shard_is_told_how_long_its_writes_waited(cluster) -> None:  # type: ignore[no-untyped-def]
    """A topic's journal is one shard (1 MiB/s). With its budget spent by another writer, 90 KB
    frames wait for it, and the receipts of the writes that waited say how long (`throttledMs`,
    as the HTTP publish response does); the others carry no such field."""
    topic = new_topic()
    shard = journal_shard(cluster, topic)
    payload = "x" * 90 * 1024  # under API Gateway's 128 KB frame once in base64
    with open_ws(cluster, producer_path(topic)) as producer:
        spend_shard_writes(cluster, shard, 2 * 1024 * 1024)  # a MiB in debt: refused for about a second
        receipts = [send(producer, payload, context=str(i)) for i in range(12)]
    assert [r["result"] for r in receipts] == ["ok"] * 12
    waits = [r.get("throttledMs", 0) for r in receipts]
    assert waits[0] > 0 and all(w >= 0 for w in waits), waits
    assert all("throttledMs" not in r or r["throttledMs"] > 0 for r in receipts)
