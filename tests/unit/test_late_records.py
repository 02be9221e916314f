"""Late journal writes on in-memory ports: no acknowledgement after the deadline, and a record
reaching the sealer after its ids were sealed as holes is re-appended exactly once (or
dead-lettered), crash-safe."""

from __future__ import annotations

import pytest
from tests.unit.stalls import stalled

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core import crashpoints, delaypoints
from magnetar.core.entry import Batch, Message, record_headers
from magnetar.core.errors import RetryableError
from magnetar.core.ledger import HOLE_GRACE_MS, WRITE_DEADLINE_MS
from magnetar.core.ledger.late import LATE_PRODUCER_PREFIX
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.ports import JournalRecord, ProducerClaim

T = TopicName.parse("late")
NS = NamespaceName("public", "default")


def batch(seq: int, text: str) -> Batch:
    return Batch.of([Message(text.encode())], sequence_id=seq, highest_sequence_id=seq)


def held_back(broker) -> JournalRecord:  # type: ignore[no-untyped-def]
    """The journal's last record, taken out: a write still in flight."""
    return broker.journal.records.pop()


def land(broker, record: JournalRecord) -> None:  # type: ignore[no-untyped-def]
    """The held record lands now, after everything written meanwhile."""
    broker.journal.append(record.partition_key, record.data)


def seal(broker):  # type: ignore[no-untyped-def]
    return broker.sealer.seal(list(broker.journal.records))


def seal_holes(broker):  # type: ignore[no-untyped-def]
    """Past the grace: the sealer tombstones the missing ids through the journal, then seals them."""
    fenced = seal(broker)
    assert fenced.holes == 0 and fenced.retry_from is not None
    return seal(broker)


def stored(broker) -> list[tuple[int, bool, str]]:  # type: ignore[no-untyped-def]
    entries = broker.reader._read_sealed(T, 0, 100)
    return [(e.entry_id, e.hole, "" if e.hole else b"".join(m.payload for m in e.messages).decode())
            for e in entries]


def test_a_journal_write_completing_after_the_deadline_is_not_acknowledged() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)

    class SlowJournal:  # the write lands, but takes longer than the reservation's deadline
        def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
            self.inner, self.max_record_bytes = inner, inner.max_record_bytes

        def append(self, key: str, data: bytes):  # type: ignore[no-untyped-def]
            clock.advance(WRITE_DEADLINE_MS + 1)
            return self.inner.append(key, data)

    broker.writer.journal = SlowJournal(broker.journal)  # type: ignore[assignment]
    with pytest.raises(RetryableError, match="after the reservation's deadline"):
        broker.writer.append(T, batch(-1, "slow"), "p")
    assert len(broker.journal.records) == 1, "durable, only not acknowledged"


def test_a_delay_point_stalls_the_writer_past_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    with stalled(clock, "produce.after_journal_write", monkeypatch), pytest.raises(RetryableError):
        broker.writer.append(T, batch(-1, "stalled"), "p")
    assert delaypoints.fired["produce.after_journal_write"] >= 1
    assert broker.writer.append(T, batch(-1, "next"), "p").entry_id == 1


def test_a_record_landing_after_its_hole_is_reappended_once_under_a_new_id() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.writer.append(T, batch(-1, "late"), "slow")  # entry 0 (acknowledged here: clocks lied)
    record = held_back(broker)
    broker.writer.append(T, batch(-1, "next"), "fast")  # entry 1
    clock.advance(HOLE_GRACE_MS + 1)
    assert seal_holes(broker).holes == 1
    land(broker, record)
    outcome = seal(broker)
    assert (outcome.late_after_hole, outcome.late_reappended) == (1, 1)
    moved = [h.entry_id for _, h in record_headers(broker.journal.records[-1].data)]
    assert moved == [2]
    seal(broker)
    assert stored(broker) == [(0, True, ""), (1, False, "next"), (2, False, "late")]
    # replays of the whole journal re-append nothing more: the mark holds
    for _ in range(2):
        again = seal(broker)
        assert again.late_reappended == 0 and again.retry_from is None
    seal(broker)
    assert stored(broker) == [(0, True, ""), (1, False, "next"), (2, False, "late")]
    assert broker.writer.append(T, batch(-1, "after"), "fast").entry_id == 3
    publishers = broker.metadata.get_topic_state(T)[1].producers
    assert f"{LATE_PRODUCER_PREFIX}0-0" in publishers


@pytest.mark.parametrize("wait", [0, "grace"])
def test_a_reappend_killed_before_its_journal_write_is_finished_by_the_replay(wait: object) -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.writer.append(T, batch(-1, "late"), "slow")
    record = held_back(broker)
    broker.writer.append(T, batch(-1, "next"), "fast")
    clock.advance(HOLE_GRACE_MS + 1)
    seal_holes(broker)
    land(broker, record)
    real_append = broker.journal.append
    calls = []

    def dying(key: str, data: bytes):  # type: ignore[no-untyped-def]
        calls.append(key)
        raise crashpoints.SimulatedCrash("journal consumer killed before the re-append's write")

    broker.sealer.late.journal.append = dying  # type: ignore[union-attr,method-assign]
    with pytest.raises(crashpoints.SimulatedCrash):
        seal(broker)
    broker.sealer.late.journal.append = real_append  # type: ignore[union-attr,method-assign]
    assert calls, "id 2 was reserved, its record never written"
    if wait == "grace":  # the replay comes after id 2 itself became a hole
        broker.writer.append(T, batch(-1, "later"), "fast")  # entry 3
        clock.advance(HOLE_GRACE_MS + 1)
        seal(broker)  # id 2 tombstoned through the journal
        first = seal(broker)
        assert first.holes == 1 and first.late_reappended == 1  # id 2 a hole, the record now as 4
        seal(broker)
        assert stored(broker) == [(0, True, ""), (1, False, "next"), (2, True, ""), (3, False, "later"),
                                  (4, False, "late")]
    else:
        seal(broker)  # within the deadline: the same id 2 is written
        seal(broker)
        assert stored(broker) == [(0, True, ""), (1, False, "next"), (2, False, "late")]
    for _ in range(2):
        assert seal(broker).late_reappended == 0


def test_with_deduplication_the_producers_retry_and_the_reappend_store_one_copy() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.admin.set_policy(NS, "deduplicationEnabled", True)
    broker.writer.append(T, batch(0, "late"), "p")  # seq 0 as entry 0, its write in flight
    record = held_back(broker)
    broker.writer.append(T, batch(0, "next"), "q")  # entry 1
    clock.advance(HOLE_GRACE_MS + 1)
    seal_holes(broker)  # 0 is a hole
    retried = broker.writer.append(T, batch(0, "late"), "p")  # the producer's retry: published for real
    assert retried.entry_id == 2 and not retried.duplicate
    land(broker, record)
    outcome = seal(broker)
    assert outcome.late_after_hole == 1 and outcome.late_reappended == 0  # it found the retry's id 2
    seal(broker)
    clock.advance(WRITE_DEADLINE_MS + 1)
    seal(broker)
    assert stored(broker) == [(0, True, ""), (1, False, "next"), (2, False, "late")]
    # the producer moves on; a replay of the late record is then dead-lettered, never appended
    broker.writer.append(T, batch(1, "more"), "p")
    replay = seal(broker)
    assert replay.late_dead_lettered == 1 and replay.late_reappended == 0
    assert any(k.startswith("dead-letter/") for k in broker.segments.objects)
    seal(broker)
    assert [s for _, _, s in stored(broker)] == ["", "next", "late", "more"]


def test_with_deduplication_the_reappend_first_and_the_retry_resolves_to_its_id() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.admin.set_policy(NS, "deduplicationEnabled", True)
    broker.writer.append(T, batch(0, "late"), "p")
    record = held_back(broker)
    broker.writer.append(T, batch(0, "next"), "q")
    clock.advance(HOLE_GRACE_MS + 1)
    seal_holes(broker)
    land(broker, record)
    assert seal(broker).late_reappended == 1  # as entry 2, under p's sequence id 0
    retried = broker.writer.append(T, batch(0, "late"), "p")
    assert retried.entry_id == 2 and retried.duplicate
    seal(broker)
    clock.advance(WRITE_DEADLINE_MS + 1)
    assert broker.writer.append(T, batch(0, "late"), "p").entry_id == 2
    assert stored(broker) == [(0, True, ""), (1, False, "next"), (2, False, "late")]


def test_a_lagging_sealer_cannot_turn_a_record_behind_its_batch_into_a_hole() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.writer.append(T, batch(-1, "a"), "slow")  # entry 0 ...
    first = held_back(broker)
    broker.writer.append(T, batch(-1, "b"), "fast")  # entry 1 lands first
    land(broker, first)  # ... and entry 0 right behind it, in time: acknowledged
    clock.advance(HOLE_GRACE_MS + 1)  # the sealer reads late, and its batch ends before entry 0
    lagging = broker.sealer.seal(broker.journal.records[:1])
    assert lagging.holes == 0 and lagging.retry_from is not None  # a tombstone for 0, behind the record
    outcome = seal(broker)
    assert outcome.holes == 0 and outcome.late_after_hole == 0
    assert stored(broker) == [(0, False, "a"), (1, False, "b")]


def test_a_tombstone_out_of_reach_holds_the_partition_for_two_graces_at_most() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.writer.append(T, batch(-1, "first"), "fast")  # entry 0
    broker.metadata.reserve_entry(T, ProducerClaim("dead", clock.now))  # entry 1: its writer died
    broker.writer.append(T, batch(-1, "next"), "fast")  # entry 2
    batch_window = list(broker.journal.records)  # the mapping's batch ends before the tombstone
    clock.advance(HOLE_GRACE_MS + 1)
    fenced = broker.sealer.seal(batch_window)
    assert fenced.holes == 0 and len(broker.journal.records) == 3  # tombstone appended, out of the window
    clock.advance(HOLE_GRACE_MS)
    outcome = broker.sealer.seal(batch_window)  # twice the grace: the clock decides
    assert outcome.holes == 1 and outcome.retry_from is None
    assert stored(broker) == [(0, False, "first"), (1, True, ""), (2, False, "next")]
    assert seal(broker).holes == 0  # the tombstone read back later is dropped
