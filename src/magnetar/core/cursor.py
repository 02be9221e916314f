"""A durable subscription cursor, Pulsar's ManagedCursor reduced to its state.

Entry ids are dense integers within a topic partition, so positions are plain ints:
- `mark_delete`: every entry below it is acknowledged (Pulsar's mark-delete position + 1);
- `acked`: individually acknowledged ranges above it (Pulsar's individualDeletedMessages);
- `read_position`: the next entry never dispatched;
- `deliveries`: dispatched, unacknowledged ranges, each owned by a consumer or by nobody
  (waiting for redelivery), with the redelivery count Pulsar reports;
- `consumers`: the attached consumers and their leases (a stateless broker sees no TCP close,
  so a consumer is attached while its lease is renewed).

All operations are pure changes of this state; the dispatcher persists it with a conditional
write, so any Lambda may change any cursor and concurrent changes never interleave.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from magnetar.core.errors import ConsumerBusy, InvalidInput

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
    consumer: str | None  # None: waiting to be redelivered
    deadline: int | None  # ack timeout: redeliverable after this instant (ms)
    redelivery_count: int = 0
    request_id: str = ""


@dataclass
class ConsumerLease:
    expires_at: int
    ack_timeout_ms: int = 0
    attached_at: int = 0


@dataclass
class CursorState:
    subscription_type: str
    mark_delete: int
    read_position: int
    acked: list[list[int]] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    consumers: dict[str, ConsumerLease] = field(default_factory=dict)
    created_at: int = 0

    # --- persistence ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CursorState:
        return cls(
            subscription_type=data["subscription_type"],
            mark_delete=data["mark_delete"],
            read_position=data["read_position"],
            acked=data.get("acked", []),
            deliveries=[Delivery(**d) for d in data.get("deliveries", [])],
            consumers={k: ConsumerLease(**v) for k, v in data.get("consumers", {}).items()},
            created_at=data.get("created_at", 0),
        )

    # --- consumers -----------------------------------------------------------------------
    def live_consumers(self, now: int) -> list[str]:
        return sorted(name for name, lease in self.consumers.items() if lease.expires_at > now)

    def attach(self, consumer: str, subscription_type: str, now: int, lease_ms: int, ack_timeout_ms: int) -> None:
        """Attach or renew a consumer, enforcing Pulsar's exclusivity rules."""
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
        self.consumers[consumer] = ConsumerLease(now + lease_ms, ack_timeout_ms, attached_at)

    def detach(self, consumer: str) -> None:
        """A closed consumer's unacknowledged entries go back for redelivery (Pulsar's behaviour)."""
        self.consumers.pop(consumer, None)
        for d in self.deliveries:
            if d.consumer == consumer:
                d.consumer = None

    def expire(self, now: int) -> None:
        """Release deliveries of consumers whose lease ran out, and those past their ack timeout."""
        for name in [n for n, lease in self.consumers.items() if lease.expires_at <= now]:
            self.detach(name)
        for d in self.deliveries:
            if d.consumer is not None and d.deadline is not None and d.deadline <= now:
                d.consumer = None

    # --- dispatch ------------------------------------------------------------------------
    def deliveries_of_request(self, consumer: str, request_id: str) -> list[Delivery]:
        return [d for d in self.deliveries if request_id and d.request_id == request_id and d.consumer == consumer]

    def claim_redeliveries(
        self, consumer: str, max_entries: int, deadline: int | None, request_id: str
    ) -> list[Delivery]:
        """Give unowned deliveries, oldest first, to `consumer` (each counts one more redelivery)."""
        claimed: list[Delivery] = []
        budget = max_entries
        kept: list[Delivery] = []
        for d in sorted(self.deliveries, key=lambda x: x.start):
            if d.consumer is None and budget > 0:
                take_end = min(d.end, d.start + budget)
                got = Delivery(d.start, take_end, consumer, deadline, d.redelivery_count + 1, request_id)
                claimed.append(got)
                kept.append(got)
                budget -= take_end - d.start
                if take_end < d.end:
                    kept.append(Delivery(take_end, d.end, None, None, d.redelivery_count, d.request_id))
            else:
                kept.append(d)
        self.deliveries = kept
        return claimed

    def claim_new(self, consumer: str, end: int, deadline: int | None, request_id: str) -> Delivery | None:
        if end <= self.read_position:
            return None
        delivery = Delivery(self.read_position, end, consumer, deadline, 0, request_id)
        self.deliveries.append(delivery)
        self.read_position = end
        return delivery

    # --- acknowledgement -----------------------------------------------------------------
    def acknowledge(self, entry_ids: list[int]) -> None:
        acked = RangeSet(self.acked)
        for entry in entry_ids:
            if entry < 0:
                raise InvalidInput(f"Invalid entry id {entry}")
            if self.mark_delete <= entry < self.read_position:
                acked.add(entry, entry + 1)
                self._remove_from_deliveries(entry, entry + 1)
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
        self._advance_mark_delete()

    def _remove_from_deliveries(self, start: int, end: int) -> None:
        kept: list[Delivery] = []
        for d in self.deliveries:
            if d.end <= start or d.start >= end:
                kept.append(d)
                continue
            if d.start < start:
                kept.append(Delivery(d.start, start, d.consumer, d.deadline, d.redelivery_count, d.request_id))
            if d.end > end:
                kept.append(Delivery(end, d.end, d.consumer, d.deadline, d.redelivery_count, d.request_id))
        self.deliveries = kept

    def _advance_mark_delete(self) -> None:
        acked = RangeSet(self.acked)
        while acked.ranges and acked.ranges[0][0] <= self.mark_delete:
            self.mark_delete = max(self.mark_delete, acked.ranges[0][1])
            acked.ranges.pop(0)
        self.acked = acked.ranges

    # --- figures -------------------------------------------------------------------------
    def backlog_entries(self, end: int) -> int:
        """Entries not yet acknowledged below `end` (the writer's next entry)."""
        return max(0, end - self.mark_delete - RangeSet(self.acked).count())

    def unacked_entries(self) -> int:
        return sum(d.end - d.start for d in self.deliveries)
