"""The compaction run, in steps that each fit in a Lambda's time: scan, write, commit."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import replace

from magnetar.core.compaction.model import (
    DEFAULT_BUDGET_S,
    ERROR,
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
    pack_map,
    unpack_map,
)
from magnetar.core.compaction.view import CompactedView, view_mask
from magnetar.core.crashpoints import crash_point
from magnetar.core.entry import Entry, encode_entry
from magnetar.core.errors import Conflict, InvalidInput, NotFound, RetryableError, TopicNotFound
from magnetar.core.ledger import EntryReader
from magnetar.core.ledger.common import sealed_bytes
from magnetar.core.naming import TopicName
from magnetar.core.ports import Clock, MetadataStore, SegmentStore

log = logging.getLogger(__name__)
UNREADABLE_WAIT_S = 0.1  # a run waiting for published entries to be readable looks again this often


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
        the budget allows; the maintenance run continues what is left. As in Pulsar, the run
        compacts every message published before the trigger (its horizon is the writer's next
        entry, not the sealed end): entries not readable yet are waited for within the budget."""
        _, writer = self.metadata.get_topic_state(topic)
        if writer is None:
            raise TopicNotFound(f"Topic {topic} not found")
        state = self.store.get_state(topic)
        if state.progress is not None:
            raise Conflict(f"Compaction already in progress on {topic}")
        self._start(topic, state, writer.next_entry)
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
        return unpack_map(self.segments.get_range(key, 0, size)) if key else {}

    def _scan_step(self, topic: TopicName, state: CompactionState, deadline: float) -> CompactionState:
        p = state.progress
        assert p is not None
        keys = self._load_map(p.map_key, p.map_size)
        position = p.position
        seal, _ = self.metadata.get_topic_state(topic)
        if position < seal.first_entry:  # trimmed before it was compacted (compaction enabled late)
            position = seal.first_entry
        while position < p.horizon:  # at least one page, then as many as the budget allows
            entries = self._read(topic, position, min(READ_PAGE, p.horizon - position), deadline)
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
        data = pack_map(keys)
        self.segments.put_if_absent(key, data)
        phase, next_position = ("write", 0) if position >= p.horizon else ("scan", position)
        new = self._advance(topic, state, replace(p, phase=phase, position=next_position, map_key=key,
                                                  map_size=len(data)))
        if p.map_key and p.map_key not in (key, state.map_key):
            self.segments.delete([p.map_key])  # the previous step's map (not the committed generation's)
        return new

    def _read(self, topic: TopicName, position: int, count: int, deadline: float) -> list[Entry]:
        """Up to `count` entries from `position` (at least one), waiting until the budget's
        `deadline` for entries published but not readable yet (being sealed, or an append in
        flight); after it, RetryableError: the run resumes from here later."""
        while True:
            seal, writer = self.metadata.get_topic_state(topic)
            entries = self.reader.read(topic, position, count, seal, writer)
            if entries:
                return entries
            if time.monotonic() >= deadline:
                raise RetryableError(f"entries from {position} are not readable yet")
            self.clock.sleep(UNREADABLE_WAIT_S)

    def _sources(self, topic: TopicName, state: CompactionState, start: int, horizon: int,
                 deadline: float) -> Iterator[Entry]:
        """The entries a new generation is filtered from, in order: the committed view below its
        horizon, then the topic up to the new horizon."""
        position = start
        while position < state.horizon and state.generation:
            page, position, _ = self.view.read(topic, position, READ_PAGE, state)
            for item in page:
                yield item.entry
            if not page:
                break
        seal, _ = self.metadata.get_topic_state(topic)
        position = max(position, state.horizon, seal.first_entry)
        while position < horizon:
            entries = self._read(topic, position, min(READ_PAGE, horizon - position), deadline)
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
            for entry in self._sources(topic, state, p.position, p.horizon, deadline):
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

