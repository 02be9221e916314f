"""Pulsar's subscription administration: create a subscription at a position, delete one, skip
entries, clear a backlog and reset a cursor by time or by message id (the admin API's
`.../subscription/{name}/...` calls, which pulsar-admin and Pulsar Manager make).

Each call is a cursor change through `SubscriptionService.update_cursor` (a conditional write on
the cursor's version, retried on a race with consumers) or, to create, one conditional put; a
delete is the one every unsubscribe makes (`SubscriptionService.delete_subscription`, with a
replicated subscription's snapshot). On a partitioned topic's own name, create, delete, clear and
reset by time apply to every partition, as in Pulsar; skipping a count and resetting to a message
id name one partition's entries, so they take the partition's name.

Counts are in entries, as the backlog is (`msgBacklog`): a batch is one entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from magnetar.core.cursor import CursorState, RangeSet
from magnetar.core.dispatch import SubscriptionService, first_available_entry
from magnetar.core.errors import (
    AlreadyExists,
    InvalidInput,
    PreconditionFailed,
    SubscriptionNotFound,
    TopicNotFound,
)
from magnetar.core.naming import TopicName, check_subscription
from magnetar.core.ports import Clock, MetadataStore
from magnetar.core.replication import is_replicator

EARLIEST, LATEST = "earliest", "latest"
PositionOf = Callable[[CursorState], int]  # the position to acknowledge up to, from the cursor


@dataclass(frozen=True)
class Position:
    """Where a new subscription starts: the earliest entry kept, the end of the topic, or an entry."""

    where: str = LATEST  # EARLIEST, LATEST, or "entry"
    entry_id: int = 0

    @classmethod
    def entry(cls, entry_id: int) -> Position:
        return cls("entry", entry_id)


class SubscriptionAdmin:
    def __init__(self, metadata: MetadataStore, subscriptions: SubscriptionService, clock: Clock) -> None:
        self.metadata = metadata
        self.subscriptions = subscriptions
        self.clock = clock

    # --- which partitions a call applies to ---------------------------------------------------
    def _targets(self, topic: TopicName, whole_topic_ok: bool = True) -> list[TopicName]:
        """The topic, or each partition of a partitioned topic's own name."""
        partitions = self.metadata.get_partitions(topic) if topic.partition_index < 0 else None
        if partitions is None:
            return [topic]
        if not whole_topic_ok:
            raise InvalidInput(f"{topic} is a partitioned topic: give one partition's name "
                               f"({topic}-partition-0 ... -partition-{partitions - 1})")
        return [topic.partition(i) for i in range(partitions)]

    @staticmethod
    def _check_name(subscription: str) -> str:
        check_subscription(subscription)
        if is_replicator(subscription):
            raise InvalidInput(f"{subscription} is a replicator's cursor, not a subscription")
        return subscription

    # --- create / delete ----------------------------------------------------------------------
    def create(self, topic: TopicName, subscription: str, position: Position = Position()) -> None:
        """Pulsar's createSubscription: a durable subscription with no consumer yet, at
        `position`; 409 when it exists (on a partitioned topic: on any partition)."""
        self._check_name(subscription)
        targets = self._targets(topic, whole_topic_ok=position.where != "entry")
        existing = 0
        for target in targets:
            if not self._create_one(target, subscription, position):
                existing += 1
        if existing == len(targets):
            raise AlreadyExists(f"Subscription {subscription} already exists on {topic}")

    def _create_one(self, topic: TopicName, subscription: str, position: Position) -> bool:
        view = self.metadata.get_subscription_view(topic, subscription)
        if view.cursor is not None:
            return False
        if view.writer is None and topic.partition_index < 0:
            raise TopicNotFound(f"Topic {topic} not found")
        self.subscriptions.check_subscription_limit(topic)
        end = view.writer.next_entry if view.writer else 0
        first = first_available_entry(view)
        start = {EARLIEST: first, LATEST: end}.get(position.where, position.entry_id)
        if not first <= start <= end:
            raise InvalidInput(f"Entry {start} is not in {topic}, which keeps entries {first} to {end - 1}")
        state = CursorState("Exclusive", mark_delete=start, read_position=start, created_at=self.clock.now_ms())
        return self.metadata.put_cursor(topic, subscription, state, 0)

    def delete(self, topic: TopicName, subscription: str, force: bool = False) -> None:
        """Pulsar's deleteSubscription: refused (412) while consumers are attached, unless
        `force` (they find it gone at their next request)."""
        self._check_name(subscription)
        found = 0
        for target in self._targets(topic):
            found += self._delete_one(target, subscription, force)
        if not found:
            raise SubscriptionNotFound(f"Subscription {subscription} not found on {topic}")

    def _delete_one(self, topic: TopicName, subscription: str, force: bool) -> bool:
        def refuse(state: CursorState) -> None:
            live = state.live_consumers(self.clock.now_ms())
            if live and not force:
                raise PreconditionFailed(f"Subscription {subscription} has active consumers: {', '.join(live)}")

        return self.subscriptions.delete_subscription(topic, subscription, refuse)

    # --- moving the cursor ----------------------------------------------------------------------
    def clear_backlog(self, topic: TopicName, subscription: str) -> int:
        """Pulsar's skipAllMessages: every entry written so far is acknowledged; how many were not."""
        self._check_name(subscription)
        cleared = 0
        for target in self._targets(topic):
            _, writer = self.metadata.get_topic_state(target)
            end = writer.next_entry if writer else 0
            cleared += self._expire(target, subscription, _constant(end))
        return cleared

    def skip(self, topic: TopicName, subscription: str, count: int) -> int:
        """Pulsar's skipMessages: acknowledge the next `count` entries not acknowledged yet (fewer
        if the backlog is shorter); how many it acknowledged."""
        self._check_name(subscription)
        if count <= 0:
            raise InvalidInput("The number of messages to skip must be positive")
        (target,) = self._targets(topic, whole_topic_ok=False)
        _, writer = self.metadata.get_topic_state(target)
        end = writer.next_entry if writer else 0
        return self._expire(target, subscription, lambda state: _after_unacked(state, count, end))

    def _expire(self, topic: TopicName, subscription: str, position_of: PositionOf) -> int:
        done = 0

        def change(state: CursorState, now: int) -> None:
            nonlocal done
            done = state.expire_before(position_of(state))  # a retried write counts its own attempt only

        self.subscriptions.update_cursor(topic, subscription, change)
        return done

    def reset_to_time(self, topic: TopicName, subscription: str, timestamp_ms: int) -> None:
        """Pulsar's resetCursor(timestamp): every consumer starts over at the first entry
        published at or after the time."""
        self._check_name(subscription)
        for target in self._targets(topic):
            self.subscriptions.seek(target, subscription, timestamp_ms=timestamp_ms)

    def reset_to_entry(self, topic: TopicName, subscription: str, entry_id: int) -> None:
        """Pulsar's resetCursor(messageId): every consumer starts over at that entry (included)."""
        self._check_name(subscription)
        (target,) = self._targets(topic, whole_topic_ok=False)
        self.subscriptions.seek(target, subscription, entry_id=entry_id)


def _constant(position: int) -> PositionOf:
    return lambda state: position


def _after_unacked(state: CursorState, count: int, end: int) -> int:
    """The position just past the `count`-th entry from the mark-delete position on that is not
    acknowledged yet (or `end`)."""
    acked = RangeSet(state.acked)
    acked.drop_below(state.mark_delete)
    position, left = state.mark_delete, count
    for start, stop in acked.ranges:
        gap = max(0, min(start, end) - position)
        if gap >= left:
            return position + left
        left -= gap
        position = max(position, stop)
    return min(end, position + left)
