"""The replicated subscriptions' snapshots of MemoryMetadataStore (the configuration store's RSUB
items of `adapters.aws.dynamodb.snapshots`): one dict for every cluster of an in-memory instance
when they share it (`snapshots` may be replaced by another store's)."""

from __future__ import annotations

import threading

from magnetar.core.naming import TopicName
from magnetar.core.ports import SubscriptionSnapshot


class MemorySnapshotStore:
    snapshots: dict[tuple[str, str], dict[str, SubscriptionSnapshot]]  # (topic, subscription) -> by cluster
    _lock: threading.RLock

    def put_subscription_snapshot(self, topic: TopicName, subscription: str, cluster: str,
                                  snapshot: SubscriptionSnapshot) -> bool:
        with self._lock:
            stored = self.snapshots.setdefault((str(topic), subscription), {})
            old = stored.get(cluster)
            if old is not None and sum(old.origin_acked.values()) >= sum(snapshot.origin_acked.values()):
                return False
            stored[cluster] = SubscriptionSnapshot(dict(snapshot.origin_acked), snapshot.at_ms)
            return True

    def get_subscription_snapshots(self, topic: TopicName, subscription: str) -> dict[str, SubscriptionSnapshot]:
        with self._lock:
            return dict(self.snapshots.get((str(topic), subscription), {}))

    def delete_subscription_snapshot(self, topic: TopicName, subscription: str, cluster: str) -> None:
        with self._lock:
            key = (str(topic), subscription)
            stored = self.snapshots.get(key, {})
            stored.pop(cluster, None)
            if not stored:
                self.snapshots.pop(key, None)

    def delete_topic_snapshots(self, topic: TopicName, cluster: str) -> int:
        with self._lock:
            subscriptions = [s for (t, s), stored in self.snapshots.items() if t == str(topic) and cluster in stored]
            for subscription in subscriptions:
                self.delete_subscription_snapshot(topic, subscription, cluster)
            return len(subscriptions)
