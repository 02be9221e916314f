"""The DeletionStore part of MemoryMetadataStore (`core.ports.deletion`): fences kept apart from
the topics, so that a topic forgotten (its listing, writer and items gone at once, as the memory
store keeps them together) still has the fence a re-creation continues from."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.ports import NamespaceInfo, SealState, TenantInfo
from magnetar.core.ports.deletion import TopicFence
from magnetar.core.schema.types import StoredSchema

if TYPE_CHECKING:
    from magnetar.adapters.memory import _Topic


class MemoryDeletionStore:
    topics: dict[str, _Topic]
    fences: dict[str, TopicFence]
    partitioned: dict[str, int]
    partitioned_policies: dict[str, dict[str, Any]]
    topic_counts: dict[NamespaceName, int]
    schemas: dict[str, list[StoredSchema]]
    namespaces: dict[NamespaceName, NamespaceInfo]
    tenants: dict[str, TenantInfo]
    _lock: threading.RLock

    def _live(self, name: str) -> _Topic | None:
        """The topic, unless it is absent or a deletion fenced it."""
        fence = self.fences.get(name)
        return None if fence is not None and not fence.done else self.topics.get(name)

    def _fenced_seal(self, name: str) -> SealState | None:
        """The seal state a forgotten topic's fence leaves (what DynamoDB's seal item keeps)."""
        fence = self.fences.get(name)
        if fence is None or name in self.topics:
            return None
        return SealState(next_entry=fence.next_entry, first_entry=fence.next_entry, base=fence.next_entry)

    def fence_topic(self, topic: TopicName, now_ms: int) -> TopicFence | None:
        with self._lock:
            name = str(topic)
            fence = self.fences.get(name)
            if fence is not None and not fence.done:
                return fence
            t = self.topics.get(name)
            if t is None:
                return fence  # none, or a finished deletion
            fence = TopicFence(t.writer.next_entry, t.writer.ledger_id, now_ms)
            self.fences[name] = fence
            return fence

    def get_fence(self, topic: TopicName) -> TopicFence | None:
        fence = self.fences.get(str(topic))
        if fence is not None and fence.done and str(topic) in self.topics:
            return None  # created again since
        return fence

    def is_listed(self, topic: TopicName) -> bool:
        return str(topic) in self.topics

    def _unfinished(self, topic: TopicName, fence: TopicFence) -> bool:
        return self.fences.get(str(topic)) == replace(fence, done=False)

    def fence_seal(self, topic: TopicName, fence: TopicFence) -> None:
        with self._lock:
            t = self.topics.get(str(topic))
            if t is not None and self._unfinished(topic, fence):
                start = fence.next_entry
                t.seal = SealState(next_entry=start, first_entry=start, base=start)

    def topic_item_keys(self, topic: TopicName) -> list[str]:
        t = self.topics.get(str(topic))
        if t is None:
            return []
        return [f"SEG#{last:020d}" for last in sorted(t.segments)] + [f"SUB#{name}" for name in sorted(t.cursors)]

    def delete_topic_items(self, topic: TopicName, fence: TopicFence, keys: list[str]) -> bool:
        with self._lock:
            if not self._unfinished(topic, fence):
                return False
            t = self.topics.get(str(topic))
            for key in keys if t is not None else []:
                if key.startswith("SEG#"):
                    t.segments.pop(int(key[4:]), None)  # type: ignore[union-attr]
                elif key.startswith("SUB#"):
                    t.cursors.pop(key[4:], None)  # type: ignore[union-attr]
            return True

    def finish_fence(self, topic: TopicName, fence: TopicFence) -> None:
        with self._lock:
            if self._unfinished(topic, fence):
                self.fences[str(topic)] = replace(fence, done=True)

    def _count_down(self, namespace: NamespaceName, counted: int) -> None:
        if counted > 0:
            self.topic_counts[namespace] = max(0, self.topic_counts.get(namespace, counted) - counted)

    def forget_topic(self, topic: TopicName, counted: int) -> bool:
        with self._lock:
            if self.topics.pop(str(topic), None) is None:
                return False
            self._count_down(topic.namespace_name, counted)
            return True

    def forget_partitioned_topic(self, topic: TopicName, counted: int) -> bool:
        with self._lock:
            self.partitioned_policies.pop(str(topic), None)
            if self.partitioned.pop(str(topic), None) is None:
                return False
            self._count_down(topic.namespace_name, counted)
            return True

    def delete_schemas(self, schema_id: str) -> int:
        with self._lock:
            return len(self.schemas.pop(schema_id, []))

    def delete_namespace(self, name: NamespaceName) -> bool:
        with self._lock:
            self.topic_counts.pop(name, None)
            return self.namespaces.pop(name, None) is not None

    def delete_tenant(self, name: str) -> bool:
        with self._lock:
            return self.tenants.pop(name, None) is not None
