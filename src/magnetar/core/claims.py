"""Claims: what one dispatch step hands a consumer, worked out in memory on a cursor read with its
topic's seal and writer states (`SubscriptionView`); the caller writes the cursor back with one
conditional write (`SubscriptionService.step` for long polls, the push dispatch for WebSocket
consumers, `dispatch_partitions` for a receive over several partitions).

A claim first admits the entries past the cursor's read position as waiting deliveries (holes are
acknowledged), then hands the consumer what is ready for it, in order, reading the entries (sealed
segments from S3, the journal's tail) up to the receive's message, byte and entry caps.

Key_Shared on a partitioned topic with at least as many partitions as consumers (AutoSplit) gives
each partition's keys to one consumer (`CursorState.partition_owner`; Pulsar's sticky-key
selectors are per partition): the others neither admit new entries into that partition's cursor
nor write it, so each cursor has one writer rather than every consumer racing on it. The
partition count is looked up for Key_Shared partitions only, and cached for
PARTITION_COUNT_TTL_MS per parent topic (a stale count only changes the assignment for a moment;
the per-key ordering protections hold either way).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from magnetar.core.cursor import CursorState, Delivery
from magnetar.core.entry import Entry
from magnetar.core.key_shared import key_hash
from magnetar.core.ledger import EntryReader
from magnetar.core.naming import TopicName
from magnetar.core.policies import TopicPolicies, dispatch_budget
from magnetar.core.ports import Clock, MetadataStore, SubscriptionView

MAX_ENTRIES_PER_RECEIVE = 100
MAX_RECEIVE_BYTES = 4 * 1024 * 1024  # base64 in JSON must stay under Lambda's 6 MB response
WIRE_BYTES_PER_ENTRY = 512  # an entry's metadata in a receive's JSON answer (ids, names, times), counted with it
PARTITION_COUNT_TTL_MS = 30_000  # a partitioned topic's partition count, cached per parent (Key_Shared)


def acknowledged_elsewhere(state: CursorState, entry: Entry) -> bool:
    """A replicated copy that a replicated subscription already acknowledged in another cluster
    (it said so before the copy got here: core.replication)."""
    origin = entry.origin
    return state.replicated and origin is not None and state.origin_acked.get(origin.cluster, -1) >= origin.entry_id


@dataclass(frozen=True)
class DeliveredEntry:
    entry: Entry
    redelivery_count: int
    acked_indexes: list[int] = field(default_factory=list)  # batch messages already acknowledged


@dataclass
class Claims:
    """The in-memory half of a dispatch step: admit, claim, read (no cursor write of its own)."""

    metadata: MetadataStore
    reader: EntryReader
    clock: Clock
    policies: Callable[[TopicName], dict[str, Any]] | None = None  # the topic's effective policies
    # parent -> (partitions, read at ms)
    _partition_counts: dict[TopicName, tuple[int, int]] = field(default_factory=dict)

    def claim(
        self,
        topic: TopicName,
        view: SubscriptionView,
        state: CursorState,
        consumer: str,
        max_messages: int,
        now: int,
        ack_timeout_ms: int,
        request_id: str,
        max_bytes: int = MAX_RECEIVE_BYTES,
    ) -> list[DeliveredEntry]:
        """One dispatch step on a cursor read in `view` (the caller writes `state` back with a
        conditional write): move new entries into the cursor, then hand `consumer` what is ready
        for it, in order (at least one entry, then up to `max_messages` and `max_bytes`). Long
        polls and pushes to WebSocket consumers both go through here."""
        partition, partitions = topic.partition_index, self.key_shared_partitions(topic, state, now)
        if not self.may_receive_new(topic, state, consumer, now) and (
                state.subscription_type == "Failover"  # a standby: it gets messages when the active one goes
                or not state.ready_for(consumer, now, partition, partitions, assign=False)):
            return []  # Key_Shared, another consumer owns this partition's keys: it admits, not this one
        self.admit_new_entries(topic, view, state, now, max_messages)
        out: list[DeliveredEntry] = []
        messages = size = redelivered = 0
        for d in state.ready_for(consumer, now, partition, partitions):
            length = d.end - d.start
            entries = self.reader.read(topic, d.start, length, view.seal, view.writer)
            taken = 0
            for entry in entries:
                if out and (messages + entry.num_messages > max_messages or size + entry.size > max_bytes):
                    break
                out.append(DeliveredEntry(entry, d.redelivery_count, state.acked_indexes(entry.entry_id)))
                messages += entry.num_messages
                size += entry.size
                redelivered += entry.num_messages if d.redelivery_count else 0
                taken += 1
            if taken:
                # the ack timeout counts from when the entries are in hand, not from the start of
                # the step (reads from a slow store would otherwise eat into the consumer's time)
                deadline = self.clock.now_ms() + ack_timeout_ms if ack_timeout_ms > 0 else None
                state.hand_out(d, taken, consumer, deadline, request_id)
            if taken < length or len(out) >= MAX_ENTRIES_PER_RECEIVE:
                break  # what is left must wait: nothing after it may overtake it
        state.compact()
        if out:
            state.record_out(messages, size, now, redelivered)
        return out

    def may_receive_new(self, topic: TopicName, state: CursorState, consumer: str, now: int) -> bool:
        """Whether entries sealed from now on may go to `consumer` (as `claim` decides): not for a
        Failover standby, nor for a Key_Shared consumer while another owns the partition's keys."""
        if state.subscription_type == "Failover":
            return state.active_consumer(now, topic.partition_index) == consumer
        partitions = self.key_shared_partitions(topic, state, now)
        return not partitions or state.partition_owner(now, topic.partition_index, partitions) in (None, consumer)

    def key_shared_partitions(self, topic: TopicName, state: CursorState, now: int) -> int:
        """The partition count of the partitioned topic `topic` is a partition of, for a Key_Shared
        AutoSplit cursor (0, and no read, otherwise; 0 too if the parent is not partitioned):
        cached per parent for PARTITION_COUNT_TTL_MS."""
        if topic.partition_index < 0 or not state.splits_keys(state.live_consumers(now)):
            return 0  # not Key_Shared AutoSplit on a partition: the partition count does not matter
        parent = topic.partitioned_topic
        cached = self._partition_counts.get(parent)
        if cached is not None and now - cached[1] < PARTITION_COUNT_TTL_MS:
            return cached[0]
        count = self.metadata.get_partitions(parent) or 0
        self._partition_counts[parent] = (count, now)
        return count

    def admit_new_entries(
        self, topic: TopicName, view: SubscriptionView, state: CursorState, now: int, max_messages: int
    ) -> None:
        """Entries past the read position join the cursor as waiting deliveries (holes are acked)."""
        if state.read_position < view.seal.first_entry:
            # the cursor points below the oldest stored entry (it was created or reset while a
            # trim ran): those entries are gone, as Pulsar moves such a cursor to the first ledger
            state.expire_before(view.seal.first_entry)
        waiting = sum(d.end - d.start for d in state.deliveries if not d.sent)
        if waiting >= MAX_ENTRIES_PER_RECEIVE:
            return  # enough is already waiting: do not read further ahead
        key_shared = state.subscription_type == "Key_Shared"
        delays = state.subscription_type in ("Shared", "Key_Shared")  # as Pulsar: others ignore deliver_at
        entries = self.reader.read(topic, state.read_position, MAX_ENTRIES_PER_RECEIVE, view.seal, view.writer)
        messages = 0
        for entry in entries:
            e = entry.entry_id
            if entry.hole or acknowledged_elsewhere(state, entry):
                state.read_position = e + 1
                state.acknowledge([e])
                continue
            if messages >= max_messages and not key_shared:
                break  # Key_Shared admits the whole read (the keys decide who gets what)
            not_before = entry.deliver_at if delays and entry.deliver_at > now else 0
            state.add_new(e, e + 1, None, False, None, "", not_before, key_hash(entry.key) if key_shared else None)
            messages += entry.num_messages

    def dispatch_budget(self, topic: TopicName, view: SubscriptionView, state: CursorState,
                        now: int) -> tuple[int, int, int] | None:
        """Pulsar's dispatchRate for this subscription: (messages, bytes) it may still hand out in
        the current period (-1: no limit on that dimension) and the period's start, or None when
        no rate is set. The count rides on the cursor write that hands entries out."""
        rate = TopicPolicies.of(self.policies(topic)).dispatch_rate if self.policies else None
        if rate is None or not rate.active:
            return None
        msgs, size, start = dispatch_budget(rate, state.dispatch_window, now, view.seal.rates_at(now))
        return msgs, size, start + rate.period_s * 1000 if 0 in (msgs, size) else start

    def fetch(self, topic: TopicName, view: SubscriptionView, deliveries: list[Delivery]) -> list[DeliveredEntry]:
        out: list[DeliveredEntry] = []
        for d in sorted(deliveries, key=lambda x: x.start):
            for entry in self.reader.read(topic, d.start, d.end - d.start, view.seal, view.writer):
                out.append(DeliveredEntry(entry, d.redelivery_count))
        return out
