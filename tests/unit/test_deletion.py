"""Deleting topics, partitioned topics, namespaces and tenants on in-memory ports: what a deletion
leaves (nothing readable, nothing of the old incarnation in a new one), the refusals, and crashes
at every step finished by a retry."""

from __future__ import annotations

from dataclasses import replace

import pytest

from magnetar.adapters.memory import memory_broker
from magnetar.core import crashpoints
from magnetar.core.entry import Batch, Message, decode_entry, encode_entry
from magnetar.core.errors import Conflict, NotFound, PreconditionFailed, RetryableError, TopicNotFound
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.policies import MAX_TOPICS
from magnetar.core.schema.types import SchemaData

T = TopicName.parse("doomed")
NS = NamespaceName("public", "default")


def publish(broker, topic: TopicName, payloads: list[bytes], producer: str = "p") -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    """Publish and seal; the (ledger, entry) ids."""
    start = len(broker.journal.records)
    ids = []
    for payload in payloads:
        result = broker.writer.append(topic, Batch.of([Message(payload)], batched=False), producer)
        ids.append((result.ledger_id, result.entry_id))
    try:
        outcome = broker.sealer.seal(broker.journal.records[start:])
    except RetryableError:  # a commit refused (a stale seal state): the mapping retries the batch
        outcome = broker.sealer.seal(broker.journal.records[start:])
    assert outcome.retry_from is None
    return ids


def read_all(broker, topic: TopicName, subscription: str = "reader") -> list[bytes]:  # type: ignore[no-untyped-def]
    broker.subscriptions.subscribe(topic, subscription, "c", "Exclusive", "Earliest")
    got = broker.subscriptions.receive(topic, subscription, "c", max_messages=1000).entries
    return [m.payload for d in got for m in d.entry.messages]


def test_a_deleted_topic_is_gone_and_a_new_one_of_its_name_starts_empty() -> None:
    broker = memory_broker()
    old_ids = publish(broker, T, [b"old-1", b"old-2", b"old-3"])
    broker.subscriptions.subscribe(T, "s", "c", "Shared", "Earliest")
    broker.schemas.put(T, SchemaData("STRING", "", {}), "FULL")
    old_records = list(broker.journal.records)
    assert broker.segments.objects

    report = broker.deletion.delete_topic(T, force=True)
    assert report.partitions == 1 and report.objects == 1 and report.items == 2  # 1 segment, 1 cursor
    assert report.schemas == 1 and broker.schemas.current(T) == []
    assert str(T) not in broker.admin.list_topics(NS)
    with pytest.raises(TopicNotFound):
        broker.stats.topic_stats(T)
    assert not broker.segments.objects
    with pytest.raises(TopicNotFound):
        broker.deletion.delete_topic(T)

    # the old incarnation's records are still in the journal: replayed now (a sealer lagging or
    # retrying its batch), they are skipped as already sealed, and nothing is created
    assert broker.sealer.seal(old_records).sealed_entries == 0
    assert not broker.segments.objects

    new_ids = publish(broker, T, [b"new-1"])
    assert new_ids[0][1] > old_ids[-1][1] and new_ids[0][0] > old_ids[-1][0], \
        "a new incarnation continues the entry ids and opens a new ledger"
    assert broker.sealer.seal(old_records).sealed_entries == 0, "no old record is sealed into the new topic"
    assert read_all(broker, T) == [b"new-1"]
    assert broker.admin.list_subscriptions(T) == ["reader"], "the old subscription is gone"
    stats = broker.stats.topic_stats(T)
    assert stats["msgInCounter"] == 1


def test_a_seal_computed_from_the_old_incarnation_never_commits_into_the_new_one() -> None:
    """The sealer remembers the seal state its last commit left (no read for the next batch): after
    a deletion and a re-creation that state is stale, and its commit must fail, not overwrite."""
    broker = memory_broker()
    publish(broker, T, [b"old-1", b"old-2"])
    broker.deletion.delete_topic(T, force=True)
    broker.admin.create_topic(T)
    # the fence's entry (2) is where the remembered old state ends too
    assert broker.sealer._known[str(T)].next_entry == 2
    start = len(broker.journal.records)
    for payload in (b"new-1", b"new-2"):
        broker.writer.append(T, Batch.of([Message(payload)], batched=False), "p")
    with pytest.raises(RetryableError):  # the commit of the stale state is refused
        broker.sealer.seal(broker.journal.records[start:])
    assert broker.sealer.seal(broker.journal.records[start:]).sealed_entries == 2  # read again
    seal, writer = broker.metadata.get_topic_state(T)
    assert writer is not None and seal.next_entry == 4 and seal.base == 2
    assert seal.sealed_messages == 2, "the seal state counts the new incarnation only"
    assert read_all(broker, T) == [b"new-1", b"new-2"]


def test_an_append_in_flight_during_the_deletion_is_not_sealed_into_the_next_incarnation() -> None:
    broker = memory_broker()
    publish(broker, T, [b"old-1"])
    # a writer reserved id 1 before the fence and writes its record after the deletion
    reservation = broker.metadata.reserve_entry(T, _claim())
    broker.deletion.delete_topic(T, force=True)
    late = _record_of(broker, reservation.ledger_id, reservation.entry_id, b"in-flight")
    publish(broker, T, [b"new-1"])
    broker.journal.append(str(T), late)
    assert broker.sealer.seal(broker.journal.records[-1:]).sealed_entries == 0
    assert read_all(broker, T) == [b"new-1"]


def _claim():  # type: ignore[no-untyped-def]
    from magnetar.core.ports import ProducerClaim

    return ProducerClaim("late", 1_700_000_000_000, messages=1, size=9)


def _record_of(broker, ledger: int, entry: int, payload: bytes) -> bytes:  # type: ignore[no-untyped-def]
    """A journal record of `payload` under the given ids, as the writer encodes it."""
    records_before = len(broker.journal.records)
    other = TopicName.parse("template")
    broker.writer.append(other, Batch.of([Message(payload)], batched=False), "p")
    data = broker.journal.records[records_before].data
    del broker.journal.records[records_before:]
    template = decode_entry(data)
    return encode_entry(replace(template, topic=str(T), ledger_id=ledger, entry_id=entry))


def test_delete_refuses_while_in_use_unless_forced() -> None:
    broker = memory_broker()
    publish(broker, T, [b"x"])
    broker.writer.attach_producer(T, "live-producer", "Shared", 30_000)
    with pytest.raises(PreconditionFailed, match="active producers/subscriptions"):
        broker.deletion.delete_topic(T)
    broker.writer.detach_producer(T, "live-producer")
    broker.subscriptions.subscribe(T, "s", "c", "Exclusive", "Earliest")
    with pytest.raises(PreconditionFailed, match="1 connected consumers"):
        broker.deletion.delete_topic(T)
    broker.clock.advance(60_000)  # the consumer's lease ran out: a subscription alone is no use
    broker.deletion.delete_topic(T)
    assert str(T) not in broker.admin.list_topics(NS)


@pytest.mark.parametrize("point", ["delete.after_fence", "delete.after_items", "delete.after_objects"])
def test_a_deletion_that_dies_halfway_is_finished_by_a_retry(point: str) -> None:
    broker = memory_broker()
    publish(broker, T, [b"old-1", b"old-2"])
    broker.subscriptions.subscribe(T, "s", "c", "Shared", "Earliest")
    crashpoints.enable(point)
    try:
        with pytest.raises(crashpoints.SimulatedCrash):
            broker.deletion.delete_topic(T, force=True)
    finally:
        crashpoints.disable_all()
    # nothing readable half-deleted, and the name is not created again meanwhile
    with pytest.raises(TopicNotFound):
        broker.stats.topic_stats(T)
    with pytest.raises(TopicNotFound):
        broker.read_entries(T, 0, 10)
    with pytest.raises(TopicNotFound):
        broker.writer.append(T, Batch.of([Message(b"during")], batched=False), "p")
    assert str(T) in broker.admin.list_topics(NS), "still listed: the retry finds it"
    broker.deletion.delete_topic(T)  # not forced: the retry of a deletion under way needs no idle topic
    assert str(T) not in broker.admin.list_topics(NS) and not broker.segments.objects
    publish(broker, T, [b"new"])
    assert read_all(broker, T) == [b"new"]


def test_a_subscribe_racing_the_deletion_leaves_no_cursor() -> None:
    broker = memory_broker()
    publish(broker, T, [b"x"])
    fence = broker.metadata.fence_topic(T, broker.clock.now_ms())
    assert fence is not None
    with pytest.raises(TopicNotFound):
        broker.subscriptions.subscribe(T, "late-sub", "c", "Exclusive", "Earliest")
    broker.deletion.delete_topic(T)
    broker.admin.create_topic(T)
    assert broker.admin.list_subscriptions(T) == []


def test_a_partitioned_topic_is_deleted_with_every_partition() -> None:
    broker = memory_broker()
    P = TopicName.parse("parts")
    broker.admin.create_partitioned_topic(P, 3)
    for i in range(3):
        publish(broker, P.partition(i), [f"p{i}".encode()])
    with pytest.raises(Conflict, match="partitioned topic"):
        broker.deletion.delete_topic(P)
    with pytest.raises(PreconditionFailed):
        broker.deletion.delete_partitioned_topic(P.partition(0))
    report = broker.deletion.delete_partitioned_topic(P)
    assert report.partitions == 3 and report.objects == 3
    assert broker.admin.list_partitioned_topics(NS) == [] and broker.admin.list_topics(NS) == []
    with pytest.raises(NotFound):
        broker.deletion.delete_partitioned_topic(P)
    broker.admin.create_partitioned_topic(P, 2)  # created again, empty
    assert read_all(broker, P.partition(0)) == []


def test_the_topic_counter_goes_down() -> None:
    broker = memory_broker()
    broker.admin.set_policy(NS, MAX_TOPICS, 2)
    broker.admin.create_topic(T)
    broker.admin.create_topic(TopicName.parse("other"))
    broker.deletion.delete_topic(T)
    broker.admin.create_topic(TopicName.parse("third"))  # room again


def test_namespaces_and_tenants() -> None:
    broker = memory_broker()
    ns = NamespaceName("public", "gone")
    broker.admin.create_namespace(ns)
    topic = TopicName.parse("persistent://public/gone/t")
    publish(broker, topic, [b"x"])
    with pytest.raises(Conflict, match="Cannot delete non empty namespace"):
        broker.deletion.delete_namespace(ns)
    with pytest.raises(Conflict, match="still has active namespaces"):
        broker.deletion.delete_tenant("public")
    report = broker.deletion.delete_namespace(ns, force=True)
    assert report.topics == 1 and report.namespaces == 1
    with pytest.raises(NotFound):
        broker.admin.get_namespace(ns)
    with pytest.raises(NotFound):
        broker.deletion.delete_namespace(ns)

    broker.admin.create_tenant("acme", [], None)
    broker.admin.create_namespace(NamespaceName("acme", "a"))
    publish(broker, TopicName.parse("persistent://acme/a/t"), [b"x"])
    broker.deletion.delete_tenant("acme", force=True)
    assert "acme" not in broker.admin.list_tenants()
    with pytest.raises(NotFound):
        broker.deletion.delete_tenant("acme")


def test_a_namespace_being_deleted_takes_no_new_topic() -> None:
    broker = memory_broker()
    ns = NamespaceName("public", "closing")
    broker.admin.create_namespace(ns)
    crashpoints.enable("delete.after_namespace_topics")
    try:
        with pytest.raises(crashpoints.SimulatedCrash):
            broker.deletion.delete_namespace(ns, force=True)
    finally:
        crashpoints.disable_all()
    with pytest.raises(NotFound):
        broker.writer.append(TopicName.parse("persistent://public/closing/t"), Batch.of([Message(b"x")]), "p")
    broker.deletion.delete_namespace(ns)
    with pytest.raises(NotFound):
        broker.admin.get_namespace(ns)
