"""CompactionStore in memory (unit tests), beside `magnetar.adapters.memory`."""

from __future__ import annotations

import threading
from dataclasses import replace

from magnetar.core.compaction import CompactedObject, CompactionState, Compactor
from magnetar.core.naming import TopicName


class MemoryCompactionStore:
    def __init__(self) -> None:
        self.states: dict[str, CompactionState] = {}
        self.objects: dict[str, dict[tuple[int, int], CompactedObject]] = {}  # topic -> (generation, last) -> object
        self._lock = threading.Lock()

    def get_state(self, topic: TopicName) -> CompactionState:
        with self._lock:
            return self.states.get(str(topic), CompactionState())

    def put_state(self, topic: TopicName, state: CompactionState, expected_version: int) -> bool:
        with self._lock:
            current = self.states.get(str(topic))
            if (current.version if current else 0) != expected_version:
                return False
            self.states[str(topic)] = replace(state, version=expected_version + 1)
            return True

    def put_object(self, topic: TopicName, obj: CompactedObject) -> None:
        with self._lock:
            self.objects.setdefault(str(topic), {})[(obj.generation, obj.last_entry)] = obj

    def list_objects(self, topic: TopicName, generation: int, from_entry: int, limit: int) -> list[CompactedObject]:
        with self._lock:
            found = sorted((k, o) for k, o in self.objects.get(str(topic), {}).items()
                           if k[0] == generation and k[1] >= from_entry)
            return [o for _, o in found[:limit]]

    def delete_objects(self, topic: TopicName, objects: list[CompactedObject]) -> None:
        with self._lock:
            for obj in objects:
                self.objects.get(str(topic), {}).pop((obj.generation, obj.last_entry), None)


def memory_compactor(broker) -> Compactor:  # type: ignore[no-untyped-def]
    """A Compactor on a `memory_broker()`'s ports, hooked into its maintenance run."""
    compactor = Compactor(broker.metadata, broker.segments, broker.reader, MemoryCompactionStore(), broker.clock)
    broker.maintenance.compaction = compactor
    return compactor
