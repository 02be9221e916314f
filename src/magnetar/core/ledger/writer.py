"""The writer: appending to a topic partition's ledger (Pulsar's managed-ledger owner, split
across AWS primitives because any Lambda may append to any topic at any moment).

- **Ids** come from one conditional counter per topic partition (`MetadataStore.reserve_entry`):
  entry ids are dense, and a reservation is valid for `WRITE_DEADLINE_MS` only. A writer that
  is past its deadline before the journal write gives up (the client retries) and never writes.
- **Durability** comes from the Kinesis journal: an append is acknowledged once its record is
  stored; the partition key is the topic partition, so its records stay in one shard, in order.
- **Group appends** (`append_group`): consecutive batches of one producer become consecutive
  entries with one reservation (`ProducerClaim.entries` ids, one conditional write carrying the
  admission checks of the whole group) and one journal record (an envelope, `entry.encode_envelope`),
  so the group is stored all together or not at all, and a request carries many entries for the
  AWS requests of one.
- The reservation carries the admission checks of a publish: deduplication (a retried publish
  gets its original ids), the publish rate (`rate_claim`) and the backlog quota (held or refused);
  a ledger is rolled over past `MAX_ENTRIES_PER_LEDGER` entries or `MAX_LEDGER_AGE_MS`.
- Producers: the access modes (Shared, Exclusive) and the admission checks of a connecting
  producer; topics are created on first use (`ensure_topic`); the effective policies are cached
  per container (`policy_cache.PolicyCache`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from magnetar.core import metrics as m
from magnetar.core.crashpoints import crash_point, refusal_point
from magnetar.core.delaypoints import delay_point
from magnetar.core.entry import (
    Batch,
    Entry,
    MessageIdData,
    encode_entry,
    encode_envelope,
    envelope_size,
    hole_entry,
    make_entry,
)
from magnetar.core.errors import (
    BacklogQuotaExceeded,
    InvalidInput,
    JournalRefused,
    MagnetarError,
    PayloadTooLarge,
    ProducerBusy,
    ProducerFenced,
    RetryableError,
    TooManyRequests,
    TopicLimitReached,
    TopicNotFound,
)
from magnetar.core.ledger import common
from magnetar.core.ledger.common import journal_key
from magnetar.core.ledger.policy_cache import PolicyCache
from magnetar.core.naming import TopicName
from magnetar.core.policies import (
    PUBLISH_BURST_S,
    TOPIC_LIMIT_REASON,
    PublishRate,
    TopicPolicies,
    rate_cost_ns,
)
from magnetar.core.ports import (
    Clock,
    DedupRecord,
    Journal,
    MetadataStore,
    ProducerClaim,
    ProducerShare,
    RateClaim,
    Reservation,
)
from magnetar.core.ports.telemetry import NO_TELEMETRY, Telemetry, Unit

log = logging.getLogger(__name__)

MAX_MESSAGES_PER_ENTRY = 10_000
MAX_ENTRIES_PER_APPEND = 1_000  # entries of one group append (one journal record bounds its bytes too)
MAX_ENTRIES_PER_LEDGER = 50_000  # Pulsar's managedLedgerMaxEntriesPerLedger
MAX_LEDGER_AGE_MS = 240 * 60_000  # Pulsar's managedLedgerMaxLedgerRolloverTimeMinutes
_HEADER_PROBE = 2**62  # ids this large bound the encoded header size before the real ids exist


@dataclass(frozen=True)
class AppendResult:
    ledger_id: int
    entry_id: int
    message_ids: list[MessageIdData]
    duplicate: bool = False  # deduplication: already stored, these are the original ids
    # how long the journal write waited for its shard's write budget (the shard is saturated: the
    # producer paces its next requests by it, core/publish_pacing.py)
    throttled_ms: int = 0
    journal_shard: str = ""  # the shard the journal record went to (producers sharing it pace together)


QUOTA_HOLD_MS = 10_000  # producer_request_hold: a publish is held this long per request (the SDK retries)
QUOTA_HOLD_POLL_S = 1.0
QUOTA_RECHECK_MS = 1_000
FENCE_PATIENCE_S = 3.0  # how long a writer tries to tombstone ids it did not store (a publish answers within 29 s)
PRODUCER_IDLE_MS = 5 * 60_000  # a producer silent this long no longer counts (stats, max producers)
DEAD_LETTER_SUFFIX = "-DLQ"  # the SDK's dead-letter topics: <topic>-<subscription>-DLQ (pulsar-client's)
END_OF_TIME_MS = 1 << 62  # a clock no lease outlives (ExclusiveWithFencing's take-over)


class LedgerWriter:
    telemetry: Telemetry = NO_TELEMETRY  # publishes, refusals and errors per namespace; the publish spans

    def __init__(self, metadata: MetadataStore, journal: Journal, clock: Clock,
                 lookup: Callable[[TopicName, int], Entry | None] | None = None) -> None:
        self.metadata = metadata
        self.journal = journal
        self.clock = clock
        self.lookup = lookup  # finds a stored entry (deduplication of a retried publish)
        # re-evaluates a topic's backlog quota now; True while it is still exceeded (lifecycle)
        self.quota_check: Callable[[TopicName], bool] | None = None
        self.policy_cache = PolicyCache(metadata, clock)
        self._quota_checked: dict[str, int] = {}

    def append(self, topic: TopicName, batch: Batch, producer_name: str, create_topic: bool = True) -> AppendResult:
        """Append one batch as one entry; the ids are final once this returns."""
        return self.append_group(topic, [batch], producer_name, create_topic)[0]

    def append_group(self, topic: TopicName, batches: list[Batch], producer_name: str,
                     create_topic: bool = True, producers: list[str] | None = None) -> list[AppendResult]:
        """Append consecutive batches as consecutive entries, all or nothing: one reservation of
        their ids (admission checks for the whole group), one journal record (an envelope).
        The results are in the order of `batches`; the ids are final once this returns.
        `producers`: each batch's producer, when they are not all `producer_name`'s (a client's
        producers of one topic publishing together); with deduplication each producer's batches
        are appended as a group of their own."""
        namespace = str(topic.namespace_name)
        metrics = self.telemetry.metrics
        with self.telemetry.tracer.span("publish") as span:
            span.annotate("namespace", namespace)
            try:
                results = self._append_group(topic, batches, producer_name, create_topic,
                                             producers or [producer_name] * len(batches))
            except MagnetarError as exc:
                refused = exc.status < 500 and not isinstance(exc, RetryableError)
                metrics.add(m.PUBLISH_REFUSED if refused else m.PUBLISH_ERRORS, 1, namespace=namespace)
                raise
            except Exception:
                metrics.add(m.PUBLISH_ERRORS, 1, namespace=namespace)
                raise
            messages = sum(b.num_messages for b in batches)
            span.annotate("messages", messages)
        metrics.add(m.PUBLISHED_MESSAGES, messages, namespace=namespace)
        metrics.add(m.PUBLISHED_BYTES, sum(len(b.payload) for b in batches), Unit.BYTES, namespace=namespace)
        if topic.partitioned_topic.local_name.endswith(DEAD_LETTER_SUFFIX):
            metrics.add(m.DEAD_LETTERED_MESSAGES, messages, namespace=namespace)
        return results

    def _append_group(self, topic: TopicName, batches: list[Batch], producer_name: str,
                      create_topic: bool, names: list[str]) -> list[AppendResult]:
        if not batches:
            raise InvalidInput("No batches to publish")
        if len(names) != len(batches):
            raise InvalidInput("Give each batch its producer")
        if len(batches) > MAX_ENTRIES_PER_APPEND:
            raise InvalidInput(f"Too many batches in one publish ({len(batches)} > {MAX_ENTRIES_PER_APPEND})")
        for batch in batches:
            if batch.num_messages <= 0:
                raise InvalidInput("No messages to publish")
            if batch.num_messages > MAX_MESSAGES_PER_ENTRY:
                raise InvalidInput(
                    f"Too many messages in one batch ({batch.num_messages} > {MAX_MESSAGES_PER_ENTRY})")
        now = self.clock.now_ms()
        key = str(topic)
        sizes = [len(encode_entry(make_entry(key, _HEADER_PROBE, _HEADER_PROBE, now, now, n, b)))
                 for n, b in zip(names, batches, strict=True)]
        if envelope_size(sizes) > self.journal.max_record_bytes:
            what = "Entry" if len(batches) == 1 else f"Publish of {len(batches)} entries"
            raise PayloadTooLarge(
                f"{what} of {envelope_size(sizes)} bytes exceeds the journal record limit of "
                f"{self.journal.max_record_bytes} bytes; enable chunking for larger messages"
            )
        policies = TopicPolicies.of(self.policies(topic))
        for batch in batches:
            size = max(batch.uncompressed_size, len(batch.payload))
            if size > policies.max_message_size and batch.chunk is None:
                raise PayloadTooLarge(
                    f"Message of {size} bytes exceeds the topic's maximum message size of "
                    f"{policies.max_message_size} bytes"
                )
        sequences = [_sequence(b) for b in batches]
        copies = sum(b.origin is not None for b in batches)
        if copies and copies != len(batches):
            raise InvalidInput("A publish carries replicated copies only, or none")
        # a replicator's copies are always deduplicated (by their origin's entry id): exactly once
        dedup = (policies.deduplication or copies > 0) and max(sequences) >= 0
        if dedup and min(sequences) < 0:
            raise InvalidInput("With deduplication, give every batch of one publish a sequence id, or none")
        if len(set(names)) > 1:
            if dedup:  # each producer's sequence ids are its own: a group (and a reservation) each
                return self._append_each_producer(topic, batches, names, create_topic)
            claim = replace(self._claim(producer_name, batches, dedup, policies), shares=shares_of(names, batches))
        else:
            claim = self._claim(names[0], batches, dedup, policies)
        reserved, claim = self._reserve_within_quota(topic, claim, create_topic)
        if isinstance(reserved, DedupRecord):
            return self._again(topic, batches, names[0], claim, reserved, create_topic)
        # the write deadline counts from the moment just before the reservation (claim.now_ms)
        return self._write(topic, batches, names, reserved, claim.now_ms, fence=not claim.deduplicate)

    def _append_each_producer(self, topic: TopicName, batches: list[Batch], names: list[str],
                              create_topic: bool) -> list[AppendResult]:
        """Several producers' batches on a deduplicated topic: each producer's, in their order, as
        its own group append; the results in the order of `batches`."""
        results: dict[int, AppendResult] = {}
        for name in dict.fromkeys(names):
            mine = [i for i, n in enumerate(names) if n == name]
            appended = self._append_group(topic, [batches[i] for i in mine], name, create_topic, [name] * len(mine))
            results.update(zip(mine, appended, strict=True))
        return [results[i] for i in range(len(batches))]

    def _claim(self, producer: str, batches: list[Batch], dedup: bool, policies: TopicPolicies) -> ProducerClaim:
        messages = sum(b.num_messages for b in batches)
        size = sum(len(b.payload) for b in batches)
        sequences = [_sequence(b) for b in batches]
        now = self.clock.now_ms()
        return ProducerClaim(producer, now, max(sequences), dedup, messages, size,
                             rate_claim(policies.publish_rate, messages, size, now), len(batches),
                             min(sequences) if len(batches) > 1 else None)

    def _write(self, topic: TopicName, batches: list[Batch], names: list[str], reservation: Reservation,
               reserved_at: int, fence: bool) -> list[AppendResult]:
        """Write the reserved entries to the journal. `fence`: when the record is certainly not
        stored, tombstone its ids at once (`_fence_own`); only for a publish without
        deduplication, whose retry takes new ids (with it, a retry within the deadline writes the
        same ids again, which a tombstone before it would turn into a late record)."""
        key = str(topic)
        now = self.clock.now_ms()
        entries = [make_entry(key, reservation.ledger_id, reservation.entry_id + i, reserved_at, now, names[i], b)
                   for i, b in enumerate(batches)]
        data = encode_envelope([encode_entry(e) for e in entries])
        crash_point("produce.after_reserve")  # ids reserved, journal not written: holes
        delay_point("produce.before_journal_write")  # a stalled writer: past its deadline, it must not write
        if self.clock.now_ms() - reserved_at > common.WRITE_DEADLINE_MS:
            self._fence_own(topic, entries, fence)
            raise RetryableError("Reservation expired before the journal write; retry the publish")
        delay_point("produce.journal_write")  # the write itself is slow: it lands late, maybe after its hole
        try:
            if refusal_point("produce.journal_refused"):  # a shard refusing every attempt: nothing stored
                raise JournalRefused("The journal's shard refused the write (write throughput exceeded); retry")
            with self.telemetry.tracer.span("journal.write"):
                position = self.journal.append(journal_key(key), data)
        except JournalRefused:
            self._fence_own(topic, entries, fence)
            raise
        delay_point("produce.after_journal_write")  # a write that took too long (throttled retries, a pause)
        _check_written_in_time(self.clock.now_ms(), reserved_at)
        crash_point("produce.after_journal_write")  # durable but not acknowledged: the client retries
        last = entries[-1]
        ledger_full = last.entry_id - reservation.ledger_first_entry + 1 >= MAX_ENTRIES_PER_LEDGER
        ledger_old = last.publish_time - reservation.ledger_opened_at >= MAX_LEDGER_AGE_MS
        if ledger_full or ledger_old:
            self.metadata.roll_ledger(topic, reservation.ledger_id, last.publish_time)
        return [replace(self._result(topic, e.ledger_id, e.entry_id, b), throttled_ms=position.throttled_ms,
                        journal_shard=position.shard_id)
                for e, b in zip(entries, batches, strict=True)]

    def _fence_own(self, topic: TopicName, entries: list[Entry], fence: bool) -> None:
        """The ids of a record this writer certainly did not store (the journal refused every
        attempt, or the deadline passed before the write): tombstone them through the journal
        now, so that the sealer seals them as holes when it reads the tombstones instead of
        waiting for the hole grace (60 s, during which the partition's later entries stay
        unsealed). Safe by the sealer's rule, the first record of an id wins: no record of these
        ids exists or will (the retry without deduplication reserves new ones). Best effort: a
        tombstone the journal refuses too leaves the ids to the sealer's fence after the grace."""
        if not fence:
            return
        now = self.clock.now_ms()
        tombstones = [encode_entry(hole_entry(str(topic), e.ledger_id, e.entry_id, now)) for e in entries]
        try:
            self.journal.append(journal_key(str(topic)), encode_envelope(tombstones), patience_s=FENCE_PATIENCE_S)
        except Exception as exc:  # the grace covers it; the publish's own error is what the client gets
            log.warning("tombstones of %s/%d..%d not written (the sealer fences them after the grace): %s",
                        topic, entries[0].entry_id, entries[-1].entry_id, exc)

    @staticmethod
    def _result(topic: TopicName, ledger_id: int, entry_id: int, batch: Batch, duplicate: bool = False) -> AppendResult:
        partition = topic.partition_index
        index = (lambda i: i) if batch.batched else (lambda i: -1)
        ids = [MessageIdData(ledger_id, entry_id, partition, index(i)) for i in range(batch.num_messages)]
        return AppendResult(ledger_id, entry_id, ids, duplicate)

    def _again(self, topic: TopicName, batches: list[Batch], producer: str, claim: ProducerClaim,
               record: DedupRecord, create_topic: bool) -> list[AppendResult]:
        """A publish reaching sequence ids the producer already used (deduplication is on).

        Batches up to the producer's last sequence id are duplicates, the rest (a partial
        overlap) is appended as a new group. When the duplicates end with the producer's last
        publish, its first attempt may not be settled: while its reservation is valid the same
        group is written again under the same ids (the sealer keeps one record per id); past it,
        the stored entry answers, and if its ids became holes (the first attempt died before the
        journal write; one record, so all of them) the whole publish is appended for real."""
        last = record.sequence_id
        dup = [i for i, b in enumerate(batches) if _sequence(b) <= last]
        fresh = [i for i, b in enumerate(batches) if _sequence(b) > last]
        same = len(dup) == record.entries and _sequence(batches[dup[-1]]) == last  # that very publish again
        results: dict[int, AppendResult] = {}
        originals = [self._result(topic, record.ledger_id, record.entry_id + n, batches[i], duplicate=True)
                     for n, i in enumerate(dup)] if same else None
        now = self.clock.now_ms()
        if max(_sequence(batches[i]) for i in dup) < last:  # older messages: stored long ago
            results.update((i, self._result(topic, -1, -1, batches[i], duplicate=True)) for i in dup)
        elif now - record.reserved_at < common.WRITE_DEADLINE_MS:
            if originals is None:
                raise RetryableError("An earlier publish of these sequence ids is not settled yet; retry")
            entries = [make_entry(str(topic), record.ledger_id, record.entry_id + n, record.reserved_at, now,
                                  producer, batches[i]) for n, i in enumerate(dup)]
            self.journal.append(journal_key(str(topic)), encode_envelope([encode_entry(e) for e in entries]))
            _check_written_in_time(self.clock.now_ms(), record.reserved_at)
            results.update(zip(dup, originals, strict=True))
        else:
            stored = self.lookup(topic, record.entry_id) if self.lookup else None
            if stored is None:
                raise RetryableError("The first attempt of this publish is not settled yet; retry")
            if stored.hole:  # the first attempt died before writing: publish all of this for real now
                reservation = self.metadata.replace_reservation(topic, replace(claim, now_ms=now, rate=None),
                                                                record.entry_id)
                return self._write(topic, batches, [producer] * len(batches), reservation, now, fence=False)
            results.update(zip(dup, originals or [self._result(topic, -1, -1, batches[i], duplicate=True)
                                                  for i in dup], strict=True))
        if fresh:
            appended = self.append_group(topic, [batches[i] for i in fresh], producer, create_topic)
            results.update(zip(fresh, appended, strict=True))
        return [results[i] for i in range(len(batches))]

    def policies(self, topic: TopicName) -> dict[str, Any]:
        """The topic's effective policies, cached per container (`PolicyCache`)."""
        return self.policy_cache.get(topic)

    def fresh_policies(self, topic: TopicName) -> dict[str, Any]:
        """The effective policies read now (the maintenance run), refreshing the cache."""
        return self.policy_cache.get(topic, fresh=True)

    def forget_policies(self) -> None:
        """A policy changed through this container: read them again on next use."""
        self.policy_cache.forget()

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
        """Pulsar's producer access modes: Exclusive takes the topic (or fails), Shared needs nothing,
        ExclusiveWithFencing takes the topic from whichever exclusive producer holds it (it renews
        as Exclusive: a renewal must not fence again).

        Also the admission checks Pulsar makes when a producer connects. An exclusive producer
        renews its lease through here every few seconds: one read and one write."""
        if access_mode not in ("Shared", "Exclusive", "WaitForExclusive", "ExclusiveWithFencing"):
            raise InvalidInput(f"Invalid access mode {access_mode!r}")
        self._admit_producer(topic, producer)
        if access_mode == "Shared":
            return
        if access_mode == "ExclusiveWithFencing":
            # the claim takes a claim that has expired: one made as of the end of time finds every
            # claim expired, and the next, as of now, gives this producer its real lease (two
            # conditional writes); the producer fenced out is refused at its next write or renewal
            self.metadata.claim_exclusive(topic, producer, END_OF_TIME_MS, 0)
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


def _check_written_in_time(now_ms: int, reserved_at: int) -> None:
    """After the journal write: a record stored past its reservation's deadline is not
    acknowledged under its ids. The sealer may already have fenced them off as holes (then it
    re-appends the record under new ids, `ledger.late`), or may still seal them (then the retry
    finds the stored entry, with deduplication); either way the producer retries, and the ids it
    is told are the ones consumers see."""
    if now_ms - reserved_at > common.WRITE_DEADLINE_MS:
        raise RetryableError("The journal write completed after the reservation's deadline; retry the publish")


def shares_of(names: list[str], batches: list[Batch]) -> tuple[ProducerShare, ...]:
    """Each producer's messages and bytes in a publish of several producers' batches."""
    return tuple(ProducerShare(name, sum(b.num_messages for n, b in zip(names, batches, strict=True) if n == name),
                               sum(len(b.payload) for n, b in zip(names, batches, strict=True) if n == name))
                 for name in dict.fromkeys(names))


def _sequence(batch: Batch) -> int:
    """The sequence id deduplication compares for a batch: its highest."""
    return max(batch.highest_sequence_id, batch.sequence_id)


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
    if namespace is None or namespace.policies.get("deleted"):  # Pulsar's Policies.deleted: being deleted
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
