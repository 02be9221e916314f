"""Late records: a journal record that reaches the sealer for ids already sealed as holes.

Its writer was past its reservation's deadline when the write completed, so the publish was not
acknowledged (`writer._check_written_in_time`; the producer retries), unless the clocks broke
the margin between the deadline and the hole grace. Either way the record is not dropped: it is
**re-appended under new ids**, exactly once, crash-safe, or — when deduplication says its
producer has since moved past its sequence ids — **dead-lettered** to S3.

Exactly once without a new kind of state: the re-append takes its ids through the writer
counter's deduplication record, which is written in the same conditional `UpdateItem` as the
reservation (atomically: the durable mark). Whose record:

- the topic deduplicates and the entries carry sequence ids: **the original producer's** (its
  name, its sequence ids). The producer's own retry of that publish and the sealer's re-append
  then settle on the same ids, whichever comes first: the retry finds the re-append's ids (or
  the re-append finds the retry's), as two retries of one publish do;
- otherwise: a per-hole name, `magnetar-late-<ledger>-<first hole id>`, sequence id 0: the
  first attempt reserves, every replay of the record finds the same ids.

Then the record's entries, their ids replaced, go to the journal as one record (an envelope
stays one), on every attempt: a second record of an id is dropped by the sealer (the first is
kept), and one written too late to be sealed under its ids is itself a late record, re-appended
again — never lost, never kept twice. When the ids the record found are older than the write
deadline they are settled or about to be: sealed for real (done), sealed as a hole (a new
reservation replaces them, `replace_reservation`), or not sealed yet (the record is retried
with the batch).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from urllib.parse import quote

from magnetar.core.entry import Entry, decode_entry, encode_entry, encode_envelope
from magnetar.core.errors import BacklogQuotaExceeded, ProducerFenced, TopicNotFound
from magnetar.core.ledger import common
from magnetar.core.ledger.common import journal_key
from magnetar.core.naming import TopicName
from magnetar.core.policies import TopicPolicies, effective_policies
from magnetar.core.ports import (
    Clock,
    DedupRecord,
    Journal,
    MetadataStore,
    ProducerClaim,
    Reservation,
    SegmentStore,
)

log = logging.getLogger(__name__)

LATE_PRODUCER_PREFIX = "magnetar-late-"


@dataclass(frozen=True)
class Settled:
    """Where the sealer stands on a topic after this invocation's commits: ids below
    `next_entry` are sealed, and `holes` are the sealed ones that hold tombstones."""

    next_entry: int
    holes: frozenset[int]


@dataclass(frozen=True)
class LateResult:
    reappended: bool = False  # new ids were taken for its entries and they went to the journal
    dead_lettered: bool = False
    retry: bool = False  # not settled yet: the record is retried with the batch


def dead_letter_key(topic: TopicName, entry: Entry) -> str:
    return (f"dead-letter/{topic.tenant}/{topic.namespace}/{topic.domain}/{quote(topic.local_name, safe='')}"
            f"/{entry.ledger_id:016x}-{entry.entry_id:016x}.entry")


class LateRecords:
    """Re-appends (or dead-letters) the entries of one late record."""

    def __init__(self, metadata: MetadataStore, journal: Journal, segments: SegmentStore, clock: Clock) -> None:
        self.metadata = metadata
        self.journal = journal
        self.segments = segments
        self.clock = clock

    def handle(self, topic: TopicName, datas: list[bytes], settled: Settled) -> LateResult:
        """`datas`: the record's late entries (consecutive ids, all sealed as holes)."""
        entries = [decode_entry(d) for d in datas]
        claim = self._claim(topic, entries)
        try:
            reserved = self.metadata.reserve_entry(topic, claim)
            if isinstance(reserved, Reservation):  # first attempt: the mark and the ids in one write
                return self._write(topic, entries, reserved.ledger_id, reserved.entry_id, claim.now_ms, first=True)
            return self._again(topic, entries, claim, reserved, settled)
        except (ProducerFenced, BacklogQuotaExceeded, TopicNotFound) as exc:
            # refusals that may last (an exclusive producer holds the topic, the backlog quota
            # blocks it, the topic is gone): waiting would hold the shard's journal up behind this
            # record, so it is dead-lettered instead
            return self._dead_letter(topic, entries, f"{type(exc).__name__}: {exc}")

    def _dead_letter(self, topic: TopicName, entries: list[Entry], why: str) -> LateResult:
        for e in entries:
            self.segments.put_if_absent(dead_letter_key(topic, e), encode_entry(e))
        log.error("late entries %s/%d..%d dead-lettered (%s)", topic, entries[0].entry_id, entries[-1].entry_id, why)
        return LateResult(dead_lettered=True)

    def _claim(self, topic: TopicName, entries: list[Entry]) -> ProducerClaim:
        now = self.clock.now_ms()
        sequences = [max(e.sequence_id, e.highest_sequence_id) for e in entries]
        if min(sequences) >= 0 and entries[0].producer_name and self._deduplicates(topic):
            return ProducerClaim(entries[0].producer_name, now, max(sequences), True, entries=len(entries),
                                 first_sequence_id=min(sequences) if len(entries) > 1 else None)
        name = f"{LATE_PRODUCER_PREFIX}{entries[0].ledger_id}-{entries[0].entry_id}"
        return ProducerClaim(name, now, 0, True, entries=len(entries))

    def _deduplicates(self, topic: TopicName) -> bool:
        info = self.metadata.get_namespace(topic.namespace_name)
        merged = effective_policies(dict(info.policies) if info else {}, self.metadata.get_topic_policies(topic))
        return TopicPolicies.of(merged).deduplication

    def _again(self, topic: TopicName, entries: list[Entry], claim: ProducerClaim, record: DedupRecord,
               settled: Settled) -> LateResult:
        if record.sequence_id > claim.sequence_id:
            # deduplication: the producer moved past these sequence ids (its retry stored them, or
            # it gave up on them); appending them now would break its order: dead-letter
            return self._dead_letter(topic, entries, f"{claim.producer} is at sequence id {record.sequence_id}")
        now = self.clock.now_ms()
        if now - record.reserved_at < common.WRITE_DEADLINE_MS:
            if record.entries != len(entries):  # another grouping of the same publish: wait until it settles
                return LateResult(retry=True)
            return self._write(topic, entries, record.ledger_id, record.entry_id, record.reserved_at)
        if record.entry_id >= settled.next_entry:
            return LateResult(retry=True)  # its ids are not settled yet
        if record.entry_id in settled.holes:  # those ids became holes too: take new ones
            fresh = self.metadata.replace_reservation(topic, replace(claim, now_ms=now), record.entry_id)
            return self._write(topic, entries, fresh.ledger_id, fresh.entry_id, now, first=True)
        return LateResult()  # sealed under those ids already: exactly once

    def _write(self, topic: TopicName, entries: list[Entry], ledger_id: int, entry_id: int, reserved_at: int,
               first: bool = False) -> LateResult:
        """The entries under their new ids, one journal record; `first`: the ids were taken now
        (counted once; a replay writes the same ids again, which the sealer drops)."""
        moved = [replace(e, ledger_id=ledger_id, entry_id=entry_id + i, reserved_at=reserved_at)
                 for i, e in enumerate(entries)]
        self.journal.append(journal_key(str(topic)), encode_envelope([encode_entry(e) for e in moved]))
        log.warning("late entries %s/%d..%d re-appended as %d..%d", topic, entries[0].entry_id,
                    entries[-1].entry_id, entry_id, entry_id + len(entries) - 1)
        return LateResult(reappended=first)


