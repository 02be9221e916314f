"""Several entries in one publish request (a group append), through the HTTP API and the SDK:
order, ids, deduplication of a retried group, key-based batching in one request, crash points."""

from __future__ import annotations

import base64
import threading
import time
import uuid
from typing import Any

import pytest

import magnetar
from http_helpers import HTTP
from journal_helpers import journal_shard, spend_shard_writes
from magnetar.client.producer import Producer
from magnetar.client.producer_entries import ENTRY_OVERHEAD_BYTES, MAX_REQUEST_BYTES
from magnetar.core import crashpoints
from magnetar.core.entry import Message, encode_messages

PATH = "/topics/persistent/public"


def _dedup_namespace(cluster) -> str:  # type: ignore[no-untyped-def]
    ns = f"group-{uuid.uuid4().hex[:8]}"
    assert HTTP.put(f"{cluster.url}/admin/v2/namespaces/public/{ns}").status_code == 204
    assert HTTP.post(f"{cluster.url}/admin/v2/namespaces/public/{ns}/deduplication", json=True).status_code == 204
    return ns


def _batch(first_seq: int, texts: list[str], key: str | None = None) -> dict[str, Any]:
    raw = encode_messages([Message(t.encode(), key) for t in texts])
    return {"payload": base64.b64encode(raw).decode(), "numMessages": len(texts), "uncompressedSize": len(raw),
            "key": key, "sequenceId": first_seq, "highestSequenceId": first_seq + len(texts) - 1}


def _stats(cluster) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    """Broker invocations, Kinesis PutRecord and DynamoDB UpdateItem requests so far."""
    stats = HTTP.get(f"{cluster.url}/_magnetar/local/stats", timeout=30).json()
    aws = stats["aws_requests"]
    return (stats["lambda"]["magnetar-broker"]["invocations"], aws.get("kinesis.PutRecord", 0),
            aws.get("dynamodb.UpdateItem", 0))


def _drain(consumer, expected: int, timeout_s: float = 30) -> list[magnetar.Message]:  # type: ignore[no-untyped-def]
    got: list[magnetar.Message] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected and time.monotonic() < deadline:
        try:
            msg = consumer.receive(timeout_millis=1000)
        except magnetar.exceptions.Timeout:
            continue
        consumer.acknowledge(msg)
        got.append(msg)
    with pytest.raises(magnetar.exceptions.Timeout):  # and nothing more (no duplicate)
        consumer.receive(timeout_millis=1500)
    return got


def test_batches_are_appended_in_order_with_consecutive_entries_and_a_retry_gets_the_same_ids(
    cluster: Any, client: magnetar.Client
) -> None:
    ns = _dedup_namespace(cluster)
    topic = f"persistent://public/{ns}/t"
    body = {"producerName": "grouped", "batches": [
        _batch(0, ["a0", "a1"], "A"), _batch(2, ["b0"], "B"), _batch(3, ["c0", "c1", "c2"], "C")]}
    url = f"{cluster.url}{PATH}/{ns}/t"
    before = _stats(cluster)
    first = HTTP.post(url, json=body, timeout=30)
    assert first.status_code == 200, first.text
    after = _stats(cluster)
    assert after[0] - before[0] == 1 and after[1] - before[1] == 1, "one invocation, one journal record"
    result = first.json()
    entries = [b["entryId"] for b in result["batches"]]
    assert entries == [entries[0], entries[0] + 1, entries[0] + 2]
    assert [len(b["messagePublishResults"]) for b in result["batches"]] == [2, 1, 3]
    assert result["batches"][2]["messagePublishResults"][1]["messageId"] == f"0:{entries[2]}:-1:1"
    assert [r["messageId"] for r in result["messagePublishResults"]] == [
        r["messageId"] for b in result["batches"] for r in b["messagePublishResults"]]
    assert not result["duplicate"]
    again = HTTP.post(url, json=body, timeout=30).json()  # the same group retried
    assert again["duplicate"] and again["messagePublishResults"] == result["messagePublishResults"]
    consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
    got = _drain(consumer, 6)
    assert [m.data() for m in got] == [b"a0", b"a1", b"b0", b"c0", b"c1", b"c2"]
    assert [m.message_id().entry_id() for m in got] == [entries[0]] * 2 + [entries[1]] + [entries[2]] * 3


@pytest.mark.parametrize(("body", "status", "reason"), [
    ({"batches": []}, 400, "batches"),
    ({"batches": [_batch(0, ["x"])], "batch": _batch(1, ["y"])}, 400, "one of messages, batch or batches"),
    ({"batch": _batch(0, ["x"])}, 400, "sequence ids go on the request"),
    ({"batches": [{**_batch(0, ["x"]), "chunk": {"uuid": "u", "chunkId": 0, "numChunks": 2, "totalSize": 4}}]},
     400, "chunk travels alone"),
    ({"batches": [_batch(0, ["x"]), {**_batch(1, ["y"]), "numMessages": 2}]}, 400, "declared 2"),
    ({"batches": [_batch(i, ["x" * 300_000]) for i in range(4)]}, 413, "journal record limit"),
])
def test_bad_batches_get_a_4xx_reason_and_store_nothing(
    cluster: Any, topic: str, body: dict[str, Any], status: int, reason: str
) -> None:
    local = topic.rsplit("/", 1)[1]
    response = HTTP.post(f"{cluster.url}{PATH}/default/{local}", json=body, timeout=30)
    assert response.status_code == status, response.text
    assert reason in response.json()["reason"]


def test_key_based_batching_posts_all_keys_of_a_batch_in_one_request(
    cluster: Any, client: magnetar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_type=magnetar.BatchingType.KeyBased,
                                      batching_max_messages=100, batching_max_publish_delay_ms=60_000)
    ids: list[magnetar.MessageId] = []
    lock = threading.Lock()

    def sent(_result: magnetar.Result, message_id: magnetar.MessageId | None) -> None:
        with lock:
            assert message_id is not None
            ids.append(message_id)

    before = _stats(cluster)
    for i in range(100):
        producer.send_async(f"{i % 32}:{i}".encode(), sent, partition_key=f"k{i % 32}")
    producer.flush()
    after = _stats(cluster)
    assert after[0] - before[0] == 1, "one request for the 32 keys' entries"
    assert after[1] - before[1] == 1 and after[2] - before[2] == 1, "one journal record, one reservation"
    assert len({m.entry_id() for m in ids}) == 32
    consumer = client.subscribe(topic, "s", consumer_type=magnetar.ConsumerType.KeyShared,
                                initial_position=magnetar.InitialPosition.Earliest)
    got = _drain(consumer, 100)
    by_key: dict[str, list[int]] = {}
    for m in got:
        key, n = m.data().decode().split(":")
        by_key.setdefault(key, []).append(int(n))
    assert len(got) == 100 and all(v == sorted(v) for v in by_key.values()), "each key in order"


def test_ready_batches_queue_while_a_request_is_in_flight_and_go_in_one_request(
    cluster: Any, client: magnetar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_max_messages=10, batching_max_publish_delay_ms=60_000,
                                      max_pending_messages=500)
    done: list[tuple[int, magnetar.MessageId]] = []
    before = _stats(cluster)
    def sent(i: int) -> Any:
        return lambda _result, message_id: done.append((i, message_id))

    for i in range(300):
        producer.send_async(str(i).encode(), sent(i))
    producer.flush()
    requests = _stats(cluster)[0] - before[0]
    assert requests <= 10, f"30 batches in {requests} requests"
    assert [i for i, _ in done] == list(range(300)), "callbacks in send order"
    assert [m for _, m in done] == sorted(m for _, m in done), "ids in send order"
    assert len({m.entry_id() for _, m in done}) == 30
    consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
    assert [int(m.data()) for m in _drain(consumer, 300)] == list(range(300))


def test_back_pressure_at_max_pending_messages_keeps_every_message(
    client: magnetar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_max_messages=10, max_pending_messages=15)
    assert isinstance(producer, Producer)
    for i in range(200):
        producer.send_async(str(i).encode(), None)
        assert producer._waiting <= 15  # the queue's bound holds
    producer.flush()
    assert [int(m.data()) for m in _drain(consumer, 200)] == list(range(200))


def test_a_delayed_message_between_batches_keeps_its_place(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "s", consumer_type=magnetar.ConsumerType.Shared,
                                initial_position=magnetar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_max_messages=5, batching_max_publish_delay_ms=60_000)
    for i in range(12):
        producer.send_async(str(i).encode(), None, deliver_after=1 if i == 6 else None)
    producer.flush()
    got = _drain(consumer, 12)
    assert sorted(int(m.data()) for m in got) == list(range(12))
    ordered = sorted(got, key=lambda m: m.message_id())
    assert [int(m.data()) for m in ordered] == list(range(12)), "stored in send order"


@pytest.mark.parametrize("point", ["produce.after_reserve", "produce.after_journal_write"])
def test_a_group_publish_crashing_is_retried_and_stores_every_message_once(
    cluster: Any, client: magnetar.Client, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import magnetar.core.ledger as ledger

    monkeypatch.setattr(ledger.common, "HOLE_GRACE_MS", 1500)
    ns = _dedup_namespace(cluster)
    topic = f"persistent://public/{ns}/crash"
    consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
    producer = client.create_producer(topic, producer_name=f"p-{uuid.uuid4().hex[:6]}",
                                      batching_type=magnetar.BatchingType.KeyBased,
                                      batching_max_publish_delay_ms=60_000)
    for i in range(40):
        producer.send_async(f"{i}".encode(), None, partition_key=f"k{i % 4}")
    crashpoints.enable(point, times=1)
    producer.flush()  # one request of 4 entries: its first attempt dies, the SDK retries it
    assert crashpoints.fired[point] >= 1
    producer.send(b"after")  # its entry follows the group's (a hole or not) and lets holes be declared
    got = _drain(consumer, 41)
    assert sorted(m.data() for m in got) == sorted([str(i).encode() for i in range(40)] + [b"after"])
    assert got[-1].data() == b"after"


def test_queued_batches_are_cut_into_requests_that_fit_one_journal_record(
    cluster: Any, client: magnetar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_max_publish_delay_ms=60_000)
    done: list[magnetar.MessageId | None] = []
    before = _stats(cluster)
    for i in range(12):  # 100 KB each: one batch each (128 KB batches), three of them per 384 KiB request
        producer.send_async(bytes([i]) * 100_000, lambda _r, m: done.append(m))
    producer.flush()
    requests = _stats(cluster)[0] - before[0]
    ids = [m for m in done if m is not None]
    assert len(ids) == 12 and ids == sorted(ids) and len({m.entry_id() for m in ids}) == 12
    per_request = MAX_REQUEST_BYTES // (100_000 + ENTRY_OVERHEAD_BYTES + 32)
    assert per_request == 3 and 12 // per_request <= requests <= 12 // per_request + 2, (
        f"12 entries of 100 KB in {requests} requests")
    consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
    assert [m.data()[0] for m in _drain(consumer, 12)] == list(range(12))


def test_a_group_overlapping_an_earlier_one_stores_only_its_new_batches(
    cluster: Any, client: magnetar.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    import magnetar.core.ledger as ledger

    monkeypatch.setattr(ledger.common, "WRITE_DEADLINE_MS", 300)  # the first publish settles sooner
    ns = _dedup_namespace(cluster)
    url = f"{cluster.url}{PATH}/{ns}/overlap"
    first = HTTP.post(url, json={"producerName": "p", "batches": [_batch(0, ["0", "1"]), _batch(2, ["2", "3"])]},
                       timeout=30).json()
    overlap = {"producerName": "p", "batches": [_batch(2, ["2", "3"]), _batch(4, ["4", "5"])]}
    deadline = time.monotonic() + 30
    while True:  # 503 (retry) until the first publish is settled: sealed, since tail reads are off
        response = HTTP.post(url, json=overlap, timeout=30)
        if response.status_code != 503 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert response.status_code == 200, response.text
    batches = response.json()["batches"]
    assert batches[0]["duplicate"] and batches[0]["entryId"] == -1, "seq 2-3: stored already"
    assert not batches[1]["duplicate"] and batches[1]["entryId"] == first["batches"][1]["entryId"] + 1
    consumer = client.subscribe(f"persistent://public/{ns}/overlap", "s",
                                initial_position=magnetar.InitialPosition.Earliest)
    assert [m.data() for m in _drain(consumer, 6)] == [str(i).encode() for i in range(6)]


def test_a_saturated_shard_is_reported_and_the_producer_paces_itself(cluster: Any, client: magnetar.Client) -> None:
    """A topic's journal is one shard (1 MiB/s). With its budget spent by another writer, a REST
    publish of 700 KB waits for it, and the response says how long (`throttledMs`, absent
    otherwise); an SDK producer with 500 KB to send reads it and spaces its requests
    (core/publish_pacing.py): every message is acknowledged and received in order."""
    name = f"paced-{uuid.uuid4().hex[:8]}"
    url = f"{cluster.url}{PATH}/default/{name}"
    shard = journal_shard(cluster, f"persistent://public/default/{name}")
    payload = base64.b64encode(b"x" * 700 * 1024).decode()
    spend_shard_writes(cluster, shard, 3 * 1024 * 1024)  # 2 MiB in debt: 700 KB waits about 2.7 s
    responses = [HTTP.post(url, json={"messages": [{"payload": payload}]}, timeout=60) for _ in range(2)]
    assert [r.status_code for r in responses] == [200] * 2, responses[-1].text
    waits = [r.json().get("throttledMs", 0) for r in responses]
    assert waits[0] >= 300 and all(w >= 0 for w in waits), waits
    assert {r.json()["journalShard"] for r in responses} == {shard}, "one topic, one shard, named in each answer"

    topic = f"persistent://public/default/{name}-sdk"
    consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_max_publish_delay_ms=5)
    spend_shard_writes(cluster, journal_shard(cluster, topic), 2 * 1024 * 1024)
    for i in range(500):
        producer.send_async(i.to_bytes(4, "big") + b"y" * 1020, None)
    producer.flush()
    assert producer._pacer.rate is not None, "the producer never read a report of the saturated shard"
    got = [m for m in _drain(consumer, 501, timeout_s=90) if m.data()]  # (the empty one named the shard)
    assert [int.from_bytes(m.data()[:4], "big") for m in got] == list(range(500))


def test_the_producers_of_one_client_share_the_pace_of_their_shard(cluster: Any, client: magnetar.Client,
                                                                    admin: Any) -> None:
    """A partitioned producer's partitions whose writes go to one journal shard pace together (one
    pacer per shard and client, core/publish_pacing.py), named by the broker's `journalShard`:
    4 partitions over the local cluster's 2 shards, 2 on each."""
    topic = f"persistent://public/default/shared-pace-{uuid.uuid4().hex[:8]}"
    admin.create_partitioned_topic(topic, 4)
    producer = client.create_producer(topic, message_routing_mode=magnetar.PartitionsRoutingMode.RoundRobinDistribution,
                                      batching_enabled=False)
    for i in range(8):
        producer.send(str(i).encode())
    partitions = producer._producers
    shards = [p._pacer for p in partitions]
    assert all(pacer is client._pacers.of(shard) for pacer, shard in zip(shards, _shards_of(cluster, topic), strict=True))
    assert len({id(p) for p in shards}) == 2, "2 shards: 2 pacers, each shared by 2 partitions"
    other = magnetar.Client(cluster.url)
    try:
        alone = other.create_producer(f"{topic}-partition-0")
        alone.send(b"x")
        assert alone._pacer is not partitions[0]._pacer, "another client paces on its own"
    finally:
        other.close()


def _shards_of(cluster: Any, topic: str) -> list[str]:
    """The journal shard of each of `topic`'s 4 partitions, as a REST publish names it."""
    return [journal_shard(cluster, f"{topic}-partition-{i}") for i in range(4)]


def test_a_clients_producers_of_one_topic_publish_together(cluster: Any, client: magnetar.Client, admin: Any,
                                                           topic: str) -> None:
    """Two producers of one topic in one client: a request of either carries what the other has
    ready, each entry under its own producer, each producer's messages in order, acknowledged to
    its own callbacks, and counted in its own stats."""
    a = client.create_producer(topic, producer_name="pa", batching_max_publish_delay_ms=200)
    b = client.create_producer(topic, producer_name="pb", batching_max_publish_delay_ms=200)
    done: dict[str, list[magnetar.MessageId]] = {"pa": [], "pb": []}
    lock = threading.Lock()

    def sent(name: str) -> Any:
        def callback(result: magnetar.Result, message_id: magnetar.MessageId | None) -> None:
            assert result == magnetar.Result.Ok and message_id is not None
            with lock:
                done[name].append(message_id)
        return callback

    before = _stats(cluster)
    for round_ in range(5):
        for i in range(20):
            a.send_async(f"a{round_ * 20 + i}".encode(), sent("pa"))
            b.send_async(f"b{round_ * 20 + i}".encode(), sent("pb"))
        time.sleep(0.25)
    a.flush()
    b.flush()
    requests = _stats(cluster)[0] - before[0]
    assert len(done["pa"]) == len(done["pb"]) == 100
    assert all(ids == sorted(ids) for ids in done.values()), "each producer's ids in send order"
    assert requests <= 6, f"5 rounds of both producers' messages in {requests} requests"
    consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
    got = _drain(consumer, 200)
    for name in ("a", "b"):
        mine = [m for m in got if m.data().startswith(name.encode())]
        assert [int(m.data()[1:]) for m in mine] == list(range(100))
        assert {m.producer_name() for m in mine} == {f"p{name}"}
    stats = admin.topic_stats(topic)
    counted = {p["producerName"]: p.get("msgInCounter", 0) for p in stats.get("publishers", [])}
    assert counted.get("pa") == 100 and counted.get("pb") == 100, counted


def test_producers_publishing_together_keep_deduplication_per_producer(cluster: Any, client: magnetar.Client) -> None:
    ns = _dedup_namespace(cluster)
    topic = f"persistent://public/{ns}/together"
    a = client.create_producer(topic, producer_name="da", batching_max_publish_delay_ms=200)
    b = client.create_producer(topic, producer_name="db", batching_max_publish_delay_ms=200)
    for i in range(10):
        a.send_async(f"a{i}".encode(), None, sequence_id=i)
        b.send_async(f"b{i}".encode(), None, sequence_id=i)
    a.flush()
    b.flush()
    assert a.last_sequence_id() == 9 and b.last_sequence_id() == 9
    a.send(b"a-again", sequence_id=5)  # a repeat of a sequence id of its own: a duplicate, not stored
    consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
    got = sorted(m.data() for m in _drain(consumer, 20))
    assert got == sorted([f"a{i}".encode() for i in range(10)] + [f"b{i}".encode() for i in range(10)])


def test_an_exclusive_producer_never_carries_another_producers_messages(client: magnetar.Client, topic: str) -> None:
    shared = client.create_producer(topic, producer_name="s1")
    shared.send(b"first")
    exclusive = client.create_producer(f"{topic}-x", producer_name="x1",
                                       access_mode=magnetar.ProducerAccessMode.Exclusive)
    assert exclusive._groups is None and shared._groups is not None


def test_a_batch_naming_its_producer_is_refused_outside_batches(cluster: Any, topic: str) -> None:
    local = topic.rsplit("/", 1)[1]
    one = {k: v for k, v in _batch(0, ["x"]).items() if "equence" not in k}
    response = HTTP.post(f"{cluster.url}{PATH}/default/{local}",
                         json={"producerName": "p", "batch": {**one, "producerName": "q"}}, timeout=30)
    assert response.status_code == 400 and "producer and sequence ids go on the request" in response.json()["reason"]


def test_a_producer_whose_messages_another_request_carries_sends_nothing_until_it_is_answered(
    client: magnetar.Client, topic: str
) -> None:
    """The order of a producer's messages holds while another producer's request carries some of
    them: what it queues meanwhile waits for that request's answer (as a second request of its own
    would wait for its first)."""
    carrier = client.create_producer(topic, producer_name="carrier")
    rider = client.create_producer(topic, producer_name="rider", batching_max_publish_delay_ms=60_000)
    first = [rider._enqueue(f"r{i}".encode(), None, None, None, None, None, None, None, None) for i in range(3)]
    taken = rider._hand_over()  # as the carrier's send does: the rider's batch goes with its request
    assert [len(b) for b in taken] == [3]
    later = rider._enqueue(b"r3", None, None, None, None, None, None, None, None)
    rider._flush_requested = True  # its batch is due now: still nothing goes before the carried ones
    with rider._cond:
        rider._cond.notify_all()
    time.sleep(0.5)
    assert not later.done(), "sent while its earlier messages were out with another request"
    carrier._publish([(rider, e) for e in rider._entries(taken)])
    rider._handed_back()
    ids = [f.result(timeout=10) for f in first] + [later.result(timeout=10)]
    assert ids == sorted(ids) and len(set(ids)) == 4
    consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
    assert [m.data() for m in _drain(consumer, 4)] == [b"r0", b"r1", b"r2", b"r3"]


def test_a_request_may_carry_only_other_producers_batches(cluster: Any, admin: Any, topic: str) -> None:
    """A producer's send cut into several requests (each within one journal record) may leave one
    carrying only the others' batches: stored under their names, counted in their stats."""
    local = topic.rsplit("/", 1)[1]
    body = {"producerName": "lead", "batches": [{**_batch(0, ["q0", "q1"]), "producerName": "other"},
                                                {**_batch(0, ["r0"]), "producerName": "third"}]}
    response = HTTP.post(f"{cluster.url}{PATH}/default/{local}", json=body, timeout=30)
    assert response.status_code == 200, response.text
    assert [b["entryId"] for b in response.json()["batches"]] == [0, 1]
    counted = {p["producerName"]: p.get("msgInCounter", 0) for p in admin.topic_stats(topic).get("publishers", [])}
    assert counted.get("other") == 2 and counted.get("third") == 1 and "lead" not in counted, counted
