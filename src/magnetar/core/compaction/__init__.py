"""Topic compaction, Pulsar's: the latest value of every key up to a horizon.

A compaction run of a topic partition reads its entries up to a **horizon** (the sealed end when
the run starts) and writes the **compacted view**: the entries holding the latest message of a
key, each stored whole (its original bytes, copied without re-encoding, as sealing copies them)
with a *mask* of the batch indexes that are not in the view (superseded, deleted by a null
value, or without a key: Pulsar drops those from the compacted ledger). Readers and consumers
with `is_read_compacted` read the view below the horizon and the topic itself from the horizon
on (`CompactedView`).

Modules: `model` (records, the store port, keys), `view` (reading the view), `compactor` (the
run).

Storage (adapters: `MemoryCompactionStore`, `DynamoCompactionStore`):
- **objects** (S3, immutable): `compacted/<topic>/g<generation>/<first>-<last>.cmp`, the kept
  entries of a range back to back; a run writes a new *generation* and never touches the old;
- **object index** (one DynamoDB item per object): its entry ids, byte offsets and masks;
- **state** (one DynamoDB item per topic partition, written conditionally on its version):
  the committed horizon and generation, the status Pulsar reports (NOT_RUN, RUNNING, SUCCESS,
  ERROR, lastError), and the **progress marker** of a run in flight.

A run is cut in steps that each fit in a Lambda's time (`Compactor.run(topic, budget_s)`):
1. *scan*: the key -> latest position map, started from the previous generation's map (one S3
   object written with it) and carried through the entries [old horizon, horizon) in pages; at
   the end of each step the map is written to S3 (`.../scan-<position>.map`, deterministic, so
   a retried step rewrites the same object) and the marker moves on (a conditional write);
2. *write*: the previous view and the new entries, in entry order, filtered through the map,
   into objects of at most `OBJECT_ENTRIES` entries: object, then its index item, then the marker
   (each step idempotent: a crash repeats it with the same bytes under the same key);
3. *commit*: one conditional write of the state makes the new generation the view (horizon,
   generation, object count) and records the old one as trash; its objects and index items are
   deleted afterwards (a crash leaves trash the next run deletes, never an index pointing to a
   missing object). Crash points: `compaction.after_write`, `compaction.after_commit`.

Retention never deletes what the view still needs: the objects are separate from the segments,
and the maintenance run trims a compacted topic only below its horizon (`keep_from`).
"""

from magnetar.core.compaction.compactor import Compactor, keep_from
from magnetar.core.compaction.model import (
    DEFAULT_BUDGET_S,
    ERROR,
    NOT_RUN,
    OBJECT_BYTES,
    OBJECT_ENTRIES,
    READ_PAGE,
    RUN_BUDGET_S,
    RUNNING,
    SUCCESS,
    CompactedObject,
    CompactionProgress,
    CompactionState,
    CompactionStore,
    Position,
    map_key,
    object_key,
)
from magnetar.core.compaction.view import CompactedEntry, CompactedView, view_mask

__all__ = [
    "DEFAULT_BUDGET_S", "ERROR", "NOT_RUN", "OBJECT_BYTES", "OBJECT_ENTRIES", "READ_PAGE", "RUNNING", "RUN_BUDGET_S",
    "SUCCESS", "CompactedEntry", "CompactedObject", "CompactedView", "CompactionProgress", "CompactionState",
    "CompactionStore", "Compactor", "Position", "keep_from", "map_key", "object_key", "view_mask",
]
