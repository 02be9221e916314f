"""In-memory ports: the core's unit tests run on these, with a controllable clock."""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from magnetar.adapters.memory_deletion import MemoryDeletionStore
from magnetar.adapters.memory_functions import MemoryFunctionStore
from magnetar.adapters.memory_snapshots import MemorySnapshotStore
from magnetar.core.clusters import ClusterData
from magnetar.core.cursor import CursorState
from magnetar.core.errors import (
    BacklogQuotaExceeded,
    NotFound,
    ProducerFenced,
    RetryableError,
    StalePolicies,
    TooManyRequests,
    TopicLimitReached,
    TopicNotFound,
)
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.policies import TOPIC_LIMIT_REASON, admit, has_overrides
from magnetar.core.ports import (
    CursorWrite,
    DedupRecord,
    JournalPosition,
    JournalRecord,
    NamespaceInfo,
    ProducerActivity,
    ProducerClaim,
    ProducerShare,
    Reservation,
    SealState,
    SegmentCommit,
    SegmentMeta,
    SubscriptionSnapshot,
    SubscriptionView,
    TenantInfo,
    WriterState,
)
from magnetar.core.ports.deletion import TopicFence
from magnetar.core.ports.functions import FunctionRecord, StateValue
from magnetar.core.schema.types import StoredSchema


def _stored_copy(state: dict[str, Any]) -> dict[str, Any]:
    """A cursor's state as the DynamoDB adapter stores it (JSON), and a copy no caller shares."""
    copied: dict[str, Any] = json.loads(json.dumps(state, separators=(",", ":")))
    return copied


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

    def append(self, partition_key: str, data: bytes, patience_s: float | None = None) -> JournalPosition:
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

    def read_shard_after(self, after: JournalPosition, max_records: int, max_bytes: int) -> list[JournalRecord]:
        out: list[JournalRecord] = []
        size = 0
        for r in self.records[int(after.sequence) + 1:][:max_records]:
            if out and size + len(r.data) > max_bytes:
                break
            out.append(r)
            size += len(r.data)
        return out


class MemorySegmentStore:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put_if_absent(self, key: str, data: bytes) -> bool:
        if key in self.objects:
            return False
        self.objects[key] = data
        return True

    def get_range(self, key: str, start: int, end: int) -> bytes:
        if key not in self.objects:
            raise NotFound(f"segment {key} was deleted")
        return self.objects[key][start:end]

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            self.objects.pop(key, None)

    def list_keys(self, prefix: str) -> list[str]:
        return sorted(k for k in self.objects if k.startswith(prefix))


@dataclass
class _Topic:
    writer: WriterState
    dedup: dict[str, DedupRecord] = field(default_factory=dict)
    exclusive: tuple[str, int] | None = None  # (producer, lease end)
    seal: SealState = field(default_factory=SealState)
    segments: dict[int, SegmentMeta] = field(default_factory=dict)  # by last entry
    cursors: dict[str, tuple[dict[str, object], int]] = field(default_factory=dict)
    policies: dict[str, Any] = field(default_factory=dict)
    rate_tat: tuple[int, int] = (0, 0)  # publish rate: the virtual clocks of messages and bytes (ns)


class MemoryMetadataStore(MemoryFunctionStore, MemoryDeletionStore, MemorySnapshotStore):
    def __init__(self) -> None:
        self.tenants: dict[str, TenantInfo] = {}
        self.clusters: dict[str, ClusterData] = {}
        self.namespaces: dict[NamespaceName, NamespaceInfo] = {}
        self.topics: dict[str, _Topic] = {}
        self._announced: dict[str, int] = {}  # push connections announced on topics not created yet
        self.partitioned: dict[str, int] = {}
        self.partitioned_policies: dict[str, dict[str, Any]] = {}
        self.topic_counts: dict[NamespaceName, int] = {}  # counted while maxTopicsPerNamespace is set
        self.schemas: dict[str, list[StoredSchema]] = {}  # schema id -> versions, oldest first
        self.functions: dict[str, FunctionRecord] = {}  # fqfn -> record
        self.function_state: dict[str, dict[str, StateValue]] = {}  # fqfn -> key -> value
        self.function_leases: dict[str, tuple[str, int]] = {}
        self.fences: dict[str, TopicFence] = {}  # deletions (memory_deletion), kept past the topic
        self.snapshots: dict[tuple[str, str], dict[str, SubscriptionSnapshot]] = {}  # (topic, subscription)
        self._lock = threading.RLock()

    def create_tenant(self, tenant: TenantInfo) -> bool:
        with self._lock:
            return self.tenants.setdefault(tenant.name, tenant) is tenant

    def update_tenant(self, tenant: TenantInfo, expected: TenantInfo | None = None) -> bool:
        with self._lock:
            if tenant.name not in self.tenants:
                return False
            if expected is not None and self.tenants[tenant.name] != expected:
                return False
            self.tenants[tenant.name] = tenant
            return True

    def get_tenant(self, name: str) -> TenantInfo | None:
        return self.tenants.get(name)

    def list_tenants(self) -> list[str]:
        return list(self.tenants)

    def create_cluster(self, name: str, data: ClusterData) -> bool:
        with self._lock:
            if name in self.clusters:
                return False
            self.clusters[name] = data
            return True

    def update_cluster(self, name: str, data: ClusterData) -> bool:
        with self._lock:
            if name not in self.clusters:
                return False
            self.clusters[name] = data
            return True

    def get_cluster(self, name: str) -> ClusterData | None:
        return self.clusters.get(name)

    def list_clusters(self) -> list[str]:
        return list(self.clusters)

    def delete_cluster(self, name: str) -> bool:
        with self._lock:
            return self.clusters.pop(name, None) is not None

    def create_namespace(self, namespace: NamespaceInfo) -> bool:
        with self._lock:
            return self.namespaces.setdefault(namespace.name, namespace) is namespace

    def get_namespace(self, name: NamespaceName) -> NamespaceInfo | None:
        info = self.namespaces.get(name)
        if info is None:
            return None
        with_policies = {b for b, p in self.partitioned_policies.items() if has_overrides(p)}
        with_policies |= {b for b, t in self.topics.items() if has_overrides(t.policies)}
        return replace(info, topics_with_policies=frozenset(
            b for b in with_policies if TopicName.parse(b).namespace_name == name))

    def list_namespaces(self, tenant: str) -> list[str]:
        return [n.namespace for n in self.namespaces if n.tenant == tenant]

    def create_topic(self, topic: TopicName, now_ms: int, max_topics: int = 0) -> bool:
        with self._lock:
            if str(topic) in self.topics:
                return False
            fence = self.fences.get(str(topic))
            if fence is not None and not fence.done:
                return False  # being deleted: created again once the deletion finished
            self._count_topics(topic.namespace_name, 1, max_topics)
            start, ledger = (fence.next_entry, fence.ledger_id + 1) if fence is not None else (0, 0)
            self.topics[str(topic)] = _Topic(WriterState(start, ledger, start, now_ms, now_ms),
                                             seal=SealState(next_entry=start, first_entry=start, base=start,
                                                            push_epoch=self._announced.pop(str(topic), 0)))
            return True

    def _count_topics(self, namespace: NamespaceName, added: int, max_topics: int) -> None:
        if max_topics > 0:
            count = self.topic_counts.get(namespace, 0)
            if count + added > max_topics:
                raise TopicLimitReached(TOPIC_LIMIT_REASON)
            self.topic_counts[namespace] = count + added

    def set_topic_count(self, namespace: NamespaceName, count: int) -> None:
        with self._lock:
            self.topic_counts[namespace] = count

    def list_topics(self, namespace: NamespaceName) -> list[str]:
        return [t for t in self.topics if TopicName.parse(t).namespace_name == namespace]

    def list_topics_page(self, namespace: NamespaceName, prefix: str, start_after: str, limit: int,
                         contains: str = "") -> list[str]:
        names = sorted(t for t in self.list_topics(namespace)
                       if t.startswith(prefix) and t > start_after and contains.lower() in t[len(prefix):].lower())
        return names[:limit]

    def create_partitioned_topic(self, topic: TopicName, partitions: int, max_topics: int = 0) -> bool:
        with self._lock:
            if str(topic) in self.partitioned or str(topic) in self.topics:
                return False
            self._count_topics(topic.namespace_name, partitions, max_topics)
            self.partitioned[str(topic)] = partitions
            return True

    def get_partitions(self, topic: TopicName) -> int | None:
        return self.partitioned.get(str(topic))

    def update_partitions(self, topic: TopicName, partitions: int, max_topics: int = 0, previous: int = 0) -> bool:
        with self._lock:
            current = self.partitioned.get(str(topic), partitions)
            if current >= partitions or (max_topics > 0 and current != previous):
                return False
            self._count_topics(topic.namespace_name, partitions - current, max_topics)
            self.partitioned[str(topic)] = partitions
            return True

    def list_partitioned_topics(self, namespace: NamespaceName) -> list[str]:
        return [t for t in self.partitioned if TopicName.parse(t).namespace_name == namespace]

    def reserve_entry(self, topic: TopicName, claim: ProducerClaim) -> Reservation | DedupRecord:
        with self._lock:
            t = self._live(str(topic))
            if t is None:
                raise TopicNotFound(f"Topic {topic} not found")
            if t.exclusive and t.exclusive[1] > claim.now_ms and any(p != t.exclusive[0] for p in claim.producers):
                raise ProducerFenced(f"Topic {topic} has an exclusive producer: {t.exclusive[0]}")
            if t.writer.backlog_blocked:
                raise BacklogQuotaExceeded(f"Cannot publish on {topic}: backlog quota exceeded", t.writer.backlog_blocked)
            last = t.dedup.get(claim.producer)
            if claim.deduplicate and last is not None and last.sequence_id >= claim.lowest_sequence_id:
                return last
            if claim.rate is not None:
                r = claim.rate
                tats = [admit(tat, r.now_ns, cost, r.burst_ns) if cost else tat
                        for tat, cost in zip(t.rate_tat, (r.msg_cost_ns, r.byte_cost_ns), strict=True)]
                if None in tats:
                    raise TooManyRequests(f"Publish rate of {topic} exceeded ({r.description}); retry later")
                t.rate_tat = (tats[0] or 0, tats[1] or 0)
            return self._take(t, claim)

    def _take(self, t: _Topic, claim: ProducerClaim) -> Reservation:
        w = t.writer
        producers = dict(w.producers)
        for share in claim.shares or (ProducerShare(claim.producer, claim.messages, claim.size),):
            seen = w.producers.get(share.producer, ProducerActivity())
            producers[share.producer] = replace(seen, last_publish=claim.now_ms, messages=seen.messages + share.messages,
                                                bytes=seen.bytes + share.size)
        t.writer = replace(w, next_entry=w.next_entry + claim.entries, messages_in=w.messages_in + claim.messages,
                           bytes_in=w.bytes_in + claim.size, producers=producers)
        if claim.deduplicate:
            t.dedup[claim.producer] = DedupRecord(claim.sequence_id, w.ledger_id, w.next_entry, claim.now_ms,
                                                  claim.entries)
        return Reservation(w.ledger_id, w.next_entry, w.ledger_first_entry, w.ledger_opened_at)

    def replace_reservation(self, topic: TopicName, claim: ProducerClaim, lost_entry: int) -> Reservation:
        with self._lock:
            t = self._live(str(topic))
            if t is None:
                raise TopicNotFound(f"Topic {topic} not found")
            last = t.dedup.get(claim.producer)
            if last is None or last.entry_id != lost_entry:
                raise RetryableError("The producer's last publish changed meanwhile; retry")
            return self._take(t, claim)

    def last_sequence_id(self, topic: TopicName, producer: str) -> int:
        t = self._live(str(topic))
        record = t.dedup.get(producer) if t else None
        return record.sequence_id if record else -1

    def claim_exclusive(self, topic: TopicName, producer: str, now_ms: int, lease_ms: int) -> bool:
        with self._lock:
            t = self._live(str(topic))
            if t is None or (t.exclusive and t.exclusive[0] != producer and t.exclusive[1] > now_ms):
                return False
            t.exclusive = (producer, now_ms + lease_ms)
            return True

    def release_exclusive(self, topic: TopicName, producer: str) -> None:
        with self._lock:
            t = self.topics.get(str(topic))
            if t and t.exclusive and t.exclusive[0] == producer:
                t.exclusive = None

    def set_namespace_policies(self, namespace: NamespaceName, policies: dict[str, Any],
                               expected: dict[str, Any]) -> bool:
        with self._lock:
            current = self.namespaces.get(namespace)
            if current is None:
                raise NotFound(f"Namespace {namespace} does not exist")
            if current.policies != expected:
                return False
            self.namespaces[namespace] = NamespaceInfo(namespace, copy.deepcopy(policies), current.topics_with_policies)
            return True

    def roll_ledger(self, topic: TopicName, expected_ledger: int, now_ms: int) -> bool:
        with self._lock:
            t = self._live(str(topic))
            if t is None:
                return False
            w = t.writer
            if w.ledger_id != expected_ledger:
                return False
            t.writer = replace(w, ledger_id=w.ledger_id + 1, ledger_first_entry=w.next_entry, ledger_opened_at=now_ms)
            return True

    def get_topic_policies(self, topic: TopicName) -> dict[str, Any]:
        base = str(topic.partitioned_topic if topic.partition_index >= 0 else topic)
        if base in self.partitioned:
            return dict(self.partitioned_policies.get(base, {}))
        t = self.topics.get(base)
        return dict(t.policies) if t else {}

    def set_topic_policies(self, topic: TopicName, policies: dict[str, Any],
                           expected: dict[str, Any] | None = None) -> bool:
        with self._lock:
            base = str(topic.partitioned_topic if topic.partition_index >= 0 else topic)
            if base in self.partitioned:
                if expected is not None and self.partitioned_policies.get(base, {}) != expected:
                    raise StalePolicies(f"The policies of {base} changed meanwhile")
                self.partitioned_policies[base] = dict(policies)
                return True
            if base in self.topics:
                if expected is not None and (self.topics[base].policies or {}) != expected:
                    raise StalePolicies(f"The policies of {base} changed meanwhile")
                self.topics[base].policies = dict(policies)
                return True
            return False

    def set_backlog_blocked(self, topic: TopicName, policy: str) -> None:
        with self._lock:
            t = self._live(str(topic))
            if t is not None:
                t.writer = replace(t.writer, backlog_blocked=policy)

    def touch_producer(self, topic: TopicName, producer: str, now_ms: int) -> None:
        with self._lock:
            t = self._live(str(topic))
            if t is not None and now_ms == 0:
                t.writer = replace(t.writer, producers={k: v for k, v in t.writer.producers.items() if k != producer})
            elif t is not None:
                seen = t.writer.producers.get(producer, ProducerActivity())
                if not seen.connected_since:
                    producers = {**t.writer.producers, producer: replace(seen, connected_since=now_ms)}
                    t.writer = replace(t.writer, producers=producers)

    def trim_segments(self, topic: TopicName, segments: list[SegmentMeta], expected_first_entry: int) -> bool:
        with self._lock:
            t = self.topics.get(str(topic))
            if t is None:
                return False
            if t.seal.first_entry != expected_first_entry or any(seg.last_entry not in t.segments for seg in segments):
                return False
            if not segments:
                return True
            for seg in segments:
                del t.segments[seg.last_entry]
            t.seal = replace(
                t.seal,
                first_entry=segments[-1].last_entry + 1,
                trimmed_entries=t.seal.trimmed_entries + sum(g.last_entry - g.first_entry + 1 for g in segments),
                trimmed_messages=t.seal.trimmed_messages + sum(g.message_count for g in segments),
                trimmed_bytes=t.seal.trimmed_bytes + sum(g.size for g in segments),
                trash=tuple(sorted({*t.seal.trash, *(g.key for g in segments)})),
            )
            return True

    def clear_trash(self, topic: TopicName, keys: list[str]) -> None:
        with self._lock:
            t = self.topics.get(str(topic))
            if t is None:
                return
            t.seal = replace(t.seal, trash=tuple(k for k in t.seal.trash if k not in keys))

    def get_seal_states(self, topics: list[str]) -> dict[str, SealState]:
        found = {name: self.topics[name].seal for name in topics if name in self.topics}
        fenced = {name: seal for name in topics if (seal := self._fenced_seal(name)) is not None}
        return found | fenced

    def commit_segments(self, commits: list[SegmentCommit]) -> list[bool]:
        return [self._commit_segment(c.segment, c.expected_next_entry, c.new_state) for c in commits]

    def _commit_segment(self, segment: SegmentMeta, expected_next_entry: int, new_state: SealState) -> bool:
        with self._lock:
            t = self.topics.get(segment.topic)
            if t is None or t.seal.next_entry != expected_next_entry or segment.last_entry in t.segments:
                return False
            if t.seal.base != new_state.base:  # computed from another incarnation's seal state
                return False
            if new_state.push_epoch == 0 and t.seal.push_epoch:  # a push connection announced itself
                return False
            t.segments[segment.last_entry] = segment
            # the sealer's attributes only: a trim may have moved the others meanwhile
            t.seal = replace(new_state, first_entry=t.seal.first_entry, trimmed_entries=t.seal.trimmed_entries,
                             trimmed_messages=t.seal.trimmed_messages, trimmed_bytes=t.seal.trimmed_bytes,
                             trash=t.seal.trash, push_epoch=t.seal.push_epoch)
            return True

    def announce_push_connection(self, topic: TopicName) -> None:
        with self._lock:
            t = self.topics.get(str(topic))
            if t is None:  # as DynamoDB's update creates the seal item: kept for the topic to come
                self._announced[str(topic)] = self._announced.get(str(topic), 0) + 1
            else:
                t.seal = replace(t.seal, push_epoch=t.seal.push_epoch + 1)

    def list_segments(self, topic: TopicName, from_entry: int, limit: int) -> list[SegmentMeta]:
        t = self.topics.get(str(topic))
        if t is None:
            return []
        return [t.segments[k] for k in sorted(t.segments) if k >= from_entry][:limit]

    def get_topic_state(self, topic: TopicName) -> tuple[SealState, WriterState | None]:
        return self.get_topic_states([topic])[str(topic)]

    def get_topic_states(self, topics: list[TopicName],
                         consistent: bool = True) -> dict[str, tuple[SealState, WriterState | None]]:
        out: dict[str, tuple[SealState, WriterState | None]] = {}
        for name in map(str, topics):
            t, live = self.topics.get(name), self._live(name)
            out[name] = (t.seal, live.writer if live else None) if t else (self._fenced_seal(name) or SealState(), None)
        return out

    def get_subscription_view(self, topic: TopicName, subscription: str) -> SubscriptionView:
        with self._lock:
            t = self.topics.get(str(topic))
            if t is None:
                return SubscriptionView(None, 0, self._fenced_seal(str(topic)) or SealState(), None)
            stored = t.cursors.get(subscription)
            cursor = CursorState.from_dict(_stored_copy(stored[0])) if stored else None
            live = self._live(str(topic))
            return SubscriptionView(cursor, stored[1] if stored else 0, t.seal, live.writer if live else None)

    def put_cursor(self, topic: TopicName, subscription: str, state: CursorState, expected_version: int) -> bool:
        with self._lock:
            t = self.topics.get(str(topic))
            if t is None or (expected_version == 0 and self._live(str(topic)) is None):
                return False  # no topic, or a new cursor beside a fenced writer (`memory_deletion`)
            version = t.cursors.get(subscription, ({}, 0))[1]
            if version != expected_version:
                return False
            t.cursors[subscription] = (_stored_copy(state.to_dict()), version + 1)
            return True

    def get_subscription_views(self, keys: list[tuple[TopicName, str]]) -> list[SubscriptionView]:
        return [self.get_subscription_view(topic, subscription) for topic, subscription in keys]

    def put_cursors(self, writes: list[CursorWrite]) -> list[bool]:
        return [self.put_cursor(w.topic, w.subscription, w.state, w.expected_version) for w in writes]

    def delete_cursor(self, topic: TopicName, subscription: str, expected_version: int) -> bool:
        with self._lock:
            t = self.topics.get(str(topic))
            if t is None or t.cursors.get(subscription, ({}, 0))[1] != expected_version:
                return False
            t.cursors.pop(subscription, None)
            return True

    def list_subscriptions(self, topic: TopicName) -> list[str]:
        t = self.topics.get(str(topic))
        return list(t.cursors) if t else []

    def list_cursors(self, topic: TopicName, consistent: bool = True) -> dict[str, tuple[CursorState, int]]:
        with self._lock:
            t = self.topics.get(str(topic))
            if t is None:
                return {}
            return {name: (CursorState.from_dict(_stored_copy(v[0])), v[1]) for name, v in t.cursors.items()}

    # --- schemas (the schema registry) --------------------------------------------------------
    def get_schemas(self, schema_id: str) -> list[StoredSchema]:
        with self._lock:
            return list(self.schemas.get(schema_id, []))

    def put_schema(self, schema_id: str, schema: StoredSchema) -> bool:
        with self._lock:
            versions = self.schemas.setdefault(schema_id, [])
            if any(s.version == schema.version for s in versions):
                return False
            versions.append(schema)
            return True


def memory_broker(clock: ManualClock | None = None, tail_reads: bool = True,  # type: ignore[no-untyped-def]
                  telemetry: Any = None, cluster_name: str | None = None):
    """A broker on in-memory ports with tenant `public` and namespace `public/default`
    (`telemetry`: adapters.memory_telemetry's, to read what the core emitted; `cluster_name`:
    the cluster of an instance it is, standalone by default)."""
    from magnetar.core.broker import Broker
    from magnetar.core.ports.telemetry import NO_TELEMETRY

    clock = clock or ManualClock()
    metadata = MemoryMetadataStore()
    metadata.create_tenant(TenantInfo("public", (), ("standalone",)))
    metadata.create_namespace(NamespaceInfo(NamespaceName("public", "default")))
    if cluster_name is None:
        return Broker(metadata, MemorySegmentStore(), MemoryJournal(clock), clock, tail_reads=tail_reads,
                      telemetry=telemetry or NO_TELEMETRY)
    return Broker(metadata, MemorySegmentStore(), MemoryJournal(clock), clock, tail_reads=tail_reads,
                  telemetry=telemetry or NO_TELEMETRY, cluster_name=cluster_name)

