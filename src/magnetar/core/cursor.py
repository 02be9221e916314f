"""A durable subscription cursor, Pulsar's ManagedCursor reduced to its state.

Entry ids are dense integers within a topic partition, so positions are plain ints:
- `mark_delete`: every entry below it is acknowledged (Pulsar's mark-delete position + 1);
- `acked`: individually acknowledged ranges above it (Pulsar's individualDeletedMessages);
- `batch_acks`: acknowledged batch indexes of partly acknowledged batch entries;
- `read_position`: the next entry never dispatched;
- `deliveries`: dispatched, unacknowledged ranges, each sent to a consumer, assigned to one and
  not yet sent (Key_Shared), or released (owner None) until `not_before` (negative-ack delay,
  delayed delivery), with the redelivery count Pulsar reports;
- `consumers`: attached consumers and their leases (a stateless broker sees no TCP close, so a
  consumer is attached while its lease is renewed);
- `epoch`: bumped by a seek, so acknowledgements made before it are ignored.

All operations are pure changes of this state; the dispatcher persists it with a conditional
write, so any Lambda may change any cursor and concurrent changes never interleave.

Key_Shared ownership (`key_owner`): Sticky, the consumer whose ranges hold the key's hash;
AutoSplit, the live consumers sorted by name split the hash range evenly — except on a partition
of a partitioned topic with at least as many partitions as live consumers, where every key of
partition i goes to the (i mod n)-th of them (Failover's rule, without priority levels). That is
a valid Key_Shared assignment, as Pulsar's sticky-key selectors are per partition (each
partition is a topic with its own dispatcher), and it gives each partition's cursor one writer
instead of all the consumers. Either way a key held, sent and unacknowledged, by another
consumer waits until it is acknowledged, and no entry of a key overtakes an older one that
waits, so a key's order holds when ownership moves as consumers come and go.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from magnetar.core.errors import ConsumerAssignError, ConsumerBusy, InvalidInput
from magnetar.core.key_shared import AUTO_SPLIT, HASH_RANGE, KeySharedPolicy
from magnetar.core.rates import ewma_add

SUBSCRIPTION_TYPES = ("Exclusive", "Shared", "Failover", "Key_Shared")
class RangeSet:
    """Sorted disjoint half-open integer ranges [start, end).

    Written here rather than taken from a library: the cursor needs four operations on a list
    that is persisted as JSON, and a dependency would still need the JSON mapping.
    """

    def __init__(self, ranges: list[list[int]] | None = None) -> None:
        self.ranges: list[list[int]] = [list(r) for r in (ranges or [])]

    def add(self, start: int, end: int) -> None:
        if end <= start:
            return
        merged: list[list[int]] = []
        placed = False
        for s, e in self.ranges:
            if e < start:
                merged.append([s, e])
            elif end < s:
                if not placed:
                    merged.append([start, end])
                    placed = True
                merged.append([s, e])
            else:
                start, end = min(s, start), max(e, end)
        if not placed:
            merged.append([start, end])
        self.ranges = sorted(merged)

    def __contains__(self, value: int) -> bool:
        return any(s <= value < e for s, e in self.ranges)

    def drop_below(self, bound: int) -> None:
        self.ranges = [[max(s, bound), e] for s, e in self.ranges if e > bound]

    def count(self) -> int:
        return sum(e - s for s, e in self.ranges)


@dataclass
class Delivery:
    """Entries [start, end) dispatched and not yet acknowledged."""

    start: int
    end: int
    consumer: str | None  # None: released, waiting to be (re)delivered
    deadline: int | None = None  # ack timeout: released after this instant (ms)
    redelivery_count: int = 0  # what the next delivery of these entries reports
    request_id: str = ""
    not_before: int = 0  # not handed out before this instant (negative-ack delay, delayed delivery)
    sent: bool = True  # False: assigned to `consumer` but not handed out yet (Key_Shared)
    key_hash: int | None = None  # Key_Shared: one entry per delivery, routed by this hash

    def to_list(self) -> list[Any]:
        return [self.start, self.end, self.consumer, self.deadline, self.redelivery_count, self.request_id,
                self.not_before, self.sent, self.key_hash]

    @classmethod
    def from_list(cls, v: list[Any]) -> Delivery:
        return cls(*v)

    def release(self, not_before: int = 0) -> None:
        """Back to the pool; a delivery the consumer had seen counts one more redelivery."""
        if self.sent and self.consumer is not None:
            self.redelivery_count += 1
        self.consumer, self.deadline, self.sent, self.request_id = None, None, False, ""
        self.not_before = max(self.not_before, not_before)


@dataclass
class ConsumerLease:
    expires_at: int
    ack_timeout_ms: int = 0
    attached_at: int = 0
    key_shared: KeySharedPolicy = AUTO_SPLIT  # Key_Shared subscriptions only
    priority: int = 0  # Pulsar's priorityLevel: 0 the highest; Failover picks among the highest first


def _lease(stored: list[Any], priority: int) -> ConsumerLease:
    """A lease as `CursorState.to_dict` stores it: [expires, ack timeout, attached at(, policy)]."""
    lease = ConsumerLease(*stored[:3])
    if len(stored) > 3:
        lease.key_shared = KeySharedPolicy.from_list(stored[3])
    lease.priority = priority
    return lease


@dataclass
class CursorState:
    subscription_type: str
    mark_delete: int
    read_position: int
    acked: list[list[int]] = field(default_factory=list)
    batch_acks: dict[str, list[int]] = field(default_factory=dict)  # entry -> [size, acked indexes...]
    deliveries: list[Delivery] = field(default_factory=list)
    consumers: dict[str, ConsumerLease] = field(default_factory=dict)
    epoch: int = 0
    created_at: int = 0
    # delivered to consumers: totals and one-minute moving averages per second (topic stats),
    # updated by the dispatch write that hands entries out, never by a write of their own
    out_messages: int = 0
    out_bytes: int = 0
    rate_out: tuple[float, float, int] = (0.0, 0.0, 0)  # (messages/s, bytes/s, at ms)
    # of those, messages handed out again (their redelivery count above 0: negative acks, ack
    # timeouts, consumers gone): messages/s, a moving average kept at rate_out's instant
    rate_redeliver: float = 0.0
    # dispatch rate (Pulsar's dispatchRate): messages and bytes handed out in the current period,
    # (period start ms, messages, bytes); kept by the dispatch write, only while a limit is set
    dispatch_window: tuple[int, int, int] = (0, 0, 0)
    # a replicated subscription (Pulsar's replicate_subscription_state): its position crosses to the
    # other clusters of the topic; `origin_acked` is, per cluster messages were first published in,
    # the highest id there whose entries before this subscription's mark-delete position are all
    # acknowledged, scanned up to `origin_scanned` (core.replication)
    replicated: bool = False
    origin_scanned: int = 0
    origin_acked: dict[str, int] = field(default_factory=dict)
    # when the acknowledgement path last wrote the subscription's snapshot for the other clusters
    # (ms), and `origin_acked` as the maintenance run last sent it (core.replicated_subscriptions)
    snapshot_at: int = 0
    origin_sent: dict[str, int] = field(default_factory=dict)

    # --- persistence: compact, the item is limited to 400 KB ------------------------------
    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "t": self.subscription_type, "md": self.mark_delete, "rp": self.read_position,
            "a": [list(r) for r in self.acked],  # copies: a snapshot must not change with the state
            "ba": {k: list(v) for k, v in self.batch_acks.items()}, "d": [d.to_list() for d in self.deliveries],
            "c": {k: [v.expires_at, v.ack_timeout_ms, v.attached_at]
                  + ([v.key_shared.to_list()] if v.key_shared != AUTO_SPLIT else [])
                  for k, v in self.consumers.items()},
            "e": self.epoch, "ca": self.created_at,
            "o": [self.out_messages, self.out_bytes, round(self.rate_out[0], 4), round(self.rate_out[1], 2),
                  self.rate_out[2]],
        }
        if self.rate_redeliver:  # written once something was redelivered (older items stay readable)
            data["o"].append(round(self.rate_redeliver, 4))
        if self.dispatch_window[0]:
            data["dw"] = list(self.dispatch_window)
        priorities = {k: v.priority for k, v in self.consumers.items() if v.priority}
        if priorities:  # written only when some consumer has a priority level (older items stay readable)
            data["cp"] = priorities
        if self.replicated:
            data["rs"] = [self.origin_scanned, dict(self.origin_acked), self.snapshot_at, dict(self.origin_sent)]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CursorState:
        return cls(
            subscription_type=data["t"], mark_delete=data["md"], read_position=data["rp"], acked=data.get("a", []),
            batch_acks=data.get("ba", {}), deliveries=[Delivery.from_list(d) for d in data.get("d", [])],
            consumers={k: _lease(v, int(data.get("cp", {}).get(k, 0))) for k, v in data.get("c", {}).items()},
            epoch=data.get("e", 0), created_at=data.get("ca", 0),
            out_messages=data.get("o", [0])[0], out_bytes=data.get("o", [0, 0])[1],
            rate_out=tuple(data["o"][2:5]) if "o" in data else (0.0, 0.0, 0),
            rate_redeliver=data["o"][5] if len(data.get("o", ())) > 5 else 0.0,
            dispatch_window=tuple(data["dw"]) if "dw" in data else (0, 0, 0),
            replicated="rs" in data, origin_scanned=data["rs"][0] if "rs" in data else 0,
            origin_acked=dict(data["rs"][1]) if "rs" in data else {},
            snapshot_at=data["rs"][2] if len(data.get("rs", ())) > 2 else 0,
            origin_sent=dict(data["rs"][3]) if len(data.get("rs", ())) > 3 else {},
        )

    # --- consumers -----------------------------------------------------------------------
    def live_consumers(self, now: int) -> list[str]:
        return sorted(name for name, lease in self.consumers.items() if lease.expires_at > now)

    def attach(self, consumer: str, subscription_type: str, now: int, lease_ms: int, ack_timeout_ms: int,
               key_shared: KeySharedPolicy | None = None, priority: int | None = None) -> None:
        """Attach or renew a consumer, enforcing Pulsar's exclusivity rules, and on Key_Shared its
        policy's (`key_shared` None: keep the lease's, as a renewal does; `priority` None likewise)."""
        others = [c for c in self.live_consumers(now) if c != consumer]
        if others and subscription_type != self.subscription_type:
            raise ConsumerBusy(
                f"Subscription is of type {self.subscription_type}, cannot attach a {subscription_type} consumer"
            )
        if not others:
            self.subscription_type = subscription_type
        if self.subscription_type == "Exclusive" and others:
            raise ConsumerBusy("Exclusive consumer is already connected")
        lease = self.consumers.get(consumer)
        attached_at = lease.attached_at if lease and lease.expires_at > now else now
        policy = key_shared if key_shared is not None else (lease.key_shared if lease else AUTO_SPLIT)
        if self.subscription_type != "Key_Shared":
            policy = AUTO_SPLIT  # Pulsar ignores a Key_Shared policy on other subscription types
        elif key_shared is not None:
            self._check_key_shared(policy, [self.consumers[c].key_shared for c in others], others)
        level = priority if priority is not None else (lease.priority if lease else 0)
        self.consumers[consumer] = ConsumerLease(now + lease_ms, ack_timeout_ms, attached_at, policy, level)

    @staticmethod
    def _check_key_shared(policy: KeySharedPolicy, theirs: list[KeySharedPolicy], names: list[str]) -> None:
        """Pulsar's rules for a consumer joining a Key_Shared subscription: the same mode and
        out-of-order setting as the consumers attached (else ConsumerBusy, as Pulsar's
        "Subscription is of different type"), and Sticky ranges no other consumer holds."""
        policy.check()
        for other, name in zip(theirs, names, strict=True):
            if other.mode != policy.mode or other.out_of_order != policy.out_of_order:
                raise ConsumerBusy(
                    f"Subscription is of different type: Key_Shared {other.mode} (allowOutOfOrderDelivery "
                    f"{str(other.out_of_order).lower()}), cannot attach a Key_Shared {policy.mode} consumer "
                    f"(allowOutOfOrderDelivery {str(policy.out_of_order).lower()})")
            if policy.overlaps(other):
                raise ConsumerAssignError(f"Range conflict with consumer {name}")

    def detach(self, consumer: str) -> None:
        """A closed consumer's unacknowledged entries go back for redelivery (Pulsar's behaviour)."""
        self.consumers.pop(consumer, None)
        for d in self.deliveries:
            if d.consumer == consumer:
                d.release()

    def expire(self, now: int) -> None:
        """Release deliveries of consumers whose lease ran out, and those past their ack timeout."""
        for name in [n for n, lease in self.consumers.items() if lease.expires_at <= now]:
            self.detach(name)
        for d in self.deliveries:
            if d.consumer is not None and d.sent and d.deadline is not None and d.deadline <= now:
                d.release()

    def active_consumer(self, now: int, partition: int) -> str | None:
        """Failover: the consumers of the highest priority level (the lowest `priorityLevel`) sorted
        by name; partition i goes to the i mod n-th of them (Pulsar's rule)."""
        live = self.live_consumers(now)
        if not live:
            return None
        highest = min(self.consumers[c].priority for c in live)
        live = [c for c in live if self.consumers[c].priority == highest]
        return live[max(partition, 0) % len(live)]

    def partition_owner(self, now: int, partition: int = -1, partitions: int = 0) -> str | None:
        """Key_Shared AutoSplit on partition `partition` of a partitioned topic of `partitions`
        partitions, when there are at least as many partitions as live consumers: the one consumer
        that owns every key of the partition, the live consumers sorted by name taking partition i
        in turn (i mod n). None otherwise (a non-partitioned topic, Sticky ranges, more consumers
        than partitions, no live consumer): keys are split by their hash."""
        return self._partition_owner(self.live_consumers(now), partition, partitions)

    def splits_keys(self, live: list[str]) -> bool:
        """Key_Shared in AutoSplit mode (no Sticky ranges) with `live` consumers: the dispatcher,
        not the consumers' own ranges, decides which consumer gets which key."""
        return self.subscription_type == "Key_Shared" and bool(live) and self.consumers[live[0]].key_shared.ranges is None

    def _partition_owner(self, live: list[str], partition: int, partitions: int) -> str | None:
        if partition < 0 or partitions < len(live) or not self.splits_keys(live):
            return None
        return live[partition % len(live)]

    def key_owner(self, hash_value: int, now: int, partition: int = -1, partitions: int = 0) -> str | None:
        """Key_Shared: the consumer a key's entries go to. On a partition of a partitioned topic
        (`partition` >= 0 of `partitions`) in AutoSplit mode with at least as many partitions as
        live consumers, the partition's owner (`partition_owner`); else AutoSplit, the live
        consumers, sorted by name, split the hash range evenly; Sticky, the consumer whose ranges
        hold the hash (None, so the key waits, if none does)."""
        live = self.live_consumers(now)
        owner = self._partition_owner(live, partition, partitions)
        if owner is not None:
            return owner
        if live and self.consumers[live[0]].key_shared.ranges is not None:
            return next((c for c in live if self.consumers[c].key_shared.covers(hash_value)), None)
        return live[hash_value * len(live) // HASH_RANGE] if live else None

    # --- dispatch ------------------------------------------------------------------------
    def deliveries_of_request(self, consumer: str, request_id: str) -> list[Delivery]:
        return [d for d in self.deliveries if request_id and d.request_id == request_id and d.consumer == consumer
                and d.sent]

    def _split(self, d: Delivery, count: int) -> Delivery:
        """Cut the first `count` entries off `d` into a delivery of their own."""
        if d.end - d.start <= count:
            return d
        head = Delivery(d.start, d.start + count, d.consumer, d.deadline, d.redelivery_count, d.request_id,
                        d.not_before, d.sent, d.key_hash)
        d.start += count
        self.deliveries.append(head)
        return head

    def ready_for(self, consumer: str, now: int, partition: int = -1, partitions: int = 0,
                  assign: bool = True) -> list[Delivery]:
        """What may be handed to `consumer` now, oldest first: entries assigned to it and not yet
        sent, and released entries that are due. Key_Shared keeps each key on one consumer at a
        time (`key_owner`, given this cursor's partition and the topic's partition count): a key
        still held (sent, unacknowledged) by another consumer waits until it is acked (Pulsar's
        "draining hashes"; not with allowOutOfOrderDelivery), and no entry of a key overtakes an
        older one that waits. `assign` False: only look, leave the waiting entries' owners as
        they are (a step that hands nothing out then changes nothing)."""
        key_shared = self.subscription_type == "Key_Shared"
        lease = self.consumers.get(consumer)
        in_order = key_shared and not (lease is not None and lease.key_shared.out_of_order)
        held_elsewhere = {d.key_hash for d in self.deliveries if in_order and d.sent and d.consumer not in (None, consumer)}
        blocked: set[int | None] = set()
        out: list[Delivery] = []
        for d in sorted(self.deliveries, key=lambda x: x.start):
            if d.sent:
                continue
            if d.not_before > now:
                blocked.add(d.key_hash)
                continue
            if key_shared:
                owner = self.key_owner(d.key_hash or 0, now, partition, partitions)
                if assign:
                    d.consumer = owner  # not sent yet, so it may move when consumers come and go
                if owner != consumer or d.key_hash in held_elsewhere or d.key_hash in blocked:
                    blocked.add(d.key_hash)
                    continue
            elif d.consumer not in (None, consumer):
                continue
            out.append(d)
        return out

    def hand_out(self, d: Delivery, count: int, consumer: str, deadline: int | None, request_id: str) -> Delivery:
        """Mark the first `count` entries of `d` sent to `consumer`."""
        part = self._split(d, count)
        part.consumer, part.sent, part.deadline, part.request_id = consumer, True, deadline, request_id
        return part

    def add_new(self, start: int, end: int, consumer: str | None, sent: bool, deadline: int | None,
                request_id: str, not_before: int = 0, key_hash: int | None = None) -> Delivery:
        delivery = Delivery(start, end, consumer, deadline if sent else None, 0, request_id if sent else "",
                            not_before, sent, key_hash)
        self.deliveries.append(delivery)
        self.read_position = max(self.read_position, end)
        return delivery

    def compact(self) -> None:
        """Merge adjacent deliveries with the same attributes (keeps the item small)."""
        merged: list[Delivery] = []
        for d in sorted(self.deliveries, key=lambda x: x.start):
            last = merged[-1] if merged else None
            if (last is not None and last.end == d.start and last.key_hash is None and d.key_hash is None
                    and last.to_list()[2:] == d.to_list()[2:]):
                last.end = d.end
            else:
                merged.append(d)
        self.deliveries = merged

    # --- acknowledgement -----------------------------------------------------------------
    def acknowledge(self, entry_ids: list[int], batch_indexes: dict[int, tuple[int, list[int]]] | None = None) -> None:
        """Acknowledge whole entries, and single messages of batch entries ((size, indexes) by entry)."""
        whole = list(entry_ids)
        acked = RangeSet(self.acked)
        for entry, (size, indexes) in (batch_indexes or {}).items():
            if not (self.mark_delete <= entry < self.read_position) or entry in acked:
                continue  # (acknowledged whole already: the same acknowledgement again changes nothing)
            done = set(self.batch_acks.get(str(entry), [size])[1:]) | {i for i in indexes if 0 <= i < size}
            if len(done) >= size:
                whole.append(entry)
                self.batch_acks.pop(str(entry), None)
            else:
                self.batch_acks[str(entry)] = [size, *sorted(done)]
        for entry in whole:
            if entry < 0:
                raise InvalidInput(f"Invalid entry id {entry}")
            if self.mark_delete <= entry < self.read_position:
                acked.add(entry, entry + 1)
                self._remove_from_deliveries(entry, entry + 1)
                self.batch_acks.pop(str(entry), None)
        self.acked = acked.ranges
        self._advance_mark_delete()

    def acknowledge_cumulative(self, entry_id: int) -> None:
        """Acknowledge every entry up to and including `entry_id`."""
        upto = min(entry_id + 1, self.read_position)
        if upto <= self.mark_delete:
            return
        self.mark_delete = upto
        self._remove_from_deliveries(0, upto)
        acked = RangeSet(self.acked)
        acked.drop_below(upto)
        self.acked = acked.ranges
        self.batch_acks = {k: v for k, v in self.batch_acks.items() if int(k) >= upto}
        self._advance_mark_delete()

    def negative_acknowledge(self, consumer: str, entry_ids: list[int], not_before: int) -> None:
        for entry in entry_ids:
            for d in list(self.deliveries):
                if d.start <= entry < d.end and d.consumer == consumer and d.sent:
                    self._isolate(d, entry).release(not_before)

    def return_unsent(self, consumer: str, entry_ids: list[int]) -> None:
        """Entries claimed for `consumer` that never reached it (the push was refused) go back to
        the pool as they were: not counted as a redelivery."""
        for entry in entry_ids:
            for d in list(self.deliveries):
                if d.start <= entry < d.end and d.consumer == consumer:
                    piece = self._isolate(d, entry)
                    piece.sent = False
                    piece.release()

    def redeliver_unacknowledged(self, consumer: str) -> None:
        for d in self.deliveries:
            if d.consumer == consumer and d.sent:
                d.release()

    def seek(self, position: int) -> None:
        """Reset the subscription to `position` for every consumer (Pulsar's seek)."""
        position = max(0, position)
        self.mark_delete = self.read_position = position
        self.acked, self.batch_acks, self.deliveries = [], {}, []
        self.epoch += 1

    def _isolate(self, d: Delivery, entry: int) -> Delivery:
        """The single-entry delivery for `entry`, split out of `d`."""
        if d.start < entry:
            self._split(d, entry - d.start)
        return self._split(d, 1)

    def _remove_from_deliveries(self, start: int, end: int) -> None:
        kept: list[Delivery] = []
        for d in self.deliveries:
            if d.end <= start or d.start >= end:
                kept.append(d)
                continue
            if d.start < start:
                kept.append(Delivery(d.start, start, *d.to_list()[2:]))
            if d.end > end:
                kept.append(Delivery(end, d.end, *d.to_list()[2:]))
        self.deliveries = kept

    def _advance_mark_delete(self) -> None:
        acked = RangeSet(self.acked)
        while acked.ranges and acked.ranges[0][0] <= self.mark_delete:
            self.mark_delete = max(self.mark_delete, acked.ranges[0][1])
            acked.ranges.pop(0)
        self.acked = acked.ranges

    def expire_before(self, position: int) -> int:
        """Acknowledge every entry below `position` (message TTL, backlog eviction: Pulsar's
        expireMessages); the number of entries it acknowledged."""
        if position <= self.mark_delete:
            return 0
        acked_before = RangeSet(self.acked)
        acked_before.drop_below(self.mark_delete)
        already = sum(min(e, position) - s for s, e in acked_before.ranges if s < position)
        expired = position - self.mark_delete - already
        self.read_position = max(self.read_position, position)
        self.acknowledge_cumulative(position - 1)
        return expired

    def record_out(self, messages: int, size: int, now: int, redelivered: int = 0) -> None:
        """Count what a dispatch handed out (`redelivered`: how many of those `messages` were
        handed out before) in the totals and the moving averages."""
        rate_msgs, rate_bytes, at = self.rate_out
        self.out_messages += messages
        self.out_bytes += size
        self.rate_redeliver = ewma_add(self.rate_redeliver, at, redelivered, now)
        self.rate_out = (ewma_add(rate_msgs, at, messages, now), ewma_add(rate_bytes, at, size, now), now)

    def count_dispatch(self, period_start: int, messages: int, size: int) -> None:
        """Count what a dispatch handed out against the dispatch rate's current period."""
        start, msgs, total = self.dispatch_window
        if start != period_start:
            msgs = total = 0
        self.dispatch_window = (period_start, msgs + messages, total + size)

    def backlog(self, end: int) -> int:
        """Entries not acknowledged yet, up to the topic's end (Pulsar's msgBacklog, in entries)."""
        acked = RangeSet(self.acked)
        acked.drop_below(self.mark_delete)
        return max(0, end - self.mark_delete - sum(min(e, end) - s for s, e in acked.ranges if s < end))

    def unacked(self) -> int:
        """Entries handed to consumers and not acknowledged (Pulsar's unackedMessages, in entries)."""
        return sum(d.end - d.start for d in self.deliveries if d.sent and d.consumer is not None)

    # --- figures -------------------------------------------------------------------------
    def acked_indexes(self, entry: int) -> list[int]:
        return self.batch_acks.get(str(entry), [0])[1:]
