"""Acknowledgements: individual, cumulative, batch-index, negative, ack timeout, redelivery count,
dead-letter topic (Pulsar's documented behaviours)."""

from __future__ import annotations

import threading
import time

import pytest

import magnetar
import sdk_helpers
from magnetar.client import exceptions

Earliest = magnetar.InitialPosition.Earliest


def receive_until_quiet(consumer, timeout_ms: int = 1500, ack: bool = False) -> list[magnetar.Message]:  # type: ignore[no-untyped-def]
    return sdk_helpers.receive_until_quiet(consumer, timeout_ms, ack)


def send_unbatched(client: magnetar.Client, topic: str, n: int) -> list[magnetar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=False)
    return [producer.send(f"m{i}".encode()) for i in range(n)]


def send_one_batch(client: magnetar.Client, topic: str, n: int) -> list[magnetar.MessageId]:
    """`n` messages in one batch entry (count-triggered)."""
    producer = client.create_producer(topic, batching_max_messages=n, batching_max_publish_delay_ms=10_000)
    ids: list[magnetar.MessageId | None] = [None] * n
    done = threading.Semaphore(0)
    for i in range(n):
        def callback(result, message_id, i=i):  # type: ignore[no-untyped-def]
            assert result == magnetar.Result.Ok
            ids[i] = message_id
            done.release()
        producer.send_async(f"m{i}".encode(), callback)
    producer.flush()
    for _ in range(n):
        assert done.acquire(timeout=10)
    assert len({(m.ledger_id(), m.entry_id()) for m in ids if m}) == 1, "precondition: one batch entry"
    return [m for m in ids if m]


# --- individual and cumulative -------------------------------------------------------------------
def test_individual_ack_acknowledges_only_that_message(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    send_unbatched(client, topic, 4)
    msgs = [consumer.receive(timeout_millis=5000) for _ in range(4)]
    consumer.acknowledge(msgs[0])
    consumer.acknowledge(msgs[2].message_id())  # by id works too
    consumer.close()
    again = client.subscribe(topic, "sub", initial_position=Earliest)
    assert [m.data() for m in receive_until_quiet(again)] == [b"m1", b"m3"]


@pytest.mark.parametrize("consumer_type", [magnetar.ConsumerType.Exclusive, magnetar.ConsumerType.Failover],
                         ids=["Exclusive", "Failover"])
def test_cumulative_ack_acknowledges_every_message_up_to_the_given_one(
    client: magnetar.Client, topic: str, consumer_type: magnetar.ConsumerType
) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=consumer_type, initial_position=Earliest)
    send_unbatched(client, topic, 5)
    msgs = [consumer.receive(timeout_millis=5000) for _ in range(5)]
    consumer.acknowledge_cumulative(msgs[2])
    consumer.close()
    again = client.subscribe(topic, "sub", consumer_type=consumer_type, initial_position=Earliest)
    assert [m.data() for m in receive_until_quiet(again)] == [b"m3", b"m4"]


def test_cumulative_ack_inside_a_batch_acknowledges_the_batch_up_to_that_message(
    client: magnetar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    send_one_batch(client, topic, 5)
    msgs = [consumer.receive(timeout_millis=5000) for _ in range(5)]
    consumer.acknowledge_cumulative(msgs[1])
    consumer.close()
    again = client.subscribe(topic, "sub", initial_position=Earliest)
    assert [m.data() for m in receive_until_quiet(again)] == [b"m2", b"m3", b"m4"]


# --- batch-index acknowledgement -----------------------------------------------------------------
def test_batch_index_ack_redelivers_only_the_unacked_messages_of_a_batch(
    client: magnetar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=magnetar.ConsumerType.Shared,
                                initial_position=Earliest, unacked_messages_timeout_ms=1000)
    ids = send_one_batch(client, topic, 5)
    msgs = [consumer.receive(timeout_millis=5000) for _ in range(5)]
    assert [m.message_id().batch_index() for m in msgs] == [0, 1, 2, 3, 4]
    assert [m.message_id() for m in msgs] == ids
    for i in (0, 2, 4):
        consumer.acknowledge(msgs[i])
    redelivered = [consumer.receive(timeout_millis=5000) for _ in range(2)]  # after the ack timeout
    assert [m.data() for m in redelivered] == [b"m1", b"m3"]
    assert [m.message_id().batch_index() for m in redelivered] == [1, 3]
    for m in redelivered:
        consumer.acknowledge(m)
    with pytest.raises(exceptions.Timeout):
        consumer.receive(timeout_millis=2500)  # longer than the ack timeout: nothing more comes back


# --- negative acknowledgement ---------------------------------------------------------------------
def test_negative_ack_redelivers_after_the_configured_delay(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=magnetar.ConsumerType.Shared,
                                initial_position=Earliest, negative_ack_redelivery_delay_ms=500)
    send_unbatched(client, topic, 1)
    first = consumer.receive(timeout_millis=5000)
    nacked_at = time.monotonic()
    consumer.negative_acknowledge(first)
    again = consumer.receive(timeout_millis=5000)
    waited = time.monotonic() - nacked_at
    assert again.data() == b"m0" and again.message_id() == first.message_id()
    assert again.redelivery_count() == 1
    assert waited >= 0.45, f"redelivered after {waited:.3f}s, before the 500 ms delay"


def test_negative_ack_on_exclusive_subscription_redelivers_the_message(
    client: magnetar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub", initial_position=Earliest, negative_ack_redelivery_delay_ms=500)
    send_unbatched(client, topic, 2)
    first = consumer.receive(timeout_millis=5000)
    consumer.acknowledge(consumer.receive(timeout_millis=5000))
    consumer.negative_acknowledge(first)
    again = consumer.receive(timeout_millis=5000)
    assert again.data() == b"m0" and again.redelivery_count() == 1


# --- ack timeout ----------------------------------------------------------------------------------
def test_ack_timeout_redelivers_unacked_messages(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=magnetar.ConsumerType.Shared,
                                initial_position=Earliest, unacked_messages_timeout_ms=1000)
    send_unbatched(client, topic, 2)
    first = consumer.receive(timeout_millis=5000)
    received_at = time.monotonic()
    consumer.acknowledge(consumer.receive(timeout_millis=5000))
    again = consumer.receive(timeout_millis=5000)
    waited = time.monotonic() - received_at
    assert again.data() == first.data() == b"m0"
    assert waited >= 0.9, f"redelivered after {waited:.3f}s, before the 1000 ms ack timeout"
    consumer.acknowledge(again)
    with pytest.raises(exceptions.Timeout):
        consumer.receive(timeout_millis=2000)  # acknowledged: no further redelivery


def test_redelivery_count_increases_on_every_redelivery(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=magnetar.ConsumerType.Shared,
                                initial_position=Earliest, negative_ack_redelivery_delay_ms=500,
                                unacked_messages_timeout_ms=1000)
    send_unbatched(client, topic, 1)
    counts = []
    for round_ in range(4):
        msg = consumer.receive(timeout_millis=5000)
        counts.append(msg.redelivery_count())
        if round_ % 2:
            consumer.negative_acknowledge(msg)  # by negative ack ...
        # ... or by letting the ack timeout pass
    assert counts == [0, 1, 2, 3]


# --- dead-letter topic ------------------------------------------------------------------------------
def test_dead_letter_topic_receives_the_message_after_max_redeliver_count(
    client: magnetar.Client, topic: str
) -> None:
    consumer = client.subscribe(
        topic, "sub", consumer_type=magnetar.ConsumerType.Shared, initial_position=Earliest,
        negative_ack_redelivery_delay_ms=500,
        dead_letter_policy=magnetar.ConsumerDeadLetterPolicy(max_redeliver_count=2),
    )
    producer = client.create_producer(topic, batching_enabled=False)
    original_id = producer.send(b"poison", properties={"app": "x"})
    counts = []
    for _ in range(3):  # the first delivery and max_redeliver_count redeliveries
        msg = consumer.receive(timeout_millis=5000)
        assert msg.data() == b"poison"
        counts.append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
    assert counts == [0, 1, 2]
    with pytest.raises(exceptions.Timeout):
        consumer.receive(timeout_millis=2500)  # the next redelivery went to the dead-letter topic

    dlq = client.subscribe(f"{topic}-sub-DLQ", "dlq-reader", initial_position=Earliest)
    dead = dlq.receive(timeout_millis=5000)
    assert dead.data() == b"poison"
    properties = dead.properties()
    assert properties["REAL_TOPIC"] == topic
    assert properties["ORIGIN_MESSAGE_ID"] == str(original_id)
    assert properties["app"] == "x", "the message's own properties are kept"


def test_dead_letter_policy_with_a_named_dead_letter_topic(client: magnetar.Client, topic: str) -> None:
    dead_topic = f"{topic}-custom-dead"
    consumer = client.subscribe(
        topic, "sub", consumer_type=magnetar.ConsumerType.Shared, initial_position=Earliest,
        negative_ack_redelivery_delay_ms=500,
        dead_letter_policy=magnetar.ConsumerDeadLetterPolicy(max_redeliver_count=1, dead_letter_topic=dead_topic),
    )
    client.create_producer(topic, batching_enabled=False).send(b"poison")
    for _ in range(2):
        consumer.negative_acknowledge(consumer.receive(timeout_millis=5000))
    with pytest.raises(exceptions.Timeout):
        consumer.receive(timeout_millis=2500)
    dlq = client.subscribe(dead_topic, "dlq-reader", initial_position=Earliest)
    assert dlq.receive(timeout_millis=5000).data() == b"poison"


def test_retry_letter_topic_redelivers_after_the_delay_then_dead_letters(
    client: magnetar.Client, topic: str
) -> None:
    consumer = client.subscribe(
        topic, "retry", consumer_type=magnetar.ConsumerType.Shared, initial_position=Earliest, retry_enable=True,
        dead_letter_policy=magnetar.ConsumerDeadLetterPolicy(max_redeliver_count=2),
    )
    client.create_producer(topic).send(b"retry me", properties={"a": "1"})
    first = consumer.receive(timeout_millis=5000)
    started = time.monotonic()
    consumer.reconsume_later(first, 1000)
    second = consumer.receive(timeout_millis=10_000)
    assert time.monotonic() - started >= 0.9, "the retry waits for its delay"
    assert second.data() == b"retry me" and second.properties()["RECONSUMETIMES"] == "1"
    assert second.properties()["REAL_TOPIC"] == topic and second.properties()["a"] == "1"
    assert second.topic_name() == f"{topic}-retry-RETRY"
    consumer.reconsume_later(second, 100)
    third = consumer.receive(timeout_millis=10_000)
    assert third.properties()["RECONSUMETIMES"] == "2"
    consumer.reconsume_later(third, 100)  # a third retry is beyond max_redeliver_count: dead letter
    with pytest.raises(exceptions.Timeout):
        consumer.receive(timeout_millis=1500)
    dlq = client.subscribe(f"{topic}-retry-DLQ", "check", initial_position=Earliest)
    dead = dlq.receive(timeout_millis=5000)
    assert dead.data() == b"retry me" and dead.properties()["REAL_TOPIC"] == topic


def test_reconsume_later_without_retry_enable_is_refused(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "noretry", initial_position=Earliest)
    client.create_producer(topic).send(b"x")
    with pytest.raises(exceptions.InvalidConfiguration, match="retry_enable"):
        consumer.reconsume_later(consumer.receive(timeout_millis=5000), 100)
