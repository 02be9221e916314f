"""The sealer: moving journal records into immutable S3 segments (the journal consumer's logic).

`Sealer` writes a topic partition's records in entry-id order into segments (at most
`MAX_SEGMENT_ENTRIES` entries and `MAX_SEGMENT_BYTES`, never spanning two ledgers) and commits
each segment and the seal state together, all or nothing (the segments of a batch's topics in
one DynamoDB transaction). A record may be an envelope of
several consecutive entries (a group append): each of its entries is sealed like a record's one,
its bytes copied as they are; its ids are all present or all missing together. A reserved id whose record never
arrives (its writer died between the reservation and the journal write) becomes a *hole*: once
the journal holds a later entry reserved more than `HOLE_GRACE_MS` ago, the writer of the
missing id is certainly past its deadline, and a tombstone takes the id (consumers skip it).
"""

from __future__ import annotations

import contextvars
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace

from magnetar.core import metrics as m
from magnetar.core.crashpoints import crash_point
from magnetar.core.delaypoints import delay_point
from magnetar.core.entry import encode_entry, encode_envelope, hole_entry, peek_header, record_headers
from magnetar.core.errors import InvalidInput, RetryableError
from magnetar.core.ledger import common
from magnetar.core.ledger.common import journal_key, segment_key
from magnetar.core.ledger.late import LateRecords, Settled
from magnetar.core.ledger.pacing import SealPacing
from magnetar.core.metrics import buckets
from magnetar.core.metrics.container import COUNTERS
from magnetar.core.naming import TopicName
from magnetar.core.ports import (
    Clock,
    Journal,
    JournalRecord,
    MetadataStore,
    SealState,
    SegmentCommit,
    SegmentMeta,
    SegmentStore,
)
from magnetar.core.ports.telemetry import NO_TELEMETRY, Telemetry
from magnetar.core.rates import ewma_add

log = logging.getLogger(__name__)

MAX_SEGMENT_ENTRIES = 2_000
MAX_SEGMENT_BYTES = 16 * 1024 * 1024
MAX_FENCE_ENTRIES = 5_000  # tombstones in one journal record (~60 bytes each)
FENCE_EVERY_MS = 1_000  # the same missing ids are tombstoned again at most this often (per container)
SEAL_CONCURRENCY = 16  # topics of one journal batch sealed at once (I/O bound: S3 put, DynamoDB commit)
READ_AHEAD_RECORDS = 10_000  # a read-ahead is one GetRecords (at most 10,000 records)
READ_AHEAD_BYTES = 4 * 1024 * 1024  # and about this many bytes with the batch (the function's memory)


@dataclass(frozen=True)
class _Item:
    """One entry found in the journal batch: its record (at `index` in the batch) may be an
    envelope of several; `record_done` marks the record's last entry."""

    index: int
    record: JournalRecord
    ledger_id: int
    entry_id: int
    reserved_at: int
    data: bytes
    record_done: bool


@dataclass
class SealOutcome:
    """What one sealer invocation did; `retry_from` is the journal record to resume from."""

    sealed_entries: int = 0
    segments_written: int = 0
    holes: int = 0
    late_after_hole: int = 0
    late_reappended: int = 0  # late records whose entries took new ids and went to the journal again
    late_dead_lettered: int = 0  # late records written to the dead-letter prefix instead
    retry_from: str | None = None

    def add(self, other: SealOutcome) -> None:
        """Count in another topic's outcome: every counter (`retry_from` is the caller's to decide)."""
        for f in fields(self):
            if f.name != "retry_from":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass(frozen=True)
class Gathered:
    """What one journal-consumer invocation seals (`Sealer.gather`): the mapping's batch without
    the records this container already sealed from a read-ahead, then those it read ahead now."""

    records: list[JournalRecord]
    from_batch: int  # how many of `records` came in the mapping's batch (the rest were read ahead)
    held_ms: int
    skipped: int  # records of the mapping's batch sealed already (read ahead by the previous invocation)

    @property
    def read_ahead(self) -> int:
        return len(self.records) - self.from_batch


@dataclass(frozen=True)
class _Chunk:
    """A segment put to S3 and not committed yet: its commit, its entries, the holes among them."""

    commit: SegmentCommit
    entries: int
    holes: int


@dataclass
class _TopicSeal:
    """One topic's part of a journal batch: its segments (put, then committed with the other
    topics'), its late records, the first record it could not seal yet."""

    topic: TopicName
    chunks: list[_Chunk]
    late: list[_Item]
    settled: Settled
    blocked_at: int | None
    outcome: SealOutcome = field(default_factory=SealOutcome)
    failure: BaseException | None = None


class Sealer:
    """Moves journal records into S3 segments (the journal consumer's logic).

    Idempotent: the seal state says which entry comes next, so a replayed or retried batch
    skips what is already sealed, and a segment key names its exact entry range, so a re-put
    after a crash between the S3 write and the DynamoDB commit writes the same bytes again.
    """

    telemetry: Telemetry = NO_TELEMETRY  # what each batch sealed (SealedEntries, Holes, ...); the seal span

    def __init__(self, metadata: MetadataStore, segments: SegmentStore, clock: Clock,
                 journal: Journal | None = None, pacing: SealPacing | None = None) -> None:
        self.metadata = metadata
        self.segments = segments
        self.clock = clock
        self.pacing = pacing or SealPacing()
        self.journal = journal
        # topic -> the seal state this container's last commit left: the next batch of a shard
        # that continues exactly there needs no read (`seal_states`). Only a saving: a state
        # moved by another container fails the commit's condition, which forgets it here.
        self._known: dict[str, SealState] = {}
        # late records (ids sealed as holes before they arrived) are re-appended through the journal
        self.late = LateRecords(metadata, journal, segments, clock) if journal is not None else None
        self._fenced: dict[tuple[str, int], int] = {}  # (topic, first missing id) -> when tombstoned

    def hold(self, records: list[JournalRecord]) -> int:
        """Wait as long as the pacing says before sealing `records` (one shard's batch: records that
        reach the journal meanwhile gather for the next batch); the ms waited."""
        held = self.pacing.hold_ms(records, self.clock.now_ms())
        if held:
            self.clock.sleep(held / 1000)
        return held

    def gather(self, records: list[JournalRecord]) -> Gathered:
        """The records one invocation seals, from the mapping's batch `records` (one shard's): those
        this container has not sealed yet, held as the pacing says, then what reached the shard
        during the hold, read ahead with one GetRecords (best effort), so that it is sealed with
        them rather than in an invocation of its own right after."""
        fresh = self.pacing.fresh(records)
        held = self.hold(fresh) if fresh else 0
        ahead: list[JournalRecord] = []
        if held and self.journal is not None:
            room = READ_AHEAD_BYTES - sum(len(r.data) for r in fresh)
            if room > 0:
                ahead = self.journal.read_shard_after(fresh[-1].position, READ_AHEAD_RECORDS, room)
        return Gathered(fresh + ahead, len(fresh), held, len(records) - len(fresh))

    def settle(self, gathered: Gathered, outcome: SealOutcome) -> str | None:
        """Once everything else the invocation does with `gathered` succeeded: the sequence number of
        the mapping's batch to resume from (None: the whole batch is done). A record read ahead that
        could not be sealed yet is not the mapping's to retry (it delivers it next anyway); what was
        sealed before it is remembered, so that the next batch skips it."""
        if outcome.retry_from is None:
            done = len(gathered.records)
        else:
            done = next(i for i, r in enumerate(gathered.records) if r.position.sequence == outcome.retry_from)
            if done < gathered.from_batch:
                return outcome.retry_from
        if done > gathered.from_batch:
            self.pacing.gathered_through(gathered.records[done - 1].position)
        return None

    def seal_states(self, first_ids: dict[str, int]) -> dict[str, SealState]:
        """The seal states of a batch's topics, given each topic's lowest entry id in the batch:
        one read for the topics whose batch does not start exactly where this container's last
        commit left them (none, on a shard this container keeps sealing). A topic absent from the
        answer has no seal state yet."""
        states = {t: self._known[t] for t, first in first_ids.items()
                  if t in self._known and self._known[t].next_entry == first}
        missing = sorted(t for t in first_ids if t not in states)
        if missing:
            states.update(self.metadata.get_seal_states(missing))
        return states

    def seal(self, records: list[JournalRecord], states: dict[str, SealState] | None = None) -> SealOutcome:
        """Seal a journal batch; `states`: the seal states of its topics when the caller has just
        read them (the journal consumer's push plan), saving the read."""
        with self.telemetry.tracer.span("seal") as span:
            span.annotate("records", len(records))
            outcome = self._seal(records, states)
            span.annotate("sealed_entries", outcome.sealed_entries)
        metrics = self.telemetry.metrics
        metrics.add(m.SEALED_ENTRIES, outcome.sealed_entries)
        metrics.add(m.SEGMENTS_WRITTEN, outcome.segments_written)
        for name, value in ((m.HOLES, outcome.holes), (m.LATE_AFTER_HOLE, outcome.late_after_hole),
                            (m.LATE_REAPPENDED, outcome.late_reappended),
                            (m.LATE_DEAD_LETTERED, outcome.late_dead_lettered)):
            if value:  # emitted only when it happens (the alarms treat a missing value as none)
                metrics.add(name, value)
        return outcome

    def _seal(self, records: list[JournalRecord], states: dict[str, SealState] | None) -> SealOutcome:
        outcome = SealOutcome()
        by_topic: dict[str, list[_Item]] = {}
        for index, record in enumerate(records):
            try:
                entries = record_headers(record.data)
            except InvalidInput:
                log.error("dropping undecodable journal record %s", record.position)
                continue
            for n, (data, header) in enumerate(entries):  # an envelope: several consecutive entries
                by_topic.setdefault(header.topic, []).append(
                    _Item(index, record, header.ledger_id, header.entry_id, header.reserved_at, data,
                          n == len(entries) - 1)
                )
        if not by_topic:
            return outcome
        if states is None:  # (a topic absent from given states has none: nothing sealed yet)
            states = self.seal_states({t: min(i.entry_id for i in items) for t, items in by_topic.items()})

        # Topics are independent (each its own segments and seal-state item): a batch's topics
        # put their segment objects side by side, then their commits go together (DynamoDB: 50
        # topics in one transaction), so a batch of many low-rate topics costs about one topic's
        # latency and a few requests, not a commit per topic. Every topic runs to its end before
        # a failure (a retryable conflict, a crash point) is raised: what committed stays, a
        # replay skips it.
        topics = list(by_topic)

        def prepare(topic: str) -> _TopicSeal:
            return self._prepare(TopicName.parse(topic), by_topic[topic], states.get(topic, SealState()))

        if len(topics) == 1:
            prepared: list[_TopicSeal | BaseException] = [prepare(topics[0])]
        else:
            with ThreadPoolExecutor(max_workers=min(SEAL_CONCURRENCY, len(topics))) as pool:
                # each in a copy of this context: the invocation's telemetry goes along
                futures = [pool.submit(contextvars.copy_context().run, prepare, topic) for topic in topics]
                prepared = [f.exception() or f.result() for f in futures]
        seals = [p for p in prepared if not isinstance(p, BaseException)]
        self._commit_all(seals)
        retry_index: int | None = None
        for topic_seal in seals:
            if topic_seal.failure is None and topic_seal.late:
                late_at = self._late_records(topic_seal.topic, topic_seal.late, topic_seal.settled, topic_seal.outcome)
                if late_at is not None and (topic_seal.blocked_at is None or late_at < topic_seal.blocked_at):
                    topic_seal.blocked_at = late_at
            outcome.add(topic_seal.outcome)
            blocked_at = topic_seal.blocked_at
            if blocked_at is not None and (retry_index is None or blocked_at < retry_index):
                retry_index = blocked_at
        COUNTERS.late_records(outcome.late_after_hole, outcome.late_reappended, outcome.late_dead_lettered)
        failure = next((p for p in prepared if isinstance(p, BaseException)), None) or next(
            (p.failure for p in seals if p.failure is not None), None)
        if failure is not None:
            raise failure
        if retry_index is not None:
            outcome.retry_from = records[retry_index].position.sequence
        self.pacing.sealed(records, self.clock.now_ms())
        return outcome

    def _commit_all(self, seals: list[_TopicSeal]) -> None:
        """Commit the topics' segments in rounds: the first segment of every topic in one call,
        then the second of those that had one more (a segment's commit expects the seal state the
        one before it left), and so on. A topic whose commit failed stops there."""
        for round_ in range(max((len(p.chunks) for p in seals), default=0)):
            due = [p for p in seals if p.failure is None and round_ < len(p.chunks)]
            if not due:
                return
            delay_point("seal.before_commit")  # a stalled sealer: holes are declared meanwhile, records pile up
            for p in due:  # unknown until the commit's answer is (a crash in between leaves them unknown)
                self._known.pop(str(p.topic), None)
            try:
                applied = self.metadata.commit_segments([p.chunks[round_].commit for p in due])
            except Exception as exc:  # those topics are retried with the batch; the others stay committed
                for p in due:
                    p.failure = exc
                continue
            crash_point("seal.after_commit")  # committed, batch not checkpointed: a replay skips it
            refused = [p for p, ok in zip(due, applied, strict=True) if not ok]
            if refused:
                self._drop_deleted(refused, round_)
            for p, ok in zip(due, applied, strict=True):
                if not ok:
                    p.failure = RetryableError(f"seal state of {p.topic} moved under us; the batch is retried")
                    continue
                chunk = p.chunks[round_]
                self._remember(str(p.topic), chunk.commit.new_state)
                p.outcome.sealed_entries += chunk.entries
                p.outcome.segments_written += 1
                p.outcome.holes += chunk.holes

    def _drop_deleted(self, refused: list[_TopicSeal], round_: int) -> None:
        """Commits refused (rare): a topic deleted meanwhile (its seal state fenced past these
        entries, `core.deletion`) will never point at the objects put for them, which the
        deletion's own listing may have missed: they are deleted here (one read, one delete)."""
        states = self.metadata.get_seal_states([str(p.topic) for p in refused])
        orphans = [chunk.commit.segment.key for p in refused
                   if (state := states.get(str(p.topic))) is not None
                   for chunk in p.chunks[round_:] if chunk.commit.segment.last_entry < state.base]
        if orphans:
            self.segments.delete(orphans)

    def _remember(self, topic: str, state: SealState) -> None:
        if len(self._known) > 10_000 and topic not in self._known:  # a container sealing very many topics
            self._known.clear()
        self._known[topic] = state

    def _prepare(self, topic: TopicName, items: list[_Item], state: SealState) -> _TopicSeal:
        """What can be sealed of one topic: its segments written to S3 (committed later, with the
        batch's other topics), its late records, the index of the first record to retry."""
        waiting: dict[int, _Item] = {}
        late: list[_Item] = []
        for item in items:
            if item.entry_id < state.next_entry:
                if item.entry_id in state.recent_holes and not _is_hole(item):
                    late.append(item)  # arrived after its id was sealed as a hole
                continue  # already sealed: a replay
            kept = waiting.setdefault(item.entry_id, item)  # the first record of an id is the one kept
            if kept is not item and _is_hole(kept) and not _is_hole(item):
                late.append(item)  # behind the tombstone the sealer wrote for its id (`_fence`)
        run: list[tuple[bytes, int, _Item | None]] = []  # (entry bytes, ledger, journal item; None: a hole)
        position = state.next_entry
        holes: list[int] = []
        now = self.clock.now_ms()
        blocked_at: int | None = None
        while waiting:
            if position in waiting:
                item = waiting.pop(position)
                if _is_hole(item):  # a tombstone from the journal (`_fence`): its id is a hole now
                    holes.append(position)
                run.append((item.data, item.ledger_id, item))
                position += 1
                continue
            later = waiting[min(waiting)]
            age = now - later.reserved_at
            if age >= common.HOLE_GRACE_MS:
                # fenced through the journal: the shard's order decides. Unless the tombstone stays
                # out of reach another grace period (the mapping resumes at the blocked record, and
                # a busy shard's batch may end before the tombstone): then the clock decides, as a
                # sealer without a journal does
                if self.late is not None and age < 2 * common.HOLE_GRACE_MS:
                    self._fence(topic, position, min(waiting), later.ledger_id, now)
                else:
                    holes.append(position)
                    run.append((encode_entry(hole_entry(str(topic), later.ledger_id, position, now)),
                                later.ledger_id, None))
                    position += 1
                    continue
            blocked_at = min(i.index for i in waiting.values())
            break
        chunks = self._write_segments(topic, run, state, holes) if run else []
        late = [i for i in late if i.entry_id < position]  # the others wait behind their unsealed tombstone
        settled = Settled(position, frozenset(state.recent_holes) | frozenset(holes))
        return _TopicSeal(topic, chunks, late, settled, blocked_at)

    def _fence(self, topic: TopicName, first: int, end: int, ledger_id: int, now: int) -> None:
        """Missing ids `first`..`end - 1`, a later id reserved more than the grace ago: append a
        tombstone for each to the journal instead of sealing holes here. The journal keeps one
        order per topic partition and the sealer keeps the first record of an id, so a record
        that reached the journal before the tombstone is sealed (however late this sealer reads
        it: a lagging batch cannot turn a stored record into a hole), and one that arrives after
        it is a late record (`_late_records`). One tombstone record per id range and second."""
        end = min(end, first + MAX_FENCE_ENTRIES)
        key = (str(topic), first)
        if now - self._fenced.get(key, -FENCE_EVERY_MS) < FENCE_EVERY_MS:
            return
        if len(self._fenced) > 10_000:
            self._fenced.clear()
        self._fenced[key] = now
        tombstones = [encode_entry(hole_entry(str(topic), ledger_id, i, now)) for i in range(first, end)]
        assert self.late is not None
        try:
            self.late.journal.append(journal_key(str(topic)), encode_envelope(tombstones))
        except Exception as exc:  # the batch is retried anyway (blocked on these ids): fence again then
            self._fenced.pop(key, None)
            log.warning("tombstones for %s/%d..%d not written: %s", topic, first, end - 1, exc)

    def _late_records(self, topic: TopicName, late: list[_Item], settled: Settled, outcome: SealOutcome) -> int | None:
        """Entries that reached the journal after their ids were sealed as holes: their writer
        missed its deadline (the publish was not acknowledged under those ids, unless clocks broke
        the margin). Each record's late entries are re-appended under new ids, exactly once, or
        dead-lettered (`ledger.late`); the index of the first record to retry, if any."""
        by_record: dict[int, list[_Item]] = {}
        for item in late:
            by_record.setdefault(item.index, []).append(item)
        retry_at: int | None = None
        for index, record_items in sorted(by_record.items()):
            outcome.late_after_hole += 1
            log.error("entries %s/%d..%d arrived after their ids were sealed as holes", topic,
                      record_items[0].entry_id, record_items[-1].entry_id)
            if self.late is None:
                continue  # no journal to re-append through (a sealer built without one)
            try:
                result = self.late.handle(topic, [i.data for i in record_items], settled)
            except RetryableError as exc:
                log.warning("late entries of %s not re-appended yet: %s", topic, exc)
                retry_at = index if retry_at is None else min(retry_at, index)
                continue
            outcome.late_reappended += int(result.reappended)
            outcome.late_dead_lettered += int(result.dead_lettered)
            if result.retry:
                retry_at = index if retry_at is None else min(retry_at, index)
        return retry_at

    def _write_segments(self, topic: TopicName, run: list[tuple[bytes, int, _Item | None]], state: SealState,
                        holes: list[int]) -> list[_Chunk]:
        """Cut the run into segments (never spanning two ledgers), put each to S3, and return their
        commits in order, each expecting the seal state the one before leaves."""
        chunks: list[_Chunk] = []
        chunk: list[tuple[bytes, int, _Item | None]] = []
        chunk_bytes = 0
        for data, ledger_id, item in run:
            starts_new = chunk and (
                ledger_id != chunk[0][1] or len(chunk) >= MAX_SEGMENT_ENTRIES or chunk_bytes + len(data) > MAX_SEGMENT_BYTES
            )
            if starts_new:
                chunks.append(self._put_segment(topic, chunk, state, holes))
                state = chunks[-1].commit.new_state
                chunk, chunk_bytes = [], 0
            chunk.append((data, ledger_id, item))
            chunk_bytes += len(data)
        if chunk:
            chunks.append(self._put_segment(topic, chunk, state, holes))
        return chunks

    def _put_segment(self, topic: TopicName, chunk: list[tuple[bytes, int, _Item | None]], state: SealState,
                     holes: list[int]) -> _Chunk:
        """Write one segment object (entries `state.next_entry` on) and prepare its commit."""
        first = state.next_entry
        last = first + len(chunk) - 1
        ledger_id = chunk[0][1]
        offsets = [0]
        messages = 0
        for data, _, _ in chunk:
            offsets.append(offsets[-1] + len(data))
        blob = b"".join(data for data, _, _ in chunk)
        max_publish_time = 0
        latency, latency_ms = state.write_latency, state.write_latency_ms
        sizes, size_bytes = state.entry_sizes, state.entry_size_bytes
        for data, _, item in chunk:
            if item is not None:
                header = peek_header(data)
                messages += header.num_messages
                if not header.hole:  # a tombstone's time is the sealer's, not a publish
                    max_publish_time = max(max_publish_time, header.publish_time)
                    # the storage write: from the reservation to the record's arrival in the journal
                    waited = max(0, item.record.arrival_ms - item.reserved_at)
                    latency = buckets.counted(latency, waited, buckets.WRITE_LATENCY_BOUNDS_MS)
                    latency_ms += waited
                    sizes = buckets.counted(sizes, len(data), buckets.ENTRY_SIZE_BOUNDS)
                    size_bytes += len(data)
        key = segment_key(topic, ledger_id, first, last)
        self.segments.put_if_absent(key, blob)
        crash_point("seal.after_segment_put")  # object in S3, not in the metadata: a replay re-puts it
        # the last journal record sealed whole (a segment may end inside an envelope): tail reads
        # start after it
        last_position = next((i.record.position for _, _, i in reversed(chunk) if i is not None and i.record_done),
                             state.last_position)
        chunk_holes = tuple(h for h in holes if first <= h <= last)
        now = self.clock.now_ms()
        meta = SegmentMeta(str(topic), ledger_id, first, last, key, tuple(offsets), messages, now, max_publish_time)
        new_state = replace(
            state,
            recent_segments=common.recent_segments(state.recent_segments, meta),
            next_entry=last + 1,
            last_position=last_position,
            recent_holes=(state.recent_holes + chunk_holes)[-64:],
            sealed_entries=state.sealed_entries + len(chunk) - len(chunk_holes),
            sealed_messages=state.sealed_messages + messages,
            sealed_bytes=state.sealed_bytes + len(blob),
            segment_count=state.segment_count + 1,
            rate_msgs=ewma_add(state.rate_msgs, state.rate_at, messages, now),
            rate_bytes=ewma_add(state.rate_bytes, state.rate_at, len(blob), now),
            rate_at=now,
            write_latency=latency,
            write_latency_ms=latency_ms,
            entry_sizes=sizes,
            entry_size_bytes=size_bytes,
            hole_entries=state.hole_entries + len(chunk_holes),
        )
        return _Chunk(SegmentCommit(meta, state.next_entry, new_state), len(chunk), len(chunk_holes))


def _is_hole(item: _Item) -> bool:
    return peek_header(item.data).hole
