"""The managed ledger of one topic partition: append, seal, read.

Pulsar lets one broker own a topic and write its ledger; here any Lambda may append to any
topic at any moment, so the owner's job is split across AWS primitives:

- **Ids** come from one conditional counter per topic partition (`MetadataStore.reserve_entry`):
  entry ids are dense, and a reservation is valid for `WRITE_DEADLINE_MS` only. A writer that
  is past its deadline before the journal write gives up (the client retries) and never writes.
- **Durability** comes from the Kinesis journal: an append is acknowledged once its record is
  stored; the partition key is the topic partition, so its records stay in one shard, in order.
- **Sealing** (`Sealer`) moves journal records into immutable S3 segments in entry-id order and
  commits the segment list and the seal state in one DynamoDB transaction. A reserved id whose
  record never arrives (its writer died between the two steps) becomes a *hole*: once the
  journal holds a later entry reserved more than `HOLE_GRACE_MS` ago, the writer of the missing
  id is certainly past its deadline, and a tombstone takes the id (consumers skip it).
- **Reading** (`EntryReader`) serves sealed entries from S3 ranged GETs and the rest from the
  journal tail, only ever a contiguous run from the requested position, so no consumer sees an
  entry before all earlier ones are settled.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

from magnetar.core.crashpoints import crash_point
from magnetar.core.entry import (
    Batch,
    Entry,
    MessageIdData,
    decode_entry,
    encode_entry,
    hole_entry,
    make_entry,
    peek_header,
)
from magnetar.core.errors import (
    BacklogQuotaExceeded,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    ProducerBusy,
    ProducerFenced,
    RetryableError,
    TooManyRequests,
    TopicLimitReached,
    TopicNotFound,
)
from magnetar.core.naming import TopicName
from magnetar.core.policies import (
    PUBLISH_BURST_S,
    TOPIC_LIMIT_REASON,
    PublishRate,
    TopicPolicies,
    effective_policies,
    rate_cost_ns,
)
from magnetar.core.ports import (
    Clock,
    DedupRecord,
    Journal,
    JournalPosition,
    JournalRecord,
    MetadataStore,
    ProducerClaim,
    RateClaim,
    Reservation,
    SealState,
    SegmentMeta,
    SegmentStore,
    WriterState,
)
from magnetar.core.rates import ewma_add

log = logging.getLogger(__name__)

WRITE_DEADLINE_MS = 10_000  # a writer never writes a reservation older than this
HOLE_GRACE_MS = 60_000  # a missing id is a hole once a later id's reservation is this old
MAX_MESSAGES_PER_ENTRY = 10_000
MAX_ENTRIES_PER_LEDGER = 50_000  # Pulsar's managedLedgerMaxEntriesPerLedger
MAX_LEDGER_AGE_MS = 240 * 60_000  # Pulsar's managedLedgerMaxLedgerRolloverTimeMinutes
MAX_SEGMENT_ENTRIES = 2_000
MAX_SEGMENT_BYTES = 16 * 1024 * 1024
_HEADER_PROBE = 2**62  # ids this large bound the encoded header size before the real ids exist


def journal_key(topic: str) -> str:
    """Kinesis partition key of a topic partition (keys are limited to 256 characters)."""
    return topic if len(topic) <= 256 else "sha256:" + hashlib.sha256(topic.encode()).hexdigest()


def segment_key(topic: TopicName, ledger_id: int, first: int, last: int) -> str:
    return (
        f"segments/{topic.tenant}/{topic.namespace}/{topic.domain}/{quote(topic.local_name, safe='')}"
        f"/{ledger_id:016x}/{first:016x}-{last:016x}.seg"
    )


@dataclass(frozen=True)
class AppendResult:
    ledger_id: int
    entry_id: int
    message_ids: list[MessageIdData]
    duplicate: bool = False  # deduplication: already stored, these are the original ids


POLICY_CACHE_MS = 10_000  # namespace policies are re-read at most this often per container
QUOTA_HOLD_MS = 10_000  # producer_request_hold: a publish is held this long per request (the SDK retries)
QUOTA_HOLD_POLL_S = 1.0
QUOTA_RECHECK_MS = 1_000
PRODUCER_IDLE_MS = 5 * 60_000  # a producer silent this long no longer counts (stats, max producers)


class LedgerWriter:
    def __init__(self, metadata: MetadataStore, journal: Journal, clock: Clock,
                 lookup: Callable[[TopicName, int], Entry | None] | None = None) -> None:
        self.metadata = metadata
        self.journal = journal
        self.clock = clock
        self.lookup = lookup  # finds a stored entry (deduplication of a retried publish)
        # re-evaluates a topic's backlog quota now; True while it is still exceeded (lifecycle)
        self.quota_check: Callable[[TopicName], bool] | None = None
        self._policies: dict[str, tuple[int, dict[str, Any]]] = {}
        self._quota_checked: dict[str, int] = {}

    def append(self, topic: TopicName, batch: Batch, producer_name: str, create_topic: bool = True) -> AppendResult:
        """Append one batch as one entry; the ids are final once this returns."""
        if batch.num_messages <= 0:
            raise InvalidInput("No messages to publish")
        if batch.num_messages > MAX_MESSAGES_PER_ENTRY:
            raise InvalidInput(f"Too many messages in one batch ({batch.num_messages} > {MAX_MESSAGES_PER_ENTRY})")
        now = self.clock.now_ms()
        key = str(topic)
        probe = make_entry(key, _HEADER_PROBE, _HEADER_PROBE, now, now, producer_name, batch)
        if len(encode_entry(probe)) > self.journal.max_record_bytes:
            raise PayloadTooLarge(
                f"Entry of {probe.size} bytes exceeds the journal record limit of {self.journal.max_record_bytes} "
                "bytes; enable chunking for larger messages"
            )
        policies = TopicPolicies.of(self.policies(topic))
        size = max(batch.uncompressed_size, len(batch.payload))
        if size > policies.max_message_size and batch.chunk is None:
            raise PayloadTooLarge(
                f"Message of {size} bytes exceeds the topic's maximum message size of "
                f"{policies.max_message_size} bytes"
            )
        sequence_id = max(batch.highest_sequence_id, batch.sequence_id)
        dedup = sequence_id >= 0 and policies.deduplication
        claim = ProducerClaim(producer_name, self.clock.now_ms(), sequence_id, dedup, batch.num_messages,
                              len(batch.payload), rate_claim(policies.publish_rate, batch.num_messages,
                                                             len(batch.payload), self.clock.now_ms()))
        reserved, claim = self._reserve_within_quota(topic, claim, create_topic)
        if isinstance(reserved, DedupRecord):
            return self._again(topic, batch, claim, reserved)
        # the write deadline counts from the moment just before the reservation (claim.now_ms)
        return self._write(topic, batch, producer_name, reserved, claim.now_ms)

    def _write(self, topic: TopicName, batch: Batch, producer_name: str, reservation: Reservation,
               reserved_at: int) -> AppendResult:
        key = str(topic)
        entry = make_entry(key, reservation.ledger_id, reservation.entry_id, reserved_at, self.clock.now_ms(),
                           producer_name, batch)
        data = encode_entry(entry)
        crash_point("produce.after_reserve")  # id reserved, journal not written: a hole
        if self.clock.now_ms() - reserved_at > WRITE_DEADLINE_MS:
            raise RetryableError("Reservation expired before the journal write; retry the publish")
        self.journal.append(journal_key(key), data)
        crash_point("produce.after_journal_write")  # durable but not acknowledged: the client retries
        ledger_full = reservation.entry_id - reservation.ledger_first_entry + 1 >= MAX_ENTRIES_PER_LEDGER
        ledger_old = entry.publish_time - reservation.ledger_opened_at >= MAX_LEDGER_AGE_MS
        if ledger_full or ledger_old:
            self.metadata.roll_ledger(topic, reservation.ledger_id, entry.publish_time)
        return self._result(topic, entry.ledger_id, entry.entry_id, batch)

    @staticmethod
    def _result(topic: TopicName, ledger_id: int, entry_id: int, batch: Batch, duplicate: bool = False) -> AppendResult:
        partition = topic.partition_index
        index = (lambda i: i) if batch.batched else (lambda i: -1)
        ids = [MessageIdData(ledger_id, entry_id, partition, index(i)) for i in range(batch.num_messages)]
        return AppendResult(ledger_id, entry_id, ids, duplicate)

    def _again(self, topic: TopicName, batch: Batch, claim: ProducerClaim, record: DedupRecord) -> AppendResult:
        """A publish whose sequence id the producer already used (deduplication is on)."""
        if record.sequence_id > claim.sequence_id:  # an older message: stored long ago
            return self._result(topic, -1, -1, batch, duplicate=True)
        now = self.clock.now_ms()
        if now - record.reserved_at < WRITE_DEADLINE_MS:
            # the same publish retried while its reservation is valid: its first attempt may have
            # died before the journal write, so write again under the same id (the sealer keeps one)
            entry = make_entry(str(topic), record.ledger_id, record.entry_id, record.reserved_at, now,
                               claim.producer, batch)
            self.journal.append(journal_key(str(topic)), encode_entry(entry))
            return self._result(topic, record.ledger_id, record.entry_id, batch, duplicate=True)
        stored = self.lookup(topic, record.entry_id) if self.lookup else None
        if stored is None:
            raise RetryableError("The first attempt of this publish is not settled yet; retry")
        if not stored.hole:
            return self._result(topic, record.ledger_id, record.entry_id, batch, duplicate=True)
        # the first attempt died before writing and its id became a hole: publish for real now
        reservation = self.metadata.replace_reservation(topic, replace(claim, now_ms=now, rate=None), record.entry_id)
        return self._write(topic, batch, claim.producer, reservation, now)

    def policies(self, topic: TopicName) -> dict[str, Any]:
        """The topic's effective policies (its overrides over its namespace's), cached per
        container for POLICY_CACHE_MS: a policy change takes effect within that time."""
        return self._policies_of(topic, fresh=False)

    def fresh_policies(self, topic: TopicName) -> dict[str, Any]:
        """The effective policies read now (the maintenance run), refreshing the cache."""
        return self._policies_of(topic, fresh=True)

    def forget_policies(self) -> None:
        """A policy changed through this container: read them again on next use."""
        self._policies.clear()

    def _policies_of(self, topic: TopicName, fresh: bool) -> dict[str, Any]:
        name = str(topic.partitioned_topic if topic.partition_index >= 0 else topic)
        now = self.clock.now_ms()
        cached = self._policies.get(name)
        if fresh or cached is None or now - cached[0] > POLICY_CACHE_MS:
            info = self.metadata.get_namespace(topic.namespace_name)
            merged = effective_policies(dict(info.policies) if info else {}, self.metadata.get_topic_policies(topic))
            cached = (now, merged)
            self._policies[name] = cached
        return cached[1]

    def _reserve_within_quota(
        self, topic: TopicName, claim: ProducerClaim, create_topic: bool
    ) -> tuple[Reservation | DedupRecord, ProducerClaim]:
        """Reserve an id; while the backlog quota blocks the topic, Pulsar's producer_request_hold
        holds the publish (re-checking the backlog, which may have drained since the last
        maintenance run) and producer_exception refuses it."""
        deadline = self.clock.now_ms() + QUOTA_HOLD_MS
        while True:
            claim = _at(claim, self.clock.now_ms())
            try:
                return self._reserve(topic, claim, create_topic)
            except BacklogQuotaExceeded as exc:
                if not self._quota_still_exceeded(topic):
                    continue  # the backlog is back under its quota: the block was lifted
                if exc.policy != "producer_request_hold":
                    raise
                if self.clock.now_ms() >= deadline:
                    raise TooManyRequests(
                        f"Publish on {topic} held {QUOTA_HOLD_MS // 1000} s: backlog quota exceeded; retry later"
                    ) from None
                self.clock.sleep(QUOTA_HOLD_POLL_S)

    def _reserve(
        self, topic: TopicName, claim: ProducerClaim, create_topic: bool
    ) -> tuple[Reservation | DedupRecord, ProducerClaim]:
        """The reservation, and the claim it was made with (its time starts the write deadline)."""
        try:
            return self.metadata.reserve_entry(topic, claim), claim
        except TopicNotFound:
            if not create_topic:
                raise
        ensure_topic(self.metadata, topic, self.clock.now_ms())
        claim = _at(claim, self.clock.now_ms())
        return self.metadata.reserve_entry(topic, claim), claim

    def _quota_still_exceeded(self, topic: TopicName) -> bool:
        """Re-evaluate a blocked topic's backlog, at most once a second per container."""
        if self.quota_check is None:
            return True
        now = self.clock.now_ms()
        if now - self._quota_checked.get(str(topic), 0) < QUOTA_RECHECK_MS:
            return True
        self._quota_checked[str(topic)] = now
        return self.quota_check(topic)

    def attach_producer(self, topic: TopicName, producer: str, access_mode: str, lease_ms: int) -> None:
        """Pulsar's producer access modes: Exclusive takes the topic (or fails), Shared needs nothing.

        Also the admission checks Pulsar makes when a producer connects. An exclusive producer
        renews its lease through here every few seconds: one read and one write."""
        if access_mode not in ("Shared", "Exclusive", "WaitForExclusive"):
            raise InvalidInput(f"Invalid access mode {access_mode!r}")
        self._admit_producer(topic, producer)
        if access_mode == "Shared":
            return
        if not self.metadata.claim_exclusive(topic, producer, self.clock.now_ms(), lease_ms):
            raise ProducerFenced(f"Topic {topic} already has an exclusive producer")

    def detach_producer(self, topic: TopicName, producer: str) -> None:
        self.metadata.release_exclusive(topic, producer)
        self.metadata.touch_producer(topic, producer, 0)  # disconnected: no longer a publisher

    def _admit_producer(self, topic: TopicName, producer: str) -> None:
        """The topic's producer limit, and a backlog quota that refuses producers
        (producer_exception); the topic is created on first use, the producer registered."""
        now = self.clock.now_ms()
        _, writer = self.metadata.get_topic_state(topic)
        if writer is None:
            ensure_topic(self.metadata, topic, now)
            _, writer = self.metadata.get_topic_state(topic)
            if writer is None:
                raise TopicNotFound(f"Topic {topic} not found")
        if writer.backlog_blocked == "producer_exception" and self._quota_still_exceeded(topic):
            raise BacklogQuotaExceeded(f"Cannot create producer on {topic}: backlog quota exceeded")
        max_producers = TopicPolicies.of(self.policies(topic)).max_producers
        if max_producers > 0:
            live = [name for name, p in writer.producers.items()
                    if name != producer and p.connected_since and now - max(p.last_publish, p.connected_since) < PRODUCER_IDLE_MS]
            if len(live) >= max_producers:
                raise ProducerBusy(f"Topic {topic} reached its maximum number of producers ({max_producers})")
        if producer not in writer.producers or not writer.producers[producer].connected_since:
            self.metadata.touch_producer(topic, producer, now)

def rate_claim(rate: PublishRate, messages: int, size: int, now_ms: int) -> RateClaim | None:
    """The publish-rate part of a reservation (None without a limit: the write has no rate condition)."""
    if not rate.active:
        return None
    limits = [f"{rate.msgs} msg/s"] if rate.msgs > 0 else []
    limits += [f"{rate.bytes} bytes/s"] if rate.bytes > 0 else []
    return RateClaim(now_ms * 1_000_000, rate_cost_ns(messages, rate.msgs), rate_cost_ns(size, rate.bytes),
                     PUBLISH_BURST_S * 1_000_000_000, ", ".join(limits))


def _at(claim: ProducerClaim, now_ms: int) -> ProducerClaim:
    """The claim made again at `now_ms` (a retried or held reservation)."""
    rate = replace(claim.rate, now_ns=now_ms * 1_000_000) if claim.rate is not None else None
    return replace(claim, now_ms=now_ms, rate=rate)


def ensure_topic(metadata: MetadataStore, topic: TopicName, now_ms: int) -> bool:
    """Create a topic on first use, as Pulsar's allowAutoTopicCreation does; False if it existed.

    A partition of a partitioned topic is created on first use too, within the partition count;
    the name of a partitioned topic itself holds no data (clients route to its partitions).
    A namespace at its maxTopicsPerNamespace refuses with Pulsar's client-side NotAllowedError
    (405); its partitions were counted when the partitioned topic was created."""
    from magnetar.core.errors import Conflict, NotAllowed, NotFound

    namespace = metadata.get_namespace(topic.namespace_name)
    if namespace is None:
        raise NotFound(f"Namespace {topic.namespace_name} does not exist")
    max_topics = 0
    if topic.partition_index >= 0:
        partitions = metadata.get_partitions(topic.partitioned_topic)
        if partitions is not None and topic.partition_index >= partitions:
            raise NotFound(f"{topic} is beyond the {partitions} partitions of {topic.partitioned_topic}")
        if partitions is None:  # a plain topic named like a partition
            max_topics = TopicPolicies.of(namespace.policies).max_topics
    elif metadata.get_partitions(topic) is not None:
        raise Conflict(f"{topic} is a partitioned topic: produce and consume through its partitions")
    else:
        max_topics = TopicPolicies.of(namespace.policies).max_topics
    try:
        return metadata.create_topic(topic, now_ms, max_topics)
    except TopicLimitReached:
        raise NotAllowed(TOPIC_LIMIT_REASON) from None


class EntryCache:
    """The managed-ledger cache: decoded entries by (topic, entry id), bounded by bytes.

    Entries are immutable once their id is taken, so a cached entry can never be stale.
    A warm Lambda container keeps it between invocations; it is only ever a cache.
    """

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, int], Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, topic: str, entry_id: int) -> Entry | None:
        with self._lock:
            entry = self._items.get((topic, entry_id))
            if entry is not None:
                self._items.move_to_end((topic, entry_id))
            return entry

    def put(self, entry: Entry) -> None:
        key = (entry.topic, entry.entry_id)
        with self._lock:
            if key in self._items:
                return
            self._items[key] = entry
            self._bytes += entry.size + 64
            while self._bytes > self.max_bytes and self._items:
                _, old = self._items.popitem(last=False)
                self._bytes -= old.size + 64


class EntryReader:
    """Reads a contiguous run of entries of a topic partition from segments and the journal tail."""

    def __init__(
        self, metadata: MetadataStore, segments: SegmentStore, journal: Journal, cache: EntryCache | None = None
    ) -> None:
        self.metadata = metadata
        self.segments = segments
        self.journal = journal
        self.cache = cache or EntryCache()
        # topic -> (last entry id read from the journal tail, its journal position): a warm cache
        self._tail_positions: dict[str, tuple[int, JournalPosition]] = {}

    def read(
        self, topic: TopicName, start: int, max_entries: int, seal: SealState, writer: WriterState | None
    ) -> list[Entry]:
        key = str(topic)
        out: list[Entry] = []
        position = start
        while len(out) < max_entries:
            cached = self.cache.get(key, position)
            if cached is None:
                break
            out.append(cached)
            position += 1
        if len(out) < max_entries and position < seal.next_entry:
            for entry in self._read_sealed(topic, position, max_entries - len(out)):
                if entry.entry_id != position:
                    break
                out.append(entry)
                position += 1
        end = writer.next_entry if writer else 0
        if len(out) < max_entries and position >= seal.next_entry and position < end:
            since = writer.created_at if writer else 0
            out.extend(self._read_tail(topic, position, max_entries - len(out), seal, since))
        return out

    def find_by_time(self, topic: TopicName, timestamp_ms: int, seal: SealState, writer: WriterState | None) -> int:
        """The first entry published at or after `timestamp_ms` (the end of the topic if none)."""
        position = 0
        while position < seal.next_entry:
            segments = self.metadata.list_segments(topic, position, limit=100)
            if not segments:
                break
            for seg in segments:
                if seg.max_publish_time >= timestamp_ms:
                    for entry in self._read_sealed(topic, max(seg.first_entry, position), seg.last_entry - max(seg.first_entry, position) + 1):
                        if not entry.hole and entry.publish_time >= timestamp_ms:
                            return entry.entry_id
                position = seg.last_entry + 1
        end = writer.next_entry if writer else position
        while position < end:
            entries = self.read(topic, position, 100, seal, writer)
            if not entries:
                break
            for entry in entries:
                if not entry.hole and entry.publish_time >= timestamp_ms:
                    return entry.entry_id
            position = entries[-1].entry_id + 1
        return end

    def _read_sealed(self, topic: TopicName, start: int, max_entries: int) -> list[Entry]:
        out: list[Entry] = []
        position = start
        for seg in self.metadata.list_segments(topic, start, limit=4):
            if seg.first_entry > position or len(out) >= max_entries:
                break  # a gap: trimmed data, nothing more to read contiguously
            first_index = position - seg.first_entry
            last_index = min(seg.last_entry, position + max_entries - len(out) - 1) - seg.first_entry
            lo, hi = seg.offsets[first_index], seg.offsets[last_index + 1]
            try:
                blob = self.segments.get_range(seg.key, lo, hi)
            except NotFound:
                break  # trimmed after we listed it: the reader starts again from the first entry
            for i in range(first_index, last_index + 1):
                a, b = seg.offsets[i] - lo, seg.offsets[i + 1] - lo
                entry = decode_entry(blob[a:b])
                self.cache.put(entry)
                out.append(entry)
            position = seg.first_entry + last_index + 1
        return out

    def _read_tail(
        self, topic: TopicName, start: int, max_entries: int, seal: SealState, since_ms: int
    ) -> list[Entry]:
        key = str(topic)
        after = seal.last_position
        known = self._tail_positions.get(key)
        if known is not None and known[0] == start - 1 and start > seal.next_entry:
            # This container already read the tail up to start - 1: read only what came after it.
            # (An earlier id landing before that record is found by the sealer; we only lose latency.)
            after = known[1]
        records = self.journal.read_after(journal_key(key), after, since_ms - 5_000, 10_000)
        found: dict[int, JournalRecord] = {}
        for record in records:
            header = peek_header(record.data)
            if header.topic == key and header.entry_id >= start and header.entry_id not in found:
                found[header.entry_id] = record
        out: list[Entry] = []
        position = start
        while position in found and len(out) < max_entries:
            entry = decode_entry(found[position].data)
            self.cache.put(entry)
            out.append(entry)
            position += 1
        if out:
            self._tail_positions[key] = (position - 1, found[position - 1].position)
        return out


@dataclass
class SealOutcome:
    """What one sealer invocation did; `retry_from` is the journal record to resume from."""

    sealed_entries: int = 0
    segments_written: int = 0
    holes: int = 0
    late_after_hole: int = 0
    retry_from: str | None = None


class Sealer:
    """Moves journal records into S3 segments (the journal consumer's logic).

    Idempotent: the seal state says which entry comes next, so a replayed or retried batch
    skips what is already sealed, and a segment key names its exact entry range, so a re-put
    after a crash between the S3 write and the DynamoDB commit writes the same bytes again.
    """

    def __init__(self, metadata: MetadataStore, segments: SegmentStore, clock: Clock) -> None:
        self.metadata = metadata
        self.segments = segments
        self.clock = clock

    def seal(self, records: list[JournalRecord]) -> SealOutcome:
        outcome = SealOutcome()
        by_topic: dict[str, list[tuple[int, JournalRecord, int, int, int]]] = {}
        for index, record in enumerate(records):
            try:
                header = peek_header(record.data)
            except InvalidInput:
                log.error("dropping undecodable journal record %s", record.position)
                continue
            by_topic.setdefault(header.topic, []).append(
                (index, record, header.ledger_id, header.entry_id, header.reserved_at)
            )
        if not by_topic:
            return outcome
        states = self.metadata.get_seal_states(sorted(by_topic))
        retry_index: int | None = None
        for topic, items in by_topic.items():
            blocked_at = self._seal_topic(TopicName.parse(topic), items, states.get(topic, SealState()), outcome)
            if blocked_at is not None and (retry_index is None or blocked_at < retry_index):
                retry_index = blocked_at
        if retry_index is not None:
            outcome.retry_from = records[retry_index].position.sequence
        return outcome

    def _seal_topic(
        self,
        topic: TopicName,
        items: list[tuple[int, JournalRecord, int, int, int]],
        state: SealState,
        outcome: SealOutcome,
    ) -> int | None:
        """Seal what can be sealed for one topic; the index of the first record to retry, if any."""
        waiting: dict[int, tuple[int, JournalRecord, int, int]] = {}
        for index, record, ledger_id, entry_id, reserved_at in items:
            if entry_id < state.next_entry:
                if entry_id in state.recent_holes:
                    outcome.late_after_hole += 1
                    log.error("entry %s/%d arrived after its id was declared a hole", topic, entry_id)
                continue  # already sealed: a replay
            waiting.setdefault(entry_id, (index, record, ledger_id, reserved_at))
        run: list[tuple[Entry | bytes, int, JournalRecord | None]] = []  # (entry or bytes, ledger, record)
        position = state.next_entry
        holes: list[int] = []
        now = self.clock.now_ms()
        blocked_at: int | None = None
        while waiting:
            if position in waiting:
                _, record, ledger_id, _ = waiting.pop(position)
                run.append((record.data, ledger_id, record))
                position += 1
                continue
            later = min(waiting)
            index, _, ledger_id, reserved_at = waiting[later]
            if now - reserved_at >= HOLE_GRACE_MS:
                holes.append(position)
                run.append((hole_entry(str(topic), ledger_id, position, now), ledger_id, None))
                position += 1
                continue
            blocked_at = min(i for i, _, _, _ in waiting.values())
            break
        if run:
            self._write_segments(topic, run, state, holes, outcome)
        return blocked_at

    def _write_segments(
        self,
        topic: TopicName,
        run: list[tuple[Entry | bytes, int, JournalRecord | None]],
        state: SealState,
        holes: list[int],
        outcome: SealOutcome,
    ) -> None:
        first = state.next_entry
        chunk: list[tuple[bytes, int, JournalRecord | None]] = []
        chunk_bytes = 0
        for item, ledger_id, record in run:
            data = encode_entry(item) if isinstance(item, Entry) else item
            starts_new = chunk and (
                ledger_id != chunk[0][1] or len(chunk) >= MAX_SEGMENT_ENTRIES or chunk_bytes + len(data) > MAX_SEGMENT_BYTES
            )
            if starts_new:
                state = self._commit(topic, first, chunk, state, holes, outcome)
                first += len(chunk)
                chunk, chunk_bytes = [], 0
            chunk.append((data, ledger_id, record))
            chunk_bytes += len(data)
        if chunk:
            self._commit(topic, first, chunk, state, holes, outcome)

    def _commit(
        self,
        topic: TopicName,
        first: int,
        chunk: list[tuple[bytes, int, JournalRecord | None]],
        state: SealState,
        holes: list[int],
        outcome: SealOutcome,
    ) -> SealState:
        last = first + len(chunk) - 1
        ledger_id = chunk[0][1]
        offsets = [0]
        messages = 0
        for data, _, _ in chunk:
            offsets.append(offsets[-1] + len(data))
        blob = b"".join(data for data, _, _ in chunk)
        max_publish_time = 0
        for data, _, record in chunk:
            if record is not None:
                header = peek_header(data)
                messages += header.num_messages
                max_publish_time = max(max_publish_time, header.publish_time)
        key = segment_key(topic, ledger_id, first, last)
        self.segments.put_if_absent(key, blob)
        crash_point("seal.after_segment_put")  # object in S3, not in the metadata: a replay re-puts it
        last_position = next((r.position for _, _, r in reversed(chunk) if r is not None), state.last_position)
        chunk_holes = tuple(h for h in holes if first <= h <= last)
        now = self.clock.now_ms()
        new_state = replace(
            state,
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
        )
        meta = SegmentMeta(str(topic), ledger_id, first, last, key, tuple(offsets), messages, self.clock.now_ms(),
                           max_publish_time)
        if not self.metadata.commit_segment(meta, state.next_entry, new_state):
            raise RetryableError(f"seal state of {topic} moved under us; the batch is retried")
        crash_point("seal.after_commit")  # committed, batch not checkpointed: a replay skips it
        outcome.sealed_entries += len(chunk)
        outcome.segments_written += 1
        outcome.holes += len(chunk_holes)
        return replace(new_state)
