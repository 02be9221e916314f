"""A writer that certainly did not store its record tombstones its own ids at once, so the sealer
does not hold the partition's later entries for the hole grace (in-memory ports)."""

from __future__ import annotations

import pytest
from tests.unit.stalls import stalled

from magnetar.adapters.memory import ManualClock, MemoryJournal, memory_broker
from magnetar.core.entry import Batch, Message, record_headers
from magnetar.core.errors import JournalRefused, RetryableError
from magnetar.core.ledger.writer import FENCE_PATIENCE_S
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.ports import JournalPosition

T = TopicName.parse("persistent://public/default/fenced")


class RefusingJournal:
    """The memory journal behind a shard that refuses the next `refusals` appends for certain."""

    def __init__(self, inner: MemoryJournal, refusals: int) -> None:
        self.inner, self.max_record_bytes, self.refusals = inner, inner.max_record_bytes, refusals
        self.patience: list[float | None] = []

    def append(self, partition_key: str, data: bytes, patience_s: float | None = None) -> JournalPosition:
        self.patience.append(patience_s)
        if self.refusals > 0:
            self.refusals -= 1
            raise JournalRefused("The journal's shard refused the write (write throughput exceeded); retry")
        return self.inner.append(partition_key, data, patience_s)

    def read_after(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return self.inner.read_after(*args, **kwargs)

    def read_shard_after(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return self.inner.read_shard_after(*args, **kwargs)


def batch(text: str, seq: int = -1) -> Batch:
    return Batch.of([Message(text.encode())], sequence_id=seq, highest_sequence_id=seq)


def seal(broker):  # type: ignore[no-untyped-def]
    return broker.sealer.seal(list(broker.journal.records))


def sealed(broker) -> list[tuple[int, bool]]:  # type: ignore[no-untyped-def]
    return [(e.entry_id, e.hole) for e in broker.reader._read_sealed(T, 0, 100)]


def test_a_refused_write_tombstones_its_ids_and_the_next_entries_seal_without_waiting() -> None:
    broker = memory_broker(ManualClock())
    broker.writer.append(T, batch("a"), "p")  # entry 0
    refusing = RefusingJournal(broker.journal, refusals=1)
    broker.writer.journal = refusing  # type: ignore[assignment]
    with pytest.raises(JournalRefused):
        broker.writer.append_group(T, [batch("b"), batch("c")], "p")  # ids 1, 2: refused
    assert refusing.patience == [None, FENCE_PATIENCE_S], "the write, then its tombstones (a shorter patience)"
    tombstones = [(h.entry_id, h.hole) for _, h in record_headers(broker.journal.records[-1].data)]
    assert tombstones == [(1, True), (2, True)]
    broker.writer.append(T, batch("d"), "p")  # the client's retry: entry 3
    outcome = seal(broker)  # no clock advance: nothing waits for the hole grace
    assert (outcome.sealed_entries, outcome.holes, outcome.retry_from) == (4, 2, None)
    assert sealed(broker) == [(0, False), (1, True), (2, True), (3, False)]


def test_with_deduplication_a_refused_write_leaves_its_ids_to_the_retry() -> None:
    """The retry of a deduplicated publish writes the same ids again within the deadline: a
    tombstone before it would turn the retried (acknowledged) record into a late one."""
    broker = memory_broker(ManualClock())
    broker.admin.set_policy(NamespaceName("public", "default"), "deduplicationEnabled", True)
    refusing = RefusingJournal(broker.journal, refusals=1)
    broker.writer.journal = refusing  # type: ignore[assignment]
    with pytest.raises(JournalRefused):
        broker.writer.append(T, batch("a", seq=0), "p")
    assert broker.journal.records == [] and refusing.patience == [None], "no tombstone"
    again = broker.writer.append(T, batch("a", seq=0), "p")  # the retry: the same id, now stored
    assert (again.entry_id, again.duplicate) == (0, True)
    seal(broker)
    assert sealed(broker) == [(0, False)]


def test_a_writer_past_its_deadline_before_the_write_tombstones_its_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    with stalled(clock, "produce.before_journal_write", monkeypatch), pytest.raises(RetryableError, match="expired before"):
        broker.writer.append(T, batch("stalled"), "p")
    assert [(h.entry_id, h.hole) for _, h in record_headers(broker.journal.records[-1].data)] == [(0, True)]
    broker.writer.append(T, batch("next"), "p")
    assert seal(broker).retry_from is None
    assert sealed(broker) == [(0, True), (1, False)]


def test_a_refused_tombstone_leaves_the_ids_to_the_sealers_fence() -> None:
    broker = memory_broker(ManualClock())
    refusing = RefusingJournal(broker.journal, refusals=2)  # the write and its tombstones
    broker.writer.journal = refusing  # type: ignore[assignment]
    with pytest.raises(JournalRefused):  # the publish's own error, not the tombstone's
        broker.writer.append(T, batch("a"), "p")
    assert broker.journal.records == []
    broker.writer.append(T, batch("b"), "p")  # entry 1
    outcome = seal(broker)
    assert outcome.sealed_entries == 0 and outcome.retry_from is not None, "id 0 waits for the grace"
