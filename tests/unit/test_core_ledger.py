"""The core on in-memory ports: ids, sealing, holes, cursors, dispatch."""

from __future__ import annotations

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.acks import Acks
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import ConsumerBusy, InvalidInput, NotAllowed, NotFound, PayloadTooLarge
from magnetar.core.ledger import HOLE_GRACE_MS
from magnetar.core.naming import TopicName
from magnetar.core.ports import ProducerClaim

T = TopicName.parse("orders")


def publish(broker, n: int, topic: TopicName = T, per_entry: int = 1):  # type: ignore[no-untyped-def]
    ids = []
    for i in range(n):
        msgs = [Message(f"m{i}-{j}".encode(), key=f"k{i}") for j in range(per_entry)]
        ids.append(broker.writer.append(topic, Batch.of(msgs, batched=per_entry > 1, sequence_id=i), "p"))
    return ids


def seal_all(broker):  # type: ignore[no-untyped-def]
    records = list(broker.journal.records)
    return broker.sealer.seal(records)


def test_entry_ids_are_dense_and_returned_at_append() -> None:
    broker = memory_broker()
    results = publish(broker, 5, per_entry=3)
    assert [r.entry_id for r in results] == [0, 1, 2, 3, 4]
    assert [str(m) for m in results[1].message_ids] == ["0:1:-1:0", "0:1:-1:1", "0:1:-1:2"]


def test_seal_is_idempotent_under_replay() -> None:
    broker = memory_broker()
    publish(broker, 10)
    first = seal_all(broker)
    again = seal_all(broker)
    assert first.sealed_entries == 10 and again.sealed_entries == 0
    state = broker.metadata.get_seal_states([str(T)])[str(T)]
    assert state.next_entry == 10 and state.sealed_messages == 10


def test_out_of_order_journal_waits_then_holes_after_grace() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    publish(broker, 2)
    broker.metadata.reserve_entry(T, ProducerClaim("p", clock.now))  # entry 2: its writer died before the journal write
    publish(broker, 2)  # entries 3, 4
    outcome = seal_all(broker)
    assert outcome.sealed_entries == 2 and outcome.retry_from is not None
    clock.advance(HOLE_GRACE_MS + 1)
    outcome = seal_all(broker)  # the sealer appends a tombstone for entry 2 to the journal
    assert outcome.holes == 0 and outcome.retry_from is not None
    outcome = seal_all(broker)  # ... and seals it when it reads it back
    assert outcome.holes == 1 and outcome.sealed_entries == 3 and outcome.retry_from is None
    # consumers skip the hole
    broker.subscriptions.subscribe(T, "s", "c1", "Exclusive", "Earliest")
    got = broker.subscriptions.receive(T, "s", "c1", max_messages=100).entries
    assert [d.entry.entry_id for d in got] == [0, 1, 3, 4]


def test_receive_reads_sealed_and_tail_and_acks_move_mark_delete() -> None:
    broker = memory_broker()
    publish(broker, 3)
    seal_all(broker)
    publish(broker, 3)  # unsealed: served from the journal tail
    broker.subscriptions.subscribe(T, "s", "c1", "Exclusive", "Earliest")
    got = broker.subscriptions.receive(T, "s", "c1", max_messages=100).entries
    assert [d.entry.entry_id for d in got] == [0, 1, 2, 3, 4, 5]
    state = broker.subscriptions.acknowledge(T, "s", Acks((0, 1, 3)))
    assert state.mark_delete == 2 and state.acked == [[3, 4]]
    state = broker.subscriptions.acknowledge(T, "s", Acks(cumulative=(5, 1, -1)))
    assert state.mark_delete == 6 and state.deliveries == []


def test_latest_subscription_skips_existing_messages() -> None:
    broker = memory_broker()
    publish(broker, 3)
    broker.subscriptions.subscribe(T, "s", "c1", "Shared", "Latest")
    publish(broker, 1)
    got = broker.subscriptions.receive(T, "s", "c1", max_messages=100).entries
    assert [d.entry.entry_id for d in got] == [3]


def test_exclusive_refuses_second_consumer_and_shared_refuses_cumulative() -> None:
    broker = memory_broker()
    broker.subscriptions.subscribe(T, "ex", "c1", "Exclusive", "Earliest")
    with pytest.raises(ConsumerBusy):
        broker.subscriptions.subscribe(T, "ex", "c2", "Exclusive", "Earliest")
    broker.subscriptions.subscribe(T, "sh", "c1", "Shared", "Earliest")
    broker.subscriptions.subscribe(T, "sh", "c2", "Shared", "Earliest")
    with pytest.raises(NotAllowed):
        broker.subscriptions.acknowledge(T, "sh", Acks(cumulative=(0, 1, -1)))


def test_shared_consumers_split_entries_and_ack_timeout_redelivers() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.subscriptions.subscribe(T, "sh", "c1", "Shared", "Earliest", ack_timeout_ms=1000)
    broker.subscriptions.subscribe(T, "sh", "c2", "Shared", "Earliest", ack_timeout_ms=1000)
    publish(broker, 4)
    a = broker.subscriptions.receive(T, "sh", "c1", max_messages=2).entries
    b = broker.subscriptions.receive(T, "sh", "c2", max_messages=2).entries
    assert [d.entry.entry_id for d in a] == [0, 1] and [d.entry.entry_id for d in b] == [2, 3]
    broker.subscriptions.acknowledge(T, "sh", Acks((0, 1)))
    clock.advance(1500)
    again = broker.subscriptions.receive(T, "sh", "c1", max_messages=10).entries
    assert [(d.entry.entry_id, d.redelivery_count) for d in again] == [(2, 1), (3, 1)]


def test_closed_consumer_messages_go_to_the_next() -> None:
    broker = memory_broker()
    broker.subscriptions.subscribe(T, "sh", "c1", "Shared", "Earliest")
    broker.subscriptions.subscribe(T, "sh", "c2", "Shared", "Earliest")
    publish(broker, 2)
    assert len(broker.subscriptions.receive(T, "sh", "c1", max_messages=10).entries) == 2
    broker.subscriptions.close_consumer(T, "sh", "c1")
    got = broker.subscriptions.receive(T, "sh", "c2", max_messages=10).entries
    assert [d.entry.entry_id for d in got] == [0, 1]


def test_retried_receive_returns_the_same_entries() -> None:
    broker = memory_broker()
    broker.subscriptions.subscribe(T, "sh", "c1", "Shared", "Earliest")
    publish(broker, 3)
    first = broker.subscriptions.receive(T, "sh", "c1", max_messages=10, request_id="r1").entries
    second = broker.subscriptions.receive(T, "sh", "c1", max_messages=10, request_id="r1").entries
    assert [d.entry.entry_id for d in first] == [d.entry.entry_id for d in second] == [0, 1, 2]


def test_bad_input_is_refused_before_anything_is_written() -> None:
    broker = memory_broker()
    assert Batch.of([Message(b"")]).validated().num_messages == 1, "an empty payload is a message, as in Pulsar"
    with pytest.raises(InvalidInput):
        Batch(b"garbage", 1, uncompressed_size=7).validated()
    with pytest.raises(PayloadTooLarge):
        broker.writer.append(T, Batch.of([Message(b"x" * (2 * 1024 * 1024))]), "p")
    with pytest.raises(NotFound):
        broker.writer.append(TopicName.parse("persistent://nope/ns/t"), Batch.of([Message(b"x")]), "p")
    assert broker.journal.records == []
    assert broker.metadata.topics == {}
    with pytest.raises(InvalidInput):
        TopicName.parse("persistent://a/b")
    with pytest.raises(NotFound):
        broker.subscriptions.receive(T, "missing", "c", max_messages=1)


def test_ledger_rolls_over_and_segments_never_span_ledgers(monkeypatch: pytest.MonkeyPatch) -> None:
    import magnetar.core.ledger as ledger

    monkeypatch.setattr(ledger.writer, "MAX_ENTRIES_PER_LEDGER", 3)
    broker = memory_broker()
    results = publish(broker, 7)
    assert [r.ledger_id for r in results] == [0, 0, 0, 1, 1, 1, 2]
    seal_all(broker)
    segs = broker.metadata.list_segments(T, 0, 10)
    assert [(s.ledger_id, s.first_entry, s.last_entry) for s in segs] == [(0, 0, 2), (1, 3, 5), (2, 6, 6)]


def test_batch_index_acks_riding_on_an_empty_poll_are_written() -> None:
    from magnetar.core.acks import Acks

    broker = memory_broker()
    broker.subscriptions.subscribe(T, "s", "c", "Shared", "Earliest", ack_timeout_ms=1000)
    broker.writer.append(T, Batch.of([Message(f"m{i}".encode()) for i in range(5)], batched=True), "p")
    broker.subscriptions.receive(T, "s", "c", 100, request_id="r1")
    broker.subscriptions.receive(T, "s", "c", 100, request_id="r2", acks=Acks(batch=((0, 5, (0, 2, 4)),), consumer="c"))
    assert broker.metadata.get_subscription_view(T, "s").cursor.batch_acks == {"0": [5, 0, 2, 4]}


def test_failover_lease_expiry_hands_unacked_and_later_messages_to_the_next_consumer() -> None:
    from magnetar.core.dispatch import DEFAULT_LEASE_MS

    clock = ManualClock()
    broker = memory_broker(clock)
    broker.subscriptions.subscribe(T, "fo", "a", "Failover", "Earliest")
    broker.subscriptions.subscribe(T, "fo", "b", "Failover", "Earliest")
    publish(broker, 2)
    assert broker.subscriptions.receive(T, "fo", "b", max_messages=10).entries == [], "b is a standby"
    got = broker.subscriptions.receive(T, "fo", "a", max_messages=1).entries
    assert [d.entry.entry_id for d in got] == [0]
    clock.advance(DEFAULT_LEASE_MS // 2 + 1)
    broker.subscriptions.receive(T, "fo", "b", max_messages=10)  # b keeps its lease alive; a is silent
    clock.advance(DEFAULT_LEASE_MS // 2 + 1)
    got = broker.subscriptions.receive(T, "fo", "b", max_messages=10).entries
    assert [(d.entry.entry_id, d.redelivery_count) for d in got] == [(0, 1), (1, 0)]


@pytest.mark.parametrize("tail_reads", [True, False])
def test_without_tail_reads_consumers_get_entries_once_sealed(tail_reads: bool) -> None:
    broker = memory_broker(tail_reads=tail_reads)
    broker.subscriptions.subscribe(T, "s", "c1", "Exclusive", "Earliest")
    publish(broker, 3)
    before = broker.subscriptions.receive(T, "s", "c1", 10).entries
    assert len(before) == (3 if tail_reads else 0)
    seal_all(broker)
    after = broker.subscriptions.receive(T, "s", "c1", 10).entries
    assert [d.entry.entry_id for d in before + after] == [0, 1, 2]


def test_topics_of_one_batch_are_sealed_side_by_side_and_a_failing_one_does_not_undo_the_others(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from magnetar.core.errors import RetryableError

    broker = memory_broker()
    topics = [TopicName.parse(f"many-{i}") for i in range(20)]
    for topic in topics:
        publish(broker, 3, topic)
    commit = broker.metadata.commit_segments
    calls: list[int] = []

    def conflicting(commits):  # type: ignore[no-untyped-def]
        calls.append(len(commits))
        applied = commit([c for c in commits if c.segment.topic != str(topics[7])])
        flags = iter(applied)
        # another sealer moved topic 7's seal state
        return [False if c.segment.topic == str(topics[7]) else next(flags) for c in commits]

    monkeypatch.setattr(broker.metadata, "commit_segments", conflicting)
    with pytest.raises(RetryableError):
        seal_all(broker)
    assert calls == [20]  # the 20 topics' commits went together
    states = broker.metadata.get_seal_states([str(t) for t in topics])
    assert [states[str(t)].next_entry if str(t) in states else 0 for t in topics] == [3] * 7 + [0] + [3] * 12
    monkeypatch.setattr(broker.metadata, "commit_segments", commit)
    outcome = seal_all(broker)  # the replay seals what is left and skips the rest
    assert outcome.sealed_entries == 3 and outcome.segments_written == 1


def test_a_receive_gets_what_it_asks_for_across_many_small_segments() -> None:
    """A trickle seals one-entry segments and a read takes a few at a time: the receive reads on."""
    from magnetar.core.ledger.reader import EntryCache

    broker = memory_broker(tail_reads=False)
    for i in range(30):  # thirty segments of one entry each
        publish(broker, 1)
        broker.sealer.seal(list(broker.journal.records)[i:])
    broker.reader.cache = EntryCache()  # a cold container: every entry comes from its segment
    broker.subscriptions.subscribe(T, "s", "c1", "Exclusive", "Earliest")
    got = broker.subscriptions.receive(T, "s", "c1", max_messages=25).entries
    assert [d.entry.entry_id for d in got] == list(range(25))
