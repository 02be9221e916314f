"""Producer features: batching, compression, chunking, delayed delivery, message metadata, sequence
ids, deduplication and access modes (Pulsar's documented behaviours)."""

from __future__ import annotations

import base64
import random
import threading
import time
import uuid
from collections import defaultdict

import pytest

import magnetar
from http_helpers import HTTP
from magnetar.client import exceptions
from sdk_helpers import receive_until_quiet

Earliest = magnetar.InitialPosition.Earliest




def send_all_async(producer, payloads: list[bytes], flush: bool = False, **kwargs) -> list[magnetar.MessageId]:  # type: ignore[no-untyped-def]
    """Queue every payload, then wait for every id (without `flush`, the batching triggers must send them)."""
    ids: list[magnetar.MessageId | None] = [None] * len(payloads)
    done = threading.Semaphore(0)
    for i, payload in enumerate(payloads):
        def callback(result, message_id, i=i):  # type: ignore[no-untyped-def]
            assert result == magnetar.Result.Ok
            ids[i] = message_id
            done.release()
        producer.send_async(payload, callback, **kwargs)
    if flush:
        producer.flush()
    for _ in payloads:
        assert done.acquire(timeout=15), "a send never completed"
    return [m for m in ids if m is not None]


def entries_of(messages: list[magnetar.Message]) -> dict[int, list[int]]:
    """entry id -> batch indexes of its messages, in receive order."""
    out: dict[int, list[int]] = defaultdict(list)
    for m in messages:
        out[m.message_id().entry_id()].append(m.message_id().batch_index())
    return dict(out)


# --- batching --------------------------------------------------------------------------------------
def test_batching_by_count_makes_one_entry_per_batch(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_max_messages=4, batching_max_publish_delay_ms=60_000)
    ids = send_all_async(producer, [f"m{i}".encode() for i in range(8)])
    received = receive_until_quiet(consumer)
    assert [m.data() for m in received] == [f"m{i}".encode() for i in range(8)]
    assert [m.message_id() for m in received] == ids
    batches = entries_of(received)
    assert len(batches) == 2
    assert all(indexes == [0, 1, 2, 3] for indexes in batches.values()), batches


def test_batching_by_size_closes_a_batch_at_the_byte_limit(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_max_messages=1000, batching_max_allowed_size_in_bytes=1000,
                                      batching_max_publish_delay_ms=60_000)
    payloads = [bytes([65 + i]) * 300 for i in range(9)]  # 3 fit in 1000 bytes, a 4th does not
    send_all_async(producer, payloads, flush=True)  # the flush sends the last batch only
    received = receive_until_quiet(consumer)
    assert [m.data() for m in received] == payloads
    assert [len(ix) for ix in entries_of(received).values()] == [3, 3, 3]


def test_batching_by_delay_sends_a_partial_batch_after_the_publish_delay(
    client: magnetar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_max_messages=1000, batching_max_publish_delay_ms=400)
    started = time.monotonic()
    send_all_async(producer, [b"a", b"b", b"c"])  # no flush: only the delay can send them
    waited = time.monotonic() - started
    assert waited >= 0.35, f"sent after {waited:.3f}s, before the 400 ms publish delay"
    received = receive_until_quiet(consumer)
    assert [m.data() for m in received] == [b"a", b"b", b"c"]
    assert list(entries_of(received).values()) == [[0, 1, 2]]


def test_batching_disabled_makes_one_entry_per_message(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=False)
    ids = send_all_async(producer, [b"a", b"b", b"c"])
    assert len({m.entry_id() for m in ids}) == 3
    assert all(m.batch_index() == -1 for m in ids)
    assert len(receive_until_quiet(consumer)) == 3


# --- compression ------------------------------------------------------------------------------------
@pytest.mark.parametrize("compression", ["LZ4", "ZLib", "ZSTD", "SNAPPY"])
def test_compression_round_trips_the_payload_end_to_end(
    client: magnetar.Client, topic: str, cluster, compression: str
) -> None:  # type: ignore[no-untyped-def]
    codec = getattr(magnetar.CompressionType, compression)
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, compression_type=codec, batching_max_messages=3,
                                      batching_max_publish_delay_ms=60_000)
    payloads = [f"compressible payload {i} ".encode() * 1000 for i in range(3)]  # 3 x 23 KB: one batch
    send_all_async(producer, payloads)
    assert [m.data() for m in receive_until_quiet(consumer)] == payloads
    # stored compressed: the entry as the broker keeps it is smaller than the batch it carries
    page = HTTP.post(f"{cluster.url}/magnetar/v1/reader/{topic.replace('://', '/')}/read",
                      json={"startEntryId": 0, "maxEntries": 10, "format": "entries"}).json()
    [entry] = page["entries"]
    assert entry["compression"] == codec.value
    assert len(base64.b64decode(entry["payload"])) < entry["uncompressedSize"] // 10


# --- chunking ---------------------------------------------------------------------------------------
def test_chunking_delivers_a_payload_above_the_record_limit_whole(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False)
    payload = random.Random(7).randbytes(3 * 1024 * 1024)
    sent_id = producer.send(payload, properties={"kind": "big"})
    msg = consumer.receive(timeout_millis=20_000)
    assert len(msg.data()) == len(payload) and msg.data() == payload
    assert msg.properties() == {"kind": "big"}
    assert msg.message_id() == sent_id
    consumer.acknowledge(msg)
    producer.send(b"after")
    assert consumer.receive(timeout_millis=5000).data() == b"after", "the chunks were acknowledged with it"


def test_payload_above_the_record_limit_without_chunking_is_refused_as_message_too_big(
    client: magnetar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    with pytest.raises(exceptions.MessageTooBig) as refused:
        producer.send(b"x" * (2 * 1024 * 1024))
    assert "chunking" in refused.value.reason


# --- delayed delivery ---------------------------------------------------------------------------------
def test_delayed_delivery_on_shared_subscription_waits_until_deliver_after(
    client: magnetar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=magnetar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    started = time.monotonic()
    producer.send(b"later", deliver_after=1500)
    producer.send(b"now")
    first = consumer.receive(timeout_millis=5000)
    first_after = time.monotonic() - started
    second = consumer.receive(timeout_millis=5000)
    second_after = time.monotonic() - started
    assert first.data() == b"now" and first_after < 1.4, "an undelayed message is not held back"
    assert second.data() == b"later"
    assert second_after >= 1.4, f"delayed message received after {second_after:.3f}s, before 1500 ms"


def test_delayed_delivery_on_exclusive_subscription_is_immediate(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")  # Exclusive: Pulsar ignores the delivery time
    producer = client.create_producer(topic, batching_enabled=False)
    started = time.monotonic()
    producer.send(b"later", deliver_after=10_000)
    assert consumer.receive(timeout_millis=5000).data() == b"later"
    assert time.monotonic() - started < 5


# --- message metadata ---------------------------------------------------------------------------------
def test_event_timestamp_round_trips(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    producer.send(b"with", event_timestamp=1_234_567_890_123)
    producer.send(b"without")
    with_time, without_time = receive_until_quiet(consumer)
    assert with_time.event_timestamp() == 1_234_567_890_123
    assert without_time.event_timestamp() == 0
    assert with_time.publish_timestamp() > 1_600_000_000_000, "publish time is set by the broker"


def test_properties_round_trip(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_max_messages=2, batching_max_publish_delay_ms=60_000)
    send_all_async(producer, [b"a", b"b"])  # in one batch: metadata is per message
    producer.send(b"c", properties={"k": "v", "unicode": "é✓"})
    producer.send(b"d", properties={"other": "1"})
    received = receive_until_quiet(consumer)
    assert [m.properties() for m in received] == [{}, {}, {"k": "v", "unicode": "é✓"}, {"other": "1"}]


def test_properties_of_messages_in_one_batch_stay_with_each_message(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_max_messages=3, batching_max_publish_delay_ms=60_000)
    ids: list[magnetar.MessageId] = []
    for i in range(3):
        producer.send_async(f"m{i}".encode(), lambda result, mid: ids.append(mid), properties={"i": str(i)})
    producer.flush()
    received = receive_until_quiet(consumer)
    assert len({m.message_id().entry_id() for m in received}) == 1, "precondition: one batch"
    assert [m.properties() for m in received] == [{"i": "0"}, {"i": "1"}, {"i": "2"}]


def test_partition_key_round_trips(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    producer.send(b"keyed", partition_key="customer-42")
    producer.send(b"unkeyed")
    keyed, unkeyed = receive_until_quiet(consumer)
    assert keyed.partition_key() == "customer-42"
    assert unkeyed.partition_key() == ""


def test_ordering_key_round_trips(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    producer.send(b"both", partition_key="pk", ordering_key="ok")
    [msg] = receive_until_quiet(consumer)
    assert msg.ordering_key() == "ok"
    assert msg.partition_key() == "pk"


# --- sequence ids -------------------------------------------------------------------------------------
def test_last_sequence_id_grows_with_sends(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    assert producer.last_sequence_id() == -1
    producer.send(b"a")
    assert producer.last_sequence_id() == 0
    for payload in (b"b", b"c", b"d"):
        producer.send(payload)
    assert producer.last_sequence_id() == 3
    send_all_async(producer, [b"e", b"f", b"g"])
    producer.flush()
    assert producer.last_sequence_id() == 6
    producer.send(b"h", sequence_id=100)
    assert producer.last_sequence_id() == 100


# --- deduplication (namespace policy) -------------------------------------------------------------------
def _dedup_namespace(cluster) -> str:  # type: ignore[no-untyped-def]
    ns = f"dedup-{uuid.uuid4().hex[:8]}"
    created = HTTP.put(f"{cluster.url}/admin/v2/namespaces/public/{ns}")
    assert created.status_code == 204, created.text
    enabled = HTTP.post(f"{cluster.url}/admin/v2/namespaces/public/{ns}/deduplication", json=True)
    assert enabled.status_code == 204, f"enabling deduplication: {enabled.status_code} {enabled.text}"
    return ns


def test_deduplication_stores_a_message_resent_with_the_same_sequence_id_once(
    client: magnetar.Client, cluster
) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://public/{_dedup_namespace(cluster)}/t"
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name="dedup-producer", batching_enabled=False)
    original = producer.send(b"once", sequence_id=7)
    duplicate = producer.send(b"once", sequence_id=7)
    assert duplicate == original, "the duplicate is acknowledged with the original id"
    assert [m.data() for m in receive_until_quiet(consumer)] == [b"once"]


def test_deduplication_drops_a_message_with_an_older_sequence_id(client: magnetar.Client, cluster) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://public/{_dedup_namespace(cluster)}/t"
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name="dedup-producer", batching_enabled=False)
    producer.send(b"ten", sequence_id=10)
    producer.send(b"five", sequence_id=5)
    producer.send(b"eleven", sequence_id=11)
    assert [m.data() for m in receive_until_quiet(consumer)] == [b"ten", b"eleven"]


def test_without_deduplication_a_resent_sequence_id_is_stored_twice(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name=f"p-{uuid.uuid4().hex[:6]}", batching_enabled=False)
    first = producer.send(b"twice", sequence_id=7)
    second = producer.send(b"twice", sequence_id=7)
    assert first != second
    assert [m.data() for m in receive_until_quiet(consumer)] == [b"twice", b"twice"]


# --- access modes -------------------------------------------------------------------------------------------
def test_exclusive_producer_access_mode_refuses_a_second_producer(client: magnetar.Client, topic: str) -> None:
    first = client.create_producer(topic, producer_name="owner", access_mode=magnetar.ProducerAccessMode.Exclusive)
    with pytest.raises(exceptions.ProducerFenced) as refused:
        client.create_producer(topic, producer_name="intruder", access_mode=magnetar.ProducerAccessMode.Exclusive)
    assert "exclusive" in refused.value.reason.lower()
    first.send(b"still the owner")
    first.close()
    client.create_producer(topic, producer_name="next", access_mode=magnetar.ProducerAccessMode.Exclusive).send(b"x")


def test_exclusive_producer_access_mode_refuses_a_shared_producer(client: magnetar.Client, topic: str) -> None:
    client.create_producer(topic, producer_name="owner", access_mode=magnetar.ProducerAccessMode.Exclusive)
    with pytest.raises(exceptions.ProducerFenced) as refused:
        shared = client.create_producer(topic, producer_name="shared")
        shared.send(b"must not be stored")
    assert "exclusive" in refused.value.reason.lower()


def test_chunks_of_a_dropped_producer_are_cleaned_up(cluster, client: magnetar.Client, topic: str) -> None:  # type: ignore[no-untyped-def]
    from magnetar.core.entry import Message, encode_messages

    raw = encode_messages([Message(b"x" * 100)])
    body = {  # the first of two chunks, from a producer that then died
        "producerName": "dead-producer",
        "batch": {"payload": base64.b64encode(raw[:50]).decode(), "numMessages": 1, "compression": "NONE",
                  "uncompressedSize": len(raw), "batched": False,
                  "chunk": {"uuid": "orphan", "chunkId": 0, "numChunks": 2, "totalSize": len(raw)}},
    }
    response = HTTP.post(f"{cluster.url}/topics/{topic.replace('://', '/')}", json=body)
    assert response.status_code == 200, response.text
    client.create_producer(topic).send(b"after")
    consumer = client.subscribe(topic, "chunks", initial_position=magnetar.InitialPosition.Earliest,
                                expire_time_of_incomplete_chunked_message_ms=500)
    after = consumer.receive(timeout_millis=5000)
    assert after.data() == b"after"
    consumer.acknowledge(after)
    time.sleep(0.8)
    with pytest.raises(exceptions.Timeout):
        consumer.receive(timeout_millis=1500)  # this poll expires the orphan chunk and acknowledges it
    consumer.close()
    from magnetar.adapters.aws import build_broker
    from magnetar.core.naming import TopicName

    cursor = build_broker().metadata.get_subscription_view(TopicName.parse(topic), "chunks").cursor
    assert cursor is not None and cursor.mark_delete == 2, "the orphan chunk (entry 0) and entry 1 are acknowledged"
    again = client.subscribe(topic, "chunks")
    with pytest.raises(exceptions.Timeout):
        again.receive(timeout_millis=2500)  # nothing left: neither the message nor the orphan chunk
