"""The connection lifecycle and the frames clients send over their connections.

$connect authorizes, validates the Pulsar path and parameters and attaches what the connection
opens: a producer (on a persistent topic), a reader (its start position kept in the connection's
item: it has no cursor) or a consumer (one consumer name per connection, attached to the durable
cursor with a lease covering API Gateway's 2 h connection limit; a subscription held by a
connection that closed without its $disconnect is freed by evicting it). $disconnect detaches and
has the released entries pushed to the subscription's other consumers.

Frames ($default): a producer's messages are appended (or fanned out, on a non-persistent topic);
a consumer's acknowledgements go to its connection's inbox and reach the cursor with a dispatch
(at once for negative acknowledgements, with an ack timeout, or once half the window is
acknowledged); a permit frame adds to a pull-mode consumer's permits, kept in its connection's
item; any frame from a reader acknowledges one message. Frames that free room trigger a dispatch.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import replace

from magnetar.core.acks import Acks
from magnetar.core.authz import ANONYMOUS, Access, Principal, Target
from magnetar.core.broker import Broker
from magnetar.core.entry import Batch, MessageIdData
from magnetar.core.errors import ConsumerBusy, InvalidInput, MagnetarError, SubscriptionNotFound
from magnetar.core.naming import TopicName
from magnetar.core.ports.push import Connection, ConnectionRegistry, PushGateway
from magnetar.core.push.common import ConnectionCache, Namespaces, inbox_acks
from magnetar.core.push.dispatch import Dispatcher
from magnetar.core.push.fanout import NonPersistentFanout
from magnetar.core.tracecontext import with_trace_context
from magnetar.core.websocket import (
    FAILED_TO_DESERIALIZE,
    PAYLOAD_ENCODING_ERROR,
    PUSH_LEASE_MS,
    UNKNOWN_ERROR,
    OpenRequest,
    decode_message_id,
    parse_frame,
    parse_open,
    producer_ack,
    producer_error,
    producer_frame,
)

log = logging.getLogger(__name__)


class Connections:
    def __init__(self, broker: Broker, registry: ConnectionRegistry, gateway: PushGateway,
                 known: ConnectionCache, namespaces: Namespaces, dispatcher: Dispatcher,
                 fanout: NonPersistentFanout) -> None:
        self.broker = broker
        self.registry = registry
        self.gateway = gateway
        self.known = known
        self.namespaces = namespaces
        self.dispatcher = dispatcher
        self.fanout = fanout
        self.clock = broker.clock

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
            if conn.has_backlog:  # from now on the journal consumer looks this topic's connections up
                self.broker.metadata.announce_push_connection(request.topic)
        except BaseException:
            self.known.detach(conn)
            raise
        self.known.remember(conn)
        return conn

    def _open_producer(self, connection_id: str, request: OpenRequest, now: int) -> Connection:
        name = request.name or f"ws-{connection_id}"
        if request.topic.is_persistent:
            self.broker.writer.attach_producer(request.topic, name, "Shared", PUSH_LEASE_MS)
        else:
            self.namespaces.check(request.topic)
        return Connection(connection_id, "producer", str(request.topic), now, name,
                          encryption_keys=request.encryption_keys)

    def _open_reader(self, connection_id: str, request: OpenRequest, now: int) -> Connection:
        topic = request.topic
        name = request.name or f"reader-{connection_id}"
        conn = Connection(connection_id, "reader", str(topic), now, name, queue_size=request.queue_size)
        if not topic.is_persistent:
            self.namespaces.check(topic)
            return replace(conn, permits=request.queue_size)  # live messages only, within its window
        position, skip = 0, -1
        if request.start != "earliest":
            from magnetar.core.ledger import ensure_topic

            ensure_topic(self.broker.metadata, topic, now)
            if request.start == "latest":
                _, writer = self.broker.metadata.get_topic_state(topic)
                position = writer.next_entry if writer else 0
                if request.start_inclusive:  # the last entry too
                    position = max(position - 1, 0)
            elif request.start_inclusive:  # at the given message (startMessageIdInclusive)
                mid = decode_message_id(request.start)
                position = max(0, mid.entry_id)
                skip = mid.batch_index - 1 if mid.batch_index >= 0 else -1
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
            self.namespaces.check(topic)
            self._check_non_persistent_subscription(conn)
            return replace(conn, permits=0 if request.pull_mode else request.queue_size)

        def subscribe() -> None:
            self.broker.subscriptions.subscribe(topic, request.subscription, name, request.subscription_type,
                                                request.initial_position, request.ack_timeout_ms, PUSH_LEASE_MS,
                                                start_inclusive=request.start_inclusive,
                                                priority_level=request.priority_level)

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
            self.known.drop(c)
        return bool(gone)

    def disconnect(self, connection_id: str) -> None:
        """$disconnect: detach (a consumer's unacknowledged messages go back for redelivery) and
        push what it released to the other consumers of its subscription."""
        conn = self.known.lookup(connection_id)
        if conn is None:
            return
        self.known.drop(conn)
        if conn.role == "consumer" and TopicName.parse(conn.topic).is_persistent:
            for other in self.registry.of_topic(conn.topic):
                if other.role == "consumer" and other.subscription == conn.subscription:
                    self.dispatcher.safely(self.dispatcher.dispatch_one, other)

    def after_seek(self, topic: TopicName, subscription: str) -> None:
        """A seek drops the acknowledgements its push consumers have not written to the cursor
        yet (as acknowledgements from before a seek are ignored), then pushes from the new position."""
        members = [c for c in self.registry.of_topic(str(topic))
                   if c.role == "consumer" and c.subscription == subscription]
        for conn in members:
            self.dispatcher.clear_inbox(conn)
        if members:
            self.dispatcher.dispatch_topic(str(topic), [replace(c, acks=frozenset()) for c in members])

    # --- frames ----------------------------------------------------------------------------
    def receive_frame(self, connection_id: str, body: str | None) -> str | None:
        """$default: one client frame; returns the frame to answer with (the route response), if any."""
        conn = self.known.lookup(connection_id)
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
            request = producer_frame(frame, conn.encryption_keys)
        except InvalidInput as exc:
            return producer_error(PAYLOAD_ENCODING_ERROR, exc.reason, frame.get("context"))
        traceparent = self.broker.telemetry.tracer.traceparent()  # a traced invocation: the message names it
        if traceparent is not None:
            message = request.message
            request = replace(request, message=replace(
                message, properties=with_trace_context(message.properties, traceparent)))
        topic = TopicName.parse(conn.topic)
        try:
            self.broker.schemas.check_publish(  # its schemaVersion is the topic's; schemaValidationEnforced
                topic, request.message.schema_version,
                bool(self.broker.writer.policies(topic).get("schema_validation_enforced")))
            throttled_ms = 0
            if not topic.is_persistent:
                message_id = self.fanout.publish(topic, [request.message], conn.name)[0]
            else:
                deliver_at = request.deliver_at
                if request.deliver_after_ms:
                    deliver_at = self.clock.now_ms() + request.deliver_after_ms
                batch = Batch.of([request.message], batched=False, sequence_id=request.sequence_id,
                                 highest_sequence_id=request.sequence_id, deliver_at=deliver_at,
                                 replicate_to=request.replicate_to)
                appended = self.broker.writer.append(topic, batch, conn.name)
                message_id, throttled_ms = appended.message_ids[0], appended.throttled_ms
        except MagnetarError as exc:
            return producer_error(UNKNOWN_ERROR, exc.reason, request.context)
        return producer_ack(message_id, request.context, throttled_ms)

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
                    self.dispatcher.dispatch_consumer(current)
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
            self.dispatcher.dispatch_consumer(latest or replace(conn, permits=0), acks)
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
            self.dispatcher.dispatch_consumer(latest, refill_at=1 if conn.pull_mode else threshold)
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
            self.dispatcher.dispatch_reader(current)
