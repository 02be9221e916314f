"""What the writer, the reader and the sealer share: where a topic partition's data lives, and
the timing rule that makes a hole safe to declare.

- `journal_key`: the Kinesis partition key of a topic partition (its records stay in one shard,
  in order); the writer appends under it and the reader reads the tail under it.
- `segment_key`: the S3 key of a sealed segment, naming its ledger and exact entry range (so a
  re-put after a crash writes the same bytes again).
- `WRITE_DEADLINE_MS` < `HOLE_GRACE_MS`: a writer never writes a reservation older than the
  deadline, so once the journal holds a later entry reserved more than the grace ago, the writer
  of a missing id is certainly past its deadline and the sealer may tombstone the id.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING
from urllib.parse import quote

from magnetar.core.naming import TopicName

if TYPE_CHECKING:
    from magnetar.core.ports import MetadataStore, SegmentMeta

# The functions read both from their environment (the verifier shortens them for a run; a
# deployment has no reason to): MAGNETAR_WRITE_DEADLINE_MS, MAGNETAR_HOLE_GRACE_MS.
ENV_WRITE_DEADLINE_MS = "MAGNETAR_WRITE_DEADLINE_MS"
ENV_HOLE_GRACE_MS = "MAGNETAR_HOLE_GRACE_MS"
# a writer never writes a reservation older than this, nor acknowledges a write completed past it
WRITE_DEADLINE_MS = int(os.environ.get(ENV_WRITE_DEADLINE_MS) or 10_000)
# a missing id is fenced off as a hole once a later id's reservation is this old
HOLE_GRACE_MS = int(os.environ.get(ENV_HOLE_GRACE_MS) or 60_000)


def journal_key(topic: str) -> str:
    """Kinesis partition key of a topic partition (keys are limited to 256 characters)."""
    return topic if len(topic) <= 256 else "sha256:" + hashlib.sha256(topic.encode()).hexdigest()


def segment_key(topic: TopicName, ledger_id: int, first: int, last: int) -> str:
    return (
        f"segments/{topic.tenant}/{topic.namespace}/{topic.domain}/{quote(topic.local_name, safe='')}"
        f"/{ledger_id:016x}/{first:016x}-{last:016x}.seg"
    )


def sealed_bytes(metadata: MetadataStore, topic: TopicName, start: int, end: int, page: int = 100) -> int:
    """Bytes of the sealed entries [start, end), exact from the segments' offsets (one listing page
    per `page` segments)."""
    size, position = 0, start
    while position < end:
        segments = metadata.list_segments(topic, position, limit=page)
        if not segments:
            break
        for seg in segments:
            lo = max(position, seg.first_entry) - seg.first_entry
            hi = min(end, seg.last_entry + 1) - seg.first_entry
            if hi > lo:
                size += seg.offsets[hi] - seg.offsets[lo]
            position = seg.last_entry + 1
            if position >= end:
                break
    return size


# The seal state carries its newest segments (`SealState.recent_segments`), so that a consumer
# that keeps up reads what was just sealed with the view it already read, without listing the
# segments (a Query per read). A few, of few entries (a size of a few bytes each, stored), so
# that the seal item stays within one 1 KB write unit: each commit writes it in a transaction.
RECENT_SEGMENTS = 4
RECENT_SEGMENT_ENTRIES = 64


def recent_segments(before: tuple[SegmentMeta, ...], new: SegmentMeta) -> tuple[SegmentMeta, ...]:
    """The newest segments once `new` is sealed after `before` (the newest before it)."""
    kept = [*before, new] if before and before[-1].last_entry + 1 == new.first_entry else [new]
    while len(kept) > RECENT_SEGMENTS or sum(s.last_entry - s.first_entry + 1 for s in kept) > RECENT_SEGMENT_ENTRIES:
        kept.pop(0)
        if not kept:
            break
    return tuple(kept)
