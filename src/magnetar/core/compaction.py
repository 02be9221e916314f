"""Topic compaction, Pulsar's: the latest value of every key up to a horizon.

A compaction run of a topic partition reads its entries up to a **horizon** (the sealed end when
the run starts) and writes the **compacted view**: the entries holding the latest message of a
key, each stored whole (its original bytes, copied without re-encoding, as sealing copies them)
with a *mask* of the batch indexes that are not in the view (superseded, deleted by a null
value, or without a key: Pulsar drops those from the compacted ledger). Readers and consumers
with `is_read_compacted` read the view below the horizon and the topic itself from the horizon
on (`CompactedView`).

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

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import quote

import msgpack

from magnetar.core.crashpoints import crash_point
from magnetar.core.entry import Entry, decode_entry, encode_entry
from magnetar.core.errors import Conflict, InvalidInput, NotFound, RetryableError, TopicNotFound
from magnetar.core.ledger import EntryReader
from magnetar.core.ledger.common import sealed_bytes
from magnetar.core.naming import TopicName
from magnetar.core.ports import Clock, MetadataStore, SegmentStore

log = logging.getLogger(__name__)

NOT_RUN, RUNNING, SUCCESS, ERROR = "NOT_RUN", "RUNNING", "SUCCESS", "ERROR"  # LongRunningProcessStatus
OBJECT_ENTRIES = 1_000  # kept entries per compacted object (its index item stays far under 400 KB)
OBJECT_BYTES = 8 * 1024 * 1024
READ_PAGE = 100  # entries per read of the topic
DEFAULT_BUDGET_S = 10.0  # a step's time: a Lambda (15 min max, 30 s behind API Gateway) is never at risk
RUN_BUDGET_S = 300.0  # compaction's share of one maintenance run (a 15-minute function), over all its topics
# Kept per key in the map: (entry id, batch index), or None for a key whose latest value is null.
Position = tuple[int, int] | None


@dataclass(frozen=True)
class CompactedObject:
    """One immutable S3 object of a generation: kept entries, in order, with their masks."""

    generation: int
    key: str
    entry_ids: tuple[int, ...]
    offsets: tuple[int, ...]  # byte offset of each entry, plus the object size at the end
    masks: dict[int, tuple[int, ...]] = field(default_factory=dict)  # entry id -> batch indexes not in the view

    @property
    def first_entry(self) -> int:
        return self.entry_ids[0]

    @property
    def last_entry(self) -> int:
        return self.entry_ids[-1]

    def to_bytes(self) -> bytes:
        data: bytes = msgpack.packb([self.generation, self.key, list(self.entry_ids), list(self.offsets),
                                     {str(k): list(v) for k, v in self.masks.items()}], use_bin_type=True)
        return data

    @classmethod
    def from_bytes(cls, data: bytes) -> CompactedObject:
        g, key, ids, offsets, masks = msgpack.unpackb(data, raw=False)
        return cls(g, key, tuple(ids), tuple(offsets), {int(k): tuple(v) for k, v in masks.items()})


@dataclass(frozen=True)
class CompactionProgress:
    """The marker of a run in flight: where the next step resumes."""

    generation: int  # the generation being written
    horizon: int  # the view will hold the entries below it
    phase: str  # "scan" or "write"
    position: int  # scan: next entry of the topic to read; write: next source entry to filter
    map_key: str = ""  # the key map so far (scan) or complete (write): an S3 object
    map_size: int = 0
    objects: int = 0  # objects written (write phase)
    messages: int = 0  # messages in the view written so far
    started_at: int = 0


@dataclass(frozen=True)
class CompactionState:
    horizon: int = 0  # the committed view holds the entries below it
    generation: int = 0  # 0: never compacted
    objects: int = 0
    messages: int = 0
    map_key: str = ""  # the committed generation's key map (the next run starts from it)
    map_size: int = 0
    status: str = NOT_RUN
    last_error: str = ""
    compacted_at: int = 0
    progress: CompactionProgress | None = None
    trash_generation: int = 0  # an old generation whose objects are still to delete (0: none)
    trash_map: str = ""
    version: int = 0  # the stored item's version (conditional writes); 0: no item yet
    started: int = 0  # the highest generation a run started: a failed run's number is never reused

    def to_bytes(self) -> bytes:
        p = self.progress
        data: bytes = msgpack.packb({
            "h": self.horizon, "g": self.generation, "o": self.objects, "m": self.messages, "mk": self.map_key,
            "ms": self.map_size, "s": self.status, "e": self.last_error, "at": self.compacted_at,
            "tg": self.trash_generation, "tm": self.trash_map, "sg": self.started,
            "p": None if p is None else [p.generation, p.horizon, p.phase, p.position, p.map_key, p.map_size,
                                         p.objects, p.messages, p.started_at],
        }, use_bin_type=True)
        return data

    @classmethod
    def from_bytes(cls, data: bytes, version: int) -> CompactionState:
        d = msgpack.unpackb(data, raw=False)
        p = CompactionProgress(*d["p"]) if d.get("p") else None
        return cls(d["h"], d["g"], d["o"], d["m"], d["mk"], d["ms"], d["s"], d["e"], d["at"], p, d["tg"], d["tm"],
                   version, d.get("sg", d["g"]))

    @property
    def enabled(self) -> bool:
        """Compaction ran or runs on this topic: its view needs the entries from the horizon on."""
        return self.generation > 0 or self.progress is not None

    def status_body(self) -> dict[str, Any]:
        """Pulsar's LongRunningProcessStatus."""
        body: dict[str, Any] = {"status": self.status}
        if self.last_error:
            body["lastError"] = self.last_error
        return body


class CompactionStore(Protocol):
    """The compaction state and object index of topic partitions (DynamoDB: one item each)."""

    def get_state(self, topic: TopicName) -> CompactionState:
        """The state (version 0 and defaults when there is none): one consistent read."""
        ...

    def put_state(self, topic: TopicName, state: CompactionState, expected_version: int) -> bool:
        """Write the state (its version becomes expected + 1) if the stored one is still at
        `expected_version` (0: none stored); False when another writer moved first."""
        ...

    def put_object(self, topic: TopicName, obj: CompactedObject) -> None:
        """Record an object's index (idempotent: the same object again overwrites it)."""
        ...

    def list_objects(self, topic: TopicName, generation: int, from_entry: int, limit: int) -> list[CompactedObject]:
        """A generation's objects whose last entry is >= from_entry, in order (one query)."""
        ...

    def delete_objects(self, topic: TopicName, objects: list[CompactedObject]) -> None:
        """Forget objects' index items (batched: 25 per request)."""
        ...


def object_key(topic: TopicName, generation: int, first: int, last: int) -> str:
    return (f"compacted/{topic.tenant}/{topic.namespace}/{topic.domain}/{quote(topic.local_name, safe='')}"
            f"/g{generation:08x}/{first:016x}-{last:016x}.cmp")


def map_key(topic: TopicName, generation: int, position: int) -> str:
    return (f"compacted/{topic.tenant}/{topic.namespace}/{topic.domain}/{quote(topic.local_name, safe='')}"
            f"/g{generation:08x}/scan-{position:016x}.map")


def _pack_map(keys: dict[str, Position]) -> bytes:
    data: bytes = msgpack.packb({k: (None if v is None else list(v)) for k, v in keys.items()}, use_bin_type=True)
    return data


def _unpack_map(data: bytes) -> dict[str, Position]:
    raw: dict[str, Any] = msgpack.unpackb(data, raw=False)
    return {k: (None if v is None else (int(v[0]), int(v[1]))) for k, v in raw.items()}


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


class Compactor:
    """Runs compaction of topic partitions in steps (see the module's docstring)."""

    def __init__(self, metadata: MetadataStore, segments: SegmentStore, reader: EntryReader,
                 store: CompactionStore, clock: Clock) -> None:
        self.metadata = metadata
        self.segments = segments
        self.reader = reader
        self.store = store
        self.clock = clock
        self.view = CompactedView(store, segments)
        self._run_deadline = 0.0  # the maintenance run's compaction budget ends then (0: no run yet)

    def new_run(self, budget_s: float | None = None) -> None:
        """A maintenance run starts: its compaction steps share `budget_s` (RUN_BUDGET_S); a topic
        met once it is spent keeps its run in flight for the next maintenance run."""
        self._run_deadline = time.monotonic() + (RUN_BUDGET_S if budget_s is None else budget_s)

    # --- triggering and status ------------------------------------------------------------
    def trigger(self, topic: TopicName, budget_s: float = DEFAULT_BUDGET_S) -> CompactionState:
        """Pulsar's `PUT .../compaction`: start a run (409 while one runs), then run it as far as
        the budget allows; the maintenance run continues what is left."""
        seal, writer = self.metadata.get_topic_state(topic)
        if writer is None:
            raise TopicNotFound(f"Topic {topic} not found")
        state = self.store.get_state(topic)
        if state.progress is not None:
            raise Conflict(f"Compaction already in progress on {topic}")
        self._start(topic, state, seal.next_entry)
        return self.run(topic, budget_s)

    def status(self, topic: TopicName) -> CompactionState:
        return self.store.get_state(topic)

    def _start(self, topic: TopicName, state: CompactionState, horizon: int) -> CompactionState:
        generation = max(state.generation, state.started) + 1  # never one a failed run wrote objects of
        progress = CompactionProgress(generation, horizon, "scan", state.horizon, state.map_key,
                                      state.map_size, started_at=self.clock.now_ms())
        new = replace(state, progress=progress, status=RUNNING, last_error="", started=generation)
        if not self.store.put_state(topic, new, state.version):
            raise RetryableError("The compaction state changed meanwhile; retry")
        return replace(new, version=state.version + 1)

    def maybe_start(self, topic: TopicName, threshold: int, state: CompactionState, sealed_end: int) -> CompactionState:
        """The compactionThreshold policy: start a run when the bytes sealed past the horizon exceed it."""
        if threshold <= 0 or state.progress is not None or sealed_end <= state.horizon:
            return state
        if self._bytes_between(topic, state.horizon, sealed_end) <= threshold:
            return state
        return self._start(topic, state, sealed_end)

    def _bytes_between(self, topic: TopicName, start: int, end: int) -> int:
        return sealed_bytes(self.metadata, topic, start, end)

    # --- the run, in steps ----------------------------------------------------------------
    def run(self, topic: TopicName, budget_s: float = DEFAULT_BUDGET_S) -> CompactionState:
        """Continue the run in flight for up to `budget_s` (a step may overrun it by one page or
        one object); the state after. An error is recorded (ERROR, lastError) and the run ends."""
        deadline = time.monotonic() + budget_s
        state = self.store.get_state(topic)
        self._empty_trash(topic, state)
        state = self.store.get_state(topic) if state.trash_generation else state
        try:
            while state.progress is not None:  # at least one step, however small the budget
                if state.progress.phase == "scan":
                    state = self._scan_step(topic, state, deadline)
                else:
                    state = self._write_step(topic, state, deadline)
                if time.monotonic() >= deadline:
                    break
        except (RetryableError, NotFound) as exc:
            log.info("compaction of %s will resume: %s", topic, exc)
        except Exception as exc:  # anything else ends the run: Pulsar's ERROR with its lastError
            log.exception("compaction of %s failed", topic)
            reason = exc.reason if isinstance(exc, InvalidInput) else f"{type(exc).__name__}: {exc}"
            failed = replace(state, progress=None, status=ERROR, last_error=reason)
            if state.progress is not None and not state.trash_generation:  # its objects go as trash
                failed = replace(failed, trash_generation=state.progress.generation,
                                 trash_map=state.progress.map_key if state.progress.map_key != state.map_key else "")
            if self.store.put_state(topic, failed, state.version):
                state = replace(failed, version=state.version + 1)
        if state.trash_generation:
            self._empty_trash(topic, state)
            state = self.store.get_state(topic)
        return state

    def _advance(self, topic: TopicName, state: CompactionState, progress: CompactionProgress) -> CompactionState:
        new = replace(state, progress=progress)
        if not self.store.put_state(topic, new, state.version):
            raise RetryableError("Another compaction step moved first")
        return replace(new, version=state.version + 1)

    def _load_map(self, key: str, size: int) -> dict[str, Position]:
        return _unpack_map(self.segments.get_range(key, 0, size)) if key else {}

    def _scan_step(self, topic: TopicName, state: CompactionState, deadline: float) -> CompactionState:
        p = state.progress
        assert p is not None
        keys = self._load_map(p.map_key, p.map_size)
        position = p.position
        seal, writer = self.metadata.get_topic_state(topic)
        if position < seal.first_entry:  # trimmed before it was compacted (compaction enabled late)
            position = seal.first_entry
        while position < p.horizon:  # at least one page, then as many as the budget allows
            entries = self.reader.read(topic, position, min(READ_PAGE, p.horizon - position), seal, writer)
            if not entries:
                raise RetryableError(f"entries from {position} are not readable yet")
            for entry in entries:
                if entry.hole or entry.chunk is not None:
                    continue
                for i, m in enumerate(entry.messages):
                    if m.key is not None:
                        keys[m.key] = None if m.null_value else (entry.entry_id, i if entry.batched else -1)
            position = entries[-1].entry_id + 1
            if time.monotonic() >= deadline:
                break
        if position >= p.horizon:
            keys = {k: v for k, v in keys.items() if v is not None}  # deleted keys need no memory any more
        key = map_key(topic, p.generation, position)
        data = _pack_map(keys)
        self.segments.put_if_absent(key, data)
        phase, next_position = ("write", 0) if position >= p.horizon else ("scan", position)
        new = self._advance(topic, state, replace(p, phase=phase, position=next_position, map_key=key,
                                                  map_size=len(data)))
        if p.map_key and p.map_key not in (key, state.map_key):
            self.segments.delete([p.map_key])  # the previous step's map (not the committed generation's)
        return new

    def _sources(self, topic: TopicName, state: CompactionState, start: int, horizon: int) -> Iterator[Entry]:
        """The entries a new generation is filtered from, in order: the committed view below its
        horizon, then the topic up to the new horizon."""
        position = start
        while position < state.horizon and state.generation:
            page, position, _ = self.view.read(topic, position, READ_PAGE, state)
            for item in page:
                yield item.entry
            if not page:
                break
        seal, writer = self.metadata.get_topic_state(topic)
        position = max(position, state.horizon, seal.first_entry)
        while position < horizon:
            entries = self.reader.read(topic, position, min(READ_PAGE, horizon - position), seal, writer)
            if not entries:
                raise RetryableError(f"entries from {position} are not readable yet")
            yield from entries
            position = entries[-1].entry_id + 1

    def _write_step(self, topic: TopicName, state: CompactionState, deadline: float) -> CompactionState:
        p = state.progress
        assert p is not None
        keys = self._load_map(p.map_key, p.map_size)
        while True:  # at least one object, then as many as the budget allows
            kept: list[tuple[Entry, tuple[int, ...]]] = []
            size = 0
            end = p.horizon
            for entry in self._sources(topic, state, p.position, p.horizon):
                mask = view_mask(entry, keys)
                if mask is None:
                    continue
                if kept and (len(kept) >= OBJECT_ENTRIES or size + entry.size > OBJECT_BYTES):
                    end = entry.entry_id  # the next object starts here
                    break
                kept.append((entry, mask))
                size += entry.size
            if kept:
                blobs = [encode_entry(e) for e, _ in kept]
                offsets = [0]
                for blob in blobs:
                    offsets.append(offsets[-1] + len(blob))
                ids = tuple(e.entry_id for e, _ in kept)
                obj = CompactedObject(p.generation, object_key(topic, p.generation, ids[0], ids[-1]), ids,
                                      tuple(offsets), {e.entry_id: m for e, m in kept if m})
                self.segments.put_if_absent(obj.key, b"".join(blobs))
                self.store.put_object(topic, obj)
                crash_point("compaction.after_write")  # written and indexed, marker not moved: rewritten the same
                messages = sum(e.num_messages - len(m) for e, m in kept)
                p = replace(p, position=end, objects=p.objects + 1, messages=p.messages + messages)
            else:
                p = replace(p, position=end)
            if p.position >= p.horizon:
                return self._commit(topic, state, p)
            state = self._advance(topic, state, p)
            if time.monotonic() >= deadline:
                return state

    def _commit(self, topic: TopicName, state: CompactionState, p: CompactionProgress) -> CompactionState:
        new = CompactionState(
            horizon=p.horizon, generation=p.generation, objects=p.objects, messages=p.messages, map_key=p.map_key,
            map_size=p.map_size, status=SUCCESS, compacted_at=self.clock.now_ms(),
            trash_generation=state.generation, trash_map=state.map_key, started=max(state.started, p.generation),
        )
        if not self.store.put_state(topic, new, state.version):
            raise RetryableError("Another compaction step moved first")
        crash_point("compaction.after_commit")  # the new view is live; the old one is trash the next run deletes
        new = replace(new, version=state.version + 1)
        self._empty_trash(topic, new)
        return self.store.get_state(topic)

    def _empty_trash(self, topic: TopicName, state: CompactionState) -> None:
        """Delete a replaced generation: its objects (S3, 1,000 per request), then its index items,
        then the trash mark. Every part is idempotent, so an interrupted deletion is finished later."""
        if not state.trash_generation:
            return
        while True:
            objects = self.store.list_objects(topic, state.trash_generation, 0, limit=1000)
            if not objects:
                break
            self.segments.delete([o.key for o in objects] + ([state.trash_map] if state.trash_map else []))
            self.store.delete_objects(topic, objects)
        if state.trash_map:
            self.segments.delete([state.trash_map])
        self.store.put_state(topic, replace(state, trash_generation=0, trash_map=""), state.version)

    # --- the maintenance run --------------------------------------------------------------
    def maintain(self, topic: TopicName, threshold: int, sealed_end: int, budget_s: float = DEFAULT_BUDGET_S) -> int | None:
        """One topic partition in the maintenance run: start a run when the threshold says so,
        continue a run in flight, finish a deletion; the entry retention must keep from (None:
        compaction is not used on this topic)."""
        state = self.store.get_state(topic)
        if not state.enabled and threshold <= 0:
            return None
        if self._run_deadline:
            budget_s = min(budget_s, self._run_deadline - time.monotonic())
            if budget_s <= 0:
                return keep_from(state)  # this run's budget is spent: the next run goes on
        try:
            state = self.maybe_start(topic, threshold, state, sealed_end)
        except RetryableError:
            return state.horizon
        if state.progress is not None or state.trash_generation:
            state = self.run(topic, budget_s)
        return keep_from(state)


def keep_from(state: CompactionState) -> int:
    """Entries from here on may still enter the view: retention must not delete them."""
    return state.horizon
