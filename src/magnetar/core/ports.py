"""The ports the core needs from the outside world, and the records that cross them.

Each port method maps to one storage request (or one small fixed number), so the cost of a core
operation can be read off the code. Implementations: `magnetar.adapters.memory` (unit tests) and
`magnetar.adapters.aws` (DynamoDB, S3, Kinesis).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from magnetar.core.cursor import CursorState
from magnetar.core.naming import NamespaceName, TopicName


@dataclass(frozen=True)
class JournalPosition:
    """Where a record sits in the journal: Kinesis shard id and sequence number."""

    shard_id: str
    sequence: str


@dataclass(frozen=True)
class JournalRecord:
    position: JournalPosition
    partition_key: str
    data: bytes
    arrival_ms: int


@dataclass(frozen=True)
class Reservation:
    """An entry id reserved for one append, with the ledger it belongs to."""

    ledger_id: int
    entry_id: int
    ledger_first_entry: int
    ledger_opened_at: int


@dataclass(frozen=True)
class ProducerClaim:
    """What a produce asks of the writer counter besides an id: the exclusive-producer fence,
    and, with deduplication, the batch's highest sequence id."""

    producer: str
    now_ms: int
    sequence_id: int = -1
    deduplicate: bool = False


@dataclass(frozen=True)
class DedupRecord:
    """The last publish of a producer, as the writer counter remembers it (deduplication)."""

    sequence_id: int
    ledger_id: int
    entry_id: int
    reserved_at: int


@dataclass(frozen=True)
class WriterState:
    next_entry: int
    ledger_id: int
    ledger_first_entry: int
    ledger_opened_at: int
    created_at: int


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


@dataclass
class SubscriptionView:
    """Everything a dispatch step reads, fetched in one round trip."""

    cursor: CursorState | None
    cursor_version: int
    seal: SealState
    writer: WriterState | None


@dataclass(frozen=True)
class TenantInfo:
    name: str
    admin_roles: tuple[str, ...] = ()
    allowed_clusters: tuple[str, ...] = ()


@dataclass(frozen=True)
class NamespaceInfo:
    name: NamespaceName
    policies: dict[str, Any] = field(default_factory=dict)


class Journal(Protocol):
    """The write-ahead journal (Kinesis). Records of one partition key keep their order."""

    max_record_bytes: int

    def append(self, partition_key: str, data: bytes) -> JournalPosition: ...

    def read_after(
        self, partition_key: str, after: JournalPosition | None, since_ms: int, max_records: int
    ) -> list[JournalRecord]:
        """Records with this partition key after `after` (or, when None, arrived since `since_ms`)."""
        ...


class SegmentStore(Protocol):
    """Immutable segment objects (S3)."""

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write once; False when the object already exists (a replay of the same seal)."""
        ...

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of an object."""
        ...


class MetadataStore(Protocol):
    """Tenants, namespaces, topics, the writer counter, seal states, segment lists, cursors."""

    # --- tenants, namespaces, topics -------------------------------------------------------
    def create_tenant(self, tenant: TenantInfo) -> bool: ...
    def get_tenant(self, name: str) -> TenantInfo | None: ...
    def list_tenants(self) -> list[str]: ...
    def create_namespace(self, namespace: NamespaceInfo) -> bool: ...
    def get_namespace(self, name: NamespaceName) -> NamespaceInfo | None: ...
    def list_namespaces(self, tenant: str) -> list[str]: ...
    def create_topic(self, topic: TopicName, now_ms: int) -> bool: ...
    def list_topics(self, namespace: NamespaceName) -> list[str]: ...
    def create_partitioned_topic(self, topic: TopicName, partitions: int) -> bool:
        """False if a partitioned or a plain topic of that name exists."""
        ...

    def get_partitions(self, topic: TopicName) -> int | None:
        """Partitions of a partitioned topic; None when the name is not a partitioned topic."""
        ...

    def update_partitions(self, topic: TopicName, partitions: int) -> bool:
        """Raise the partition count; False unless it grows."""
        ...

    def list_partitioned_topics(self, namespace: NamespaceName) -> list[str]: ...

    # --- the writer: one conditional counter per topic partition --------------------------
    def reserve_entry(self, topic: TopicName, claim: ProducerClaim) -> Reservation | DedupRecord:
        """Atomically take the next entry id, unless another producer holds the topic exclusively
        (ProducerFenced) or, deduplicating, the producer already published this sequence id (then
        its record is returned). Raises TopicNotFound when the topic does not exist."""
        ...

    def replace_reservation(self, topic: TopicName, claim: ProducerClaim, lost_entry: int) -> Reservation:
        """Deduplication: re-reserve for a publish whose entry became a hole (its writer died)."""
        ...

    def last_sequence_id(self, topic: TopicName, producer: str) -> int: ...

    def claim_exclusive(self, topic: TopicName, producer: str, now_ms: int, lease_ms: int) -> bool: ...

    def release_exclusive(self, topic: TopicName, producer: str) -> None: ...

    def set_namespace_policies(self, namespace: NamespaceName, policies: dict[str, Any]) -> None: ...

    def roll_ledger(self, topic: TopicName, expected_ledger: int, now_ms: int) -> bool: ...

    # --- the sealer -------------------------------------------------------------------------
    def get_seal_states(self, topics: list[str]) -> dict[str, SealState]: ...

    def commit_segment(self, segment: SegmentMeta, expected_next_entry: int, new_state: SealState) -> bool:
        """Record the segment and move the seal state, all or nothing; False if another sealer moved first."""
        ...

    def list_segments(self, topic: TopicName, from_entry: int, limit: int) -> list[SegmentMeta]:
        """Segments whose last entry is >= from_entry, in order."""
        ...

    def get_topic_state(self, topic: TopicName) -> tuple[SealState, WriterState | None]:
        """Seal and writer states of a topic partition (writer None: no such topic)."""
        ...

    # --- cursors ----------------------------------------------------------------------------
    def get_subscription_view(self, topic: TopicName, subscription: str) -> SubscriptionView: ...

    def put_cursor(
        self, topic: TopicName, subscription: str, state: CursorState, expected_version: int
    ) -> bool:
        """Write the cursor if its version is still `expected_version` (0: must not exist)."""
        ...

    def delete_cursor(self, topic: TopicName, subscription: str, expected_version: int) -> bool: ...

    def list_subscriptions(self, topic: TopicName) -> list[str]: ...


class Clock(Protocol):
    def now_ms(self) -> int: ...
    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
