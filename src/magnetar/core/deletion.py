"""Deleting topics, partitioned topics, namespaces and tenants, as Pulsar's admin API does.

A topic partition's state is spread over this cluster's metadata table (writer counter, seal
state, segment items, cursors, compaction state and index, WebSocket connections), its bucket
(segment and compacted objects), the journal (records possibly still in flight) and the
configuration store (listing, partitioned metadata, policies, schemas, permissions). Any Lambda
may serve the topic at any moment, so the deletion cannot stop its writers first: it *fences*
them, then removes what the fence made unreachable.

1. **fence** (one conditional write of the writer counter, `DeletionStore.fence_topic`): no id is
   reserved under the old incarnation from here on, and every read finds no topic (404): nothing
   is readable half-deleted. The fence records the counter's next entry id F and ledger L.
2. **seal fence**: the seal state is replaced by an empty one starting at F. Every record of the
   old incarnation has an id below F, so the sealer skips each one still in the journal as
   already sealed, and a seal of the old incarnation in flight fails its commit's condition.
3. **compaction fence**: the compaction state keeps only the highest generation started, so a run
   in flight fails its next conditional write and the next incarnation's generations (and their
   write-once objects) are new numbers.
4. the partition's other items (segments, cursors, compacted index, connections): 99 per
   TransactWriteItems, each conditional on the deletion being unfinished; then the snapshots this
   cluster wrote of its replicated subscriptions (configuration store: the subscriptions are gone,
   so a snapshot write in flight was sent before; a retry deletes them again); then its S3
   objects, 1,000 keys per DeleteObjects, only ledgers up to L and compacted generations up to the
   fenced one (a later incarnation's objects are never touched).
5. the listing (with its policies) and, for a whole topic, its schema and permissions.
6. **finish**: the name may be created again. A new incarnation continues from the fence (entry
   ids from F, ledger L + 1), so neither a journal record nor a message id of the old one can ever
   address it.

Every step is idempotent and a deletion that dies anywhere is finished by a retry of the same
DELETE (the fence, unfinished, keeps the topic visible to it).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

from magnetar.core.authz import AUTH_POLICIES, TOPIC_AUTH
from magnetar.core.clusters import STANDALONE
from magnetar.core.compaction.model import CompactionState, CompactionStore
from magnetar.core.crashpoints import crash_point
from magnetar.core.errors import Conflict, NotFound, PreconditionFailed, RetryableError, TopicNotFound
from magnetar.core.ledger.writer import PRODUCER_IDLE_MS
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.policies import REPLICATION_CLUSTERS, TopicPolicies
from magnetar.core.ports import Clock, MetadataStore, SegmentStore, WriterState
from magnetar.core.ports.deletion import TopicFence
from magnetar.core.schema import schema_id

DELETED = "deleted"  # Pulsar's Policies.deleted: a namespace being deleted takes no new topic
NAMESPACE_ROUNDS = 5  # topics created during a namespace's deletion are deleted in further rounds
_LEDGER_DIR = re.compile(r"/([0-9a-f]{16})/[^/]+$")
_GENERATION_DIR = re.compile(r"/g([0-9a-f]{8})/[^/]+$")


@dataclass
class DeletionReport:
    """What one deletion removed (its cost: every item and object is one key of a batch request)."""

    partitions: int = 0
    items: int = 0  # metadata items of the partitions (segments, cursors, ...)
    objects: int = 0  # S3 objects (segments, compacted objects and maps)
    schemas: int = 0
    snapshots: int = 0  # replicated subscriptions' snapshots (configuration store)
    topics: int = 0  # a namespace's or tenant's topics
    namespaces: int = 0

    def add(self, other: DeletionReport) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))


class TopicDeletion:
    """Pulsar's deleteTopic, deletePartitionedTopic, deleteNamespace and deleteTenant."""

    def __init__(self, metadata: MetadataStore, segments: SegmentStore, clock: Clock,
                 compaction: CompactionStore | None = None, cluster_name: str = STANDALONE) -> None:
        self.metadata = metadata
        self.segments = segments
        self.clock = clock
        self.compaction = compaction  # None: no compaction store (its fence is skipped)
        self.cluster_name = cluster_name

    # --- topics ------------------------------------------------------------------------------
    def delete_topic(self, topic: TopicName, force: bool = False) -> DeletionReport:
        """A non-partitioned topic (or one partition of a partitioned topic): 404 when it does not
        exist, 409 for a partitioned topic's own name, 412 while it is in use, unless `force`."""
        if topic.partition_index < 0 and self.metadata.get_partitions(topic) is not None:
            raise Conflict(f"{topic} is a partitioned topic: delete it with DELETE .../partitions")
        listed = self.metadata.is_listed(topic)
        _, writer = self.metadata.get_topic_state(topic)
        fence = self.metadata.get_fence(topic)
        if not listed and writer is None and (fence is None or fence.done):
            raise TopicNotFound(f"Topic {topic} does not exist")
        if not force and writer is not None:
            self._check_idle(topic, writer)
        report = self._erase_partition(topic, counted=self._counted(topic))
        if topic.partition_index < 0:  # a partition's schema and permissions are its topic's
            report.schemas = self._forget_topic_config(topic)
        return report

    def delete_partitioned_topic(self, topic: TopicName, force: bool = False) -> DeletionReport:
        """Every partition, then the partitioned metadata: 404 when it does not exist, 412 while a
        partition is in use, unless `force`."""
        if topic.partition_index >= 0:
            raise PreconditionFailed("Partitioned Topic Name should not contain '-partition-'")
        partitions = self.metadata.get_partitions(topic)
        if partitions is None:
            raise NotFound(f"Partitioned topic {topic} does not exist")
        names = [topic.partition(i) for i in range(partitions)]
        if not force:
            for partition, (_, writer) in self.metadata.get_topic_states(names).items():
                if writer is not None:
                    self._check_idle(TopicName.parse(partition), writer)
        for name in names:  # every partition stops taking writes before any is emptied
            self.metadata.fence_topic(name, self.clock.now_ms())
        crash_point("delete.after_partitions_fenced")
        report = DeletionReport()
        for name in names:
            report.add(self._erase_partition(name, counted=0))
        report.schemas = self._forget_topic_config(topic)
        counted = partitions if self._namespace_counts(topic.namespace_name) else 0
        self.metadata.forget_partitioned_topic(topic, counted)
        return report

    def _erase_partition(self, topic: TopicName, counted: int) -> DeletionReport:
        """Steps 1-6 of the module's docstring for one topic partition."""
        report = DeletionReport(partitions=1)
        fence = self.metadata.fence_topic(topic, self.clock.now_ms())
        crash_point("delete.after_fence")
        if fence is not None and not fence.done:
            self.metadata.fence_seal(topic, fence)
            generation = self._fence_compaction(topic)
            keys = self.metadata.topic_item_keys(topic)
            if not self.metadata.delete_topic_items(topic, fence, keys):
                return report  # another run of this deletion finished it
            report.items = len(keys)
            crash_point("delete.after_items")
            if topic.is_persistent:  # (a non-persistent topic's subscriptions share no position)
                report.snapshots = self.metadata.delete_topic_snapshots(topic, self.cluster_name)
            report.objects = self._delete_objects(topic, fence, generation)
            crash_point("delete.after_objects")
        self.metadata.forget_topic(topic, counted)
        if fence is not None and not fence.done:
            self.metadata.finish_fence(topic, fence)
        return report

    def _fence_compaction(self, topic: TopicName) -> int:
        """Step 3: the highest compaction generation ever started (0: none)."""
        if self.compaction is None:
            return 0
        for _ in range(10):
            state = self.compaction.get_state(topic)
            started = max(state.generation, state.started, state.trash_generation,
                          state.progress.generation if state.progress is not None else 0)
            fenced = CompactionState(started=started)
            if state.version and state == CompactionState(started=started, version=state.version):
                return started  # fenced already
            if not started and not state.version:
                return 0  # never compacted
            if self.compaction.put_state(topic, fenced, state.version):
                return started
        raise RetryableError(f"The compaction state of {topic} keeps changing; retry")

    def _delete_objects(self, topic: TopicName, fence: TopicFence, generation: int) -> int:
        """Step 4's objects: the old incarnation's segments (ledgers up to the fence's) and
        compacted objects (generations up to the fenced one), 1,000 keys per DeleteObjects."""
        path = f"{topic.tenant}/{topic.namespace}/{topic.domain}/{_quoted(topic)}/"
        keys = [k for k in self.segments.list_keys(f"segments/{path}")
                if (m := _LEDGER_DIR.search(k)) is not None and int(m.group(1), 16) <= fence.ledger_id]
        if generation:
            keys += [k for k in self.segments.list_keys(f"compacted/{path}")
                     if (m := _GENERATION_DIR.search(k)) is not None and int(m.group(1), 16) <= generation]
        self.segments.delete(keys)
        return len(keys)

    def _forget_topic_config(self, topic: TopicName) -> int:
        """A whole topic's schema versions and topic-level permissions (configuration store)."""
        removed = self.metadata.delete_schemas(schema_id(topic))
        for _ in range(10):
            info = self.metadata.get_namespace(topic.namespace_name)
            auth = (info.policies.get(AUTH_POLICIES) or {}) if info is not None else {}
            if info is None or str(topic) not in (auth.get(TOPIC_AUTH) or {}):
                return removed
            grants = {name: roles for name, roles in auth[TOPIC_AUTH].items() if name != str(topic)}
            policies = {**info.policies, AUTH_POLICIES: {**auth, TOPIC_AUTH: grants}}
            if self.metadata.set_namespace_policies(topic.namespace_name, policies, info.policies):
                return removed
        raise RetryableError(f"The policies of {topic.namespace_name} keep changing; retry")

    def _check_idle(self, topic: TopicName, writer: WriterState) -> None:
        """Pulsar refuses a delete that is not forced while producers or consumers are connected.
        Magnetar's clients hold no connection: a producer is active while it has neither closed
        nor been silent for `PRODUCER_IDLE_MS` (5 min), a consumer while its lease runs (30 s,
        renewed by every receive and by the SDK's heartbeat; 2 h for a WebSocket consumer)."""
        now = self.clock.now_ms()
        producers = [name for name, p in writer.producers.items()
                     if p.connected_since and now - max(p.last_publish, p.connected_since) < PRODUCER_IDLE_MS]
        consumers = [consumer for state, _ in self.metadata.list_cursors(topic).values()
                     for consumer in state.live_consumers(now)]
        if producers or consumers:
            raise PreconditionFailed(f"Topic has active producers/subscriptions: {topic} has {len(producers)} active "
                                     f"producers and {len(consumers)} connected consumers (force=true deletes it anyway)")

    def _counted(self, topic: TopicName) -> int:
        """1 when the topic counts against its namespace's maxTopicsPerNamespace counter."""
        if topic.partition_index >= 0 and self.metadata.get_partitions(topic.partitioned_topic) is not None:
            return 0  # counted with its partitioned topic
        return 1 if self._namespace_counts(topic.namespace_name) else 0

    def _namespace_counts(self, namespace: NamespaceName) -> bool:
        info = self.metadata.get_namespace(namespace)
        return info is not None and TopicPolicies.of(info.policies).max_topics > 0

    # --- namespaces and tenants -------------------------------------------------------------------
    def delete_namespace(self, namespace: NamespaceName, force: bool = False) -> DeletionReport:
        """Pulsar's deleteNamespace: 404 when it does not exist, 409 "Cannot delete non empty
        namespace" while it has topics (unless `force`) or functions, 412 while it replicates to
        other clusters. Forced, it is marked deleted (no topic is created in it from then on),
        then its topics are deleted, forced."""
        info = self.metadata.get_namespace(namespace)
        if info is None:
            raise NotFound(f"Namespace {namespace} does not exist")
        functions = self.metadata.list_functions(namespace.tenant, namespace.namespace)
        if functions:
            raise Conflict(f"Cannot delete non empty namespace: {namespace} has functions ({', '.join(functions)}); "
                           "delete them first")
        remotes = sorted(set(info.policies.get(REPLICATION_CLUSTERS) or ()) - {self.cluster_name})
        if remotes:
            raise PreconditionFailed(f"Cannot delete the global namespace {namespace}: it replicates to clusters "
                                     f"{', '.join(remotes)} (set its replication clusters to this cluster first)")
        if not force and any(self._namespace_topics(namespace)):
            raise Conflict("Cannot delete non empty namespace")
        if not info.policies.get(DELETED):
            self._mark_deleted(namespace)
        report = DeletionReport()
        for _ in range(NAMESPACE_ROUNDS):
            partitioned, plain = self._namespace_topics(namespace)
            if not partitioned and not plain:
                break
            for name in partitioned:
                with contextlib.suppress(NotFound):  # deleted meanwhile
                    report.add(self.delete_partitioned_topic(TopicName.parse(name), force=True))
                report.topics += 1
            for name in plain:
                with contextlib.suppress(NotFound):
                    report.add(self.delete_topic(TopicName.parse(name), force=True))
                report.topics += 1
        else:
            raise RetryableError(f"Topics keep appearing in {namespace}; retry")
        crash_point("delete.after_namespace_topics")
        self.metadata.delete_namespace(namespace)
        report.namespaces = 1
        return report

    def _namespace_topics(self, namespace: NamespaceName) -> tuple[list[str], list[str]]:
        """The namespace's partitioned topics, and its other topics (partitions of those left out)."""
        partitioned = sorted(self.metadata.list_partitioned_topics(namespace))
        plain = sorted(t for t in self.metadata.list_topics(namespace)
                       if str(TopicName.parse(t).partitioned_topic) not in partitioned)
        return partitioned, plain

    def _mark_deleted(self, namespace: NamespaceName) -> None:
        for _ in range(10):
            info = self.metadata.get_namespace(namespace)
            if info is None:
                raise NotFound(f"Namespace {namespace} does not exist")
            if self.metadata.set_namespace_policies(namespace, {**info.policies, DELETED: True}, info.policies):
                return
        raise RetryableError(f"The policies of {namespace} keep changing; retry")

    def delete_tenant(self, tenant: str, force: bool = False) -> DeletionReport:
        """Pulsar's deleteTenant: 404 when it does not exist, 409 "The tenant still has active
        namespaces" unless `force`, which deletes them (and their topics) first."""
        if self.metadata.get_tenant(tenant) is None:
            raise NotFound(f"Tenant {tenant} does not exist")
        namespaces = sorted(self.metadata.list_namespaces(tenant))
        if namespaces and not force:
            raise Conflict("The tenant still has active namespaces")
        report = DeletionReport()
        for ns in namespaces:
            with contextlib.suppress(NotFound):
                report.add(self.delete_namespace(NamespaceName(tenant, ns), force=True))
        if self.metadata.list_namespaces(tenant):
            raise RetryableError(f"Namespaces keep appearing in tenant {tenant}; retry")
        self.metadata.delete_tenant(tenant)
        return report


def _quoted(topic: TopicName) -> str:
    from urllib.parse import quote

    return quote(topic.local_name, safe="")
