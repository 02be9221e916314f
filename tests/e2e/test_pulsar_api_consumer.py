"""pulsar-client 3.x consumer names with behaviour, through the SDK against the session cluster:
cumulative acknowledgement refused on Shared subscriptions with pulsar-client's exception,
`get_last_message_id`, pausing and resuming the message listener, `seek(messageid)`."""

from __future__ import annotations

import threading
import time

import pytest
from tests.sdk_helpers import receive_until_quiet

import magnetar
import magnetar.client.partitioned

Earliest = magnetar.InitialPosition.Earliest


@pytest.mark.parametrize("kind", [magnetar.ConsumerType.Shared, magnetar.ConsumerType.KeyShared])
def test_cumulative_ack_on_shared_raises_pulsar_clients_error(client: magnetar.Client, topic: str,
                                                              kind: magnetar.ConsumerType) -> None:
    consumer = client.subscribe(topic, "s", consumer_type=kind, initial_position=Earliest)
    client.create_producer(topic).send(b"m", partition_key="k")
    message = consumer.receive(timeout_millis=5000)
    with pytest.raises(magnetar.CumulativeAcknowledgementNotAllowedError):
        consumer.acknowledge_cumulative(message)


def test_get_last_message_id_is_the_last_published(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "s")
    assert isinstance(consumer, magnetar.Consumer)
    producer = client.create_producer(topic, batching_enabled=False)
    last = [producer.send(f"m{i}".encode()) for i in range(3)][-1]
    got = consumer.get_last_message_id()
    assert (got.ledger_id(), got.entry_id()) == (last.ledger_id(), last.entry_id())


def test_a_paused_listener_gets_nothing_until_resumed(client: magnetar.Client, topic: str) -> None:
    got: list[bytes] = []
    arrived = threading.Event()

    def listener(consumer: object, message: magnetar.Message) -> None:
        got.append(message.data())
        arrived.set()

    consumer = client.subscribe(topic, "s", message_listener=listener, initial_position=Earliest)
    assert isinstance(consumer, magnetar.Consumer)
    consumer.pause_message_listener()
    client.create_producer(topic).send(b"held")
    time.sleep(1.5)
    assert got == []
    consumer.resume_message_listener()
    assert arrived.wait(10) and got == [b"held"]


def test_seek_takes_pulsar_clients_keyword(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "s", initial_position=Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    first = producer.send(b"a")
    producer.send(b"b")
    assert consumer.receive(timeout_millis=5000).data() == b"a"
    consumer.seek(messageid=first)  # as pulsar-client: what came after it
    assert consumer.receive(timeout_millis=5000).data() == b"b"
    with pytest.raises(ValueError, match="seek"):
        consumer.seek(messageid="nowhere")  # type: ignore[arg-type]


def test_multi_topic_consumer_refuses_get_last_message_id_as_pulsar_client(
        client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe([topic, topic + "-2"], "s")
    assert isinstance(consumer, magnetar.client.partitioned.MultiTopicsConsumer)
    with pytest.raises(magnetar.OperationNotSupported):
        consumer.get_last_message_id()
    consumer.pause_message_listener()  # accepted: no listener here
    consumer.resume_message_listener()


def test_start_message_id_inclusive_starts_a_latest_subscription_at_the_last_message(
        client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"old")
    producer.send(b"last")
    inclusive = client.subscribe(topic, "incl", start_message_id_inclusive=True)
    exclusive = client.subscribe(topic, "excl")
    producer.send(b"new")
    assert [m.data() for m in receive_until_quiet(inclusive)] == [b"last", b"new"]
    assert [m.data() for m in receive_until_quiet(exclusive)] == [b"new"]


def test_a_closed_client_leaves_none_of_its_threads(cluster, admin, topic: str) -> None:  # type: ignore[no-untyped-def]
    """pulsar-client's close returns with its threads ended (its suite counts them: test_logger_thread_leaks):
    so does the SDK's, for every kind of producer, consumer and reader, listeners included."""
    partitioned = f"{topic}-p"
    admin.create_partitioned_topic(partitioned, 2)
    before = set(threading.enumerate())
    client = magnetar.Client(cluster.url)
    client.create_producer(topic, access_mode=magnetar.ProducerAccessMode.Exclusive).send(b"m", partition_key="k")
    client.create_producer(partitioned).send(b"m")

    def ignore(*_: object) -> None:
        pass

    client.subscribe(topic, "single", message_listener=ignore)
    client.subscribe(partitioned, "partitioned", message_listener=ignore)  # one shared poll, its acks
    client.subscribe([topic, partitioned], "several")  # a pump per plain topic
    client.subscribe(topic, "push", delivery="push", message_listener=ignore)  # WebSocket reader, ack flusher
    client.subscribe(topic, "gone", initial_position=Earliest).unsubscribe()
    client.create_reader(topic, magnetar.MessageId.earliest, reader_listener=ignore)
    client.create_reader(partitioned, magnetar.MessageId.earliest, reader_listener=ignore)
    client.create_table_view(topic)
    time.sleep(1.0)  # every loop under way: polls in flight, listeners waiting
    assert len(set(threading.enumerate()) - before) > 10
    client.close()
    # (the session cluster serves in this process: its HTTP server's AnyIO workers are not the SDK's)
    left = [t.name for t in set(threading.enumerate()) - before if t.is_alive() and not t.name.startswith("AnyIO")]
    assert left == []


def test_a_message_that_comes_after_the_timeout_is_the_next_receives(client: magnetar.Client, topic: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """pulsar-client's receive(timeout) raises Timeout when nothing arrived in time, even if a
    message arrives just after (its suite's test_deliver_after counts on it): a poll answered after
    the deadline leaves its messages queued for the next receive."""
    from magnetar.core import delaypoints

    consumer = client.subscribe(topic, "late", initial_position=Earliest)
    client.create_producer(topic).send(b"late")
    monkeypatch.setattr(delaypoints, "duration_ms", 1500)
    delaypoints.enable("dispatch.before_claim", times=1)  # the poll's claim stalls past the receive's timeout
    try:
        started = time.monotonic()
        with pytest.raises(magnetar.Timeout):
            consumer.receive(timeout_millis=500)
        assert time.monotonic() - started >= 1.4, "the poll was answered late"
        assert delaypoints.fired["dispatch.before_claim"] == 1
    finally:
        delaypoints.disable_all()
    assert consumer.receive(timeout_millis=0).data() == b"late"  # already here: no wait at all
