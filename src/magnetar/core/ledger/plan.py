"""Read plans: which sealed segment bytes hold an entry range, for readers that fetch S3 themselves.

A reader with its own path to the segment objects (Spark executors, through presigned URLs the
broker hands out) asks for a plan of `[start, end)` of a topic partition: the sealed part of the
range as slices of segment objects, each with the byte offset of every planned entry, so the
reader fetches a slice with one ranged GET and cuts it into entries exactly as the broker's
`EntryReader` does (`segment_entries`, then `entry.decode_entry`: the same codec, the same
bytes). The plan stops at the seal: entries from `ReadPlan.next_entry` on (the unsealed tail, or
a range trimmed while planning) are read through the broker as before.

Core: no AWS here. Presigning the slices' URLs is the adapter's job (the route asks it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from magnetar.core.entry import Entry, decode_entry
from magnetar.core.errors import TopicNotFound
from magnetar.core.naming import TopicName
from magnetar.core.ports import MetadataStore

LIST_PAGE = 100  # segments per listing request


@dataclass(frozen=True)
class PlannedSegment:
    """Entries `first_entry .. first_entry + len(offsets) - 2` of one segment object: entry i
    (from 0) is bytes `[offsets[i], offsets[i + 1])` of the object."""

    key: str
    ledger_id: int
    first_entry: int
    offsets: tuple[int, ...]

    @property
    def last_entry(self) -> int:
        return self.first_entry + len(self.offsets) - 2

    @property
    def byte_range(self) -> tuple[int, int]:
        """`[start, end)` of the object holding the planned entries."""
        return self.offsets[0], self.offsets[-1]


@dataclass(frozen=True)
class ReadPlan:
    first_entry: int  # the first entry retention keeps (a range from below it lost entries)
    sealed_end: int  # entries below it are sealed (in segments)
    next_entry: int  # where the planned segments stop: plan again from here, or read the broker
    segments: tuple[PlannedSegment, ...]


def plan_sealed(metadata: MetadataStore, topic: TopicName, start: int, end: int, max_entries: int) -> ReadPlan:
    """The sealed entries of `[start, end)` (from the first kept entry on), at most `max_entries`,
    as contiguous slices of segments. Stops early at a gap (a trim racing the plan)."""
    seal, writer = metadata.get_topic_state(topic)
    if writer is None:
        raise TopicNotFound(f"Topic {topic} not found")
    position = max(start, seal.first_entry)
    stop = min(end, seal.next_entry, position + max(0, max_entries))
    out: list[PlannedSegment] = []
    while position < stop:
        listed = metadata.list_segments(topic, position, limit=LIST_PAGE)
        if not listed or listed[0].first_entry > position:
            break  # trimmed meanwhile (or not listed yet): the broker's read says what is kept
        for seg in listed:
            if seg.first_entry > position:
                break
            lo = position - seg.first_entry
            hi = min(seg.last_entry + 1, stop) - seg.first_entry
            out.append(PlannedSegment(seg.key, seg.ledger_id, position, tuple(seg.offsets[lo:hi + 1])))
            position = seg.first_entry + hi
            if position >= stop:
                break
        else:
            continue
        if position < stop:
            break  # a gap inside the listing
    return ReadPlan(seal.first_entry, seal.next_entry, position, tuple(out))


def segment_entries(blob: bytes, offsets: Sequence[int], base: int | None = None) -> Iterator[Entry]:
    """The entries of a slice of a segment object: `blob` holds bytes `[base, ...)` of the object
    (`base` defaults to `offsets[0]`), entry i is `[offsets[i], offsets[i + 1])`."""
    origin = offsets[0] if base is None else base
    for i in range(len(offsets) - 1):
        yield decode_entry(blob[offsets[i] - origin:offsets[i + 1] - origin])
