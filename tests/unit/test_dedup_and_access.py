"""Deduplication and producer access modes on in-memory ports."""

from __future__ import annotations

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import ProducerFenced
from magnetar.core.ledger import WRITE_DEADLINE_MS
from magnetar.core.naming import NamespaceName, TopicName

T = TopicName.parse("dedup")


def batch(seq: int, text: str = "m") -> Batch:
    return Batch.of([Message(text.encode())], sequence_id=seq, highest_sequence_id=seq)


def dedup_broker(clock: ManualClock):  # type: ignore[no-untyped-def]
    broker = memory_broker(clock)
    broker.admin.set_policy(NamespaceName("public", "default"), "deduplicationEnabled", True)
    return broker


def test_a_retried_publish_is_stored_once_and_acked_with_the_original_id() -> None:
    clock = ManualClock()
    broker = dedup_broker(clock)
    first = broker.writer.append(T, batch(0), "p1")
    again = broker.writer.append(T, batch(0), "p1")
    assert again.duplicate and again.message_ids == first.message_ids
    broker.sealer.seal(list(broker.journal.records))
    assert broker.metadata.get_seal_states([str(T)])[str(T)].sealed_messages == 1
    older = broker.writer.append(T, batch(1), "p1")
    assert not older.duplicate and older.entry_id == 1
    stale = broker.writer.append(T, batch(0), "p1")
    assert stale.duplicate and stale.entry_id == -1, "an older sequence id is a duplicate too"
    assert broker.metadata.last_sequence_id(T, "p1") == 1


def test_a_retry_after_the_first_attempt_died_stores_the_message_once() -> None:
    from magnetar.core import crashpoints

    clock = ManualClock()
    broker = dedup_broker(clock)
    crashpoints.enable("produce.after_reserve")
    with pytest.raises(crashpoints.SimulatedCrash):
        broker.writer.append(T, batch(0), "p1")
    retried = broker.writer.append(T, batch(0), "p1")  # within the deadline: same id, written now
    assert retried.entry_id == 0
    clock.advance(WRITE_DEADLINE_MS + 1)
    assert broker.writer.append(T, batch(0), "p1").duplicate
    broker.sealer.seal(list(broker.journal.records))
    entries = broker.read_entries(T, 0, 10)
    assert [(e.entry_id, e.hole) for e in entries] == [(0, False)]


def test_without_deduplication_the_same_sequence_id_is_stored_again() -> None:
    broker = memory_broker()
    broker.writer.append(T, batch(0), "p1")
    assert not broker.writer.append(T, batch(0), "p1").duplicate


def test_an_exclusive_producer_fences_the_others_until_it_leaves() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.writer.attach_producer(T, "owner", "Exclusive", 30_000)
    with pytest.raises(ProducerFenced):
        broker.writer.attach_producer(T, "other", "Exclusive", 30_000)
    with pytest.raises(ProducerFenced):
        broker.writer.append(T, batch(-1), "other")
    broker.writer.append(T, batch(-1), "owner")
    clock.advance(30_001)  # the owner's lease ran out without renewal
    broker.writer.append(T, batch(-1), "other")
    broker.writer.attach_producer(T, "other", "Exclusive", 30_000)
    broker.writer.detach_producer(T, "other")
    broker.writer.attach_producer(T, "third", "Exclusive", 30_000)
