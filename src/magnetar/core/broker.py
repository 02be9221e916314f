"""The broker: one object wiring the core services to a set of ports.

A Lambda handler builds one per container (`magnetar.adapters.aws.build_broker`) and keeps it
warm; unit tests build one on the in-memory ports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from magnetar.core.admin import AdminService
from magnetar.core.dispatch import SubscriptionService
from magnetar.core.ledger import EntryCache, EntryReader, LedgerWriter, Sealer
from magnetar.core.ports import Clock, Journal, MetadataStore, SegmentStore, SystemClock


@dataclass
class Broker:
    metadata: MetadataStore
    segments: SegmentStore
    journal: Journal
    clock: Clock = field(default_factory=SystemClock)
    cache: EntryCache = field(default_factory=EntryCache)

    def __post_init__(self) -> None:
        self.admin = AdminService(self.metadata, self.clock)
        self.writer = LedgerWriter(self.metadata, self.journal, self.clock)
        self.reader = EntryReader(self.metadata, self.segments, self.journal, self.cache)
        self.sealer = Sealer(self.metadata, self.segments, self.clock)
        self.subscriptions = SubscriptionService(self.metadata, self.reader, self.clock)
