"""Dispatch: pushing a persistent topic's entries to its connected consumers and readers.

A WebSocket consumer is an ordinary consumer of the durable cursor: one consumer name per
connection, attached with a lease covering API Gateway's 2 h connection limit. Every push is a
*dispatch step* exactly like a long poll with no wait: read the cursor, admit new entries, hand
the consumer what is ready for it within its permits, one conditional write; then one
PostToConnection per message. So Shared, Failover, Key_Shared, ack timeouts, negative acks and
redelivery behave as they do for polling consumers, and a consumer's window is computed from the
cursor itself (the entries it holds unacknowledged), which costs no write of its own.

What triggers a dispatch (no Lambda waits for anything):
- the journal consumer, after sealing a batch, for the topics of the batch that have
  connections (entries served from the batch it holds in memory, through the broker's cache:
  journal_batch.py);
- a consumer's frames: an acknowledgement (which rides on the dispatch write), a negative
  acknowledgement, a permit;
- the connect: API Gateway accepts pushes only once $connect has returned, so the WebSocket
  function invokes itself asynchronously to push the backlog (`deliver_backlog`). Another
  dispatch can meet the connection before it opens (a journal batch, the $disconnect of the
  connection a client is replacing): its refused push gives the claims back uncounted and keeps the
  connection, for `deliver_backlog`;
- a disconnect, for the other consumers of the subscription (the released entries);
- the maintenance run, once a minute (`redispatch`): due redeliveries (negative-ack delays, ack
  timeouts, expired leases) and anything a failed push left behind.

In pull mode a dispatch takes what it pushed from the connection's permits with a conditional
write (so two dispatchers never push past the permits). A reader's position lives in its
connection's item too (it has no cursor), moved by a conditional write before its push.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from magnetar.core.acks import NO_ACKS, Acks
from magnetar.core.broker import Broker
from magnetar.core.claims import MAX_ENTRIES_PER_RECEIVE, DeliveredEntry
from magnetar.core.cursor import CursorState
from magnetar.core.delivery_telemetry import record_delivery
from magnetar.core.entry import Entry
from magnetar.core.errors import (
    MagnetarError,
    RetryableError,
    SubscriptionNotFound,
    TopicNotFound,
)
from magnetar.core.metrics import PUSHED_MESSAGES
from magnetar.core.naming import TopicName
from magnetar.core.ports import (
    SubscriptionView,
)
from magnetar.core.ports.push import Connection, ConnectionRegistry, PushGateway
from magnetar.core.push.common import (
    CLAIM_RETRIES,
    INBOX_CLEAR_AT,
    MAX_BACKOFF_S,
    ConnectionCache,
    inbox_acks,
    outstanding,
    sealed_only,
)
from magnetar.core.push.shared_group import dispatch_shared_group
from magnetar.core.websocket import MAX_CONNECTION_MS, entry_frames

log = logging.getLogger(__name__)

DISPATCH_WORKERS = 8  # subscriptions and readers dispatched in parallel by one run
SEND_WORKERS = 16  # connections a group step pushes to at once (each connection's frames in order)
MAX_ROUNDS = 20  # claims per connection per dispatch (each up to 100 entries)
# a connection this young whose push is refused may still be in $connect: its own run, then deliver_backlog's wait
CONNECT_WINDOW_MS = 10_000
BACKLOG_WAIT_S = 5.0  # how long the post-connect dispatch waits for API Gateway to open the connection
MAX_PREFETCH = 1_000  # entries of a sealed backlog read into the cache ahead of a dispatch's claims


@dataclass
class PushReport:
    topics: int = 0
    connections: int = 0
    pushed: int = 0
    gone: int = 0  # connections found closed (detached and forgotten)

    def add(self, other: PushReport) -> None:
        self.pushed += other.pushed
        self.gone += other.gone


class Dispatcher:
    def __init__(self, broker: Broker, registry: ConnectionRegistry, gateway: PushGateway,
                 known: ConnectionCache, workers: int = DISPATCH_WORKERS) -> None:
        self.broker = broker
        self.registry = registry
        self.gateway = gateway
        self.known = known
        self.clock = broker.clock
        self.workers = workers
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._senders: ThreadPoolExecutor | None = None

    def deliver_backlog(self, connection_id: str, wait_s: float = BACKLOG_WAIT_S) -> int:
        """The dispatch that follows a connect: once API Gateway has opened the connection (it
        refuses pushes while $connect runs), push what is already there for it."""
        conn = self.known.lookup(connection_id)
        if conn is None or conn.role == "producer" or not TopicName.parse(conn.topic).is_persistent:
            return 0
        deadline = time.monotonic() + wait_s
        pause = 0.05
        while not self.gateway.connected(connection_id):
            if time.monotonic() >= deadline:
                self.known.drop(conn)  # it never opened (or closed at once)
                return 0
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
        current = self.registry.current(conn)
        return self.dispatch_one(current) if current is not None else 0

    # --- one connection ------------------------------------------------------------------------
    def dispatch_one(self, conn: Connection) -> int:
        if conn.role == "reader":
            return self.dispatch_reader(conn)
        if conn.role == "consumer":
            return self.dispatch_consumer(conn)
        return 0

    def dispatch_consumer(self, conn: Connection, acks: Acks = NO_ACKS, cap: int | None = None,
                          refill_at: int = 1, view: SubscriptionView | None = None) -> int:
        """Dispatch steps for one connected consumer, until its permits or what is ready run out.

        `refill_at`: an acknowledgement frame gives its permit back, but claims only once that
        much of the window is free (Pulsar's consumers send flow permits once half their queue is
        consumed): a backlog is then read in chunks, not an entry per acknowledgement.
        `view`: the subscription's view when the caller has just read it (a journal batch reads
        those of all its subscriptions at once), for the first step."""
        topic = TopicName.parse(conn.topic)
        pushed = 0

        def window(state: CursorState) -> int:
            if conn.pull_mode:
                room = conn.permits - pushed
            else:
                room = conn.queue_size - outstanding(state, conn.name)
                if room < refill_at:
                    room = 0
            return room if cap is None else min(room, cap)

        if conn.acks:  # the inbox is written to the cursor with the first claim
            acks = inbox_acks(conn.acks, conn.name, acks)
        for _ in range(MAX_ROUNDS):
            try:
                delivered, more = self._claim(topic, conn, window, acks, view)
            except SubscriptionNotFound:
                if acks:  # not attached (any more): its acknowledgements count all the same
                    with contextlib.suppress(SubscriptionNotFound):
                        self.broker.subscriptions.acknowledge(topic, conn.subscription, acks)
                self.clear_inbox(conn)
                return pushed
            acks, view = NO_ACKS, None  # written with the first claim; the view is read anew
            if not delivered or len(conn.acks) >= INBOX_CLEAR_AT:
                conn = self.clear_inbox(conn)
            else:
                conn = replace(conn, acks=frozenset())  # written: left in the item for now (INBOX_CLEAR_AT)
            if not delivered:
                break
            frames = [f for d in delivered for f in entry_frames(d.entry, topic.partition_index, d.redelivery_count,
                                                                  set(d.acked_indexes))]
            if conn.pull_mode:
                need = min(len(frames), 1) if len(delivered) == 1 else len(frames)  # a batch may overshoot
                if frames and not self.registry.take_permits(conn, len(frames), need):
                    self._release(topic, conn, delivered)  # another dispatcher used the permits first
                    break
            sent = self.gateway.send(conn.connection_id, frames) if frames else 0
            pushed += sent
            if sent < len(frames):
                if self.refused(topic, conn, sent, delivered):
                    continue  # it opened meanwhile: claim again
                break
            self._record(topic, delivered)
            if cap is not None or not more:
                break
        return pushed

    def _claim(self, topic: TopicName, conn: Connection, budget: Callable[[CursorState], int],
               acks: Acks, view: SubscriptionView | None = None) -> tuple[list[DeliveredEntry], bool]:
        """One dispatch step for a push consumer: `SubscriptionService.receive` with no wait, but
        the number of messages comes from the cursor read by this very step (the window). Also
        says whether more may be ready (a step hands out at most 100 entries and reads ahead a few
        segments at a time)."""
        service = self.broker.subscriptions
        for attempt in range(CLAIM_RETRIES):
            if view is None or attempt:
                view = service.metadata.get_subscription_view(topic, conn.subscription)
            if view.cursor is None:
                raise SubscriptionNotFound(f"Subscription {conn.subscription} not found on {topic}")
            sealed_only(view)
            now = self.clock.now_ms()
            state = view.cursor
            before = state.to_dict()
            acks.apply(state, now)
            state.expire(now)
            lease = state.consumers.get(conn.name)
            if lease is None:
                raise SubscriptionNotFound(f"Consumer {conn.name} is not attached to {conn.subscription}")
            limit = budget(state)
            delivered: list[DeliveredEntry] = []
            if limit > 0:
                self._prefetch(topic, view, state.read_position, limit)
                delivered = service.claims.claim(topic, view, state, conn.name, limit, now, lease.ack_timeout_ms, "")
            more = bool(delivered) and (len(delivered) >= MAX_ENTRIES_PER_RECEIVE
                                        or state.read_position < view.seal.next_entry)
            if not delivered and state.to_dict() == before:
                return [], False
            if service.write_cursor(topic, conn.subscription, state, view, "dispatch.after_claim"):
                return delivered, more
            # acknowledgement frames of one subscription arrive in parallel invocations: back off
            self.clock.sleep(random.uniform(0.0, min(MAX_BACKOFF_S, 0.005 * 2 ** attempt)))
        raise RetryableError("Too much contention on the subscription; retry")

    def clear_inbox(self, conn: Connection) -> Connection:
        if conn.acks:
            self.registry.clear_acks(conn, conn.acks)
        return replace(conn, acks=frozenset())

    def _prefetch(self, topic: TopicName, view: SubscriptionView, start: int, count: int) -> None:
        """Read a sealed backlog into the cache ahead of the claims: a read takes a few segments
        at a time (a trickle seals one-entry segments), and each claim is a cursor write, so the
        claims should find whole windows in memory."""
        position, end = start, min(view.seal.next_entry, start + min(count, MAX_PREFETCH))
        while position < end:
            entries = self.broker.reader.read(topic, position, min(MAX_ENTRIES_PER_RECEIVE, end - position),
                                              view.seal, view.writer)
            if not entries:
                return
            position = entries[-1].entry_id + 1

    def _record(self, topic: TopicName, delivered: list[DeliveredEntry]) -> None:
        """Pushed messages and their latency, to the telemetry (the delivery span)."""
        telemetry = self.broker.telemetry
        with telemetry.tracer.span("deliver") as span:
            span.annotate("namespace", str(topic.namespace_name))
            record_delivery(telemetry, topic, delivered, PUSHED_MESSAGES, self.clock.now_ms(), span)

    def _release(self, topic: TopicName, conn: Connection, delivered: list[DeliveredEntry]) -> None:
        """Claimed for `conn` and not pushed: back to the pool, not counted as a redelivery."""
        entries = sorted({d.entry.entry_id for d in delivered})
        self.broker.subscriptions.update_cursor(topic, conn.subscription,
                                                lambda state, _now: state.return_unsent(conn.name, entries))

    def opening(self, conn: Connection, sent: int) -> bool:
        """Whether a push refused as gone (410) may have met a connection whose $connect is still
        running: API Gateway opens a connection only once $connect returns (up to its integration
        timeout), and until then refuses pushes to it. Such a connection is kept; its post-connect
        dispatch (`deliver_backlog`) pushes once it is open."""
        return sent == 0 and self.clock.now_ms() - conn.connected_at < CONNECT_WINDOW_MS

    def refused(self, topic: TopicName, conn: Connection, sent: int, delivered: list[DeliveredEntry]) -> bool:
        """A consumer's push was refused after `sent` frames. A connection that is gone is dropped
        (its deliveries are released for the others); one that may still be opening gets its
        claims back into the pool uncounted. True when it has opened since: push to it again."""
        if not self.opening(conn, sent):
            self.known.drop(conn)  # gone: its deliveries are released for the others
            return False
        self._release(topic, conn, delivered)
        # not open yet: its deliver_backlog claims after it opens, so after this release
        return self.gateway.connected(conn.connection_id)

    def dispatch_reader(self, conn: Connection) -> int:
        """A reader's push: entries from its position within its window; the position moves by a
        conditional write first, so two dispatchers never send the same messages."""
        topic = TopicName.parse(conn.topic)
        if not topic.is_persistent:
            return 0
        pushed = 0
        for _ in range(MAX_ROUNDS):
            budget = conn.queue_size - conn.inflight
            if budget <= 0:
                break
            try:
                entries = self._read_sealed(topic, conn.position, min(budget, MAX_ENTRIES_PER_RECEIVE))
            except TopicNotFound:
                break
            frames: list[str] = []
            position, skip = conn.position, conn.skip
            for entry in entries:
                first = skip + 1 if entry.entry_id == position else 0
                room = budget - len(frames)
                out = entry_frames(entry, topic.partition_index, 0, first_index=first, limit=room)
                frames.extend(out)
                count = 1 if entry.chunk is not None else entry.num_messages
                if not entry.hole and first + len(out) < count:  # the window closed inside this entry
                    position, skip = entry.entry_id, first + len(out) - 1
                    break
                position, skip = entry.entry_id + 1, -1
            if (position, skip) == (conn.position, conn.skip):
                break
            if not self.registry.advance_reader(conn, position, skip, len(frames)):
                break  # another dispatcher moved it: it pushes
            sent = self.gateway.send(conn.connection_id, frames) if frames else 0
            pushed += sent
            moved = replace(conn, position=position, skip=skip, inflight=conn.inflight + len(frames))
            if sent < len(frames):
                if not self.opening(conn, sent):
                    self.known.drop(conn)
                    break
                # still opening: back to where it was, for its deliver_backlog (or this, if open now)
                if not self.registry.advance_reader(moved, conn.position, conn.skip, -len(frames)):
                    break
                if self.gateway.connected(conn.connection_id):
                    continue
                break
            conn = moved
            self._record(topic, [DeliveredEntry(e, 0) for e in entries if e.entry_id < position
                                 or (e.entry_id == position and skip >= 0)])
            if len(entries) < MAX_ENTRIES_PER_RECEIVE:
                break
        return pushed

    def _read_sealed(self, topic: TopicName, start: int, count: int) -> list[Entry]:
        seal, writer = self.broker.metadata.get_topic_state(topic)
        if writer is None:
            raise TopicNotFound(f"Topic {topic} not found")
        view = SubscriptionView(None, 0, seal, writer)
        sealed_only(view)
        return self.broker.reader.read(topic, max(start, seal.first_entry), count, seal, view.writer)

    # --- a topic's connections -------------------------------------------------------------------
    def views_of(self, connections: dict[str, list[Connection]]) -> dict[str, dict[str, SubscriptionView]]:
        """The views of the subscriptions these consumers are attached to, in one read (topic ->
        subscription -> view), for the first step of each (`topic_tasks`); none when the read fails
        (each dispatch then reads its own)."""
        keys = sorted({(topic, c.subscription) for topic, conns in connections.items() for c in conns
                       if c.role == "consumer" and TopicName.parse(topic).is_persistent})
        out: dict[str, dict[str, SubscriptionView]] = {}
        if not keys:
            return out
        try:
            views = self.broker.metadata.get_subscription_views([(TopicName.parse(t), s) for t, s in keys])
        except Exception:
            log.exception("subscription views not read")
            return out
        for (topic, subscription), view in zip(keys, views, strict=True):
            out.setdefault(topic, {})[subscription] = view
        return out

    def dispatch_topic(self, topic: str, connections: list[Connection] | None = None,
                       new_messages: int = 0, views: dict[str, SubscriptionView] | None = None) -> PushReport:
        """Push to a topic's connected consumers and readers: subscriptions in parallel, the
        consumers of one subscription one after the other (in random order). With `new_messages`
        (a journal batch), a Shared subscription's consumers first get a fair share each; `views`:
        the subscriptions' views when the caller has just read them (`views_of`)."""
        conns = self.registry.of_topic(topic) if connections is None else connections
        report = PushReport(topics=1, connections=len(conns))
        for result in self.run(self.topic_tasks(topic, conns, new_messages, views)):
            report.add(result)
        return report

    def topic_tasks(self, topic: str, conns: list[Connection], new_messages: int,
                     views: dict[str, SubscriptionView] | None = None) -> list[Callable[[], PushReport]]:
        """One task per subscription (its consumers in turn) and per reader; `views`: the
        subscriptions' views, when the caller has just read them."""
        if not TopicName.parse(topic).is_persistent:
            return []
        groups: dict[str, list[Connection]] = {}
        tasks: list[Callable[[], PushReport]] = []
        for c in conns:
            if c.role == "consumer":
                groups.setdefault(c.subscription, []).append(c)
            elif c.role == "reader":
                tasks.append(lambda c=c: self._count(self.dispatch_reader, c))  # type: ignore[misc]
        for subscription, members in groups.items():
            view = (views or {}).get(subscription)
            tasks.append(lambda members=members, view=view: self._dispatch_group(  # type: ignore[misc]
                members, new_messages, view))
        return tasks

    def _dispatch_group(self, members: list[Connection], new_messages: int,
                        view: SubscriptionView | None = None) -> PushReport:
        report = PushReport()
        order = random.sample(members, len(members))
        cap = None
        if new_messages and len(order) > 1 and order[0].subscription_type == "Shared":
            cap = math.ceil(new_messages / len(order))
        if cap is not None and not any(c.pull_mode for c in order):
            # the shares in one step; while someone took a whole share more may be ready: another
            # round of shares (each consumer's window bounds it), not one consumer taking the rest
            for _ in range(MAX_ROUNDS):
                try:
                    pushed, more = dispatch_shared_group(self, order, cap, view)
                except MagnetarError as exc:
                    log.warning("push to %s/%s failed: %s", order[0].topic, order[0].subscription, exc.reason)
                    break
                except Exception:  # a push problem never fails the caller (the journal batch)
                    log.exception("push to %s/%s failed", order[0].topic, order[0].subscription)
                    break
                report.pushed += pushed
                view = None  # read anew by the next round
                if not more:
                    break
            return report
        saturated = False
        for n, c in enumerate(order):  # the view read by the caller serves the first consumer's first step
            got = self._count(functools.partial(self.dispatch_consumer, cap=cap, view=None if n else view), c)
            report.add(got)
            saturated = saturated or (cap is not None and got.pushed >= cap)
        if saturated:  # more than the fair shares was ready: let them take the rest
            for c in order:
                report.add(self._count(self.dispatch_consumer, c))
        return report

    def _count(self, dispatch: Callable[[Connection], int], conn: Connection) -> PushReport:
        report = PushReport()
        try:
            report.pushed = dispatch(conn)
        except MagnetarError as exc:
            log.warning("push to %s on %s failed: %s", conn.connection_id, conn.topic, exc.reason)
        except Exception:  # a push problem never fails the caller (the journal batch, a frame)
            log.exception("push to %s on %s failed", conn.connection_id, conn.topic)
        return report

    def run(self, tasks: list[Callable[[], PushReport]]) -> Iterable[PushReport]:
        """Run pushes, in parallel on the container's pool when there are several."""
        inside = threading.current_thread().name.startswith("push")  # never wait on the pool from it
        if len(tasks) <= 1 or self.workers <= 1 or inside:
            return [task() for task in tasks]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="push")
            pool = self._pool
        # each task in a copy of this context: the invocation's telemetry goes along
        runs = [(contextvars.copy_context(), task) for task in tasks]
        return list(pool.map(lambda run: run[0].run(run[1]), runs))

    def send_each(self, pushes: list[tuple[Connection, list[str]]]) -> list[int | None]:
        """Each connection's frames in order, the connections in parallel: a PostToConnection
        takes ~10-30 ms on AWS, so a hundred consumers' shares one after the other would hold the
        journal batch (and its shard's sealing) for seconds. Per connection: the frames sent
        (fewer: it is gone), or None when the push failed otherwise (logged; what it was handed
        stays with it until its lease or ack timeout, as after any failed push)."""
        def send(push: tuple[Connection, list[str]]) -> int | None:
            conn, frames = push
            try:
                return self.gateway.send(conn.connection_id, frames)
            except Exception:  # a push problem never fails the caller (the journal batch)
                log.exception("push to %s on %s failed", conn.connection_id, conn.topic)
                return None

        if len(pushes) <= 1:
            return [send(p) for p in pushes]
        with self._lock:
            if self._senders is None:
                self._senders = ThreadPoolExecutor(SEND_WORKERS, thread_name_prefix="send")
            senders = self._senders
        runs = [(contextvars.copy_context(), push) for push in pushes]
        return list(senders.map(lambda run: run[0].run(send, run[1]), runs))

    def safely(self, dispatch: Callable[[Connection], int], conn: Connection) -> int:
        return self._count(dispatch, conn).pushed

    # --- maintenance -----------------------------------------------------------------------
    def redispatch(self) -> PushReport:
        """For the maintenance run: push due redeliveries (negative-ack delays, ack timeouts,
        expired leases) and anything a failed push left, for every connected subscription; forget
        connections past API Gateway's 2 h limit whose $disconnect never came. The topics'
        connections in one lookup (`of_topics`: two BatchGetItems per 100 topics) and every
        subscription's view in one read (one BatchGetItem per 33): a few requests per 100 idle
        consumers and minute, and a dispatch only where something is due."""
        report = PushReport()
        now = self.clock.now_ms()
        indexed = self.registry.topics()
        found = self.registry.of_topics(list(indexed))
        alive: dict[str, list[Connection]] = {}
        for topic, last_connect in indexed.items():
            for conn in found.get(topic, []):
                if now - conn.connected_at > MAX_CONNECTION_MS + 60_000:
                    self.known.drop(conn)
                    report.gone += 1
                else:
                    alive.setdefault(topic, []).append(conn)
            if topic not in alive:
                self.registry.forget_topic(topic, last_connect)
        views = self.views_of(alive)
        for topic, conns in alive.items():
            due = [c for c in conns if c.role == "reader"]
            for subscription in sorted({c.subscription for c in conns if c.role == "consumer"}):
                view = views.get(topic, {}).get(subscription)
                members = [c for c in conns if c.role == "consumer" and c.subscription == subscription]
                if view is not None and view.cursor is not None and (_due(view, now) or any(c.acks for c in members)):
                    due.extend(members)
            if due:
                result = self.dispatch_topic(topic, due, views=views.get(topic))
                report.topics += 1
                report.connections += len(due)
                report.add(result)
        return report


def _due(view: SubscriptionView, now: int) -> bool:
    """Whether a dispatch of this subscription could hand something out now."""
    state = view.cursor
    if state is None:
        return False
    if any(lease.expires_at <= now for lease in state.consumers.values()):
        return True
    for d in state.deliveries:
        if d.sent and d.consumer is not None and d.deadline is not None and d.deadline <= now:
            return True
        if not d.sent and d.not_before <= now:
            return True
    return state.read_position < view.seal.next_entry
