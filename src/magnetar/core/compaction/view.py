"""Reading the compacted view: which messages of an entry are in it, and the view's entries from a
position on."""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.core.compaction.model import CompactionState, CompactionStore, Position
from magnetar.core.entry import Entry, decode_entry
from magnetar.core.errors import NotFound, RetryableError
from magnetar.core.naming import TopicName
from magnetar.core.ports import SegmentStore


def view_mask(entry: Entry, keys: dict[str, Position]) -> tuple[int, ...] | None:
    """The batch indexes of `entry` that are not in the view, None when none of it is."""
    if entry.hole or entry.chunk is not None:
        return None  # chunked messages are not compacted (the compacted part holds whole entries)
    kept: list[int] = []
    masked: list[int] = []
    for i, m in enumerate(entry.messages):
        index = i if entry.batched else -1
        if m.key is not None and keys.get(m.key) == (entry.entry_id, index):
            kept.append(i)
        else:
            masked.append(i)
    return tuple(masked) if kept else None


@dataclass(frozen=True)
class CompactedEntry:
    entry: Entry
    mask: tuple[int, ...]  # batch indexes not in the view


class CompactedView:
    """Reads a topic partition's compacted view (the committed generation) from an entry on."""

    def __init__(self, store: CompactionStore, segments: SegmentStore) -> None:
        self.store = store
        self.segments = segments

    def read(self, topic: TopicName, start: int, max_entries: int,
             state: CompactionState | None = None) -> tuple[list[CompactedEntry], int, CompactionState]:
        """Kept entries from `start` below the horizon, and the position to read next (the horizon
        once the view is read through: the topic itself is read from there)."""
        state = state or self.store.get_state(topic)
        if state.generation == 0 or start >= state.horizon:
            return [], max(start, state.horizon), state
        out: list[CompactedEntry] = []
        position = start
        while len(out) < max_entries:
            objects = self.store.list_objects(topic, state.generation, position, limit=2)
            for obj in objects:
                ids = [i for i, e in enumerate(obj.entry_ids) if e >= position][: max_entries - len(out)]
                if not ids:
                    continue
                lo, hi = obj.offsets[ids[0]], obj.offsets[ids[-1] + 1]
                try:
                    blob = self.segments.get_range(obj.key, lo, hi)
                except NotFound:  # a newer generation replaced it meanwhile: read again
                    raise RetryableError("The compacted view changed while it was read; retry") from None
                for i in ids:
                    entry = decode_entry(blob[obj.offsets[i] - lo: obj.offsets[i + 1] - lo])
                    out.append(CompactedEntry(entry, obj.masks.get(entry.entry_id, ())))
                position = obj.entry_ids[ids[-1]] + 1
                if len(out) >= max_entries:
                    break
            if len(objects) < 2 and (not objects or position > objects[-1].last_entry):
                return out, state.horizon, state  # read through: the topic itself from the horizon on
        return out, position, state


    def kept(self, topic: TopicName, start: int, limit: int = 10_000) -> tuple[list[tuple[int, tuple[int, ...]]], int,
                                                                        CompactionState]:
        """The view's entry ids from `start` with their masks, from the object index alone (no
        object read: one Query per few objects), and the position to ask from next (the horizon
        once through)."""
        state = self.store.get_state(topic)
        if state.generation == 0 or start >= state.horizon:
            return [], max(start, state.horizon), state
        out: list[tuple[int, tuple[int, ...]]] = []
        position = start
        per_query = max(2, min(100, limit // 100))  # objects hold up to OBJECT_ENTRIES: bound the answer
        while len(out) < limit:
            objects = self.store.list_objects(topic, state.generation, position, limit=per_query)
            for obj in objects:
                out += [(e, obj.masks.get(e, ())) for e in obj.entry_ids if e >= position]
                position = obj.last_entry + 1
            if len(objects) < per_query:
                return out, state.horizon, state
        return out, position, state


