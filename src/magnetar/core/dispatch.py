"""Dispatch: subscriptions, consumers, receive and acknowledge over durable cursors.

Every step reads the cursor (with the seal and writer states, in one round trip), changes it in
memory with the pure operations of `CursorState`, and writes it back with a conditional write on
its version. Two Lambdas serving the same subscription never hand out the same entry: the loser
of the race re-reads and tries again.
"""

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from magnetar.core.crashpoints import crash_point
from magnetar.core.cursor import SUBSCRIPTION_TYPES, CursorState, Delivery
from magnetar.core.entry import Entry
from magnetar.core.errors import InvalidInput, NotAllowed, RetryableError, SubscriptionNotFound
from magnetar.core.ledger import EntryReader, ensure_topic
from magnetar.core.naming import TopicName, check_consumer_name, check_subscription
from magnetar.core.ports import Clock, MetadataStore, SubscriptionView

log = logging.getLogger(__name__)

DEFAULT_LEASE_MS = 30_000  # a consumer is attached while it renews this lease (SDK heartbeats)
MAX_WAIT_MS = 20_000  # a long poll stays well inside API Gateway's 30 s integration timeout
POLL_INTERVAL_S = 0.2
FILL_POLL_INTERVAL_S = 0.05  # while waiting for min_messages, with some already there
MAX_ENTRIES_PER_RECEIVE = 100
MAX_RECEIVE_BYTES = 4 * 1024 * 1024  # base64 in JSON must stay under Lambda's 6 MB response
CONFLICT_RETRIES = 20
UNKNOWN_END = 2**62  # "the writer may be anywhere": the journal tail read finds out


@dataclass(frozen=True)
class Acks:
    """Acknowledgements: entry ids, and everything up to and including `cumulative`."""

    entries: tuple[int, ...] = ()
    cumulative: int | None = None

    def __bool__(self) -> bool:
        return bool(self.entries) or self.cumulative is not None

    def apply(self, state: CursorState) -> None:
        if self.cumulative is not None:
            if state.subscription_type in ("Shared", "Key_Shared"):
                raise NotAllowed(f"Cumulative acknowledgement is not allowed on a {state.subscription_type} subscription")
            state.acknowledge_cumulative(self.cumulative)
        if self.entries:
            state.acknowledge(list(self.entries))


NO_ACKS = Acks()


@dataclass(frozen=True)
class DeliveredEntry:
    entry: Entry
    redelivery_count: int


class SubscriptionService:
    def __init__(self, metadata: MetadataStore, reader: EntryReader, clock: Clock) -> None:
        self.metadata = metadata
        self.reader = reader
        self.clock = clock

    # --- subscribe / close ---------------------------------------------------------------
    def subscribe(
        self,
        topic: TopicName,
        subscription: str,
        consumer: str,
        subscription_type: str = "Exclusive",
        initial_position: str = "Latest",
        ack_timeout_ms: int = 0,
        lease_ms: int = DEFAULT_LEASE_MS,
    ) -> CursorState:
        check_subscription(subscription)
        check_consumer_name(consumer)
        if subscription_type not in SUBSCRIPTION_TYPES:
            raise InvalidInput(f"Invalid subscription type {subscription_type!r}; one of {', '.join(SUBSCRIPTION_TYPES)}")
        if subscription_type in ("Failover", "Key_Shared"):
            raise InvalidInput(f"Subscription type {subscription_type} is not supported yet")
        if initial_position not in ("Earliest", "Latest"):
            raise InvalidInput(f"Invalid initial position {initial_position!r}; Earliest or Latest")
        if ack_timeout_ms < 0 or lease_ms <= 0:
            raise InvalidInput("Timeouts must be positive")

        def change(state: CursorState, now: int) -> None:
            state.expire(now)
            state.attach(consumer, subscription_type, now, lease_ms, ack_timeout_ms)

        view = self.metadata.get_subscription_view(topic, subscription)
        if view.writer is None:
            ensure_topic(self.metadata, topic, self.clock.now_ms())
        return self._update(topic, subscription, change, create=(subscription_type, initial_position))

    def close_consumer(self, topic: TopicName, subscription: str, consumer: str) -> None:
        self._update(topic, subscription, lambda state, now: state.detach(consumer))

    # --- receive ---------------------------------------------------------------------------
    def receive(
        self,
        topic: TopicName,
        subscription: str,
        consumer: str,
        max_messages: int = 1000,
        wait_ms: int = 0,
        request_id: str = "",
        acks: Acks = NO_ACKS,
        min_messages: int = 1,
    ) -> list[DeliveredEntry]:
        """Long-poll: hand out up to `max_messages` (whole entries, at least one) to `consumer`.

        The poll returns as soon as `min_messages` are available, or when `wait_ms` has passed
        with whatever there is (Pulsar's batch-receive policy; Kafka's fetch.min.bytes): a
        throughput-minded consumer trades a little latency for fewer, fuller requests.
        `acks` ride along (Pulsar's grouped acks): they are applied in the same cursor write as
        the claim, so an active consumer's acknowledgements cost no request of their own.
        """
        if max_messages <= 0:
            raise InvalidInput("maxMessages must be positive")
        min_messages = max(1, min(min_messages, max_messages))
        deadline = self.clock.now_ms() + min(max(wait_ms, 0), MAX_WAIT_MS)
        refill: SubscriptionView | None = None
        while True:
            final = self.clock.now_ms() >= deadline
            delivered, refill = self._receive_once(
                topic, subscription, consumer, max_messages, request_id, acks, 1 if final else min_messages, refill
            )
            if delivered is not None:
                acks = NO_ACKS  # written with the cursor
                if delivered or final:
                    return delivered
                self.clock.sleep(POLL_INTERVAL_S)
            else:  # some ready, not enough: wait half the time left (at least FILL_POLL_INTERVAL_S)
                left_s = (deadline - self.clock.now_ms()) / 1000
                self.clock.sleep(max(FILL_POLL_INTERVAL_S, min(left_s / 2, left_s)))

    def _receive_once(
        self,
        topic: TopicName,
        subscription: str,
        consumer: str,
        max_messages: int,
        request_id: str,
        acks: Acks,
        min_messages: int,
        refill: SubscriptionView | None,
    ) -> tuple[list[DeliveredEntry] | None, SubscriptionView | None]:
        """One dispatch step; (None, view) when fewer than `min_messages` are ready (nothing written).

        The view returned with None lets the next step of the same poll skip re-reading the
        cursor: it only looks at the journal tail again, and its conditional write still
        catches any change made meanwhile (then the loop re-reads).
        """
        for attempt in range(CONFLICT_RETRIES):
            if attempt == 0 and refill is not None:
                view = refill
            else:
                view = self.metadata.get_subscription_view(topic, subscription)
            pristine = copy.deepcopy(view)
            if view.cursor is None:
                raise SubscriptionNotFound(f"Subscription {subscription} not found on {topic}")
            now = self.clock.now_ms()
            state = view.cursor
            before = state.to_dict()
            acks.apply(state)
            state.expire(now)
            lease = state.consumers.get(consumer)
            if lease is None:
                raise SubscriptionNotFound(f"Consumer {consumer} is not attached to {subscription}; subscribe again")
            if lease.expires_at - now < DEFAULT_LEASE_MS // 2:  # renew, but not on every poll
                state.attach(consumer, state.subscription_type, now, DEFAULT_LEASE_MS, lease.ack_timeout_ms)
            retried = state.deliveries_of_request(consumer, request_id)
            if retried:  # the same receive again (a client retry after a lost response)
                entries = self._fetch(topic, view, retried)
                if self.metadata.put_cursor(topic, subscription, state, view.cursor_version):
                    return entries, None
                continue
            delivered = self._claim(topic, view, state, consumer, max_messages, now, lease.ack_timeout_ms, request_id)
            if sum(len(d.entry.messages) for d in delivered) < min_messages and delivered:
                return None, _unbounded_tail(pristine)  # not enough yet: keep waiting, write nothing
            if not delivered and state.to_dict() == before:
                return [], None  # nothing to hand out and nothing changed: no write
            if self.metadata.put_cursor(topic, subscription, state, view.cursor_version):
                crash_point("dispatch.after_claim")  # claimed, not delivered: the retried receive gets them
                return delivered, None
            self.clock.sleep(random.uniform(0.0, 0.02))
        raise RetryableError("Too much contention on the subscription; retry")

    def _claim(
        self,
        topic: TopicName,
        view: SubscriptionView,
        state: CursorState,
        consumer: str,
        max_messages: int,
        now: int,
        ack_timeout_ms: int,
        request_id: str,
    ) -> list[DeliveredEntry]:
        deadline = now + ack_timeout_ms if ack_timeout_ms > 0 else None
        budget_entries = MAX_ENTRIES_PER_RECEIVE
        out: list[DeliveredEntry] = []
        redeliveries = state.claim_redeliveries(consumer, budget_entries, deadline, request_id)
        if redeliveries:
            out.extend(self._fetch(topic, view, redeliveries))
        messages = sum(len(d.entry.messages) for d in out)
        if messages >= max_messages or len(out) >= budget_entries:
            return out
        entries = self.reader.read(
            topic, state.read_position, budget_entries - len(out), view.seal, view.writer
        )
        taken: list[Entry] = []
        size = sum(d.entry.size for d in out)
        for entry in entries:
            if (out or taken) and (messages + len(entry.messages) > max_messages or size + entry.size > MAX_RECEIVE_BYTES):
                break
            taken.append(entry)
            messages += len(entry.messages)
            size += entry.size
        if taken:
            end = taken[-1].entry_id + 1
            state.claim_new(consumer, end, deadline, request_id)
            holes = [e.entry_id for e in taken if e.hole]
            if holes:
                state.acknowledge(holes)
            out.extend(DeliveredEntry(e, 0) for e in taken if not e.hole)
        return out

    def _fetch(self, topic: TopicName, view: SubscriptionView, deliveries: list[Delivery]) -> list[DeliveredEntry]:
        out: list[DeliveredEntry] = []
        for d in sorted(deliveries, key=lambda x: x.start):
            entries = self.reader.read(topic, d.start, d.end - d.start, view.seal, view.writer)
            out.extend(DeliveredEntry(e, d.redelivery_count) for e in entries if not e.hole and e.entry_id < d.end)
        return out

    # --- acknowledge ---------------------------------------------------------------------
    def acknowledge(
        self,
        topic: TopicName,
        subscription: str,
        entry_ids: list[int],
        cumulative_entry: int | None = None,
    ) -> CursorState:
        acks = Acks(tuple(entry_ids), cumulative_entry)
        return self._update(topic, subscription, lambda state, now: acks.apply(state))

    # --- plumbing ------------------------------------------------------------------------
    def _update(
        self,
        topic: TopicName,
        subscription: str,
        change: Callable[[CursorState, int], None],
        create: tuple[str, str] | None = None,
    ) -> CursorState:
        """Read-modify-write of a cursor with optimistic concurrency; creates it if asked."""
        for _ in range(CONFLICT_RETRIES):
            view = self.metadata.get_subscription_view(topic, subscription)
            now = self.clock.now_ms()
            if view.cursor is None:
                if create is None:
                    raise SubscriptionNotFound(f"Subscription {subscription} not found on {topic}")
                sub_type, initial = create
                end = view.writer.next_entry if view.writer else 0
                start = end if initial == "Latest" else first_available_entry(view)
                state = CursorState(sub_type, mark_delete=start, read_position=start, created_at=now)
            else:
                state = view.cursor
            change(state, now)
            if self.metadata.put_cursor(topic, subscription, state, view.cursor_version):
                crash_point("cursor.after_update")  # cursor moved, caller not told: retrying is harmless
                return state
            self.clock.sleep(random.uniform(0.0, 0.02))
        raise RetryableError("Too much contention on the subscription; retry")


def _unbounded_tail(view: SubscriptionView) -> SubscriptionView:
    """A re-used view does not know how far the writer got since: let the tail read tell."""
    if view.writer is not None:
        view.writer = replace(view.writer, next_entry=UNKNOWN_END)
    return view


def first_available_entry(view: SubscriptionView) -> int:
    """The oldest entry still stored (0 until ledger trimming exists)."""
    return 0
