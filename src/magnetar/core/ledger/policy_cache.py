"""The effective policies of topics (each topic's overrides over its namespace's), cached per
container: a policy change takes effect within `POLICY_CACHE_MS`."""

from __future__ import annotations

from typing import Any

from magnetar.core.naming import TopicName
from magnetar.core.policies import effective_policies
from magnetar.core.ports import Clock, MetadataStore

POLICY_CACHE_MS = 10_000  # namespace policies are re-read at most this often per container


class PolicyCache:
    def __init__(self, metadata: MetadataStore, clock: Clock) -> None:
        self.metadata = metadata
        self.clock = clock
        self._topics: dict[str, tuple[int, dict[str, Any]]] = {}
        # a namespace's policies, shared by its topics: with many low-rate topics a topic's own
        # entry rarely hits, its namespace's does (one read per namespace and period, not per topic)
        # namespace -> (read at, its policies, its topics with overrides of their own; None: unknown)
        self._namespaces: dict[str, tuple[int, dict[str, Any], frozenset[str] | None]] = {}

    def get(self, topic: TopicName, fresh: bool = False) -> dict[str, Any]:
        """The topic's (or its partitioned topic's) effective policies; `fresh`: read now."""
        name = str(topic.partitioned_topic if topic.partition_index >= 0 else topic)
        now = self.clock.now_ms()
        cached = self._topics.get(name)
        if fresh or cached is None or now - cached[0] > POLICY_CACHE_MS:
            namespace = str(topic.namespace_name)
            ns_cached = self._namespaces.get(namespace)
            if fresh or ns_cached is None or now - ns_cached[0] > POLICY_CACHE_MS:
                info = self.metadata.get_namespace(topic.namespace_name)
                ns_cached = (now, dict(info.policies) if info else {}, info.topics_with_policies if info else None)
                self._namespaces[namespace] = ns_cached
            indexed = ns_cached[2]
            # a topic the namespace does not list has no overrides: no read of its own (a publish
            # to one of many low-rate topics would otherwise read them every time)
            overrides = self.metadata.get_topic_policies(topic) if indexed is None or name in indexed else {}
            cached = (now, effective_policies(dict(ns_cached[1]), overrides))
            self._topics[name] = cached
        return cached[1]

    def forget(self) -> None:
        """A policy changed through this container: read them again on next use."""
        self._topics.clear()
        self._namespaces.clear()
