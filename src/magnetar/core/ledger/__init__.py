"""The managed ledger of one topic partition: append, seal, read.

Pulsar lets one broker own a topic and write its ledger; here any Lambda may append to any
topic at any moment, so the owner's job is split across AWS primitives, and this package by
responsibility:

- `writer`: appending (`LedgerWriter`), one entry or a group of consecutive entries in one
  journal record. Ids come from one conditional counter per topic
  partition, a reservation valid for `WRITE_DEADLINE_MS` only; durability from the Kinesis
  journal (an append is acknowledged once its record is stored). Also the admission checks of a
  publish and of a producer, topic creation on first use (`ensure_topic`), the policy cache;
- `sealer`: moving journal records into immutable S3 segments in entry-id order, each committed
  with the seal state in one DynamoDB transaction (`Sealer`); a reserved id whose record never
  arrives becomes a *hole* once a later entry is `HOLE_GRACE_MS` old, and a tombstone takes it;
- `reader`: serving sealed entries from S3 ranged GETs and the rest from the journal tail, only
  ever a contiguous run from the requested position, so no consumer sees an entry before all
  earlier ones are settled (`EntryReader`, `EntryCache`);
- `common`: what they share (the journal and segment keys, the deadline and grace of holes).

The hole timing is read from `common` when it is used, so a test or the verifier shortens it
by setting `ledger.common.WRITE_DEADLINE_MS` / `HOLE_GRACE_MS`.
"""

from magnetar.core.ledger import common
from magnetar.core.ledger.common import HOLE_GRACE_MS, WRITE_DEADLINE_MS, journal_key, segment_key
from magnetar.core.ledger.policy_cache import POLICY_CACHE_MS, PolicyCache
from magnetar.core.ledger.reader import EntryCache, EntryReader
from magnetar.core.ledger.sealer import MAX_SEGMENT_BYTES, MAX_SEGMENT_ENTRIES, Gathered, Sealer, SealOutcome
from magnetar.core.ledger.writer import (
    MAX_ENTRIES_PER_APPEND,
    MAX_ENTRIES_PER_LEDGER,
    MAX_LEDGER_AGE_MS,
    MAX_MESSAGES_PER_ENTRY,
    PRODUCER_IDLE_MS,
    QUOTA_HOLD_MS,
    QUOTA_HOLD_POLL_S,
    QUOTA_RECHECK_MS,
    AppendResult,
    LedgerWriter,
    ensure_topic,
    rate_claim,
)

__all__ = [
    "HOLE_GRACE_MS",
    "MAX_ENTRIES_PER_APPEND",
    "MAX_ENTRIES_PER_LEDGER",
    "MAX_LEDGER_AGE_MS",
    "MAX_MESSAGES_PER_ENTRY",
    "MAX_SEGMENT_BYTES",
    "MAX_SEGMENT_ENTRIES",
    "POLICY_CACHE_MS",
    "PRODUCER_IDLE_MS",
    "QUOTA_HOLD_MS",
    "QUOTA_HOLD_POLL_S",
    "QUOTA_RECHECK_MS",
    "WRITE_DEADLINE_MS",
    "AppendResult",
    "EntryCache",
    "EntryReader",
    "Gathered",
    "LedgerWriter",
    "PolicyCache",
    "SealOutcome",
    "Sealer",
    "common",
    "ensure_topic",
    "journal_key",
    "rate_claim",
    "segment_key",
]
