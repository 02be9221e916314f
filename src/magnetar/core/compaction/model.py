"""Compaction's records: the compacted objects and their index, a topic partition's compaction state
and progress marker, the store port, the S3 keys and the scan map's encoding."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

import msgpack

from magnetar.core.naming import TopicName

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


def pack_map(keys: dict[str, Position]) -> bytes:
    data: bytes = msgpack.packb({k: (None if v is None else list(v)) for k, v in keys.items()}, use_bin_type=True)
    return data


def unpack_map(data: bytes) -> dict[str, Position]:
    raw: dict[str, Any] = msgpack.unpackb(data, raw=False)
    return {k: (None if v is None else (int(v[0]), int(v[1]))) for k, v in raw.items()}

