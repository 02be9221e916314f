"""Positions: initial position, consumer seek (message id, time), readers (Pulsar's documented behaviours)."""

from __future__ import annotations

import time

import pytest

import magnetar
from http_helpers import HTTP
from magnetar.client import exceptions
from sdk_helpers import receive_until_quiet

Earliest = magnetar.InitialPosition.Earliest
Latest = magnetar.InitialPosition.Latest




def read_until_quiet(reader: magnetar.Reader, timeout_ms: int = 1000) -> list[bytes]:
    out = []
    while True:
        try:
            out.append(reader.read_next(timeout_millis=timeout_ms).data())
        except exceptions.Timeout:
            return out


def send(client: magnetar.Client, topic: str, payloads: list[str]) -> list[magnetar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=False)
    return [producer.send(p.encode()) for p in payloads]


def subscriptions(cluster, topic: str) -> list[str]:  # type: ignore[no-untyped-def]
    response = HTTP.get(f"{cluster.url}/admin/v2/{topic.replace('://', '/')}/subscriptions")
    assert response.status_code == 200, response.text
    names: list[str] = response.json()
    return names


# --- initial position ---------------------------------------------------------------------------
def test_initial_position_earliest_delivers_messages_published_before_subscribing(
    client: magnetar.Client, topic: str
) -> None:
    send(client, topic, ["before-0", "before-1"])
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    send(client, topic, ["after"])
    assert [m.data() for m in receive_until_quiet(consumer)] == [b"before-0", b"before-1", b"after"]


def test_initial_position_latest_skips_messages_published_before_subscribing(
    client: magnetar.Client, topic: str
) -> None:
    send(client, topic, ["before-0", "before-1"])
    consumer = client.subscribe(topic, "sub", initial_position=Latest)
    send(client, topic, ["after"])
    assert [m.data() for m in receive_until_quiet(consumer)] == [b"after"]


def test_initial_position_applies_only_when_the_subscription_is_created(
    client: magnetar.Client, topic: str
) -> None:
    client.subscribe(topic, "sub", initial_position=Latest).close()
    send(client, topic, ["kept-by-the-cursor"])
    # an existing subscription keeps its cursor, whatever the new consumer asks for
    consumer = client.subscribe(topic, "sub", initial_position=Latest)
    assert [m.data() for m in receive_until_quiet(consumer)] == [b"kept-by-the-cursor"]


# --- consumer seek ------------------------------------------------------------------------------
def test_seek_to_message_id_redelivers_what_came_after_it(client: magnetar.Client, topic: str) -> None:
    """pulsar-client's seek to a message id goes on after it (its C++ client skips the message)."""
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    ids = send(client, topic, [f"m{i}" for i in range(5)])
    assert len(receive_until_quiet(consumer)) == 5  # all acknowledged
    consumer.seek(ids[2])
    assert [m.data() for m in receive_until_quiet(consumer)] == [b"m3", b"m4"]


def test_seek_to_message_id_lands_on_it_with_start_message_id_inclusive(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", initial_position=Earliest, start_message_id_inclusive=True)
    ids = send(client, topic, [f"m{i}" for i in range(5)])
    assert len(receive_until_quiet(consumer)) == 5
    consumer.seek(ids[2])
    assert [m.data() for m in receive_until_quiet(consumer)] == [b"m2", b"m3", b"m4"]


def test_seek_to_earliest_redelivers_everything(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    send(client, topic, [f"m{i}" for i in range(3)])
    assert len(receive_until_quiet(consumer)) == 3
    consumer.seek(magnetar.MessageId.earliest)
    assert [m.data() for m in receive_until_quiet(consumer)] == [b"m0", b"m1", b"m2"]


def test_seek_to_timestamp_redelivers_messages_published_from_then(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    send(client, topic, ["m0", "m1"])
    time.sleep(0.05)  # a distinct publish time for what follows
    send(client, topic, ["m2", "m3"])
    received = receive_until_quiet(consumer)
    assert [m.data() for m in received] == [b"m0", b"m1", b"m2", b"m3"]
    at = received[2].publish_timestamp()
    assert at > received[1].publish_timestamp()
    consumer.seek(at)
    assert [m.data() for m in receive_until_quiet(consumer)] == [b"m2", b"m3"]


# --- readers ------------------------------------------------------------------------------------
def test_reader_from_earliest_reads_every_message(client: magnetar.Client, topic: str) -> None:
    send(client, topic, [f"m{i}" for i in range(3)])
    reader = client.create_reader(topic, magnetar.MessageId.earliest)
    assert read_until_quiet(reader) == [b"m0", b"m1", b"m2"]


def test_reader_from_latest_reads_only_messages_published_afterwards(client: magnetar.Client, topic: str) -> None:
    send(client, topic, ["old-0", "old-1"])
    reader = client.create_reader(topic, magnetar.MessageId.latest)
    assert reader.has_message_available() is False
    send(client, topic, ["new"])
    assert reader.read_next(timeout_millis=5000).data() == b"new"
    with pytest.raises(exceptions.Timeout):
        reader.read_next(timeout_millis=1000)


def test_reader_from_a_message_id_starts_after_that_message(client: magnetar.Client, topic: str) -> None:
    ids = send(client, topic, [f"m{i}" for i in range(5)])
    reader = client.create_reader(topic, ids[2])
    assert read_until_quiet(reader) == [b"m3", b"m4"]


def test_reader_from_a_message_id_inclusive_starts_at_that_message(client: magnetar.Client, topic: str) -> None:
    ids = send(client, topic, [f"m{i}" for i in range(5)])
    reader = client.create_reader(topic, ids[2], start_message_id_inclusive=True)
    assert read_until_quiet(reader) == [b"m2", b"m3", b"m4"]


def test_reader_from_a_message_id_inside_a_batch_starts_after_that_message(
    client: magnetar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_max_messages=4, batching_max_publish_delay_ms=10_000)
    ids: list[magnetar.MessageId] = []
    for i in range(4):
        producer.send_async(f"m{i}".encode(), lambda result, mid: ids.append(mid))
    producer.flush()
    ids.sort()
    assert len({m.entry_id() for m in ids}) == 1, "precondition: one batch entry"
    reader = client.create_reader(topic, ids[1])
    assert read_until_quiet(reader) == [b"m2", b"m3"]


def test_reader_has_message_available_until_it_reaches_the_end(client: magnetar.Client, topic: str) -> None:
    send(client, topic, ["m0", "m1"])
    reader = client.create_reader(topic, magnetar.MessageId.earliest)
    assert reader.has_message_available() is True
    reader.read_next(timeout_millis=5000)
    assert reader.has_message_available() is True
    reader.read_next(timeout_millis=5000)
    assert reader.has_message_available() is False
    send(client, topic, ["m2"])
    assert reader.has_message_available() is True


def test_reader_seek_to_message_id_reads_what_came_after_it(client: magnetar.Client, topic: str) -> None:
    ids = send(client, topic, [f"m{i}" for i in range(4)])
    reader = client.create_reader(topic, magnetar.MessageId.earliest)
    assert len(read_until_quiet(reader)) == 4
    reader.seek(ids[1])
    assert read_until_quiet(reader) == [b"m2", b"m3"]
    inclusive = client.create_reader(topic, magnetar.MessageId.earliest, start_message_id_inclusive=True)
    assert len(read_until_quiet(inclusive)) == 4
    inclusive.seek(ids[1])
    assert read_until_quiet(inclusive) == [b"m1", b"m2", b"m3"]


def test_reader_seek_to_timestamp_reads_messages_published_from_then(client: magnetar.Client, topic: str) -> None:
    send(client, topic, ["m0", "m1"])
    time.sleep(0.05)
    send(client, topic, ["m2", "m3"])
    reader = client.create_reader(topic, magnetar.MessageId.earliest)
    messages = [reader.read_next(timeout_millis=5000) for _ in range(4)]
    assert messages[2].publish_timestamp() > messages[1].publish_timestamp()
    reader.seek(messages[2].publish_timestamp())
    assert read_until_quiet(reader) == [b"m2", b"m3"]


def test_reader_is_non_durable_and_leaves_no_subscription_behind(
    client: magnetar.Client, topic: str, cluster
) -> None:  # type: ignore[no-untyped-def]
    send(client, topic, ["m0", "m1"])
    reader = client.create_reader(topic, magnetar.MessageId.earliest)
    assert read_until_quiet(reader) == [b"m0", b"m1"]
    reader.seek(magnetar.MessageId.earliest)
    reader.has_message_available()
    reader.close()
    assert subscriptions(cluster, topic) == []
    # a second reader starts where it is told, not where the first one stopped
    again = client.create_reader(topic, magnetar.MessageId.earliest)
    assert again.read_next(timeout_millis=5000).data() == b"m0"
    # whereas a consumer's durable subscription is listed
    client.subscribe(topic, "durable")
    assert subscriptions(cluster, topic) == ["durable"]
