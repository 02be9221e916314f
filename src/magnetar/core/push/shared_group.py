"""A Shared subscription's connected consumers served by one dispatch step together.

After a journal batch, every push consumer of a Shared subscription gets a fair share of the new
messages. Served one after the other, each consumer costs a step of its own — a cursor read and a
conditional cursor write — and the consumers wait for each other: with 100 consumers, 100 reads
and 100 writes per batch, and a journal-consumer invocation of ~15 s during which the shard's
sealing waits (docs/benchmarks.md, "One Shared subscription with 100 consumers"). One cursor
holds every consumer's deliveries, so one step can hand out all the shares: read the cursor once,
apply each consumer's inbox acknowledgements, claim each consumer's share in turn on the same
state, write it once (conditional on the version read, as every step), then push each consumer
its frames, the consumers in parallel. A lost condition repeats the whole step; a crash after
the write leaves entries claimed and not pushed, which the consumers' leases and the maintenance
run's redispatch hand out again, as after any step.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from magnetar.core.acks import NO_ACKS
from magnetar.core.claims import DeliveredEntry
from magnetar.core.errors import RetryableError
from magnetar.core.naming import TopicName
from magnetar.core.ports import SubscriptionView
from magnetar.core.ports.push import Connection
from magnetar.core.push.common import (
    CLAIM_RETRIES,
    INBOX_CLEAR_AT,
    MAX_BACKOFF_S,
    inbox_acks,
    outstanding,
    sealed_only,
)
from magnetar.core.websocket import entry_frames

if TYPE_CHECKING:
    from magnetar.core.push.dispatch import Dispatcher


def dispatch_shared_group(dispatcher: Dispatcher, members: list[Connection], cap: int,
                          view: SubscriptionView | None) -> tuple[int, bool]:
    """Claim up to `cap` messages for each consumer in one cursor write, then push them; returns
    (messages pushed, whether any consumer took its whole share: more may be ready)."""
    topic = TopicName.parse(members[0].topic)
    subscription = members[0].subscription
    service = dispatcher.broker.subscriptions
    claimed: dict[str, list[DeliveredEntry]] = {}
    for attempt in range(CLAIM_RETRIES):
        if view is None or attempt:
            view = service.metadata.get_subscription_view(topic, subscription)
        if view.cursor is None:
            return 0, False
        sealed_only(view)
        now = dispatcher.clock.now_ms()
        state = view.cursor
        before = state.to_dict()
        for conn in members:  # each inbox rides on this write, as on a consumer's own step
            if conn.acks:
                inbox_acks(conn.acks, conn.name, NO_ACKS).apply(state, now)
        state.expire(now)
        claimed = {}
        for conn in members:
            lease = state.consumers.get(conn.name)
            if lease is None:
                continue
            limit = min(conn.queue_size - outstanding(state, conn.name), cap)
            if limit > 0:
                dispatcher._prefetch(topic, view, state.read_position, limit)
                claimed[conn.connection_id] = service.claims.claim(topic, view, state, conn.name, limit, now,
                                                            lease.ack_timeout_ms, "")
        if not any(claimed.values()) and state.to_dict() == before:
            break
        if service.write_cursor(topic, subscription, state, view, "dispatch.after_claim"):
            break
        dispatcher.clock.sleep(random.uniform(0.0, min(MAX_BACKOFF_S, 0.005 * 2 ** attempt)))
    else:
        raise RetryableError("Too much contention on the subscription; retry")
    pushes: list[tuple[Connection, list[str]]] = []
    full = False
    for conn in members:
        delivered = claimed.get(conn.connection_id, [])
        if conn.acks and (not delivered or len(conn.acks) >= INBOX_CLEAR_AT):
            dispatcher.clear_inbox(conn)
        if delivered:
            pushes.append((conn, [f for d in delivered for f in entry_frames(
                d.entry, topic.partition_index, d.redelivery_count, set(d.acked_indexes))]))
            full = full or sum(d.entry.num_messages for d in delivered) >= cap
    pushed = 0
    for (conn, frames), sent in zip(pushes, dispatcher.send_each(pushes), strict=True):
        pushed += sent or 0
        if sent is not None and sent < len(frames) and dispatcher.refused(
                topic, conn, sent, claimed[conn.connection_id]):
            pushed += dispatcher.dispatch_one(conn)  # it opened meanwhile
    return pushed, full
