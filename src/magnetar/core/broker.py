"""The broker: one object wiring the core services to a set of ports.

A Lambda handler builds one per container (`magnetar.adapters.aws.build_broker`) and keeps it
warm; unit tests build one on the in-memory ports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from magnetar.core.admin import AdminService
from magnetar.core.authz import AuthorizationService, AuthSettings
from magnetar.core.claims import MAX_RECEIVE_BYTES
from magnetar.core.clusters import STANDALONE
from magnetar.core.deletion import TopicDeletion
from magnetar.core.dispatch import SubscriptionService
from magnetar.core.entry import Entry
from magnetar.core.errors import TopicNotFound
from magnetar.core.functions.registry import FunctionRegistry
from magnetar.core.ledger import EntryCache, EntryReader, LedgerWriter, Sealer
from magnetar.core.ledger.pacing import DEFAULT_SEAL_LATENCY_MS, SealPacing
from magnetar.core.lifecycle import LedgerMaintenance
from magnetar.core.naming import TopicName
from magnetar.core.ports import Clock, Journal, MetadataStore, SegmentStore, SystemClock
from magnetar.core.ports.functions import FunctionDeployer
from magnetar.core.ports.telemetry import NO_TELEMETRY, Telemetry
from magnetar.core.replicated_subscriptions import SubscriptionSnapshots
from magnetar.core.schema import SchemaRegistry
from magnetar.core.stats import TopicStatsService
from magnetar.core.subscription_admin import SubscriptionAdmin


@dataclass
class Broker:
    metadata: MetadataStore
    segments: SegmentStore
    journal: Journal
    clock: Clock = field(default_factory=SystemClock)
    cache: EntryCache = field(default_factory=EntryCache)
    auth: AuthSettings = field(default_factory=AuthSettings)
    tail_reads: bool = True  # read unsealed entries from the journal (see EntryReader)
    seal_latency_ms: int = DEFAULT_SEAL_LATENCY_MS  # the journal consumer's hold (ledger.pacing)
    cluster_name: str = STANDALONE  # the cluster of the instance this deployment is (Pulsar's clusterName)
    telemetry: Telemetry = NO_TELEMETRY  # metrics and trace spans (adapters: EMF and X-Ray on AWS)
    deployer: FunctionDeployer | None = None  # registered functions' Lambda functions (None: not deployed)
    admin: AdminService = field(init=False)
    authz: AuthorizationService = field(init=False)
    writer: LedgerWriter = field(init=False)
    reader: EntryReader = field(init=False)
    sealer: Sealer = field(init=False)
    subscriptions: SubscriptionService = field(init=False)
    subscription_admin: SubscriptionAdmin = field(init=False)
    maintenance: LedgerMaintenance = field(init=False)
    stats: TopicStatsService = field(init=False)
    schemas: SchemaRegistry = field(init=False)
    functions: FunctionRegistry = field(init=False)
    deletion: TopicDeletion = field(init=False)

    def __post_init__(self) -> None:
        self.admin = AdminService(self.metadata, self.clock, cluster_name=self.cluster_name)
        self.writer = LedgerWriter(self.metadata, self.journal, self.clock, self.find_entry)
        self.authz = AuthorizationService(self.metadata, self.clock, self.auth)
        self.admin.on_policy_change = self._forget_policies
        self.reader = EntryReader(self.metadata, self.segments, self.journal, self.cache, self.tail_reads)
        self.sealer = Sealer(self.metadata, self.segments, self.clock, self.journal, SealPacing(self.seal_latency_ms))
        self.subscriptions = SubscriptionService(self.metadata, self.reader, self.clock, self.writer.policies)
        self.subscriptions.snapshots = SubscriptionSnapshots(self.metadata, self.reader, self.clock, self.cluster_name,
                                                             self.writer.policies)
        self.subscription_admin = SubscriptionAdmin(self.metadata, self.subscriptions, self.clock)
        self.maintenance = LedgerMaintenance(self.metadata, self.segments, self.reader, self.writer,
                                             self.subscriptions, self.clock)
        self.writer.quota_check = self.maintenance.quota_exceeded
        self.stats = TopicStatsService(self.metadata, self.maintenance, self.clock, self.writer.policies)
        self.schemas = SchemaRegistry(self.metadata, self.clock)
        self.functions = FunctionRegistry(self.metadata, self.segments, self.clock, self.cluster_name,
                                           self.deployer)
        self.deletion = TopicDeletion(self.metadata, self.segments, self.clock, cluster_name=self.cluster_name)
        for service in (self.writer, self.subscriptions, self.sealer, self.maintenance):
            service.telemetry = self.telemetry

    def _forget_policies(self) -> None:
        self.writer.forget_policies()
        self.authz.forget()

    def read_entries(self, topic: TopicName, start: int, max_entries: int) -> list[Entry]:
        """A non-durable read (readers, Spark): entries from `start`, no cursor involved."""
        return self.read_retained(topic, start, max_entries)[1]

    def read_retained(self, topic: TopicName, start: int, max_entries: int) -> tuple[int, list[Entry]]:
        """`read_entries` and the first entry id retention keeps: entries below it are deleted, so a
        read from below it starts there (the caller tells a trimmed range from an empty one)."""
        seal, writer = self.metadata.get_topic_state(topic)
        if writer is None:
            raise TopicNotFound(f"Topic {topic} not found")
        entries = self.reader.read(topic, max(start, seal.first_entry), max_entries, seal, writer)
        size, kept = 0, list[Entry]()
        for entry in entries:  # stay under Lambda's 6 MB response once base64-encoded
            if kept and size + entry.size > MAX_RECEIVE_BYTES:
                break
            kept.append(entry)
            size += entry.size
        return seal.first_entry, kept

    def last_entry(self, topic: TopicName) -> tuple[int, int]:
        """(ledger id, entry id) of the last entry appended, (-1, -1) when there is none."""
        _, writer = self.metadata.get_topic_state(topic)
        if writer is None:
            raise TopicNotFound(f"Topic {topic} not found")
        last = writer.next_entry - 1
        if last < 0:
            return (-1, -1)
        ledger = writer.ledger_id if last >= writer.ledger_first_entry else writer.ledger_id - 1
        return (ledger, last)

    def entry_at_time(self, topic: TopicName, timestamp_ms: int) -> int:
        """The first entry published at or after `timestamp_ms` (readers' seek by time)."""
        seal, writer = self.metadata.get_topic_state(topic)
        if writer is None:
            raise TopicNotFound(f"Topic {topic} not found")
        return self.reader.find_by_time(topic, timestamp_ms, seal, writer)

    def find_entry(self, topic: TopicName, entry_id: int) -> Entry | None:
        """A stored entry (a hole is returned as such); None while it is not settled yet."""
        seal, writer = self.metadata.get_topic_state(topic)
        found = self.reader.read(topic, entry_id, 1, seal, writer)
        return found[0] if found and found[0].entry_id == entry_id else None
