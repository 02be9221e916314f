"""Group appends on in-memory ports: several consecutive entries in one reservation and one
journal record (an envelope), read back by the sealer, the tail reader, the push plan and
deduplication."""

from __future__ import annotations

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core import crashpoints
from magnetar.core import policies as rules
from magnetar.core.entry import Batch, Message, decode_entry, encode_entry, make_entry, record_entries
from magnetar.core.errors import InvalidInput, PayloadTooLarge, RetryableError, TooManyRequests
from magnetar.core.ledger import HOLE_GRACE_MS, WRITE_DEADLINE_MS
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.ports import ProducerClaim

T = TopicName.parse("groups")
NS = NamespaceName("public", "default")


def batch(first_seq: int, n: int = 2, key: str | None = None, size: int = 8) -> Batch:
    messages = [Message(f"{first_seq + i}".encode().ljust(size, b"."), key=key) for i in range(n)]
    return Batch.of(messages, sequence_id=first_seq, highest_sequence_id=first_seq + n - 1)


def group(first_seq: int, batches: int, n: int = 2) -> list[Batch]:
    return [batch(first_seq + i * n, n) for i in range(batches)]


def dedup_broker(clock: ManualClock):  # type: ignore[no-untyped-def]
    broker = memory_broker(clock)
    broker.admin.set_policy(NS, "deduplicationEnabled", True)
    return broker


def payloads(entries) -> list[bytes]:  # type: ignore[no-untyped-def]
    return [m.payload.rstrip(b".") for e in entries if not e.hole for m in e.messages]


def test_a_group_takes_consecutive_ids_in_one_record_and_reads_back_in_order() -> None:
    broker = memory_broker()
    single = broker.writer.append(T, batch(0), "p")  # entry 0: a plain record
    results = broker.writer.append_group(T, group(2, 3), "p")  # entries 1-3: one envelope
    assert single.entry_id == 0 and [r.entry_id for r in results] == [1, 2, 3]
    assert [str(m) for m in results[2].message_ids] == ["0:3:-1:0", "0:3:-1:1"]
    assert len(broker.journal.records) == 2
    inside = record_entries(broker.journal.records[1].data)
    assert [decode_entry(d).entry_id for d in inside] == [1, 2, 3]
    assert record_entries(broker.journal.records[0].data) == [broker.journal.records[0].data]  # old records
    # the journal tail serves them before sealing, the segments after
    assert payloads(broker.read_entries(T, 0, 10)) == [str(i).encode() for i in range(8)]
    outcome = broker.sealer.seal(list(broker.journal.records))
    assert outcome.sealed_entries == 4 and outcome.retry_from is None
    state = broker.metadata.get_seal_states([str(T)])[str(T)]
    assert state.next_entry == 4 and state.sealed_messages == 8
    assert state.last_position == broker.journal.records[1].position
    assert payloads(broker.reader._read_sealed(T, 0, 10)) == [str(i).encode() for i in range(8)]
    assert broker.sealer.seal(list(broker.journal.records)).sealed_entries == 0  # a replay seals nothing


def test_a_tail_read_that_stops_inside_an_envelope_continues_with_its_rest() -> None:
    broker = memory_broker()
    broker.writer.append_group(T, group(0, 4), "p")  # entries 0-3 in one record
    seal, writer = broker.metadata.get_topic_state(T)
    first = broker.reader.read(T, 0, 2, seal, writer)
    rest = broker.reader.read(T, 2, 10, seal, writer)
    assert [e.entry_id for e in first] == [0, 1] and [e.entry_id for e in rest] == [2, 3]


def test_a_segment_ending_inside_an_envelope_keeps_the_record_for_tail_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    from magnetar.core.ledger import sealer

    monkeypatch.setattr(sealer, "MAX_SEGMENT_ENTRIES", 3)
    broker = memory_broker()
    broker.writer.append(T, batch(0), "p")
    broker.writer.append_group(T, group(2, 4), "p")  # entries 1-4: segments [0-2] and [3-4]
    outcome = broker.sealer.seal(list(broker.journal.records))
    assert outcome.sealed_entries == 5 and outcome.segments_written == 2
    assert broker.metadata.get_seal_states([str(T)])[str(T)].last_position == broker.journal.records[1].position
    assert payloads(broker.read_entries(T, 0, 10)) == [str(i).encode() for i in range(10)]


def test_a_group_whose_writer_died_becomes_holes_all_together() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.writer.append(T, batch(0), "p")
    crashpoints.enable("produce.after_reserve")
    with pytest.raises(crashpoints.SimulatedCrash):
        broker.writer.append_group(T, group(2, 3), "p")  # ids 1-3 reserved, never written
    broker.writer.append(T, batch(8), "p")  # entry 4
    outcome = broker.sealer.seal(list(broker.journal.records))
    assert outcome.sealed_entries == 1 and outcome.retry_from is not None
    clock.advance(HOLE_GRACE_MS + 1)
    broker.sealer.seal(list(broker.journal.records))  # appends the tombstones to the journal
    outcome = broker.sealer.seal(list(broker.journal.records))
    assert outcome.holes == 3 and outcome.sealed_entries == 4
    entries = broker.read_entries(T, 0, 10)
    assert [(e.entry_id, e.hole) for e in entries] == [(0, False), (1, True), (2, True), (3, True), (4, False)]


def test_a_retried_group_gets_its_original_ids_and_is_stored_once() -> None:
    clock = ManualClock()
    broker = dedup_broker(clock)
    first = broker.writer.append_group(T, group(0, 3), "p")
    again = broker.writer.append_group(T, group(0, 3), "p")  # within the deadline: written again, same ids
    assert all(r.duplicate for r in again)
    assert [r.message_ids for r in again] == [r.message_ids for r in first]
    clock.advance(WRITE_DEADLINE_MS + 1)
    broker.sealer.seal(list(broker.journal.records))
    late = broker.writer.append_group(T, group(0, 3), "p")  # settled: the stored entries answer
    assert [r.message_ids for r in late] == [r.message_ids for r in first]
    state = broker.metadata.get_seal_states([str(T)])[str(T)]
    assert state.next_entry == 3 and state.sealed_messages == 6
    assert broker.metadata.last_sequence_id(T, "p") == 5


@pytest.mark.parametrize("point", ["produce.after_reserve", "produce.after_journal_write"])
def test_a_group_retried_after_a_crash_is_stored_once(point: str) -> None:
    clock = ManualClock()
    broker = dedup_broker(clock)
    crashpoints.enable(point)
    with pytest.raises(crashpoints.SimulatedCrash):
        broker.writer.append_group(T, group(0, 3), "p")
    retried = broker.writer.append_group(T, group(0, 3), "p")
    assert [r.entry_id for r in retried] == [0, 1, 2]
    broker.sealer.seal(list(broker.journal.records))
    assert payloads(broker.read_entries(T, 0, 10)) == [str(i).encode() for i in range(6)]


def test_a_group_retried_after_its_ids_became_holes_is_published_for_real() -> None:
    clock = ManualClock()
    broker = dedup_broker(clock)
    crashpoints.enable("produce.after_reserve")
    with pytest.raises(crashpoints.SimulatedCrash):
        broker.writer.append_group(T, group(0, 2), "p")  # ids 0-1 lost
    broker.writer.append(T, batch(100), "other")  # entry 2: lets the sealer declare the holes
    clock.advance(HOLE_GRACE_MS + 1)
    broker.sealer.seal(list(broker.journal.records))  # appends the tombstones to the journal
    assert broker.sealer.seal(list(broker.journal.records)).holes == 2
    retried = broker.writer.append_group(T, group(0, 2), "p")
    assert [r.entry_id for r in retried] == [3, 4] and not any(r.duplicate for r in retried)
    broker.sealer.seal(list(broker.journal.records))
    assert payloads(broker.read_entries(T, 0, 10)) == [b"100", b"101", b"0", b"1", b"2", b"3"]


def test_a_partial_overlap_stores_only_the_new_batches() -> None:
    clock = ManualClock()
    broker = dedup_broker(clock)
    broker.writer.append_group(T, group(0, 3), "p")  # seq 0-5, entries 0-2
    with pytest.raises(RetryableError):  # overlaps an unsettled publish of another shape: retry
        broker.writer.append_group(T, [batch(4), batch(6)], "p")
    clock.advance(WRITE_DEADLINE_MS + 1)
    broker.sealer.seal(list(broker.journal.records))
    overlap = broker.writer.append_group(T, [batch(4), batch(6)], "p")  # seq 4-5 stored, 6-7 new
    assert overlap[0].duplicate and overlap[0].entry_id == -1
    assert not overlap[1].duplicate and overlap[1].entry_id == 3
    older = broker.writer.append_group(T, [batch(2), batch(8)], "p")  # seq 2-3 long stored, 8-9 new
    assert older[0].duplicate and older[1].entry_id == 4
    broker.sealer.seal(list(broker.journal.records))
    assert payloads(broker.read_entries(T, 0, 10)) == [str(i).encode() for i in range(10)]


def test_the_admission_checks_cover_the_whole_group() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.admin.set_policy(NS, rules.PUBLISH_RATE, rules.check_publish_rate(10, -1))
    broker.writer.append_group(T, group(0, 6), "p")  # 12 messages: past the one second of burst
    with pytest.raises(TooManyRequests):
        broker.writer.append_group(T, group(12, 2), "p")
    assert broker.metadata.get_topic_state(T)[1].next_entry == 6, "a refused group takes no id"
    big = [batch(0, 1, size=400 * 1024) for _ in range(3)]
    with pytest.raises(PayloadTooLarge):
        memory_broker().writer.append_group(T, big, "p")
    with pytest.raises(InvalidInput):
        memory_broker().writer.append_group(T, [], "p")


def test_a_claim_of_several_ids_is_one_reservation() -> None:
    broker = memory_broker()
    broker.writer.append(T, batch(0), "p")
    reservation = broker.metadata.reserve_entry(T, ProducerClaim("p", 0, entries=5))
    assert reservation.entry_id == 1 and broker.metadata.get_topic_state(T)[1].next_entry == 6


def test_the_push_plan_decodes_the_entries_of_an_envelope() -> None:
    from magnetar.adapters.memory_push import MemoryConnectionRegistry
    from magnetar.core.ports.push import Connection
    from magnetar.core.push import PushService

    broker = memory_broker()
    registry = MemoryConnectionRegistry()
    registry.add(Connection("c1", "consumer", str(T), broker.clock.now_ms(), "c1", "s"))
    broker.metadata.announce_push_connection(T)  # as the connect does
    push = PushService(broker, registry, gateway=None)  # type: ignore[arg-type]
    broker.writer.append_group(T, group(0, 3), "p")
    records = list(broker.journal.records)
    plan = push.plan_journal_batch(records)
    assert [entry_id for entry_id, _ in plan.settled[str(T)]] == [0, 1, 2]
    broker.sealer.seal(records, plan.states)
    push.dispatch_journal_batch(plan)  # the connection's pushes fail here (no gateway): not the point
    assert [broker.cache.get(str(T), i).num_messages for i in range(3)] == [2, 2, 2]  # type: ignore[union-attr]


def test_an_envelope_of_one_entry_is_the_entry_itself() -> None:
    from magnetar.core.entry import encode_envelope

    entry = encode_entry(make_entry(str(T), 0, 7, 1, 1, "p", batch(0)))
    assert encode_envelope([entry]) == entry and record_entries(entry) == [entry]
    with pytest.raises(InvalidInput):
        record_entries(b"\xc1garbage")


def test_several_producers_batches_take_one_reservation_and_one_record() -> None:
    """A client's producers of one topic publishing together: each entry names its producer, and
    each producer's stats count its own messages."""
    broker = memory_broker()
    results = broker.writer.append_group(T, [batch(0), batch(0, 3), batch(2)], "a", producers=["a", "b", "a"])
    assert [r.entry_id for r in results] == [0, 1, 2]
    assert len(broker.journal.records) == 1
    inside = [decode_entry(d) for d in record_entries(broker.journal.records[0].data)]
    assert [e.producer_name for e in inside] == ["a", "b", "a"]
    _, writer = broker.metadata.get_topic_state(T)
    assert writer.next_entry == 3 and writer.messages_in == 7
    assert (writer.producers["a"].messages, writer.producers["b"].messages) == (4, 3)


def test_an_exclusive_producer_fences_a_publish_carrying_any_other_producer() -> None:
    from magnetar.core.errors import ProducerFenced

    broker = memory_broker()
    broker.writer.append(T, batch(0), "x")
    broker.writer.attach_producer(T, "x", "Exclusive", 60_000)
    with pytest.raises(ProducerFenced):
        broker.writer.append_group(T, [batch(2), batch(4)], "x", producers=["x", "y"])
    assert broker.metadata.get_topic_state(T)[1].next_entry == 1, "refused: no id taken"


def test_with_deduplication_each_producers_batches_are_a_group_of_their_own() -> None:
    broker = dedup_broker(ManualClock())
    first = broker.writer.append_group(T, [batch(0), batch(0), batch(2)], "a", producers=["a", "b", "a"])
    assert [r.entry_id for r in first] == [0, 2, 1]  # a's two batches, then b's
    assert broker.metadata.last_sequence_id(T, "a") == 3 and broker.metadata.last_sequence_id(T, "b") == 1
    again = broker.writer.append_group(T, [batch(0), batch(0), batch(2)], "a", producers=["a", "b", "a"])
    assert all(r.duplicate for r in again) and [r.entry_id for r in again] == [0, 2, 1]
    with pytest.raises(InvalidInput):
        broker.writer.append_group(T, [batch(4)], "a", producers=["a", "b"])
