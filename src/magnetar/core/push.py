"""Push delivery over WebSocket connections (Pulsar's WebSocket API), and non-persistent topics.

A WebSocket consumer is an ordinary consumer of the durable cursor: one consumer name per
connection, attached with a lease covering API Gateway's 2 h connection limit. Every push is a
*dispatch step* exactly like a long poll with no wait: read the cursor, admit new entries, hand
the consumer what is ready for it within its permits, one conditional write; then one
PostToConnection per message. So Shared, Failover, Key_Shared, ack timeouts, negative acks and
redelivery behave as they do for polling consumers, and a consumer's window is computed from the
cursor itself (the entries it holds unacknowledged), which costs no write of its own.

What triggers a dispatch (no Lambda waits for anything):
- the journal consumer, after sealing a batch, for the topics of the batch that have
  connections (entries served from the batch it holds in memory, through the broker's cache);
- a consumer's frames: an acknowledgement (which rides on the dispatch write), a negative
  acknowledgement, a permit;
- the connect: API Gateway accepts pushes only once $connect has returned, so the WebSocket
  function invokes itself asynchronously to push the backlog (`deliver_backlog`);
- a disconnect, for the other consumers of the subscription (the released entries);
- the maintenance run, once a minute (`redispatch`): due redeliveries (negative-ack delays, ack
  timeouts, expired leases) and anything a failed push left behind.

Pull mode (`pullMode=true`) keeps its permits in the connection's item: a permit frame adds to
them, a dispatch takes what it pushed with a conditional write (so two dispatchers never push
past the permits). Readers keep their position there too (they have no cursor).

Non-persistent topics have no journal, no segments and no cursor: the broker fans a publish out
at once to the consumers connected at that moment, one per subscription chosen by its type,
each message taking a permit; a subscription without a consumer with permits drops it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from magnetar.core.authz import ANONYMOUS, Access, Principal, Target
from magnetar.core.broker import Broker
from magnetar.core.crashpoints import crash_point
from magnetar.core.cursor import HASH_RANGE, CursorState, key_hash
from magnetar.core.dispatch import MAX_ENTRIES_PER_RECEIVE, NO_ACKS, Acks, DeliveredEntry
from magnetar.core.entry import Batch, Entry, Message, MessageIdData, decode_entry, peek_header
from magnetar.core.errors import (
    ConsumerBusy,
    InvalidInput,
    MagnetarError,
    NotFound,
    RetryableError,
    SubscriptionNotFound,
    TopicNotFound,
)
from magnetar.core.naming import TopicName
from magnetar.core.ports import Connection, ConnectionRegistry, JournalRecord, PushGateway, SubscriptionView
from magnetar.core.websocket import (
    FAILED_TO_DESERIALIZE,
    MAX_CONNECTION_MS,
    PAYLOAD_ENCODING_ERROR,
    PUSH_LEASE_MS,
    UNKNOWN_ERROR,
    OpenRequest,
    decode_message_id,
    entry_frames,
    message_frame,
    parse_frame,
    parse_open,
    producer_ack,
    producer_error,
    producer_frame,
)

log = logging.getLogger(__name__)

NON_PERSISTENT_POLL_REASON = (
    "Non-persistent topics deliver by push only: consume over the WebSocket API "
    "(/ws/v2/consumer/non-persistent/{tenant}/{namespace}/{topic}/{subscription})"
)
DISPATCH_WORKERS = 8  # subscriptions and readers dispatched in parallel by one run
MAX_ROUNDS = 20  # claims per connection per dispatch (each up to 100 entries)
BACKLOG_WAIT_S = 5.0  # how long the post-connect dispatch waits for API Gateway to open the connection
KNOWN_CONNECTIONS = 10_000  # connections remembered per container (their connect-time fields never change)
NAMESPACE_CACHE_MS = 10_000
CLAIM_RETRIES = 40  # conflicting cursor writes (parallel frames of one subscription), backing off
MAX_BACKOFF_S = 0.25
MAX_PREFETCH = 1_000  # entries of a sealed backlog read into the cache ahead of a dispatch's claims


def inbox_acks(codes: Iterable[str], consumer: str, base: Acks = NO_ACKS) -> Acks:
    """Acknowledgements from inbox entries ("entry" or "entry:size:index"), added to `base`."""
    whole = set(base.entries)
    batch: dict[int, tuple[int, set[int]]] = {e: (n, set(ix)) for e, n, ix in base.batch}
    for code in codes:
        parts = code.split(":")
        try:
            numbers = [int(p) for p in parts]
        except ValueError:
            continue
        if len(numbers) == 1:
            whole.add(numbers[0])
        elif len(numbers) == 3:
            batch.setdefault(numbers[0], (numbers[1], set()))[1].add(numbers[2])
    return Acks(tuple(sorted(whole)), tuple((e, n, tuple(sorted(ix))) for e, (n, ix) in sorted(batch.items())),
                base.cumulative, base.nacks, base.nack_delay_ms, base.epoch, consumer or base.consumer)


def outstanding(state: CursorState, consumer: str) -> int:
    """Entries handed to `consumer` and not acknowledged: its part of the window."""
    return sum(d.end - d.start for d in state.deliveries if d.sent and d.consumer == consumer)


@dataclass
class JournalPlan:
    """What the journal consumer pushes after sealing a batch: the topics that have connections,
    and the batch's entries for them, decoded once (served from the broker's cache)."""

    connections: dict[str, list[Connection]] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    messages: dict[str, int] = field(default_factory=dict)  # new messages per topic


@dataclass
class PushReport:
    topics: int = 0
    connections: int = 0
    pushed: int = 0
    gone: int = 0  # connections found closed (detached and forgotten)

    def add(self, other: PushReport) -> None:
        self.pushed += other.pushed
        self.gone += other.gone


class PushService:
    def __init__(self, broker: Broker, registry: ConnectionRegistry, gateway: PushGateway,
                 workers: int = DISPATCH_WORKERS) -> None:
        self.broker = broker
        self.registry = registry
        self.gateway = gateway
        self.clock = broker.clock
        self.workers = workers
        self._known: OrderedDict[str, Connection] = OrderedDict()
        self._namespaces: dict[str, tuple[int, bool]] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._round_robin = itertools.count(random.randrange(1 << 16))

    # --- connect / disconnect ------------------------------------------------------------
    def connect(self, connection_id: str, path: str, params: dict[str, str],
                principal: Principal = ANONYMOUS) -> Connection:
        """$connect: authorize, validate the Pulsar path and parameters, attach, record the
        connection. Its frames act on this topic and subscription only, so they need no check."""
        authz = self.broker.authz
        authz.authenticate(principal, Access.PRODUCE)
        request = parse_open(path, params)
        access = Access.PRODUCE if request.role == "producer" else Access.CONSUME
        authz.check(principal, access, Target.of_topic(request.topic, request.subscription or None))
        now = self.clock.now_ms()
        if request.role == "producer":
            conn = self._open_producer(connection_id, request, now)
        elif request.role == "reader":
            conn = self._open_reader(connection_id, request, now)
        else:
            conn = self._open_consumer(connection_id, request, now)
        try:
            self.registry.add(conn)
        except BaseException:
            self._detach(conn)
            raise
        self._remember(conn)
        return conn

    def _open_producer(self, connection_id: str, request: OpenRequest, now: int) -> Connection:
        name = request.name or f"ws-{connection_id}"
        if request.topic.is_persistent:
            self.broker.writer.attach_producer(request.topic, name, "Shared", PUSH_LEASE_MS)
        else:
            self._check_namespace(request.topic)
        return Connection(connection_id, "producer", str(request.topic), now, name)

    def _open_reader(self, connection_id: str, request: OpenRequest, now: int) -> Connection:
        topic = request.topic
        name = request.name or f"reader-{connection_id}"
        conn = Connection(connection_id, "reader", str(topic), now, name, queue_size=request.queue_size)
        if not topic.is_persistent:
            self._check_namespace(topic)
            return replace(conn, permits=request.queue_size)  # live messages only, within its window
        position, skip = 0, -1
        if request.start != "earliest":
            from magnetar.core.ledger import ensure_topic

            ensure_topic(self.broker.metadata, topic, now)
            if request.start == "latest":
                _, writer = self.broker.metadata.get_topic_state(topic)
                position = writer.next_entry if writer else 0
            else:  # after the given message (Pulsar's reader start is exclusive)
                mid = decode_message_id(request.start)
                position = max(0, mid.entry_id) + (1 if mid.batch_index < 0 else 0)
                skip = mid.batch_index if mid.batch_index >= 0 else -1
        return replace(conn, position=position, skip=skip)

    def _open_consumer(self, connection_id: str, request: OpenRequest, now: int) -> Connection:
        topic = request.topic
        unique = connection_id.replace("/", "_")  # one consumer per connection, whatever its consumerName
        name = f"{request.name}-{unique}" if request.name else f"ws-{unique}"
        conn = Connection(connection_id, "consumer", str(topic), now, name, request.subscription,
                          request.subscription_type, request.pull_mode, request.queue_size, request.nack_delay_ms,
                          request.ack_timeout_ms)
        if not topic.is_persistent:
            self._check_namespace(topic)
            self._check_non_persistent_subscription(conn)
            return replace(conn, permits=0 if request.pull_mode else request.queue_size)

        def subscribe() -> None:
            self.broker.subscriptions.subscribe(topic, request.subscription, name, request.subscription_type,
                                                request.initial_position, request.ack_timeout_ms, PUSH_LEASE_MS)

        try:
            subscribe()
        except ConsumerBusy:
            # a consumer whose connection closed without its $disconnect (best effort on AWS) holds
            # the subscription until its lease ends: find such connections and let them go (or
            # its $disconnect was running: it has detached it by now)
            self._evict_closed(conn)
            subscribe()
        return conn

    def _check_non_persistent_subscription(self, conn: Connection) -> None:
        """Pulsar's rules for a subscription's consumers, from the topic's connections."""
        for attempt in range(2):
            others = [c for c in self.registry.of_topic(conn.topic)
                      if c.role == "consumer" and c.subscription == conn.subscription]
            busy = ""
            if others and others[0].subscription_type != conn.subscription_type:
                busy = (f"Subscription is of type {others[0].subscription_type}, cannot attach a "
                        f"{conn.subscription_type} consumer")
            elif others and conn.subscription_type == "Exclusive":
                busy = "Exclusive consumer is already connected"
            if not busy:
                return
            if attempt or not self._evict_closed(conn, others):
                raise ConsumerBusy(busy)

    def _evict_closed(self, conn: Connection, candidates: list[Connection] | None = None) -> bool:
        """Detach the subscription's connections that API Gateway no longer has; True if any."""
        if candidates is None:
            candidates = [c for c in self.registry.of_topic(conn.topic)
                          if c.role == "consumer" and c.subscription == conn.subscription]
        gone = [c for c in candidates
                if c.connection_id != conn.connection_id and not self.gateway.connected(c.connection_id)]
        for c in gone:
            self._drop(c)
        return bool(gone)

    def disconnect(self, connection_id: str) -> None:
        """$disconnect: detach (a consumer's unacknowledged messages go back for redelivery) and
        push what it released to the other consumers of its subscription."""
        conn = self._lookup(connection_id)
        if conn is None:
            return
        self._drop(conn)
        if conn.role == "consumer" and TopicName.parse(conn.topic).is_persistent:
            for other in self.registry.of_topic(conn.topic):
                if other.role == "consumer" and other.subscription == conn.subscription:
                    self._safely(self._dispatch_one, other)

    def after_seek(self, topic: TopicName, subscription: str) -> None:
        """A seek drops the acknowledgements its push consumers have not written to the cursor
        yet (as acknowledgements from before a seek are ignored), then pushes from the new position."""
        members = [c for c in self.registry.of_topic(str(topic))
                   if c.role == "consumer" and c.subscription == subscription]
        for conn in members:
            self._clear_inbox(conn)
        if members:
            self.dispatch_topic(str(topic), [replace(c, acks=frozenset()) for c in members])

    def deliver_backlog(self, connection_id: str, wait_s: float = BACKLOG_WAIT_S) -> int:
        """The dispatch that follows a connect: once API Gateway has opened the connection (it
        refuses pushes while $connect runs), push what is already there for it."""
        conn = self._lookup(connection_id)
        if conn is None or conn.role == "producer" or not TopicName.parse(conn.topic).is_persistent:
            return 0
        deadline = time.monotonic() + wait_s
        pause = 0.05
        while not self.gateway.connected(connection_id):
            if time.monotonic() >= deadline:
                self._drop(conn)  # it never opened (or closed at once)
                return 0
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
        current = self.registry.current(conn)
        return self._dispatch_one(current) if current is not None else 0

    # --- frames ----------------------------------------------------------------------------
    def receive_frame(self, connection_id: str, body: str | None) -> str | None:
        """$default: one client frame; returns the frame to answer with (the route response), if any."""
        conn = self._lookup(connection_id)
        if conn is None:
            log.warning("frame from unknown connection %s", connection_id)
            return json.dumps({"result": "error", "errorMsg": "Unknown connection; reconnect"})
        if conn.role == "producer":
            return self._produce(conn, body)
        try:
            frame = parse_frame(body)
            if conn.role == "reader":
                self._reader_frame(conn)
                return None
            return self._consumer_frame(conn, frame)
        except MagnetarError as exc:
            return json.dumps({"result": "error", "errorMsg": exc.reason})

    def _produce(self, conn: Connection, body: str | None) -> str:
        try:
            frame = parse_frame(body)
        except InvalidInput as exc:
            return producer_error(FAILED_TO_DESERIALIZE, exc.reason, None)
        try:
            request = producer_frame(frame)
        except InvalidInput as exc:
            return producer_error(PAYLOAD_ENCODING_ERROR, exc.reason, frame.get("context"))
        topic = TopicName.parse(conn.topic)
        try:
            if not topic.is_persistent:
                message_id = self.publish_non_persistent(topic, [request.message], conn.name)[0]
            else:
                deliver_at = request.deliver_at
                if request.deliver_after_ms:
                    deliver_at = self.clock.now_ms() + request.deliver_after_ms
                batch = Batch.of([request.message], batched=False, sequence_id=request.sequence_id,
                                 highest_sequence_id=request.sequence_id, deliver_at=deliver_at)
                message_id = self.broker.writer.append(topic, batch, conn.name).message_ids[0]
        except MagnetarError as exc:
            return producer_error(UNKNOWN_ERROR, exc.reason, request.context)
        return producer_ack(message_id, request.context)

    def _consumer_frame(self, conn: Connection, frame: dict[str, object]) -> str | None:
        kind = frame.get("type")
        topic = TopicName.parse(conn.topic)
        if kind == "isEndOfTopic":
            return json.dumps({"endOfTopic": False})  # topics are never terminated
        if kind == "permit":
            count = frame.get("permitMessages")
            if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
                raise InvalidInput("Missing required permitMessages field for 'permit' command")
            if conn.pull_mode:  # as Pulsar: permits mean nothing without pull mode
                current = self.registry.add_permits(conn, count)
                if current is not None and topic.is_persistent:
                    self._dispatch_consumer(current)
            return None
        if kind == "unsubscribe":
            if topic.is_persistent:
                try:
                    self.broker.subscriptions.unsubscribe(topic, conn.subscription, conn.name)
                finally:
                    self.gateway.close(conn.connection_id)  # as Pulsar, the consumer is closed either way
            else:
                self.gateway.close(conn.connection_id)
            return None
        if kind not in (None, "ack", "negativeAcknowledge"):
            raise InvalidInput(f"Unknown frame type {kind!r}")
        ids = [decode_message_id(frame.get("messageId"))] if "messageId" in frame or "messageIds" not in frame else []
        extra = frame.get("messageIds")  # Magnetar: several acknowledgements in one frame
        if isinstance(extra, list):
            ids.extend(decode_message_id(m) for m in extra)
        if not topic.is_persistent:
            if not conn.pull_mode:  # each acknowledgement gives its permit back
                self.registry.add_permits(conn, len(ids))
            return None
        sizes: dict[int, int] = {}  # Magnetar: batchSize (of messageId) or batchSizes {entry: size}
        raw = frame.get("batchSizes")
        if isinstance(raw, dict):
            sizes = {int(k): v for k, v in raw.items() if str(k).isdigit() and isinstance(v, int)}
        size = frame.get("batchSize")
        if isinstance(size, int) and ids:
            sizes[ids[0].entry_id] = size
        latest: Connection | None = conn
        if kind == "negativeAcknowledge" or conn.ack_timeout_ms > 0:
            # written to the cursor at once: a negative ack is redelivered after its delay, and an
            # ack must land before the ack timeout would redeliver the message
            if conn.pull_mode:
                latest = self.registry.current(conn)  # its permits, which frames do not carry
            if kind == "negativeAcknowledge":
                acks = Acks(nacks=tuple(sorted({m.entry_id for m in ids if m.entry_id >= 0})),
                            nack_delay_ms=conn.nack_delay_ms, consumer=conn.name)
            else:
                acks = inbox_acks(self._ack_codes(topic, ids, sizes), conn.name)
            self._dispatch_consumer(latest or replace(conn, permits=0), acks)
            return None
        # Acknowledgements go to the connection's inbox (an unconditional write: the frames of a
        # consumer arrive in parallel invocations, and would conflict on the cursor); a dispatch
        # writes them to the cursor, at once when half the window is acknowledged (Pulsar's
        # consumers return flow permits in such steps), else with the next push, the disconnect
        # or the maintenance run.
        codes = self._ack_codes(topic, ids, sizes)
        if not codes:
            return None
        latest = self.registry.add_acks(conn, codes)
        if latest is None:  # off its topic already (closed): straight to the cursor
            with contextlib.suppress(SubscriptionNotFound):
                self.broker.subscriptions.acknowledge(topic, conn.subscription, inbox_acks(codes, conn.name))
            return None
        threshold = max(1, conn.queue_size // 2)
        before = len(latest.acks - frozenset(codes))
        if len(latest.acks) // threshold > before // threshold:  # this frame crossed it: one dispatch
            self._dispatch_consumer(latest, refill_at=1 if conn.pull_mode else threshold)
        return None

    def _ack_codes(self, topic: TopicName, ids: list[MessageIdData], sizes: dict[int, int]) -> list[str]:
        """Acknowledged ids as inbox entries: "entry", or "entry:size:index" inside a batch."""
        codes: list[str] = []
        for mid in ids:
            if mid.entry_id < 0:
                continue
            if mid.batch_index >= 0:
                size = sizes.get(mid.entry_id) or self._batch_size(topic, mid.entry_id)
                if size > 1:
                    codes.append(f"{mid.entry_id}:{size}:{mid.batch_index}")
                    continue
            codes.append(str(mid.entry_id))
        return codes

    def _batch_size(self, topic: TopicName, entry_id: int) -> int:
        """Messages in an entry (a Pulsar client acknowledges a batch message by its id alone)."""
        cached = self.broker.cache.get(str(topic), entry_id)
        entry = cached or self.broker.find_entry(topic, entry_id)
        return entry.num_messages if entry is not None and entry.batched else 0

    def _reader_frame(self, conn: Connection) -> None:
        """Any frame from a reader acknowledges one message (Pulsar's reader flow control)."""
        if not TopicName.parse(conn.topic).is_persistent:
            self.registry.add_permits(conn, 1)
            return
        current = self.registry.reader_acked(conn, 1)
        if current is not None:
            self._dispatch_reader(current)

    # --- dispatch ----------------------------------------------------------------------------
    def _dispatch_one(self, conn: Connection) -> int:
        if conn.role == "reader":
            return self._dispatch_reader(conn)
        if conn.role == "consumer":
            return self._dispatch_consumer(conn)
        return 0

    def _dispatch_consumer(self, conn: Connection, acks: Acks = NO_ACKS, cap: int | None = None,
                           refill_at: int = 1) -> int:
        """Dispatch steps for one connected consumer, until its permits or what is ready run out.

        `refill_at`: an acknowledgement frame gives its permit back, but claims only once that
        much of the window is free (Pulsar's consumers send flow permits once half their queue is
        consumed): a backlog is then read in chunks, not an entry per acknowledgement."""
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
                delivered, more = self._claim(topic, conn, window, acks)
            except SubscriptionNotFound:
                if acks:  # not attached (any more): its acknowledgements count all the same
                    with contextlib.suppress(SubscriptionNotFound):
                        self.broker.subscriptions.acknowledge(topic, conn.subscription, acks)
                self._clear_inbox(conn)
                return pushed
            acks = NO_ACKS  # written with the first claim
            conn = self._clear_inbox(conn)
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
                self._drop(conn)  # gone: its deliveries are released for the others
                break
            if cap is not None or not more:
                break
        return pushed

    def _claim(self, topic: TopicName, conn: Connection, budget: Callable[[CursorState], int],
               acks: Acks) -> tuple[list[DeliveredEntry], bool]:
        """One dispatch step for a push consumer: `SubscriptionService.receive` with no wait, but
        the number of messages comes from the cursor read by this very step (the window). Also
        says whether more may be ready (a step hands out at most 100 entries and reads ahead a few
        segments at a time)."""
        service = self.broker.subscriptions
        for attempt in range(CLAIM_RETRIES):
            view = service.metadata.get_subscription_view(topic, conn.subscription)
            if view.cursor is None:
                raise SubscriptionNotFound(f"Subscription {conn.subscription} not found on {topic}")
            _sealed_only(view)
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
                delivered = service.claim(topic, view, state, conn.name, limit, now, lease.ack_timeout_ms, "")
            more = bool(delivered) and (len(delivered) >= MAX_ENTRIES_PER_RECEIVE
                                        or state.read_position < view.seal.next_entry)
            if not delivered and state.to_dict() == before:
                return [], False
            if service.metadata.put_cursor(topic, conn.subscription, state, view.cursor_version):
                crash_point("dispatch.after_claim")
                return delivered, more
            # acknowledgement frames of one subscription arrive in parallel invocations: back off
            self.clock.sleep(random.uniform(0.0, min(MAX_BACKOFF_S, 0.005 * 2 ** attempt)))
        raise RetryableError("Too much contention on the subscription; retry")

    def _clear_inbox(self, conn: Connection) -> Connection:
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

    def _release(self, topic: TopicName, conn: Connection, delivered: list[DeliveredEntry]) -> None:
        entries = tuple(sorted({d.entry.entry_id for d in delivered}))
        self.broker.subscriptions.acknowledge(topic, conn.subscription,
                                              Acks(nacks=entries, nack_delay_ms=0, consumer=conn.name))

    def _dispatch_reader(self, conn: Connection) -> int:
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
            if sent < len(frames):
                self._drop(conn)
                break
            conn = replace(conn, position=position, skip=skip, inflight=conn.inflight + len(frames))
            if len(entries) < MAX_ENTRIES_PER_RECEIVE:
                break
        return pushed

    def _read_sealed(self, topic: TopicName, start: int, count: int) -> list[Entry]:
        seal, writer = self.broker.metadata.get_topic_state(topic)
        if writer is None:
            raise TopicNotFound(f"Topic {topic} not found")
        view = SubscriptionView(None, 0, seal, writer)
        _sealed_only(view)
        return self.broker.reader.read(topic, max(start, seal.first_entry), count, seal, view.writer)

    def dispatch_topic(self, topic: str, connections: list[Connection] | None = None,
                       new_messages: int = 0) -> PushReport:
        """Push to a topic's connected consumers and readers: subscriptions in parallel, the
        consumers of one subscription one after the other (in random order). With `new_messages`
        (a journal batch), a Shared subscription's consumers first get a fair share each."""
        conns = self.registry.of_topic(topic) if connections is None else connections
        report = PushReport(topics=1, connections=len(conns))
        for result in self._run(self._topic_tasks(topic, conns, new_messages)):
            report.add(result)
        return report

    def _topic_tasks(self, topic: str, conns: list[Connection], new_messages: int) -> list[Callable[[], PushReport]]:
        """One task per subscription (its consumers in turn) and per reader."""
        if not TopicName.parse(topic).is_persistent:
            return []
        groups: dict[str, list[Connection]] = {}
        tasks: list[Callable[[], PushReport]] = []
        for c in conns:
            if c.role == "consumer":
                groups.setdefault(c.subscription, []).append(c)
            elif c.role == "reader":
                tasks.append(lambda c=c: self._count(self._dispatch_reader, c))  # type: ignore[misc]
        for members in groups.values():
            tasks.append(lambda members=members: self._dispatch_group(members, new_messages))  # type: ignore[misc]
        return tasks

    def _dispatch_group(self, members: list[Connection], new_messages: int) -> PushReport:
        report = PushReport()
        order = random.sample(members, len(members))
        cap = None
        if new_messages and len(order) > 1 and order[0].subscription_type == "Shared":
            cap = math.ceil(new_messages / len(order))
        saturated = False
        for c in order:
            got = self._count(lambda conn: self._dispatch_consumer(conn, cap=cap), c)
            report.add(got)
            saturated = saturated or (cap is not None and got.pushed >= cap)
        if saturated:  # more than the fair shares was ready: let them take the rest
            for c in order:
                report.add(self._count(self._dispatch_consumer, c))
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

    def _run(self, tasks: list[Callable[[], PushReport]]) -> Iterable[PushReport]:
        inside = threading.current_thread().name.startswith("push")  # never wait on the pool from it
        if len(tasks) <= 1 or self.workers <= 1 or inside:
            return [task() for task in tasks]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="push")
            pool = self._pool
        return list(pool.map(lambda task: task(), tasks))

    def _safely(self, dispatch: Callable[[Connection], int], conn: Connection) -> int:
        return self._count(dispatch, conn).pushed

    # --- the journal consumer ------------------------------------------------------------------
    def plan_journal_batch(self, records: list[JournalRecord]) -> JournalPlan:
        """Before sealing: the batch's topics that have connections (one query per topic) and
        their entries that this batch settles, decoded once. Only the record the sealer keeps for
        an id is cached: the first at or past the seal state's next entry (one read for all topics)."""
        by_topic: dict[str, list[tuple[int, JournalRecord]]] = {}
        for record in records:
            try:
                header = peek_header(record.data)
            except InvalidInput:
                continue
            by_topic.setdefault(header.topic, []).append((header.entry_id, record))
        plan = JournalPlan()
        try:  # pushing never holds sealing up: without a plan, the next dispatch catches up
            for topic in by_topic:
                conns = [c for c in self.registry.of_topic(topic) if c.role in ("consumer", "reader")]
                if conns:
                    plan.connections[topic] = conns
            if not plan.connections:
                return plan
            states = self.broker.metadata.get_seal_states(sorted(plan.connections))
        except Exception:
            log.exception("no push plan for this journal batch")
            return JournalPlan()
        for topic in plan.connections:
            start = states[topic].next_entry if topic in states else 0
            seen: set[int] = set()
            for entry_id, record in by_topic[topic]:
                if entry_id < start or entry_id in seen:
                    continue
                seen.add(entry_id)
                try:
                    entry = decode_entry(record.data)
                except InvalidInput:
                    continue
                plan.entries.append(entry)
                plan.messages[topic] = plan.messages.get(topic, 0) + entry.num_messages
        return plan

    def dispatch_journal_batch(self, plan: JournalPlan) -> PushReport:
        """After sealing: push to the planned topics' connections, entries served from memory."""
        for entry in plan.entries:
            self.broker.cache.put(entry)
        report = PushReport(topics=len(plan.connections),
                            connections=sum(len(c) for c in plan.connections.values()))
        tasks = [task for topic, conns in plan.connections.items()
                 for task in self._topic_tasks(topic, conns, plan.messages.get(topic, 0))]
        try:
            for result in self._run(tasks):
                report.add(result)
        except Exception:  # never fails the journal batch: the next dispatch catches up
            log.exception("push after a journal batch failed")
        return report

    # --- maintenance -----------------------------------------------------------------------
    def redispatch(self) -> PushReport:
        """For the maintenance run: push due redeliveries (negative-ack delays, ack timeouts,
        expired leases) and anything a failed push left, for every connected subscription; forget
        connections past API Gateway's 2 h limit whose $disconnect never came. One query per
        topic with connections, one read per subscription, a dispatch only where something is due."""
        report = PushReport()
        now = self.clock.now_ms()
        for topic, last_connect in self.registry.topics().items():
            alive: list[Connection] = []
            for conn in self.registry.of_topic(topic):
                if now - conn.connected_at > MAX_CONNECTION_MS + 60_000:
                    self._drop(conn)
                    report.gone += 1
                else:
                    alive.append(conn)
            if not alive:
                self.registry.forget_topic(topic, last_connect)
                continue
            due = [c for c in alive if c.role == "reader"]
            name = TopicName.parse(topic)
            for subscription in {c.subscription for c in alive if c.role == "consumer"}:
                try:
                    view = self.broker.metadata.get_subscription_view(name, subscription)
                except MagnetarError:
                    continue
                members = [c for c in alive if c.role == "consumer" and c.subscription == subscription]
                if view.cursor is not None and (_due(view, now) or any(c.acks for c in members)):
                    due.extend(c for c in alive if c.role == "consumer" and c.subscription == subscription)
            if due:
                result = self.dispatch_topic(topic, due)
                report.topics += 1
                report.connections += len(due)
                report.add(result)
        return report

    # --- non-persistent topics ---------------------------------------------------------------
    def publish_non_persistent(self, topic: TopicName, messages: list[Message], producer: str) -> list[MessageIdData]:
        """Fan a publish out to the consumers connected now; the ids, `-1:-1` for a message
        delivered nowhere (as Pulsar answers for a dropped message)."""
        if not messages:
            raise InvalidInput("No messages to publish")
        self._check_namespace(topic)
        now = self.clock.now_ms()
        partition = topic.partition_index
        targets = [c for c in self.registry.of_topic(str(topic)) if c.role in ("consumer", "reader")]
        groups: dict[str, list[Connection]] = {}
        for c in sorted(targets, key=lambda c: c.name):
            groups.setdefault(c.subscription if c.role == "consumer" else f"\0reader:{c.connection_id}", []).append(c)
        permits = {c.connection_id: c.permits for c in targets}
        frames: dict[str, list[str]] = {}
        ledger, base = now, uuid.uuid4().int & ((1 << 40) - 1)
        ids: list[MessageIdData] = []
        for i, message in enumerate(messages):
            mid = MessageIdData(ledger, base + i, partition, -1)
            delivered = False
            for members in groups.values():
                target = self._pick(members, message, permits, partition)
                if target is None:
                    continue
                permits[target.connection_id] -= 1
                frames.setdefault(target.connection_id, []).append(message_frame(message, mid, now, 0, producer))
                delivered = True
            ids.append(mid if delivered else MessageIdData(-1, -1, partition, -1))
        by_id = {c.connection_id: c for c in targets}

        def deliver(conn: Connection, out: list[str]) -> PushReport:
            report = PushReport()
            if not self.registry.take_permits(conn, len(out), len(out)):
                return report  # another publish took its permits meanwhile: dropped, as without permits
            report.pushed = self.gateway.send(conn.connection_id, out)
            if report.pushed < len(out):
                self._drop(conn)
            return report

        self._run([lambda c=by_id[cid], out=out: deliver(c, out) for cid, out in frames.items()])  # type: ignore[misc]
        return ids

    def _pick(self, members: list[Connection], message: Message, permits: dict[str, int],
              partition: int) -> Connection | None:
        """The consumer of one subscription a message goes to, by the subscription's type."""
        kind = members[0].subscription_type if members[0].role == "consumer" else "Exclusive"
        if kind == "Shared":
            ready = [c for c in members if permits[c.connection_id] > 0]
            return ready[next(self._round_robin) % len(ready)] if ready else None
        if kind == "Key_Shared":
            chosen = members[key_hash(message.key) * len(members) // HASH_RANGE]
        elif kind == "Failover":
            chosen = members[max(partition, 0) % len(members)]
        else:
            chosen = members[0]
        return chosen if permits[chosen.connection_id] > 0 else None

    def _check_namespace(self, topic: TopicName) -> None:
        name = str(topic.namespace_name)
        now = self.clock.now_ms()
        cached = self._namespaces.get(name)
        if cached is None or now - cached[0] > NAMESPACE_CACHE_MS:
            cached = (now, self.broker.metadata.get_namespace(topic.namespace_name) is not None)
            self._namespaces[name] = cached
        if not cached[1]:
            raise NotFound(f"Namespace {topic.namespace_name} does not exist")

    # --- plumbing ----------------------------------------------------------------------------
    def _lookup(self, connection_id: str) -> Connection | None:
        with self._lock:
            conn = self._known.get(connection_id)
            if conn is not None:
                self._known.move_to_end(connection_id)
                return conn
        conn = self.registry.get(connection_id)
        if conn is not None:
            self._remember(conn)
        return conn

    def _remember(self, conn: Connection) -> None:
        with self._lock:
            self._known[conn.connection_id] = conn
            while len(self._known) > KNOWN_CONNECTIONS:
                self._known.popitem(last=False)

    def _drop(self, conn: Connection) -> None:
        """Forget a connection and detach what it was attached as (idempotent)."""
        with self._lock:
            self._known.pop(conn.connection_id, None)
        if conn.role != "consumer" or not TopicName.parse(conn.topic).is_persistent:
            self.registry.remove(conn)
            self._detach(conn)
            return
        # detached before it leaves its topic: a connect that finds the subscription busy finds
        # this connection too (and waits for it), never a consumer with no connection to evict
        current = self.registry.current(conn)
        inbox = current.acks if current is not None else frozenset()
        self._detach(conn, inbox)
        last = self.registry.remove(conn)
        if last is not None and last.acks - inbox:  # acknowledged meanwhile
            with contextlib.suppress(NotFound):
                self.broker.subscriptions.acknowledge(TopicName.parse(conn.topic), conn.subscription,
                                                      inbox_acks(last.acks - inbox, conn.name))

    def _detach(self, conn: Connection, acks: frozenset[str] = frozenset()) -> None:
        topic = TopicName.parse(conn.topic)
        if not topic.is_persistent:
            return
        try:
            if conn.role == "consumer":
                if acks:  # acknowledged before it left: not redelivered
                    self.broker.subscriptions.acknowledge(topic, conn.subscription, inbox_acks(acks, conn.name))
                self.broker.subscriptions.close_consumer(topic, conn.subscription, conn.name)
            elif conn.role == "producer":
                self.broker.writer.detach_producer(topic, conn.name)
        except NotFound:
            pass


def _sealed_only(view: SubscriptionView) -> None:
    """Pushes serve sealed entries (and what the journal consumer put in the cache): never the
    journal tail, which a dispatch per frame would read far beyond Kinesis' 5 reads/s per shard.
    Newer entries are pushed by the journal consumer once it has sealed them."""
    if view.writer is not None and view.writer.next_entry > view.seal.next_entry:
        view.writer = replace(view.writer, next_entry=view.seal.next_entry)


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
