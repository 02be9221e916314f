"""Dispatch: subscriptions, consumers, receive and acknowledge over durable cursors.

Every step reads the cursor (with the seal and writer states, in one round trip), changes it in
memory with the pure operations of `CursorState`, and writes it back with a conditional write on
its version. Two Lambdas serving the same subscription never hand out the same entry: the loser
of the race re-reads and tries again. The in-memory part is `SubscriptionService.step`, so a
receive over several partitions of a partitioned topic (`dispatch_partitions`) takes the same
step per partition and writes the cursors together.

What a step hands out (admission, claims, reads, Key_Shared partition ownership) is worked out
by `core.claims`; this module reads and writes the cursors.
"""

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from magnetar.core.acks import NO_ACKS, Acks
from magnetar.core.claims import MAX_RECEIVE_BYTES, Claims, DeliveredEntry
from magnetar.core.crashpoints import crash_point
from magnetar.core.cursor import SUBSCRIPTION_TYPES, CursorState
from magnetar.core.delaypoints import delay_point
from magnetar.core.delivery_telemetry import record_delivery
from magnetar.core.errors import (
    Conflict,
    ConsumerLimitReached,
    InvalidInput,
    NotAllowed,
    RetryableError,
    SubscriptionNotFound,
    TopicNotFound,
)
from magnetar.core.key_shared import AUTO_SPLIT, KeySharedPolicy
from magnetar.core.ledger import EntryReader, ensure_topic
from magnetar.core.ledger.pacing import next_seal_in_ms, seal_expected
from magnetar.core.metrics import DISPATCHED_MESSAGES
from magnetar.core.naming import TopicName, check_consumer_name, check_subscription
from magnetar.core.policies import TopicPolicies, subscription_limit_reason
from magnetar.core.ports import Clock, MetadataStore, SealState, SubscriptionView
from magnetar.core.ports.telemetry import NO_TELEMETRY, Telemetry
from magnetar.core.replicated_subscriptions import SubscriptionSnapshots
from magnetar.core.replication import is_replicator

log = logging.getLogger(__name__)

DEFAULT_LEASE_MS = 30_000  # a consumer is attached while it renews this lease (SDK heartbeats)
MAX_PRIORITY_LEVEL = 2**31 - 1  # Pulsar's priorityLevel is an int32, 0 the highest
MAX_WAIT_MS = 20_000  # a long poll stays well inside API Gateway's 30 s integration timeout
POLL_INTERVAL_S = 0.1  # an idle long poll looks again after this, doubling up to MAX_POLL_INTERVAL_S
MAX_POLL_INTERVAL_S = 1.0  # (each look is a DynamoDB read: idle consumers should not hammer the table)
FILL_POLL_INTERVAL_S = 0.05  # while waiting for min_messages, with some already there
# A batch receive (min_messages > 1) waiting at most this long whose consumer's previous poll here
# ended short of its count looks once, when its wait is over: a look at its start would find a
# part of the batch and wait anyway (a look is a DynamoDB read; a consumer that keeps up polls
# faster than seals come). The first poll of a consumer, or one after a full batch, looks at once.
LOOK_ONCE_MAX_WAIT_MS = 1_000
CONFLICT_RETRIES = 20
UNKNOWN_END = 2**62  # "the writer may be anywhere": the journal tail read finds out


@dataclass(frozen=True)
class Received:
    entries: list[DeliveredEntry]
    epoch: int  # the cursor's epoch: acknowledgements must carry it (a seek bumps it)
    # when the topic's next seal is due (ms from now; None: unknown): a consumer that keeps up and
    # found its batch short need not look again before then (`ledger.pacing.next_seal_in_ms`)
    next_seal_in_ms: int | None = None
    acks_applied: bool = True  # False: the acks that rode along were left for the consumer's next poll


@dataclass(frozen=True)
class _Look:
    """One look of a poll (`_receive_once`): what it handed out (None: fewer than the poll's
    minimum were ready, nothing written), the view the next look may reuse, the cursor's epoch,
    when a dispatch rate's next period starts (0: not held back), whether it left the poll's
    acknowledgements for the consumer's next poll."""

    delivered: list[DeliveredEntry] | None
    refill: SubscriptionView | None
    epoch: int
    throttled_until: int = 0
    acks_deferred: bool = False


@dataclass
class Step:
    """What one dispatch step did to a cursor in memory (`SubscriptionService.step`)."""

    delivered: list[DeliveredEntry]
    state: CursorState
    write: bool  # the cursor changed: write it back (conditionally) for the step to count
    throttled_until: int = 0  # the dispatch rate held everything back until then
    retried: bool = False  # a client's retry of a receive: `delivered` is what it was given before
    cap: int = 2**31  # the messages it might hand out at most (the dispatch rate may lower the ask)
    limited: bool = False  # a dispatch rate applies: the caller must not claim more past `cap`
    acks_only: bool = False  # nothing changed but what the acknowledgements did: no hand-out, no lease

    @property
    def messages(self) -> int:
        return sum(d.entry.num_messages for d in self.delivered)


class SubscriptionService:
    telemetry: Telemetry = NO_TELEMETRY  # messages dispatched per namespace, their latency; the spans
    # replicated subscriptions' snapshots, shared by the acknowledgement path (an instance's cluster)
    snapshots: SubscriptionSnapshots | None = None

    def __init__(self, metadata: MetadataStore, reader: EntryReader, clock: Clock,
                 policies: Callable[[TopicName], dict[str, Any]] | None = None) -> None:
        self.metadata = metadata
        self.reader = reader
        self.clock = clock
        self.policies = policies  # the topic's effective policies (cached by the ledger writer)
        self.claims = Claims(metadata, reader, clock, policies)  # the in-memory half of a step
        self._short: dict[tuple[str, str, str], bool] = {}  # (topic, subscription, consumer): last poll short
        self._seals: dict[str, SealState] = {}  # topic -> the seal state its last look here saw

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
        key_shared: KeySharedPolicy = AUTO_SPLIT,
        start_inclusive: bool = False,
        priority_level: int = 0,
        replicate_state: bool = False,
    ) -> CursorState:
        """`key_shared`: a Key_Shared consumer's policy (Sticky hash ranges, out-of-order delivery);
        `start_inclusive`: a subscription created at Latest starts at the last entry, not after it
        (pulsar-client's start_message_id_inclusive); `priority_level`: Pulsar's priorityLevel
        (0 the highest), which picks a Failover subscription's active consumers; `replicate_state`:
        Pulsar's replicate_subscription_state, the subscription's position crosses to the topic's
        other clusters (core.replication; once set, it stays)."""
        check_subscription(subscription)
        check_consumer_name(consumer)
        if is_replicator(subscription):  # as Pulsar: the replicators' cursors are not for consumers
            raise InvalidInput("Subscription with reserved subscription name attempted")
        if subscription_type not in SUBSCRIPTION_TYPES:
            raise InvalidInput(f"Invalid subscription type {subscription_type!r}; one of {', '.join(SUBSCRIPTION_TYPES)}")
        if initial_position not in ("Earliest", "Latest"):
            raise InvalidInput(f"Invalid initial position {initial_position!r}; Earliest or Latest")
        if ack_timeout_ms < 0 or lease_ms <= 0:
            raise InvalidInput("Timeouts must be positive")
        if not 0 <= priority_level <= MAX_PRIORITY_LEVEL:
            raise InvalidInput(f"Invalid priority level {priority_level}: 0 (the highest) to {MAX_PRIORITY_LEVEL}")

        self._check_consumer_limit(topic, subscription, consumer)

        def change(state: CursorState, now: int) -> None:
            state.expire(now)
            state.attach(consumer, subscription_type, now, lease_ms, ack_timeout_ms, key_shared, priority_level)
            if replicate_state and not state.replicated:
                state.replicated, state.origin_scanned = True, state.mark_delete

        initial = "LatestInclusive" if start_inclusive and initial_position == "Latest" else initial_position
        state = self._update(topic, subscription, change, create=(subscription_type, initial))
        if state.replicated and self.snapshots is not None:  # what the other clusters acknowledged
            self.snapshots.catch_up(topic, subscription, state.subscription_type)
        return state

    def prepare_share(self, topic: TopicName, state: CursorState, seal: SealState) -> bool:
        """Before a cursor write: a replicated subscription's snapshot, when due, goes with it
        (`SubscriptionSnapshots.prepare`); True: `publish_share` once the write succeeded."""
        return self.snapshots is not None and self.snapshots.prepare(topic, state, seal, self.clock.now_ms())

    def publish_share(self, topic: TopicName, subscription: str, state: CursorState) -> None:
        if self.snapshots is not None:
            self.snapshots.publish(topic, subscription, state)

    def write_cursor(self, topic: TopicName, subscription: str, state: CursorState, view: SubscriptionView,
                     crash: str) -> bool:
        """The cursor's conditional write (False: another moved it); a replicated subscription's
        snapshot, when due, is published once it succeeded. `crash`: the crash point right after it."""
        share = self.prepare_share(topic, state, view.seal)
        if not self.metadata.put_cursor(topic, subscription, state, view.cursor_version):
            return False
        crash_point(crash)
        if share:
            self.publish_share(topic, subscription, state)
        return True

    def _check_consumer_limit(self, topic: TopicName, subscription: str, consumer: str) -> None:
        """Pulsar's maxConsumersPerTopic, counted over every subscription's live consumers."""
        limit = TopicPolicies.of(self.policies(topic)).max_consumers if self.policies else 0
        if limit <= 0:
            return
        now = self.clock.now_ms()
        live = {
            (name, c) for name, (state, _) in self.metadata.list_cursors(topic).items()
            for c in state.live_consumers(now)
        }
        live.discard((subscription, consumer))
        if len(live) >= limit:
            raise ConsumerLimitReached(f"Topic {topic} reached its maximum number of consumers ({limit})")

    def check_subscription_limit(self, topic: TopicName) -> None:
        """Pulsar's maxSubscriptionsPerTopic, checked when a new subscription's cursor is created
        (one Query, only then); refused with Pulsar's NotAllowedError (405)."""
        limit = TopicPolicies.of(self.policies(topic)).max_subscriptions if self.policies else 0
        if limit > 0 and sum(not is_replicator(s) for s in self.metadata.list_subscriptions(topic)) >= limit:
            raise NotAllowed(subscription_limit_reason(topic))

    def close_consumer(self, topic: TopicName, subscription: str, consumer: str) -> None:
        self._update(topic, subscription, lambda state, now: state.detach(consumer))

    def redeliver_unacknowledged(self, topic: TopicName, subscription: str, consumer: str) -> None:
        self._update(topic, subscription, lambda state, now: state.redeliver_unacknowledged(consumer))

    def seek(self, topic: TopicName, subscription: str, entry_id: int | None = None,
             timestamp_ms: int | None = None) -> CursorState:
        """Reset the subscription for all its consumers: to an entry, or to a publish time."""
        if (entry_id is None) == (timestamp_ms is None):
            raise InvalidInput("Seek to a message id or to a timestamp")
        if timestamp_ms is not None:
            seal, writer = self.metadata.get_topic_state(topic)
            entry_id = self.reader.find_by_time(topic, timestamp_ms, seal, writer)
        position = entry_id if entry_id is not None else 0
        return self._update(topic, subscription, lambda state, now: state.seek(position))

    def expire_messages(self, topic: TopicName, subscription: str, position: int) -> int:
        """Pulsar's expireMessages: acknowledge every entry below `position` (message TTL, backlog
        eviction); the number of entries it acknowledged, 0 if the subscription is gone."""
        expired = 0

        def change(state: CursorState, now: int) -> None:
            nonlocal expired
            expired = state.expire_before(position)  # a retried write counts its own attempt only

        try:
            self._update(topic, subscription, change)
        except SubscriptionNotFound:
            return 0
        return expired

    def unsubscribe(self, topic: TopicName, subscription: str, consumer: str) -> None:
        """Delete the subscription (its cursor); refused while other consumers are attached."""
        def refuse(state: CursorState) -> None:
            others = [c for c in state.live_consumers(self.clock.now_ms()) if c != consumer]
            if others:
                raise Conflict(f"Subscription {subscription} has other connected consumers: {', '.join(others)}")

        if not self.delete_subscription(topic, subscription, refuse):
            raise SubscriptionNotFound(f"Subscription {subscription} not found on {topic}")

    def delete_subscription(self, topic: TopicName, subscription: str, refuse: Callable[[CursorState], None]) -> bool:
        """Delete the subscription unless `refuse` raises on its cursor; False: there is none. Every
        door's unsubscribe (SDK and REST, WebSocket, binary protocol) and the admin API's delete
        come here. A replicated subscription's snapshot for this cluster goes first (one DeleteItem
        in the configuration store; refused, 503, while its home is unreachable, nothing deleted),
        then the cursor, conditional on the version read: the same request again finishes a
        deletion that died between the two, and a cursor write that raced it (whose snapshot would
        have been written after it) makes it read and delete both again."""
        for _ in range(CONFLICT_RETRIES):
            view = self.metadata.get_subscription_view(topic, subscription)
            if view.cursor is None:
                return False
            refuse(view.cursor)
            if view.cursor.replicated and self.snapshots is not None:
                self.snapshots.forget(topic, subscription)
                crash_point("unsubscribe.after_snapshot")
            if self.metadata.delete_cursor(topic, subscription, view.cursor_version):
                return True
        raise RetryableError("Too much contention on the subscription; retry")

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
        defer_acks: bool = False,
    ) -> Received:
        """Long-poll: hand out up to `max_messages` (whole entries, at least one) to `consumer`.

        The poll returns as soon as `min_messages` are available, or when `wait_ms` has passed
        with whatever there is (Pulsar's batch-receive policy; Kafka's fetch.min.bytes): a
        throughput-minded consumer trades a little latency for fewer, fuller requests.
        `acks` ride along (Pulsar's grouped acks): they are applied in the same cursor write as
        the claim, so an active consumer's acknowledgements cost no request of their own.
        `defer_acks`: the consumer sends them again with its next poll when told they were not
        applied; a poll that hands out nothing while the topic's next seal is expected then leaves
        them for that poll's claim (`acks_applied` False) rather than write the cursor for them alone.
        """
        if max_messages <= 0:
            raise InvalidInput("maxMessages must be positive")
        min_messages = max(1, min(min_messages, max_messages))
        deadline = self.clock.now_ms() + min(max(wait_ms, 0), MAX_WAIT_MS)
        key = (str(topic), subscription, consumer)
        if min_messages > 1 and 0 < wait_ms <= LOOK_ONCE_MAX_WAIT_MS and self._short.get(key):
            self.clock.sleep(wait_ms / 1000)  # look once, at the deadline (LOOK_ONCE_MAX_WAIT_MS)
        with self.telemetry.tracer.span("dispatch") as span:
            span.annotate("namespace", str(topic.namespace_name))
            received = self._poll(topic, subscription, consumer, max_messages, request_id, acks, min_messages,
                                  deadline, defer_acks)
            record_delivery(self.telemetry, topic, received.entries, DISPATCHED_MESSAGES, self.clock.now_ms(), span)
        if len(self._short) > 10_000:
            self._short.clear()
        self._short[key] = sum(d.entry.num_messages for d in received.entries) < min_messages
        seal = self._seals.get(str(topic))
        if seal is None:
            return received
        return replace(received, next_seal_in_ms=next_seal_in_ms(seal, self.clock.now_ms()))

    def _poll(self, topic: TopicName, subscription: str, consumer: str, max_messages: int, request_id: str,
              acks: Acks, min_messages: int, deadline: int, defer_acks: bool = False) -> Received:
        """`receive`'s looks until `min_messages` are ready or the deadline has passed."""
        refill: SubscriptionView | None = None
        idle_interval = POLL_INTERVAL_S
        while True:
            final = self.clock.now_ms() >= deadline
            look = self._receive_once(
                topic, subscription, consumer, max_messages, request_id, acks, 1 if final else min_messages, refill,
                final, defer_acks,
            )
            delivered, refill, epoch, throttled_until = look.delivered, look.refill, look.epoch, look.throttled_until
            if look.acks_deferred:
                return Received([], epoch, acks_applied=False)
            if delivered is not None:
                if delivered or final or throttled_until:
                    acks = NO_ACKS  # written with the cursor
                if delivered or final:
                    return Received(delivered, epoch)
                left_s = max(0.0, (deadline - self.clock.now_ms()) / 1000)
                if throttled_until:  # the dispatch rate's period is used up: wait for the next
                    self.clock.sleep(min(max(throttled_until - self.clock.now_ms(), 1) / 1000, left_s + 0.001))
                    continue
                self.clock.sleep(min(idle_interval, left_s + 0.001))
                idle_interval = min(idle_interval * 2, MAX_POLL_INTERVAL_S)
            else:  # some ready, not enough: look again once the wait is over (or in 250 ms)
                left_s = (deadline - self.clock.now_ms()) / 1000
                self.clock.sleep(max(FILL_POLL_INTERVAL_S, min(left_s, 0.25)))

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
        last: bool = True,
        defer_acks: bool = False,
    ) -> _Look:
        """One dispatch step (`_Look`): nothing handed out and the view when fewer than
        `min_messages` are ready (nothing written).

        The view returned with None lets the next step of the same poll skip re-reading the
        cursor: it only looks at the journal tail again, and its conditional write still
        catches any change made meanwhile (then the loop re-reads). A look before the poll's
        `last` that hands out nothing writes nothing for acknowledgements alone: they go with the
        poll's claim or its last look, one cursor write for the poll (negative ones are written at
        once: their redelivery delay runs from then). With `defer_acks`, not even on the last look
        while the topic's next seal is expected (`ledger.pacing.seal_expected`): the answer is
        `acks_deferred`, and the consumer's next poll, due when that seal is, carries them again.
        """
        for attempt in range(CONFLICT_RETRIES):
            if attempt == 0 and refill is not None:
                view = refill
            else:
                view = self.metadata.get_subscription_view(topic, subscription)
            if len(self._seals) > 10_000:
                self._seals.clear()
            self._seals[str(topic)] = view.seal
            pristine = copy.deepcopy(view)
            step = self.step(topic, view, consumer, max_messages, request_id, acks, self.clock.now_ms(),
                             subscription=subscription)
            state = step.state
            if not step.retried and 0 < step.messages < min(min_messages, step.cap):
                return _Look(None, _unbounded_tail(pristine), state.epoch)  # not enough yet: wait, write nothing
            if (last and defer_acks and step.acks_only and not step.throttled_until and acks and not acks.nacks
                    and seal_expected(view.seal, self.clock.now_ms())):
                return _Look([], None, state.epoch, acks_deferred=True)  # they go with the next seal's claim
            if not step.write or (not step.delivered and not step.throttled_until and not last and acks
                                  and not acks.nacks):  # (a nack's delay runs from when it is written)
                # nothing to hand out, nothing changed: no write. Nor for acknowledgements alone on a
                # look before the poll's last one: they go with the claim, or with the last look
                return _Look([], None, state.epoch, step.throttled_until)
            delay_point("dispatch.before_claim")  # a stalled claim: the ack timeout, the poll's retry
            # claimed, not delivered (a crash after the write): the retried receive gets them
            if self.write_cursor(topic, subscription, state, view, "dispatch.after_claim"):
                return _Look(step.delivered, None, state.epoch, step.throttled_until)
            self.clock.sleep(random.uniform(0.0, 0.02))
        raise RetryableError("Too much contention on the subscription; retry")

    def step(
        self,
        topic: TopicName,
        view: SubscriptionView,
        consumer: str,
        max_messages: int,
        request_id: str,
        acks: Acks,
        now: int,
        max_bytes: int = MAX_RECEIVE_BYTES,
        subscription: str = "",
    ) -> Step:
        """One dispatch step on a cursor read in `view`, in memory: apply `acks`, expire leases and
        ack timeouts, renew the consumer's lease, then hand out up to `max_messages` (0: claim
        nothing, only acknowledge and renew). The caller writes `step.state` back with a
        conditional write on `view.cursor_version` when `step.write` says it changed; until then
        nothing happened. Raises before anything is written when the consumer is not attached."""
        if view.cursor is None:
            named = f"Subscription {subscription}" if subscription else "Subscription"
            raise SubscriptionNotFound(f"{named} not found on {topic}")
        state = view.cursor
        before = state.to_dict()
        acks.apply(state, now)
        acked = state.to_dict() if acks else before
        state.expire(now)
        lease = state.consumers.get(consumer)
        if lease is None:
            raise SubscriptionNotFound(f"Consumer {consumer} is not attached to {topic}; subscribe again")
        if lease.expires_at - now < DEFAULT_LEASE_MS // 2:  # renew, but not on every poll
            state.attach(consumer, state.subscription_type, now, DEFAULT_LEASE_MS, lease.ack_timeout_ms)
        retried = state.deliveries_of_request(consumer, request_id)
        if retried:  # the same receive again (a client retry after a lost response)
            return Step(self.claims.fetch(topic, view, retried), state, True, retried=True)
        if max_messages <= 0:
            return Step([], state, state.to_dict() != before)
        throttled_until = 0
        budget = self.claims.dispatch_budget(topic, view, state, now)
        cap_msgs = max_messages
        if budget is not None and 0 in budget[:2]:
            delivered: list[DeliveredEntry] = []  # the subscription's dispatch rate is used up for this period
            throttled_until = budget[2]
        else:
            cap_msgs = max_messages if budget is None or budget[0] < 0 else min(max_messages, budget[0])
            cap_bytes = max_bytes if budget is None or budget[1] < 0 else min(max_bytes, budget[1])
            delivered = self.claims.claim(topic, view, state, consumer, cap_msgs, now, lease.ack_timeout_ms, request_id,
                                   cap_bytes)
            if budget is not None and delivered:
                state.count_dispatch(budget[2], sum(d.entry.num_messages for d in delivered),
                                     sum(d.entry.size for d in delivered))
        after = state.to_dict()
        write = bool(delivered) or after != before
        return Step(delivered, state, write, throttled_until, cap=cap_msgs, limited=budget is not None,
                    acks_only=not delivered and after == acked)

    # --- acknowledge ---------------------------------------------------------------------
    def acknowledge(self, topic: TopicName, subscription: str, acks: Acks) -> CursorState:
        with self.telemetry.tracer.span("acknowledge") as span:
            span.annotate("namespace", str(topic.namespace_name))
            return self._update(topic, subscription, acks.apply)

    # --- plumbing ------------------------------------------------------------------------
    def update_cursor(self, topic: TopicName, subscription: str, change: Callable[[CursorState, int], None]) -> CursorState:
        """Apply `change(state, now)` to an existing cursor (SubscriptionNotFound otherwise), with
        the conditional write and retries of every cursor change (the admin API's skips)."""
        return self._update(topic, subscription, change)

    def _update(
        self,
        topic: TopicName,
        subscription: str,
        change: Callable[[CursorState, int], None],
        create: tuple[str, str] | None = None,
    ) -> CursorState:
        """Read-modify-write of a cursor with optimistic concurrency; creates it if asked."""
        created = False
        for _ in range(CONFLICT_RETRIES):
            view = self.metadata.get_subscription_view(topic, subscription)
            now = self.clock.now_ms()
            if view.cursor is None:
                if create is None:
                    raise SubscriptionNotFound(f"Subscription {subscription} not found on {topic}")
                if view.writer is None:  # a first subscription may create the topic (auto-creation)
                    if created:  # still none: a deletion of the topic is under way
                        raise TopicNotFound(f"Topic {topic} not found (being deleted)")
                    ensure_topic(self.metadata, topic, now)
                    created = True
                    continue
                self.check_subscription_limit(topic)
                sub_type, initial = create
                end = view.writer.next_entry if view.writer else 0
                start = first_available_entry(view)
                if initial == "Latest":
                    start = end
                elif initial == "LatestInclusive":  # the last entry too (start_message_id_inclusive)
                    start = max(start, end - 1)
                state = CursorState(sub_type, mark_delete=start, read_position=start, created_at=now)
            else:
                state = view.cursor
            change(state, now)
            delay_point("cursor.before_update")  # a stalled write: another may move the cursor meanwhile
            # (a crash after the write: the cursor moved, the caller not told; retrying is harmless)
            if self.write_cursor(topic, subscription, state, view, "cursor.after_update"):
                return state
            self.clock.sleep(random.uniform(0.0, 0.02))
        raise RetryableError("Too much contention on the subscription; retry")


def _unbounded_tail(view: SubscriptionView) -> SubscriptionView:
    """A re-used view does not know how far the writer got since: let the tail read tell."""
    if view.writer is not None:
        view.writer = replace(view.writer, next_entry=UNKNOWN_END)
    return view


def first_available_entry(view: SubscriptionView) -> int:
    """The oldest entry still stored: entries below it were trimmed by the ledger lifecycle."""
    return view.seal.first_entry
