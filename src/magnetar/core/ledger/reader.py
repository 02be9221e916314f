"""The reader: serving a topic partition's entries to consumers.

`EntryReader` serves sealed entries from S3 ranged GETs of the segments and the rest from the
journal tail (whose records may be envelopes of several entries, `entry.record_entries`), only ever a contiguous run from the requested position, so no consumer sees an
entry before all earlier ones are settled; `find_by_time` finds the first entry published at or
after a time (a seek by timestamp). `EntryCache` keeps decoded entries per container.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from magnetar.core.entry import Entry, decode_entry, record_headers
from magnetar.core.errors import NotFound
from magnetar.core.ledger.common import journal_key
from magnetar.core.naming import TopicName
from magnetar.core.ports import (
    Journal,
    JournalPosition,
    MetadataStore,
    SealState,
    SegmentMeta,
    SegmentStore,
    WriterState,
)

SEGMENTS_PER_LISTING = 4  # segments per DynamoDB listing of a read (a read asking for more reads on)


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
    """Reads a contiguous run of entries of a topic partition from segments and the journal tail.

    With `tail_reads` off, only sealed entries (and what this container's cache holds) are read:
    the journal consumer is then the only reader of the journal, so the number of consumers
    never meets Kinesis's 5 reads/s per shard, and an entry reaches consumers once sealed.
    """

    def __init__(
        self, metadata: MetadataStore, segments: SegmentStore, journal: Journal, cache: EntryCache | None = None,
        tail_reads: bool = True,
    ) -> None:
        self.metadata = metadata
        self.segments = segments
        self.journal = journal
        self.cache = cache or EntryCache()
        self.tail_reads = tail_reads
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
            for entry in self._read_sealed(topic, position, max_entries - len(out), seal.recent_segments):
                if entry.entry_id != position:
                    break
                out.append(entry)
                position += 1
        end = writer.next_entry if writer else 0
        if self.tail_reads and len(out) < max_entries and position >= seal.next_entry and position < end:
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

    def _read_sealed(self, topic: TopicName, start: int, max_entries: int,
                     recent: tuple[SegmentMeta, ...] = ()) -> list[Entry]:
        """Up to `max_entries` sealed entries from `start`, contiguous: one segment listing per
        SEGMENTS_PER_LISTING segments, read on while more is asked for (a trickle seals one-entry
        segments: a receive asking for 40 must not get 4). No listing at all when `start` lies in
        `recent`, the seal state's newest segments (a consumer that keeps up)."""
        out: list[Entry] = []
        position = start
        while len(out) < max_entries:
            newest = recent and recent[0].first_entry <= position <= recent[-1].last_entry
            segments = ([s for s in recent if s.last_entry >= position] if newest
                        else self.metadata.list_segments(topic, position, limit=SEGMENTS_PER_LISTING))
            for seg in segments:
                if seg.first_entry > position or len(out) >= max_entries:
                    return out  # a gap (trimmed data: nothing more to read contiguously), or enough
                first_index = position - seg.first_entry
                last_index = min(seg.last_entry, position + max_entries - len(out) - 1) - seg.first_entry
                lo, hi = seg.offsets[first_index], seg.offsets[last_index + 1]
                try:
                    blob = self.segments.get_range(seg.key, lo, hi)
                except NotFound:
                    return out  # trimmed after we listed it: the reader starts again from the first entry
                for i in range(first_index, last_index + 1):
                    a, b = seg.offsets[i] - lo, seg.offsets[i + 1] - lo
                    entry = decode_entry(blob[a:b])
                    self.cache.put(entry)
                    out.append(entry)
                position = seg.first_entry + last_index + 1
            if newest or len(segments) < SEGMENTS_PER_LISTING:
                return out  # the listing reached the last sealed segment
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
        # entry id -> (its bytes, its record's position if it is the record's last entry)
        found: dict[int, tuple[bytes, JournalPosition | None]] = {}
        for record in records:
            entries = record_headers(record.data)  # an envelope holds several
            for n, (data, header) in enumerate(entries):
                if header.topic == key and header.entry_id >= start and header.entry_id not in found:
                    found[header.entry_id] = (data, record.position if n == len(entries) - 1 else None)
        out: list[Entry] = []
        position = start
        while position in found and len(out) < max_entries:
            entry = decode_entry(found[position][0])
            self.cache.put(entry)
            out.append(entry)
            position += 1
        if out:
            after_last = found[position - 1][1]
            if after_last is not None:
                self._tail_positions[key] = (position - 1, after_last)
            else:  # stopped inside an envelope: the next read starts over from the seal state
                self._tail_positions.pop(key, None)
        return out
