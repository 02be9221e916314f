"""In-memory ports: the core's unit tests run on these, with a controllable clock."""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any

from magnetar.core.cursor import CursorState
from magnetar.core.errors import ProducerFenced, RetryableError, TopicNotFound
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.ports import (
    DedupRecord,
    JournalPosition,
    JournalRecord,
    NamespaceInfo,
    ProducerClaim,
    Reservation,
    SealState,
    SegmentMeta,
    SubscriptionView,
    TenantInfo,
    WriterState,
)


class ManualClock:
    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += int(seconds * 1000)

    def advance(self, ms: int) -> None:
        self.now += ms


class MemoryJournal:
    """One ordered list per partition key stands in for a Kinesis shard."""

    def __init__(self, clock: ManualClock, max_record_bytes: int = 1024 * 1024) -> None:
        self.clock = clock
        self.max_record_bytes = max_record_bytes
        self.records: list[JournalRecord] = []
        self._lock = threading.Lock()

    def append(self, partition_key: str, data: bytes) -> JournalPosition:
        with self._lock:
            position = JournalPosition("shard-0", f"{len(self.records):020d}")
            self.records.append(JournalRecord(position, partition_key, data, self.clock.now_ms()))
            return position

    def read_after(
        self, partition_key: str, after: JournalPosition | None, since_ms: int, max_records: int
    ) -> list[JournalRecord]:
        start = int(after.sequence) + 1 if after else 0
        out = [r for r in self.records[start:] if r.partition_key == partition_key and (after or r.arrival_ms >= since_ms)]
        return out[:max_records]


class MemorySegmentStore:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put_if_absent(self, key: str, data: bytes) -> bool:
        if key in self.objects:
            return False
        self.objects[key] = data
        return True

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self.objects[key][start:end]


@dataclass
class _Topic:
    writer: WriterState
    dedup: dict[str, DedupRecord] = field(default_factory=dict)
    exclusive: tuple[str, int] | None = None  # (producer, lease end)
    seal: SealState = field(default_factory=SealState)
    segments: dict[int, SegmentMeta] = field(default_factory=dict)  # by last entry
    cursors: dict[str, tuple[dict[str, object], int]] = field(default_factory=dict)


class MemoryMetadataStore:
    def __init__(self) -> None:
        self.tenants: dict[str, TenantInfo] = {}
        self.namespaces: dict[NamespaceName, NamespaceInfo] = {}
        self.topics: dict[str, _Topic] = {}
        self.partitioned: dict[str, int] = {}
        self._lock = threading.RLock()

    def create_tenant(self, tenant: TenantInfo) -> bool:
        with self._lock:
            return self.tenants.setdefault(tenant.name, tenant) is tenant

    def get_tenant(self, name: str) -> TenantInfo | None:
        return self.tenants.get(name)

    def list_tenants(self) -> list[str]:
        return list(self.tenants)

    def create_namespace(self, namespace: NamespaceInfo) -> bool:
        with self._lock:
            return self.namespaces.setdefault(namespace.name, namespace) is namespace

    def get_namespace(self, name: NamespaceName) -> NamespaceInfo | None:
        return self.namespaces.get(name)

    def list_namespaces(self, tenant: str) -> list[str]:
        return [n.namespace for n in self.namespaces if n.tenant == tenant]

    def create_topic(self, topic: TopicName, now_ms: int) -> bool:
        with self._lock:
            if str(topic) in self.topics:
                return False
            self.topics[str(topic)] = _Topic(WriterState(0, 0, 0, now_ms, now_ms))
            return True

    def list_topics(self, namespace: NamespaceName) -> list[str]:
        return [t for t in self.topics if TopicName.parse(t).namespace_name == namespace]

    def create_partitioned_topic(self, topic: TopicName, partitions: int) -> bool:
        with self._lock:
            if str(topic) in self.partitioned or str(topic) in self.topics:
                return False
            self.partitioned[str(topic)] = partitions
            return True

    def get_partitions(self, topic: TopicName) -> int | None:
        return self.partitioned.get(str(topic))

    def update_partitions(self, topic: TopicName, partitions: int) -> bool:
        with self._lock:
            if self.partitioned.get(str(topic), partitions) >= partitions:
                return False
            self.partitioned[str(topic)] = partitions
            return True

    def list_partitioned_topics(self, namespace: NamespaceName) -> list[str]:
        return [t for t in self.partitioned if TopicName.parse(t).namespace_name == namespace]

    def reserve_entry(self, topic: TopicName, claim: ProducerClaim) -> Reservation | DedupRecord:
        with self._lock:
            t = self.topics.get(str(topic))
            if t is None:
                raise TopicNotFound(f"Topic {topic} not found")
            if t.exclusive and t.exclusive[0] != claim.producer and t.exclusive[1] > claim.now_ms:
                raise ProducerFenced(f"Topic {topic} has an exclusive producer: {t.exclusive[0]}")
            last = t.dedup.get(claim.producer)
            if claim.deduplicate and last is not None and last.sequence_id >= claim.sequence_id:
                return last
            return self._take(t, claim)

    def _take(self, t: _Topic, claim: ProducerClaim) -> Reservation:
        w = t.writer
        t.writer = WriterState(w.next_entry + 1, w.ledger_id, w.ledger_first_entry, w.ledger_opened_at, w.created_at)
        if claim.deduplicate:
            t.dedup[claim.producer] = DedupRecord(claim.sequence_id, w.ledger_id, w.next_entry, claim.now_ms)
        return Reservation(w.ledger_id, w.next_entry, w.ledger_first_entry, w.ledger_opened_at)

    def replace_reservation(self, topic: TopicName, claim: ProducerClaim, lost_entry: int) -> Reservation:
        with self._lock:
            t = self.topics[str(topic)]
            last = t.dedup.get(claim.producer)
            if last is None or last.entry_id != lost_entry:
                raise RetryableError("The producer's last publish changed meanwhile; retry")
            return self._take(t, claim)

    def last_sequence_id(self, topic: TopicName, producer: str) -> int:
        t = self.topics.get(str(topic))
        record = t.dedup.get(producer) if t else None
        return record.sequence_id if record else -1

    def claim_exclusive(self, topic: TopicName, producer: str, now_ms: int, lease_ms: int) -> bool:
        with self._lock:
            t = self.topics.get(str(topic))
            if t is None or (t.exclusive and t.exclusive[0] != producer and t.exclusive[1] > now_ms):
                return False
            t.exclusive = (producer, now_ms + lease_ms)
            return True

    def release_exclusive(self, topic: TopicName, producer: str) -> None:
        with self._lock:
            t = self.topics.get(str(topic))
            if t and t.exclusive and t.exclusive[0] == producer:
                t.exclusive = None

    def set_namespace_policies(self, namespace: NamespaceName, policies: dict[str, Any]) -> None:
        with self._lock:
            self.namespaces[namespace] = NamespaceInfo(namespace, dict(policies))

    def roll_ledger(self, topic: TopicName, expected_ledger: int, now_ms: int) -> bool:
        with self._lock:
            t = self.topics[str(topic)]
            w = t.writer
            if w.ledger_id != expected_ledger:
                return False
            t.writer = WriterState(w.next_entry, w.ledger_id + 1, w.next_entry, now_ms, w.created_at)
            return True

    def get_seal_states(self, topics: list[str]) -> dict[str, SealState]:
        return {name: self.topics[name].seal for name in topics if name in self.topics}

    def commit_segment(self, segment: SegmentMeta, expected_next_entry: int, new_state: SealState) -> bool:
        with self._lock:
            t = self.topics[segment.topic]
            if t.seal.next_entry != expected_next_entry or segment.last_entry in t.segments:
                return False
            t.segments[segment.last_entry] = segment
            t.seal = new_state
            return True

    def list_segments(self, topic: TopicName, from_entry: int, limit: int) -> list[SegmentMeta]:
        t = self.topics.get(str(topic))
        if t is None:
            return []
        return [t.segments[k] for k in sorted(t.segments) if k >= from_entry][:limit]

    def get_topic_state(self, topic: TopicName) -> tuple[SealState, WriterState | None]:
        t = self.topics.get(str(topic))
        return (t.seal, t.writer) if t else (SealState(), None)

    def get_subscription_view(self, topic: TopicName, subscription: str) -> SubscriptionView:
        with self._lock:
            t = self.topics.get(str(topic))
            if t is None:
                return SubscriptionView(None, 0, SealState(), None)
            stored = t.cursors.get(subscription)
            cursor = CursorState.from_dict(copy.deepcopy(stored[0])) if stored else None
            return SubscriptionView(cursor, stored[1] if stored else 0, t.seal, t.writer)

    def put_cursor(self, topic: TopicName, subscription: str, state: CursorState, expected_version: int) -> bool:
        with self._lock:
            t = self.topics[str(topic)]
            version = t.cursors.get(subscription, ({}, 0))[1]
            if version != expected_version:
                return False
            t.cursors[subscription] = (copy.deepcopy(state.to_dict()), version + 1)
            return True

    def delete_cursor(self, topic: TopicName, subscription: str, expected_version: int) -> bool:
        with self._lock:
            t = self.topics[str(topic)]
            if t.cursors.get(subscription, ({}, 0))[1] != expected_version:
                return False
            t.cursors.pop(subscription, None)
            return True

    def list_subscriptions(self, topic: TopicName) -> list[str]:
        t = self.topics.get(str(topic))
        return list(t.cursors) if t else []


def memory_broker(clock: ManualClock | None = None):  # type: ignore[no-untyped-def]
    """A broker on in-memory ports with tenant `public` and namespace `public/default`."""
    from magnetar.core.broker import Broker

    clock = clock or ManualClock()
    metadata = MemoryMetadataStore()
    metadata.create_tenant(TenantInfo("public", (), ("standalone",)))
    metadata.create_namespace(NamespaceInfo(NamespaceName("public", "default")))
    return Broker(metadata, MemorySegmentStore(), MemoryJournal(clock), clock)
