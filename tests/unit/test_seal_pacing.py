"""Seals follow the load: the journal consumer's hold (ledger.pacing) and the seal states it
keeps from its own commits (no read for a shard it keeps sealing), on in-memory ports."""

from __future__ import annotations

from typing import Any

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import InvalidInput
from magnetar.core.ledger import EntryCache, Sealer
from magnetar.core.ledger.pacing import FULL_SEGMENT_BYTES, SealPacing
from magnetar.core.naming import TopicName
from magnetar.core.ports import JournalPosition, JournalRecord

T = TopicName.parse("orders")


def record(arrival_ms: int, size: int = 100, shard: str = "shard-0") -> JournalRecord:
    return JournalRecord(JournalPosition(shard, "1"), "k", b"x" * size, arrival_ms)


def test_a_quiet_shard_is_sealed_at_once() -> None:
    pacing = SealPacing(latency_target_ms=200)
    assert pacing.hold_ms([record(1_000)], 1_010) == 0  # nothing sealed here yet
    pacing.sealed([record(1_000)], 1_020)
    assert pacing.hold_ms([record(5_000)], 5_010) == 0  # the last seal is long past: nothing more is coming


def test_a_busy_shard_holds_a_small_batch_until_its_oldest_record_waited_the_target() -> None:
    pacing = SealPacing(latency_target_ms=200)
    pacing.sealed([record(900)], 1_000)
    assert pacing.hold_ms([record(1_050), record(1_060)], 1_070) == 180  # 1_050 + 200 - 1_070
    assert pacing.hold_ms([record(900)], 1_150) == 0  # its oldest has waited 250 ms already
    assert pacing.hold_ms([record(1_050, size=FULL_SEGMENT_BYTES)], 1_060) == 0  # big enough: at once
    assert pacing.hold_ms([record(1_050, shard="shard-1")], 1_060) == 0  # another shard is quiet
    assert pacing.hold_ms([record(5_000)], 1_060) == 200  # an arrival clock ahead never holds past the target


def test_a_zero_target_never_holds_and_the_target_is_checked() -> None:
    pacing = SealPacing(latency_target_ms=0)
    pacing.sealed([record(900)], 1_000)
    assert pacing.hold_ms([record(1_050)], 1_060) == 0
    with pytest.raises(InvalidInput):
        SealPacing(latency_target_ms=-1)
    with pytest.raises(InvalidInput):
        SealPacing(latency_target_ms=60_000)


def test_the_sealer_holds_on_its_clock() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.writer.append(T, Batch.of([Message(b"a")]), "p")
    first = list(broker.journal.records)
    assert broker.sealer.hold(first) == 0  # quiet: sealed at once
    broker.sealer.seal(first)
    clock.advance(50)
    broker.writer.append(T, Batch.of([Message(b"b")]), "p")
    second = list(broker.journal.records)[1:]
    started = clock.now
    held = broker.sealer.hold(second)
    assert held == broker.sealer.pacing.latency_target_ms and clock.now == started + held


def calls_of(owner: object, method: str) -> list[tuple[object, ...]]:
    """Record the arguments of every call of `owner.method` from now on (the call still happens)."""
    seen: list[tuple[object, ...]] = []
    original = getattr(owner, method)

    def counted(*args: object, **kwargs: object) -> object:
        seen.append(args)
        return original(*args, **kwargs)

    setattr(owner, method, counted)
    return seen


def test_a_shard_this_container_keeps_sealing_needs_no_seal_state_read() -> None:
    broker = memory_broker()
    reads = calls_of(broker.metadata, "get_seal_states")
    for n in range(3):
        broker.writer.append(T, Batch.of([Message(f"m{n}".encode())]), "p")
        batch = list(broker.journal.records)[n:]
        outcome = broker.sealer.seal(batch)
        assert outcome.sealed_entries == 1
    assert reads == [([str(T)],)]  # only the first batch read it
    assert broker.metadata.get_seal_states([str(T)])[str(T)].next_entry == 3


def test_a_state_moved_elsewhere_is_read_again_and_nothing_is_sealed_twice() -> None:
    broker = memory_broker()
    elsewhere = Sealer(  # another container's sealer on the same stores
        broker.metadata, broker.segments, broker.clock, broker.journal)
    for n in range(4):
        broker.writer.append(T, Batch.of([Message(f"m{n}".encode())]), "p")
    records = list(broker.journal.records)
    assert broker.sealer.seal(records[:1]).sealed_entries == 1  # this container knows: next is 1
    assert elsewhere.seal(records[1:3]).sealed_entries == 2  # another sealed 1..2
    # a replay of 1..3 here: this container's knowledge (next 1) matches the batch's start, is
    # stale, and the commit's condition refuses it; the retried batch reads the state again
    with pytest.raises(Exception, match="moved under us"):
        broker.sealer.seal(records[1:])
    assert broker.sealer.seal(records[1:]).sealed_entries == 1
    state = broker.metadata.get_seal_states([str(T)])[str(T)]
    assert state.next_entry == 4 and state.sealed_entries == 4
    # and a batch that starts past what this container knows is read, not trusted
    broker.writer.append(T, Batch.of([Message(b"m4")]), "p")
    assert elsewhere.seal(list(broker.journal.records)[4:]).sealed_entries == 1
    broker.writer.append(T, Batch.of([Message(b"m5")]), "p")
    assert broker.sealer.seal(list(broker.journal.records)[5:]).sealed_entries == 1


def test_the_seal_state_carries_its_newest_segments_and_a_consumer_that_keeps_up_lists_none() -> None:
    broker = memory_broker()
    broker.subscriptions.subscribe(T, "s", "c1", "Exclusive", "Earliest")
    listings = calls_of(broker.metadata, "list_segments")
    got: list[bytes] = []
    for n in range(6):
        broker.writer.append(T, Batch.of([Message(f"m{n}".encode())]), "p")
        broker.sealer.seal(list(broker.journal.records)[n:])
        if n % 2:  # two seals between receives: both among the newest
            broker.reader.cache = EntryCache()  # as another container would: nothing cached
            got += [d.entry.messages[0].payload for d in broker.subscriptions.receive(T, "s", "c1", 100).entries]
    assert got == [f"m{n}".encode() for n in range(6)]
    assert listings == []
    recent = broker.metadata.get_seal_states([str(T)])[str(T)].recent_segments
    assert [(s.first_entry, s.last_entry) for s in recent] == [(2, 2), (3, 3), (4, 4), (5, 5)]  # the newest 4


def test_newest_segments_stay_few_and_contiguous() -> None:
    from magnetar.core.ledger.common import RECENT_SEGMENT_ENTRIES, recent_segments
    from magnetar.core.ports import SegmentMeta

    def seg(first: int, last: int) -> SegmentMeta:
        return SegmentMeta("t", 0, first, last, "k", tuple(range(last - first + 2)), last - first + 1, 0)

    kept = recent_segments((seg(0, 9), seg(10, 19)), seg(20, 29))
    assert [s.first_entry for s in kept] == [0, 10, 20]
    assert recent_segments(kept, seg(40, 49)) == (seg(40, 49),)  # not contiguous (a ledger rolled, a gap): a new run
    big = recent_segments(kept, seg(30, 30 + RECENT_SEGMENT_ENTRIES - 1))
    assert [s.first_entry for s in big] == [30]
    assert recent_segments((), seg(0, 2 * RECENT_SEGMENT_ENTRIES)) == ()  # too big to carry


def test_a_poll_carrying_acknowledgements_writes_the_cursor_once() -> None:
    """Acknowledgements ride on the next poll; a look that finds nothing before the poll's last one
    does not write them alone: the claim of what is sealed meanwhile carries them, one write."""
    from magnetar.core.acks import Acks

    class SealingClock(ManualClock):  # a seal lands while the poll waits
        def sleep(self, seconds: float) -> None:
            super().sleep(seconds)
            if not broker.journal.records[1:]:
                broker.writer.append(T, Batch.of([Message(b"b")]), "p")
                broker.sealer.seal(list(broker.journal.records)[1:])

    broker = memory_broker(SealingClock())
    broker.subscriptions.subscribe(T, "s", "c1", "Shared", "Earliest")
    broker.writer.append(T, Batch.of([Message(b"a")]), "p")
    broker.sealer.seal(list(broker.journal.records))
    assert [d.entry.entry_id for d in broker.subscriptions.receive(T, "s", "c1", 100).entries] == [0]
    writes = calls_of(broker.metadata, "put_cursor")
    received = broker.subscriptions.receive(T, "s", "c1", 100, wait_ms=500, acks=Acks((0,)))
    assert [d.entry.entry_id for d in received.entries] == [1]
    assert len(writes) == 1  # an empty look, then the claim: one write
    state = broker.metadata.get_subscription_view(T, "s").cursor
    assert state is not None and state.mark_delete == 1  # the acknowledgement went with the claim


def test_a_batch_receive_short_of_its_count_last_time_looks_once() -> None:
    """A consumer that keeps up polls faster than seals come: its batch receive, short of its count
    the previous time, looks once when its wait is over, not at its start (finding nothing) and again."""

    class SealingClock(ManualClock):  # an entry is sealed while each poll waits
        def sleep(self, seconds: float) -> None:
            super().sleep(seconds)
            sealed = len(broker.journal.records)
            broker.writer.append(T, Batch.of([Message(b"m")]), "p")
            broker.sealer.seal(list(broker.journal.records)[sealed:])

    broker = memory_broker(SealingClock())
    broker.subscriptions.subscribe(T, "s", "c1", "Shared", "Earliest")
    looks = calls_of(broker.metadata, "get_subscription_view")
    counts = []
    for _ in range(3):
        looks.clear()
        started = broker.clock.now
        got = broker.subscriptions.receive(T, "s", "c1", 100, wait_ms=100, min_messages=10)
        assert got.entries and broker.clock.now - started >= 100  # waited for its count or its timeout
        counts.append(len(looks))
    assert counts == [2, 1, 1]  # the first poll looks at its start (nothing yet) and at its end


def test_a_push_connection_announced_while_a_seal_is_prepared_fails_its_commit() -> None:
    """The journal consumer looks a topic's WebSocket connections up only once one announced itself
    (`push_epoch`); a seal prepared before that announcement cannot commit (the retried batch reads
    the state again and looks them up), so no entry falls between a connect and the seals after it."""
    broker = memory_broker()
    broker.writer.append(T, Batch.of([Message(b"a")]), "p")
    assert broker.sealer.seal(list(broker.journal.records)).sealed_entries == 1
    assert broker.metadata.get_seal_states([str(T)])[str(T)].push_epoch == 0  # nobody connected: no look-up
    broker.writer.append(T, Batch.of([Message(b"b")]), "p")
    known = broker.sealer.seal_states({str(T): 1})  # this container's knowledge: no connection
    broker.metadata.announce_push_connection(T)  # a consumer connects meanwhile
    with pytest.raises(Exception, match="moved under us"):
        broker.sealer.seal(list(broker.journal.records)[1:], known)
    again = broker.sealer.seal_states({str(T): 1})
    assert again[str(T)].push_epoch == 1  # read again: its connections are looked up after this seal
    assert broker.sealer.seal(list(broker.journal.records)[1:], again).sealed_entries == 1
    assert broker.metadata.get_seal_states([str(T)])[str(T)].push_epoch == 1  # the commit leaves it as it is


class ArrivingClock(ManualClock):
    """A clock on which a message reaches the journal while the sealer holds its batch."""

    def __init__(self) -> None:
        super().__init__()
        self.during_hold: list[bytes] = []
        self.broker: object = None

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        for payload in self.during_hold:
            self.broker.writer.append(T, Batch.of([Message(payload)]), "p")  # type: ignore[attr-defined]
        self.during_hold = []


def test_a_held_batch_reads_ahead_and_the_next_batch_skips_what_was_sealed() -> None:
    """What reaches the shard while a busy shard's batch is held is sealed with it (one segment,
    not two seals in a row), and the mapping's next batch, which starts with those records,
    skips them in the container that sealed them."""
    clock = ArrivingClock()
    broker = memory_broker(clock)
    clock.broker = broker
    broker.writer.append(T, Batch.of([Message(b"a")]), "p")
    first = broker.sealer.gather(list(broker.journal.records))
    assert first.held_ms == 0 and first.read_ahead == 0  # a quiet shard: sealed at once, nothing read ahead
    assert broker.sealer.settle(first, broker.sealer.seal(first.records)) is None
    clock.advance(50)
    broker.writer.append(T, Batch.of([Message(b"b")]), "p")
    clock.during_hold = [b"c", b"d"]
    second = broker.sealer.gather(list(broker.journal.records)[1:])  # the mapping's batch: b
    assert second.held_ms > 0 and second.from_batch == 1 and second.read_ahead == 2
    outcome = broker.sealer.seal(second.records)
    assert outcome.sealed_entries == 3 and outcome.segments_written == 1
    assert broker.sealer.settle(second, outcome) is None
    broker.writer.append(T, Batch.of([Message(b"e")]), "p")
    third = broker.sealer.gather(list(broker.journal.records)[1:])  # b, c, d (sealed here), then e
    assert third.skipped == 3 and [r.data for r in third.records] == [broker.journal.records[4].data]
    # another container (no read-ahead remembered) gets them all and skips them as a replay
    elsewhere = Sealer(broker.metadata, broker.segments, broker.clock, broker.journal)
    assert elsewhere.pacing.fresh(list(broker.journal.records)[1:]) == list(broker.journal.records)[1:]
    assert elsewhere.seal(list(broker.journal.records)[1:]).sealed_entries == 1  # only e is new
    state = broker.metadata.get_seal_states([str(T)])[str(T)]
    assert state.next_entry == 5


def test_a_record_read_ahead_that_cannot_be_sealed_yet_is_left_to_the_mapping() -> None:
    from magnetar.core.ledger import Gathered, SealOutcome

    broker = memory_broker()
    for n in range(3):
        broker.writer.append(T, Batch.of([Message(f"m{n}".encode())]), "p")
    records = list(broker.journal.records)
    gathered = Gathered(records, from_batch=1, held_ms=100, skipped=0)
    # blocked at a record read ahead: the mapping's batch is done, the records before it are remembered
    assert broker.sealer.settle(gathered, SealOutcome(retry_from=records[2].position.sequence)) is None
    assert broker.sealer.pacing.fresh(records) == records[2:]
    # blocked inside the mapping's batch: the mapping resumes there, nothing more is remembered
    other = memory_broker()
    blocked = Gathered(records, from_batch=2, held_ms=100, skipped=0)
    assert other.sealer.settle(blocked, SealOutcome(retry_from=records[1].position.sequence)) == (
        records[1].position.sequence)
    assert other.sealer.pacing.fresh(records) == records


def seal_one(broker: Any, payload: bytes) -> None:
    """Publish one message to T and seal it in a segment of its own (at the clock's time)."""
    before = len(broker.journal.records)
    broker.writer.append(T, Batch.of([Message(payload)]), "p")
    broker.sealer.seal(list(broker.journal.records)[before:])


def test_a_poll_says_when_a_busy_topics_next_seal_is_due() -> None:
    """Seals 250 then 350 ms apart: a poll 50 ms after the second hears the next is due in 200 ms,
    one after the third in 250 ms (the mean interval, 300, from the last; a consumer that keeps up
    need not look before); once it is overdue, or for a quiet topic, nothing."""
    from magnetar.core.ledger.pacing import next_seal_in_ms

    clock = ManualClock()
    broker = memory_broker(clock)
    broker.subscriptions.subscribe(T, "s", "c1", "Shared", "Earliest")

    seal_one(broker, b"a")
    first = broker.subscriptions.receive(T, "s", "c1", 100)
    assert [d.entry.entry_id for d in first.entries] == [0] and first.next_seal_in_ms is None  # one seal: no cadence
    clock.advance(250)
    seal_one(broker, b"b")
    clock.advance(50)
    second = broker.subscriptions.receive(T, "s", "c1", 100)
    assert [d.entry.entry_id for d in second.entries] == [1] and second.next_seal_in_ms == 200
    clock.advance(300)
    seal_one(broker, b"c")
    clock.advance(50)
    third = broker.subscriptions.receive(T, "s", "c1", 100)
    assert [d.entry.entry_id for d in third.entries] == [2] and third.next_seal_in_ms == 250
    clock.advance(300)
    assert broker.subscriptions.receive(T, "s", "c1", 100).next_seal_in_ms is None  # overdue: not predicted
    state = broker.metadata.get_seal_states([str(T)])[str(T)]
    assert next_seal_in_ms(state, state.recent_segments[-1].created_at) == 300
    clock.advance(2_000)  # a pause past a busy topic's cadence: the intervals before it are not its cadence
    seal_one(broker, b"d")
    state = broker.metadata.get_seal_states([str(T)])[str(T)]
    assert next_seal_in_ms(state, state.recent_segments[-1].created_at) is None


def seal_two_partitions_every_250_ms(broker: Any, clock: ManualClock, parent: TopicName) -> None:
    """Partitions 0 and 1 of `parent` each sealed three times, 250 ms apart, partition 1 100 ms
    after partition 0 (0 at 0, 250 and 500 ms, 1 at 100, 350 and 600 ms); the clock then at 620 ms,
    when partition 0's next seal is due in 130 ms and partition 1's in 230 ms."""
    for pause in (150, 150, 20):
        for p in (0, 1):
            before = len(broker.journal.records)
            broker.writer.append(parent.partition(p), Batch.of([Message(b"x", key=f"k{p}")]), "p")
            broker.sealer.seal(list(broker.journal.records)[before:])
            clock.advance(100 if p == 0 else pause)


def test_a_poll_over_partitions_says_when_the_first_of_their_next_seals_is_due() -> None:
    """Two busy partitions sealed 250 ms apart each, the second 100 ms after the first: a poll over
    both hears of the first next seal; with a partition whose cadence is unknown, of none."""
    from magnetar.core.dispatch_partitions import next_seal_of_partitions, receive_partitions

    clock = ManualClock()
    broker = memory_broker(clock)
    parent = TopicName.parse("busy")
    for p in range(3):
        broker.subscriptions.subscribe(parent.partition(p), "s", "c1", "Shared", "Earliest")

    seal_two_partitions_every_250_ms(broker, clock, parent)
    got = receive_partitions(broker.subscriptions, parent, [0, 1], "s", "c1", 100, 0, "r1", {})
    assert [len(got[p].entries) for p in (0, 1)] == [3, 3]
    assert (got[0].next_seal_in_ms, got[1].next_seal_in_ms) == (130, 230)
    assert next_seal_of_partitions(got) == 130
    quiet = receive_partitions(broker.subscriptions, parent, [0, 1, 2], "s", "c1", 100, 0, "r2", {})
    assert quiet[2].next_seal_in_ms is None and next_seal_of_partitions(quiet) is None


def test_a_poll_over_partitions_cut_short_by_its_count_says_nothing_of_the_next_seal() -> None:
    """More is readable than the poll asked for: the next look need not wait for a seal."""
    from magnetar.core.dispatch_partitions import next_seal_of_partitions, receive_partitions

    clock = ManualClock()
    broker = memory_broker(clock)
    parent = TopicName.parse("cut")
    broker.subscriptions.subscribe(parent.partition(0), "s", "c1", "Shared", "Earliest")
    for n in range(3):  # three seals 250 ms apart (at 0, 250 and 500 ms), two entries each
        clock.advance(250 if n else 0)
        before = len(broker.journal.records)
        for _ in range(2):
            broker.writer.append(parent.partition(0), Batch.of([Message(b"x")]), "p")
        broker.sealer.seal(list(broker.journal.records)[before:])
    clock.advance(20)  # the next seal is due at 750 ms
    cut = receive_partitions(broker.subscriptions, parent, [0], "s", "c1", 4, 0, "r1", {})
    assert len(cut[0].entries) == 4 and next_seal_of_partitions(cut) is None
    rest = receive_partitions(broker.subscriptions, parent, [0], "s", "c1", 100, 0, "r2", {})
    assert len(rest[0].entries) == 2 and next_seal_of_partitions(rest) == 230


@pytest.mark.parametrize("sub_type", ["Key_Shared", "Failover"])
def test_a_poll_over_partitions_counts_only_the_seals_that_may_bring_the_consumer_something(sub_type: str) -> None:
    """Two consumers on two busy partitions: Key_Shared gives each partition's keys to one of them
    (Failover, each partition to its active consumer), so each hears of the next seal of its own
    partition, not of the other's, which could only bring it a look that finds nothing."""
    from magnetar.core.dispatch_partitions import next_seal_of_partitions, receive_partitions

    clock = ManualClock()
    broker = memory_broker(clock)
    parent = TopicName.parse(f"owned-{sub_type.lower()}")
    assert broker.metadata.create_partitioned_topic(parent, 2)
    for consumer in ("c1", "c2"):
        for p in range(2):
            broker.subscriptions.subscribe(parent.partition(p), "s", consumer, sub_type, "Earliest")

    seal_two_partitions_every_250_ms(broker, clock, parent)
    first = receive_partitions(broker.subscriptions, parent, [0, 1], "s", "c1", 100, 0, "r1", {})
    second = receive_partitions(broker.subscriptions, parent, [0, 1], "s", "c2", 100, 0, "r2", {})
    assert [len(first[p].entries) for p in (0, 1)] == [3, 0]  # c1 has partition 0, c2 partition 1
    assert [len(second[p].entries) for p in (0, 1)] == [0, 3]
    assert next_seal_of_partitions(first) == 130
    assert next_seal_of_partitions(second) == 230  # not partition 0's, due 100 ms sooner


def test_a_look_that_finds_nothing_just_before_a_busy_topics_seal_leaves_its_acks_for_the_next() -> None:
    """A consumer that keeps up looks about when the next seal is due: a look just before it finds
    nothing. With `defer_acks`, its acknowledgements are not written alone: the answer says so, and
    the next look's claim writes them with it (one cursor write for both). Without it, or on a
    quiet topic, or with a negative acknowledgement, the look writes them as before."""
    from magnetar.core.acks import Acks

    clock = ManualClock()
    broker = memory_broker(clock)
    broker.subscriptions.subscribe(T, "s", "c1", "Shared", "Earliest")

    def mark_delete() -> int:  # the first entry not acknowledged
        state = broker.metadata.get_subscription_view(T, "s").cursor
        assert state is not None
        return state.mark_delete

    seal_one(broker, b"quiet")
    assert len(broker.subscriptions.receive(T, "s", "c1", 100).entries) == 1
    quiet = broker.subscriptions.receive(T, "s", "c1", 100, acks=Acks((0,)), defer_acks=True)
    assert quiet.acks_applied and mark_delete() == 1  # no cadence: written at once

    for n in range(3):  # busy: seals 250 ms apart, the next due 250 ms after the last
        clock.advance(250)
        seal_one(broker, b"busy-%d" % n)
    assert [d.entry.entry_id for d in broker.subscriptions.receive(T, "s", "c1", 100).entries] == [1, 2, 3]
    clock.advance(260)  # a look 10 ms after the next seal was due: it has not come yet
    writes = calls_of(broker.metadata, "put_cursor")
    early = broker.subscriptions.receive(T, "s", "c1", 100, acks=Acks((1, 2)), defer_acks=True)
    assert early.entries == [] and not early.acks_applied and mark_delete() == 1 and writes == []
    clock.advance(40)
    seal_one(broker, b"busy-3")
    got = broker.subscriptions.receive(T, "s", "c1", 100, acks=Acks((1, 2)), defer_acks=True)
    assert [d.entry.entry_id for d in got.entries] == [4] and got.acks_applied
    assert mark_delete() == 3 and len(writes) == 1  # the claim and the acks: one write

    clock.advance(260)
    plain = broker.subscriptions.receive(T, "s", "c1", 100, acks=Acks((3,)))
    assert plain.acks_applied and mark_delete() == 4  # not asked to defer: written
    clock.advance(1)
    nacked = broker.subscriptions.receive(T, "s", "c1", 100, acks=Acks(nacks=(4,), nack_delay_ms=5_000, consumer="c1"),
                                            defer_acks=True)
    assert nacked.acks_applied and len(writes) == 3  # a negative ack's delay runs from its write
    clock.advance(1_000)  # a seal more than an interval overdue: the topic may have gone quiet
    late = broker.subscriptions.receive(T, "s", "c1", 100, acks=Acks((4,)), defer_acks=True)
    assert late.acks_applied and mark_delete() == 5
