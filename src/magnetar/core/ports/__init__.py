"""The ports the core needs from the outside world, and the records that cross them.

Each port method maps to one storage request (or one small fixed number), so the cost of a core
operation can be read off the code. Implementations: `magnetar.adapters.memory` (unit tests) and
`magnetar.adapters.aws` (DynamoDB, S3, Kinesis).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.core.cursor import CursorState
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.ports.deletion import DeletionStore
from magnetar.core.ports.functions import FunctionStore
from magnetar.core.ports.schema import SchemaStore
from magnetar.core.rates import ewma_decay

if TYPE_CHECKING:
    from magnetar.core.clusters import ClusterData


@dataclass(frozen=True)
class JournalPosition:
    """Where a record sits in the journal: Kinesis shard id and sequence number. `throttled_ms`
    (not part of the position): how long its append waited for the shard's write budget."""

    shard_id: str
    sequence: str
    throttled_ms: int = field(default=0, compare=False)


@dataclass(frozen=True)
class JournalRecord:
    position: JournalPosition
    partition_key: str
    data: bytes
    arrival_ms: int


@dataclass(frozen=True)
class Reservation:
    """An entry id reserved for one append (the first of a group append's consecutive ids),
    with the ledger it belongs to."""

    ledger_id: int
    entry_id: int
    ledger_first_entry: int
    ledger_opened_at: int


@dataclass(frozen=True)
class RateClaim:
    """A publish-rate limit the reservation write enforces (`policies.admit`, per dimension):
    what this publish costs on the virtual clock of the message rate and of the byte rate
    (nanoseconds; 0: no limit on that dimension), and how far ahead of now a clock may run.
    Refused, the write changes nothing and the store raises TooManyRequests."""

    now_ns: int
    msg_cost_ns: int
    byte_cost_ns: int
    burst_ns: int
    description: str = ""  # the limit, for the refusal's reason


@dataclass(frozen=True)
class ProducerShare:
    """One producer's part of a publish that carries several producers' batches (a client's
    producers of one topic publishing together): its counts for the stats, and its fence."""

    producer: str
    messages: int
    size: int


@dataclass(frozen=True)
class ProducerClaim:
    """What a produce asks of the writer counter besides an id: the exclusive-producer fence,
    and, with deduplication, the batch's highest sequence id."""

    producer: str
    now_ms: int
    sequence_id: int = -1
    deduplicate: bool = False
    messages: int = 0  # counted into the topic's and the producer's totals by the same write (stats)
    size: int = 0
    rate: RateClaim | None = None  # the topic's publish rate, checked and counted by the same write
    # a group append (several entries, one record): how many consecutive ids to take, and the
    # lowest sequence id of the group (None: `sequence_id`); deduplication refuses the whole
    # group when the producer's last sequence id reaches that lowest one, and records the highest
    entries: int = 1
    first_sequence_id: int | None = None
    # several producers' batches (never with deduplication): each one's counts, and each is fenced
    # by an exclusive producer; empty: everything is `producer`'s
    shares: tuple[ProducerShare, ...] = ()

    @property
    def producers(self) -> tuple[str, ...]:
        """Every producer whose entries this publish writes, and the request's own: each is fenced."""
        return tuple(dict.fromkeys((self.producer, *(s.producer for s in self.shares))))

    @property
    def lowest_sequence_id(self) -> int:
        return self.sequence_id if self.first_sequence_id is None else self.first_sequence_id


@dataclass(frozen=True)
class DedupRecord:
    """The last publish of a producer, as the writer counter remembers it (deduplication)."""

    sequence_id: int
    ledger_id: int
    entry_id: int  # the first id of that publish
    reserved_at: int
    entries: int = 1  # the ids that publish took (a group append takes several consecutive ones)


@dataclass(frozen=True)
class ProducerActivity:
    """What the writer counter remembers of one producer (topic stats' `publishers`)."""

    last_publish: int = 0
    messages: int = 0
    bytes: int = 0
    connected_since: int = 0


@dataclass(frozen=True)
class WriterState:
    next_entry: int
    ledger_id: int
    ledger_first_entry: int
    ledger_opened_at: int
    created_at: int
    messages_in: int = 0  # totals since creation, counted when an entry id is reserved
    bytes_in: int = 0
    producers: dict[str, ProducerActivity] = field(default_factory=dict)
    backlog_blocked: str = ""  # a backlog-quota policy refusing or holding publishes, "" when none


@dataclass(frozen=True)
class SealState:
    """How far the sealer has moved a topic partition from the journal into S3 segments."""

    next_entry: int = 0
    last_position: JournalPosition | None = None
    recent_holes: tuple[int, ...] = ()
    sealed_entries: int = 0
    sealed_messages: int = 0
    sealed_bytes: int = 0
    segment_count: int = 0
    # rate of sealed messages and bytes per second, an exponentially weighted moving average
    # over a minute (Pulsar's msgRateIn), kept by the sealer in the same write
    rate_msgs: float = 0.0
    rate_bytes: float = 0.0
    rate_at: int = 0
    # the ledger lifecycle: entries below first_entry were trimmed (their segments deleted)
    first_entry: int = 0
    trimmed_entries: int = 0
    trimmed_messages: int = 0
    trimmed_bytes: int = 0
    trash: tuple[str, ...] = ()  # segment objects unlisted by a trim and not yet deleted
    # the newest sealed segments, in order, ending at next_entry - 1 (a few, of few entries:
    # `ledger.common.recent_segments`): a consumer that keeps up reads them without a listing
    recent_segments: tuple[SegmentMeta, ...] = ()
    # > 0 once a WebSocket consumer or reader has connected to the topic partition (each connect
    # adds one): only then does the journal consumer look up its connections after a seal
    push_epoch: int = 0
    # counted by the sealer in the same write (`core.metrics.buckets`, Pulsar's buckets): entries by
    # storage write latency (reservation to arrival in the journal) and by size, with their sums
    # (ms, bytes); and the ids sealed as holes
    write_latency: tuple[int, ...] = ()
    write_latency_ms: int = 0
    entry_sizes: tuple[int, ...] = ()
    entry_size_bytes: int = 0
    hole_entries: int = 0
    # the entry this incarnation of the topic partition starts at: a topic deleted and created
    # again continues from its deletion's fence (`ports.deletion`), and a seal commit holds only
    # while the stored state is of the incarnation it was computed from
    base: int = 0

    def rates_at(self, now_ms: int) -> tuple[float, float]:
        """The in-rates (messages/s, bytes/s) decayed to `now_ms`."""
        factor = ewma_decay(now_ms - self.rate_at) if self.rate_at else 0.0
        return self.rate_msgs * factor, self.rate_bytes * factor




@dataclass(frozen=True)
class SegmentMeta:
    """One immutable S3 object holding entries first_entry..last_entry of one ledger."""

    topic: str
    ledger_id: int
    first_entry: int
    last_entry: int
    key: str
    offsets: tuple[int, ...]  # byte offset of each entry, plus the object size at the end
    message_count: int
    created_at: int
    max_publish_time: int = 0  # the latest publish time in the segment (seek by time)

    @property
    def size(self) -> int:
        return self.offsets[-1]


@dataclass(frozen=True)
class SegmentCommit:
    """One commit of `MetadataStore.commit_segments`: record `segment` and move its topic
    partition's seal state from `expected_next_entry` to `new_state`, all or nothing."""

    segment: SegmentMeta
    expected_next_entry: int
    new_state: SealState


@dataclass
class SubscriptionView:
    """Everything a dispatch step reads, fetched in one round trip."""

    cursor: CursorState | None
    cursor_version: int
    seal: SealState
    writer: WriterState | None


@dataclass(frozen=True)
class CursorWrite:
    """One conditional cursor write of `MetadataStore.put_cursors`."""

    topic: TopicName
    subscription: str
    state: CursorState
    expected_version: int


@dataclass(frozen=True)
class TenantInfo:
    name: str
    admin_roles: tuple[str, ...] = ()
    allowed_clusters: tuple[str, ...] = ()


@dataclass(frozen=True)
class NamespaceInfo:
    name: NamespaceName
    policies: dict[str, Any] = field(default_factory=dict)
    # the namespace's topics that have policy overrides of their own (Pulsar's brokers load a
    # namespace's topic policies at once): a publish to any other topic needs no read of its own.
    # None: not known (a namespace from before the index, or one with too many to list).
    topics_with_policies: frozenset[str] | None = None


class Journal(Protocol):
    """The write-ahead journal (Kinesis). Records of one partition key keep their order."""

    max_record_bytes: int

    def append(self, partition_key: str, data: bytes, patience_s: float | None = None) -> JournalPosition:
        """Store one record. Throttled attempts are retried for `patience_s` seconds (by default
        most of the writer's deadline); raises `JournalRefused` when every attempt was refused."""
        ...

    def read_after(
        self, partition_key: str, after: JournalPosition | None, since_ms: int, max_records: int
    ) -> list[JournalRecord]:
        """Records with this partition key after `after` (or, when None, arrived since `since_ms`)."""
        ...

    def read_shard_after(self, after: JournalPosition, max_records: int, max_bytes: int) -> list[JournalRecord]:
        """Records of every key in `after`'s shard after it, in shard order, at most `max_records`
        and about `max_bytes` (one read, best effort: [] when the shard's read budget is spent)."""
        ...


class SegmentStore(Protocol):
    """Immutable segment objects (S3)."""

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write once; False when the object already exists (a replay of the same seal)."""
        ...

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of an object; NotFound when it was deleted (trimmed)."""
        ...

    def delete(self, keys: list[str]) -> None:
        """Delete objects (up to 1,000 per request); a missing one is not an error."""
        ...

    def list_keys(self, prefix: str) -> list[str]:
        """The keys under `prefix`, sorted (S3: one ListObjectsV2 per 1,000 keys)."""
        ...


@dataclass(frozen=True)
class SubscriptionSnapshot:
    """What a replicated subscription acknowledged in one cluster: per cluster of origin, the
    highest origin entry id within its acknowledged prefix; written at `at_ms` there."""

    origin_acked: dict[str, int]
    at_ms: int


class MetadataStore(SchemaStore, FunctionStore, DeletionStore, Protocol):
    """Tenants, namespaces, topics, the writer counter, seal states, segment lists, cursors,
    schemas, functions, deletions."""

    # --- tenants, namespaces, topics -------------------------------------------------------
    def create_tenant(self, tenant: TenantInfo) -> bool: ...
    def update_tenant(self, tenant: TenantInfo, expected: TenantInfo | None = None) -> bool:
        """Replace an existing tenant's admin roles and clusters; False when it does not exist, or
        (with `expected`, what the caller read) when they changed since."""
        ...

    def get_tenant(self, name: str) -> TenantInfo | None: ...
    def list_tenants(self) -> list[str]: ...

    # --- clusters of the instance (configuration store) -------------------------------------
    def create_cluster(self, name: str, data: ClusterData) -> bool:
        """Record a cluster; False (nothing written) when it exists."""
        ...

    def update_cluster(self, name: str, data: ClusterData) -> bool:
        """Replace an existing cluster's data; False when it does not exist."""
        ...

    def get_cluster(self, name: str) -> ClusterData | None: ...
    def list_clusters(self) -> list[str]: ...
    def delete_cluster(self, name: str) -> bool:
        """Forget a cluster; False when it did not exist."""
        ...

    # --- replicated subscriptions' snapshots (configuration store: every cluster reads them) ---
    def put_subscription_snapshot(self, topic: TopicName, subscription: str, cluster: str,
                                  snapshot: SubscriptionSnapshot) -> bool:
        """Record what `subscription` of `topic` acknowledged in `cluster`; False (nothing written)
        when the one stored covers as much: a snapshot never moves back."""
        ...

    def get_subscription_snapshots(self, topic: TopicName, subscription: str) -> dict[str, SubscriptionSnapshot]:
        """The snapshots of `subscription` of `topic`, by the cluster that wrote each."""
        ...

    def delete_subscription_snapshot(self, topic: TopicName, subscription: str, cluster: str) -> None:
        """Forget what `subscription` of `topic` acknowledged in `cluster` (it is being deleted
        there); nothing when there is no such snapshot."""
        ...

    def delete_topic_snapshots(self, topic: TopicName, cluster: str) -> int:
        """Forget every snapshot `cluster` wrote for the subscriptions of `topic` (a topic
        partition being deleted there); how many there were."""
        ...

    def create_namespace(self, namespace: NamespaceInfo) -> bool: ...
    def get_namespace(self, name: NamespaceName) -> NamespaceInfo | None: ...
    def list_namespaces(self, tenant: str) -> list[str]: ...
    def create_topic(self, topic: TopicName, now_ms: int, max_topics: int = 0) -> bool:
        """False if it exists. With `max_topics` (the namespace's limit), the namespace's topic
        counter goes up in the same write, refused with TopicLimitReached at the limit."""
        ...

    def list_topics(self, namespace: NamespaceName) -> list[str]: ...
    def list_topics_page(self, namespace: NamespaceName, prefix: str, start_after: str, limit: int,
                         contains: str = "") -> list[str]:
        """Up to `limit` of the namespace's topics, sorted, whose names begin with `prefix` (a
        domain's `persistent://tenant/ns/`), come after `start_after` and hold `contains`: one
        page, read from the listing's sort order (no more of the listing than the page needs
        unless `contains` filters it)."""
        ...

    def create_partitioned_topic(self, topic: TopicName, partitions: int, max_topics: int = 0) -> bool:
        """False if a partitioned or a plain topic of that name exists; each partition counts
        against `max_topics` (as create_topic)."""
        ...

    def get_partitions(self, topic: TopicName) -> int | None:
        """Partitions of a partitioned topic; None when the name is not a partitioned topic."""
        ...

    def update_partitions(self, topic: TopicName, partitions: int, max_topics: int = 0, previous: int = 0) -> bool:
        """Raise the partition count; False unless it grows. With `max_topics`, the count must
        still be `previous` and the added partitions count against the limit (as create_topic)."""
        ...

    def set_topic_count(self, namespace: NamespaceName, count: int) -> None:
        """Set the namespace's topic counter (counted when maxTopicsPerNamespace is set)."""
        ...

    def list_partitioned_topics(self, namespace: NamespaceName) -> list[str]: ...

    # --- the writer: one conditional counter per topic partition --------------------------
    def reserve_entry(self, topic: TopicName, claim: ProducerClaim) -> Reservation | DedupRecord:
        """Atomically take the next entry id, unless another producer holds the topic exclusively
        (ProducerFenced) or, deduplicating, the producer already published this sequence id (then
        its record is returned). Raises TopicNotFound when the topic does not exist, and
        TooManyRequests (nothing taken) when the claim's publish rate refuses it."""
        ...

    def replace_reservation(self, topic: TopicName, claim: ProducerClaim, lost_entry: int) -> Reservation:
        """Deduplication: re-reserve for a publish whose entry became a hole (its writer died)."""
        ...

    def last_sequence_id(self, topic: TopicName, producer: str) -> int: ...

    def claim_exclusive(self, topic: TopicName, producer: str, now_ms: int, lease_ms: int) -> bool: ...

    def release_exclusive(self, topic: TopicName, producer: str) -> None: ...

    def set_namespace_policies(self, namespace: NamespaceName, policies: dict[str, Any],
                               expected: dict[str, Any]) -> bool:
        """Replace the namespace's policies if they are still `expected` (what the caller read and
        changed): False, and nothing written, when another edit came in between."""
        ...

    def get_topic_policies(self, topic: TopicName) -> dict[str, Any]:
        """Topic-level policy overrides of a (non-partitioned or partitioned) topic; {} if none."""
        ...

    def set_topic_policies(self, topic: TopicName, policies: dict[str, Any],
                           expected: dict[str, Any] | None = None) -> bool:
        """Replace a topic's overrides, and its name in its namespace's `topics_with_policies`, in
        one write; False when the topic does not exist. With `expected` (the overrides the caller
        read), StalePolicies when they changed since, and nothing is written."""
        ...

    def set_backlog_blocked(self, topic: TopicName, policy: str) -> None:
        """Backlog quota: make publishes fail ("" lifts it) until the backlog is back under quota."""
        ...

    def touch_producer(self, topic: TopicName, producer: str, now_ms: int) -> None:
        """Record a producer's connection (stats' connectedSince); 0 forgets the producer (closed)."""
        ...

    def roll_ledger(self, topic: TopicName, expected_ledger: int, now_ms: int) -> bool: ...

    # --- the sealer -------------------------------------------------------------------------
    def get_seal_states(self, topics: list[str]) -> dict[str, SealState]: ...

    def commit_segments(self, commits: list[SegmentCommit]) -> list[bool]:
        """Several topic partitions' segment commits (at most one per partition) in as few
        requests as possible (DynamoDB: 50 in one transaction); each is applied all or nothing
        and only if its seal state is still at its expected entry, and, when the new state says no
        push connection was ever announced (`push_epoch` 0), still none is. The flags say which
        were: False when another sealer moved first, a connection was announced meanwhile (or
        the write conflicted): retry the batch."""
        ...

    def announce_push_connection(self, topic: TopicName) -> None:
        """A WebSocket consumer or reader connected to `topic`: its seal state's `push_epoch` goes
        up by one (the item is created if the topic was never sealed). One write."""
        ...

    def list_segments(self, topic: TopicName, from_entry: int, limit: int) -> list[SegmentMeta]:
        """Segments whose last entry is >= from_entry, in order."""
        ...

    def get_topic_state(self, topic: TopicName) -> tuple[SealState, WriterState | None]:
        """Seal and writer states of a topic partition (writer None: no such topic)."""
        ...

    def get_topic_states(self, topics: list[TopicName],
                         consistent: bool = True) -> dict[str, tuple[SealState, WriterState | None]]:
        """`get_topic_state` of several topic partitions, by name (DynamoDB: one BatchGetItem per 50;
        `consistent` False: eventually consistent reads, half the read units)."""
        ...

    def trim_segments(self, topic: TopicName, segments: list[SegmentMeta], expected_first_entry: int) -> bool:
        """Unlist segments (at most 99, the oldest, contiguous) and move the seal state's first entry
        past them, recording their objects as trash, all or nothing; False if another trim moved first."""
        ...

    def clear_trash(self, topic: TopicName, keys: list[str]) -> None:
        """Forget trash objects once they are deleted."""
        ...

    # --- cursors ----------------------------------------------------------------------------
    def get_subscription_view(self, topic: TopicName, subscription: str) -> SubscriptionView: ...

    def put_cursor(
        self, topic: TopicName, subscription: str, state: CursorState, expected_version: int
    ) -> bool:
        """Write the cursor if its version is still `expected_version` (0: must not exist)."""
        ...

    def get_subscription_views(self, keys: list[tuple[TopicName, str]]) -> list[SubscriptionView]:
        """The views of several (topic partition, subscription) pairs (a consumer of a partitioned
        topic, the subscriptions a journal batch pushes to), in the order asked, in one round trip
        (one BatchGetItem per 33 pairs)."""
        ...

    def put_cursors(self, writes: list[CursorWrite]) -> list[bool]:
        """Several conditional cursor writes in as few requests as possible; each is applied if
        and only if its version still matches (as `put_cursor`), the flags say which were."""
        ...

    def delete_cursor(self, topic: TopicName, subscription: str, expected_version: int) -> bool: ...

    def list_subscriptions(self, topic: TopicName) -> list[str]: ...

    def list_cursors(self, topic: TopicName, consistent: bool = True) -> dict[str, tuple[CursorState, int]]:
        """Every subscription's cursor and version, in one query (maintenance, stats; `consistent`
        False: eventually consistent, half the read units)."""
        ...


class Clock(Protocol):
    def now_ms(self) -> int: ...
    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
