"""Consumers of the binary protocol: SUBSCRIBE, FLOW, MESSAGE, ACK, REDELIVER, CLOSE, UNSUBSCRIBE.

Each consumer is a subscription's consumer in the core (a lease on its durable cursor, like an
SDK consumer's), named by the client's consumer name. While the client has granted permits (FLOW),
a background task long-polls the core's receive for at most that many messages and writes each
entry it gets as one MESSAGE (Pulsar's batch format for batched entries). Acknowledgements,
negative acknowledgements and closes are applied in the order the client sent them; acks queued
behind one another are written to the cursor together. The lease is renewed while the connection
lives, so a consumer whose application is busy keeps its messages.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from magnetar.core.acks import Acks
from magnetar.core.authz import Access
from magnetar.core.claims import MAX_ENTRIES_PER_RECEIVE
from magnetar.core.dispatch import MAX_POLL_INTERVAL_S, POLL_INTERVAL_S
from magnetar.core.errors import NotAllowed, SubscriptionNotFound
from magnetar.core.key_shared import AUTO_SPLIT, KeySharedPolicy
from magnetar.core.naming import TopicName
from magnetar.protocol import compacted
from magnetar.protocol import pulsar_api_pb2 as pb
from magnetar.protocol.acks import acks_of, joined, signed
from magnetar.protocol.chunks import Reassembly
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.frames import Type, command
from magnetar.protocol.messages import ack_set, entry_message, message_id
from magnetar.protocol.schemas import check_consumer

if TYPE_CHECKING:
    from magnetar.client.compacted import CompactedFilter
    from magnetar.core.claims import DeliveredEntry
    from magnetar.core.cursor import CursorState
    from magnetar.core.entry import Entry
    from magnetar.protocol.connection import Connection

log = logging.getLogger(__name__)

SUB_TYPES = {pb.CommandSubscribe.Exclusive: "Exclusive", pb.CommandSubscribe.Shared: "Shared",
             pb.CommandSubscribe.Failover: "Failover", pb.CommandSubscribe.Key_Shared: "Key_Shared"}
MAX_POLL_MESSAGES = 1000
ERROR_BACKOFF_S = 1.0
IDLE_POLL_S = POLL_INTERVAL_S  # a consumer looks again after this, doubling while it finds nothing
MAX_IDLE_POLL_S = MAX_POLL_INTERVAL_S  # up to this once its subscription has been quiet for ACTIVE_S
MAX_ACTIVE_POLL_S = 0.25  # and up to this while it has had messages within ACTIVE_S
ACTIVE_S = 10.0
MAX_BATCH_SIZES = 100_000  # batch sizes remembered per consumer (batch-index acks name no size)
# Acks wait this long for a poll to carry them (written with its claim: no request of their own)
# before they are written alone. Longer than the idle backoff's longest wait, so while the consumer
# has permits its next poll always comes first; the fallback is for a consumer without permits.
ACK_HOLD_S = 1.5 * MAX_POLL_INTERVAL_S
_LATEST = (1 << 63) - 1  # MessageId.latest's ledger id (Long.MAX_VALUE)


async def open_consumer(conn: Connection, request: Any) -> None:
    """SUBSCRIBE: attach the consumer (creating the subscription); what it was handed before and
    did not acknowledge (a reconnecting client) is redelivered, as a broker does for a new consumer."""
    try:
        if request.consumer_id in conn.consumers:
            raise ProtocolError(f"Consumer id {request.consumer_id} is already in use on this connection",
                                pb.ConsumerBusy)
        topic = TopicName.parse(request.topic)
        if not topic.is_persistent:  # docs/semantics.md: why, and the doors that serve them
            raise ProtocolError("Consuming a non-persistent topic through the binary protocol proxy is not supported: "
                                "its messages are pushed to WebSocket consumers (the SDK's push delivery)")
        sub_type = SUB_TYPES[request.subType]
        initial = "Earliest" if request.initialPosition == pb.CommandSubscribe.Earliest else "Latest"
        name = request.consumer_name or f"magnetar-{uuid.uuid4().hex[:10]}"
        await conn.authorize(Access.CONSUME, topic, request.subscription)
        await conn.call(check_consumer, conn.broker, topic, request)
        if request.HasField("durable") and not request.durable:  # a reader: no cursor, a position of its own
            from magnetar.protocol.readers import Reader

            consumer: Consumer = Reader(conn, request.consumer_id, topic, request.subscription, name, sub_type,
                                        initial)
            await consumer.start_at(request)  # type: ignore[attr-defined]
            consumer.read_compacted = request.read_compacted
        else:
            consumer = Consumer(conn, request.consumer_id, topic, request.subscription, name, sub_type, initial)
            consumer.key_shared = key_shared_policy(request)
            consumer.priority_level = request.priority_level  # Failover: the highest level's consumers are active
            consumer.replicate_state = request.replicate_subscription_state
            if request.read_compacted:  # the view as at subscribe filters what it delivers (protocol/compacted.py)
                consumer.compacted = await conn.call(compacted.load, topic)
            state = await consumer.attach()
            if any(d.consumer == name and d.sent for d in state.deliveries):  # a reconnect: it has them no more
                await conn.call(conn.broker.subscriptions.redeliver_unacknowledged, topic, request.subscription, name)
    except Exception as exc:
        conn.error(request.request_id, exc)
        return
    conn.consumers[request.consumer_id] = consumer
    consumer.start()
    conn.success(request.request_id)


def key_shared_policy(request: Any) -> KeySharedPolicy:
    """SUBSCRIBE's keySharedMeta as the core's policy (STICKY = 1 takes its inclusive hashRanges)."""
    if not request.HasField("keySharedMeta"):
        return AUTO_SPLIT
    meta = request.keySharedMeta
    ranges = tuple((r.start, r.end) for r in meta.hashRanges) if meta.keySharedMode == 1 else None
    return KeySharedPolicy(ranges, meta.allowOutOfOrderDelivery)


class Consumer:
    key_shared: KeySharedPolicy = AUTO_SPLIT  # Key_Shared: SUBSCRIBE's keySharedMeta
    compacted: CompactedFilter | None = None  # SUBSCRIBE's read_compacted: the view as at subscribe
    read_compacted = False  # a reader's read_compacted (readers.py)
    priority_level = 0  # SUBSCRIBE's priority_level (0 the highest)
    replicate_state = False  # SUBSCRIBE's replicate_subscription_state

    def __init__(self, conn: Connection, consumer_id: int, topic: TopicName, subscription: str, name: str,
                 sub_type: str, initial: str) -> None:
        self.conn = conn
        self.id = consumer_id
        self.topic = topic
        self.subscription = subscription
        self.name = name
        self.sub_type = sub_type
        self.initial = initial
        self.permits = 0
        self.wake = asyncio.Event()
        self.commands: asyncio.Queue[Any] = asyncio.Queue()
        self.stopped = False
        self.released = False
        self.renewed_at = 0.0
        self.batch_sizes: dict[int, int] = {}  # entry id -> messages, of batched entries handed out
        self.held_acks: list[Any] = []  # ACK commands not written yet (the next poll or a flush writes them)
        self.chunks = Reassembly()  # chunk entries until their message is whole
        self.view_dropped: list[tuple[int, int, tuple[int, ...]]] = []  # read_compacted: acks for the next poll
        self.claimed: collections.deque[DeliveredEntry] = collections.deque()  # polled, not sent yet (no permits)
        self.queue_size = 0  # the client's receiver queue (its largest FLOW): how much a poll claims
        self.full = False  # the last poll took all it could: more may be ready at once
        self._flush_pending = False
        self._tasks: list[asyncio.Task[Any]] = []

    @property
    def subscriptions(self) -> Any:
        return self.conn.broker.subscriptions

    async def attach(self) -> CursorState:
        state: CursorState = await self.conn.call(
            self.subscriptions.subscribe, self.topic, self.subscription, self.name, self.sub_type, self.initial, 0,
            self.conn.server.settings.consumer_lease_ms, self.key_shared, priority_level=self.priority_level,
            replicate_state=self.replicate_state)
        self.renewed_at = time.monotonic()
        return state

    def start(self) -> None:
        self._tasks = [self.conn.spawn(self._dispatch()), self.conn.spawn(self._apply()),
                       self.conn.spawn(self._keep_alive())]

    def stop(self) -> None:
        """Stop dispatching (closing): what it still polls for goes back with the close."""
        self.stopped = True
        self.wake.set()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()

    def flow(self, permits: int) -> None:
        self.permits += permits
        self.queue_size = max(self.queue_size, permits)  # the first FLOW is the client's whole receiver queue
        self.wake.set()

    def enqueue(self, cmd: Any) -> None:
        self.commands.put_nowait(cmd)

    # --- dispatch -------------------------------------------------------------------------------
    async def _dispatch(self) -> None:
        """Send while permits remain, polling when nothing claimed is left: one dispatch step per
        call (`_fetch`: the core's receive without a wait; a reader's non-durable read), the waits
        between polls here, so a closing consumer or a stopping proxy has no poll left in flight for
        long. A poll that took all it could is followed by the next at once; otherwise the next
        comes 100 ms later (what was ready is taken: the journal consumer seals the next entries
        meanwhile), doubling while polls find nothing, up to 250 ms while the subscription has had
        messages within the last 10 s and up to 1 s once it is quiet (an idle consumer costs one
        read a second). A poll claims up to the client's receiver queue, not just its permits
        (Pulsar's clients grant half their queue at a time): what the permits do not cover waits
        here, claimed by the consumer's lease, for the next FLOW, as the SDK's prefetch waits in its
        queue: half the polls."""
        idle = IDLE_POLL_S
        look_at = 0.0  # when the next poll may go (monotonic)
        active_until = 0.0  # messages came within ACTIVE_S before this
        while not self.stopped:
            if self.permits <= 0:
                self.wake.clear()
                await self.wake.wait()
                continue
            if not self.claimed:
                await self._pause_until(look_at)
                if self.stopped:
                    return
                got = await self._fetch()
                if self.stopped:
                    return
                if got is None:  # failed: `_fetch` has backed off
                    continue
                now = time.monotonic()
                if got or self.full:
                    active_until = now + ACTIVE_S
                    idle = IDLE_POLL_S
                    look_at = now if self.full else now + idle
                else:
                    look_at = now + idle
                    idle = min(idle * 2, MAX_ACTIVE_POLL_S if now < active_until else MAX_IDLE_POLL_S)
                if not got:
                    continue
                self.claimed.extend(got)
            while self.claimed and self.permits > 0:
                self._deliver(self.claimed.popleft())
            await self._expire_chunks()
            await self.conn.drain()

    async def _pause_until(self, when: float) -> None:
        """Wait until `when`; a close cuts the wait short (a FLOW does not: polling sooner would
        find no more)."""
        while not self.stopped and (left := when - time.monotonic()) > 0:
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), left)

    def _poll_size(self) -> int:
        return min(max(self.permits, self.queue_size), MAX_POLL_MESSAGES)

    async def _fetch(self) -> list[DeliveredEntry] | None:
        """One receive from the cursor, the held acknowledgements riding along (written with the
        claim); None after a failure."""
        riding, self.held_acks = self.held_acks, []
        dropped, self.view_dropped = self.view_dropped, []
        acks = acks_of(riding, self.batch_sizes, self.name)
        if dropped:  # what the compacted view dropped at the last poll rides on this one
            acks = joined(acks, compacted.view_acks(dropped, self.name))
        self.full = False
        size = self._poll_size()
        try:
            got = await self.conn.call(self.subscriptions.receive, self.topic, self.subscription, self.name,
                                       size, 0, uuid.uuid4().hex, acks)
        except SubscriptionNotFound as exc:  # our lease lapsed, or the subscription went away
            self.held_acks[:0] = riding
            self.view_dropped[:0] = dropped
            log.info("binary protocol: consumer %s: %s; attaching again", self.name, exc.reason)
            await self._reattach()
            return None
        except Exception as exc:
            self.held_acks[:0] = riding
            self.view_dropped[:0] = dropped
            log.info("binary protocol: consumer %s: receive failed: %s", self.name, exc)
            await asyncio.sleep(ERROR_BACKOFF_S)
            return None
        self._receipts(riding, None)
        self.renewed_at = time.monotonic()
        entries = list(got.entries)
        self.full = (len(entries) >= MAX_ENTRIES_PER_RECEIVE
                     or sum(d.entry.num_messages for d in entries) >= size)  # more may be ready now
        if self.compacted is not None:  # read_compacted: what the view drops is acknowledged (by the next
            # poll: no write of its own; dropped again if redelivered before), never sent
            entries = [kept for d in entries if (kept := compacted.through_view(self.compacted, d,
                                                                                 self.view_dropped))]
        return entries

    def _deliver(self, delivered: DeliveredEntry) -> None:
        entry = delivered.entry
        if entry.hole:
            return
        if entry.chunk is not None:  # held until the message is whole, then Pulsar's chunks (chunks.py)
            try:
                whole = self.chunks.add(entry, delivered.redelivery_count)
            except Exception as exc:  # an undecodable chunked message: its chunks are dropped
                log.info("binary protocol: consumer %s: chunked message dropped: %s", self.name, exc)
                return
            for part, metadata, payload in whole or ():
                self._send_message(part, delivered.redelivery_count, metadata, payload)
            return
        metadata, payload = entry_message(entry)
        acked = delivered.acked_indexes if entry.batched else []
        if entry.batched:
            self.batch_sizes[entry.entry_id] = entry.num_messages
            if len(self.batch_sizes) > MAX_BATCH_SIZES:  # the oldest first (dicts keep insertion order)
                del self.batch_sizes[next(iter(self.batch_sizes))]
        self._send_message(entry, delivered.redelivery_count, metadata, payload, acked)
        self.permits -= entry.num_messages - 1 - len(acked)

    def _send_message(self, entry: Entry, redelivery: int, metadata: Any, payload: bytes,
                      acked: list[int] | tuple[int, ...] = ()) -> None:
        message: dict[str, Any] = {
            "consumer_id": self.id,
            "message_id": message_id(entry.ledger_id, entry.entry_id, self.topic.partition_index),
            "redelivery_count": redelivery,
        }
        if acked:
            message["ack_set"] = ack_set(list(acked), entry.num_messages)
        self.conn.send_payload(command(Type.MESSAGE, message=message), metadata, payload)
        self.permits -= 1

    async def _expire_chunks(self) -> None:
        """Chunks of a message whose rest never came (its producer died): acknowledged and dropped,
        as pulsar-client and the SDK drop an incomplete chunked message after a minute."""
        stale = self.chunks.expired()
        if stale:
            await self._write_acks(Acks(tuple(sorted(e.entry_id for e in stale)), consumer=self.name))

    async def _position_of(self, mid: Any) -> int:
        """The entry a message id names (SEEK, a reader's start): itself, 0 for MessageId.earliest
        (-1, -1), past the last entry for MessageId.latest."""
        if signed(mid.ledgerId) == _LATEST:
            return int((await self.conn.call(self.conn.broker.last_entry, self.topic))[1]) + 1
        return max(signed(mid.entryId), 0)

    async def _reattach(self) -> None:
        try:
            await self.attach()
        except Exception as exc:  # the subscription was deleted, or the consumer is refused now
            log.info("binary protocol: consumer %s cannot attach again: %s", self.name, exc)
            await asyncio.sleep(ERROR_BACKOFF_S)

    async def _keep_alive(self) -> None:
        """Renew the lease while no poll does (an application busy with the messages it holds)."""
        every = self.conn.server.settings.consumer_lease_ms / 3000
        while not self.stopped:
            await asyncio.sleep(every / 2)
            if time.monotonic() - self.renewed_at >= every:
                try:
                    await self.attach()
                except Exception as exc:
                    log.info("binary protocol: consumer %s: renewing its lease failed: %s", self.name, exc)

    # --- acknowledgements and closes, in order ------------------------------------------------------
    async def _apply(self) -> None:
        while True:
            cmd = await self.commands.get()
            if cmd.type == Type.ACK:  # held briefly: the next poll carries them, else a write of their own
                self.held_acks.append(cmd)
                if not self._flush_pending:
                    self._flush_pending = True
                    self.conn.spawn(self._flush_later())
                continue
            await self._flush_acks()  # whatever comes next sees the acks sent before it
            if cmd.type == Type.REDELIVER_UNACKNOWLEDGED_MESSAGES:
                await self._redeliver(cmd.redeliverUnacknowledgedMessages)
            elif cmd.type == Type.CLOSE_CONSUMER:
                await self._close(cmd.close_consumer.request_id)
                return
            elif cmd.type in (Type.UNSUBSCRIBE, Type.SEEK):
                finished = await (self._unsubscribe(cmd.unsubscribe.request_id) if cmd.type == Type.UNSUBSCRIBE
                                  else self._seek(cmd.seek))
                if finished:  # this consumer is gone (refused: it carries on)
                    return

    async def _flush_later(self) -> None:
        await asyncio.sleep(ACK_HOLD_S)
        self._flush_pending = False
        await self._flush_acks()

    async def _flush_acks(self) -> None:
        cmds, self.held_acks = self.held_acks, []
        if cmds:
            await self._acknowledge(cmds)

    async def _acknowledge(self, cmds: list[Any]) -> None:
        self._receipts(cmds, await self._write_acks(acks_of(cmds, self.batch_sizes, self.name)))

    async def _write_acks(self, acks: Acks) -> BaseException | None:
        if not acks:
            return None
        try:
            await self.conn.call(self.subscriptions.acknowledge, self.topic, self.subscription, acks)
        except Exception as exc:
            log.info("binary protocol: consumer %s: acknowledgement failed: %s", self.name, exc)
            return exc
        return None

    def _receipts(self, cmds: list[Any], error: BaseException | None) -> None:
        for cmd in cmds:  # acknowledgement receipts, when the client asked for them
            if cmd.ack.HasField("request_id"):
                response: dict[str, Any] = {"consumer_id": self.id, "request_id": cmd.ack.request_id}
                if error is not None:
                    from magnetar.protocol.errors import server_error

                    response["error"], response["message"] = server_error(error)
                self.conn.send(command(Type.ACK_RESPONSE, ackResponse=response))

    async def _redeliver(self, request: Any) -> None:
        try:
            if request.message_ids:  # negative acknowledgements, ack timeouts: those entries, now
                entries = tuple(sorted({signed(m.entryId) for m in request.message_ids if signed(m.entryId) >= 0}))
                await self.conn.call(self.subscriptions.acknowledge, self.topic, self.subscription,
                                     Acks(nacks=entries, consumer=self.name))
            else:  # everything it holds goes back, what the proxy had claimed for it too
                await self.conn.call(self.subscriptions.redeliver_unacknowledged, self.topic, self.subscription,
                                     self.name)
                self.claimed.clear()
                self.chunks.clear()
        except Exception as exc:
            log.info("binary protocol: consumer %s: redelivery failed: %s", self.name, exc)

    async def _close(self, request_id: int) -> None:
        self.stop()
        self.conn.consumers.pop(self.id, None)
        try:
            await self.release()
        except Exception as exc:
            log.info("binary protocol: closing consumer %s: %s", self.name, exc)
        self.conn.success(request_id)

    async def _unsubscribe(self, request_id: int) -> bool:
        try:
            await self.conn.call(self.subscriptions.unsubscribe, self.topic, self.subscription, self.name)
        except Exception as exc:
            self.conn.error(request_id, exc)
            return False
        self.stop()
        self.released = True  # the subscription is gone: nothing to detach from
        self.conn.consumers.pop(self.id, None)
        self.conn.success(request_id)
        return True

    async def _seek(self, request: Any) -> bool:
        """SEEK by message id or publish time: the subscription moves for all its consumers; this one
        is closed (CLOSE_CONSUMER) and subscribes again from the new position, as a broker does."""
        try:
            if request.HasField("message_publish_time"):
                await self.conn.call(self.subscriptions.seek, self.topic, self.subscription, None,
                                     request.message_publish_time)
            elif request.HasField("message_id"):
                position = await self._position_of(request.message_id)
                await self.conn.call(self.subscriptions.seek, self.topic, self.subscription, position)
            else:
                raise ProtocolError("Seek to a message id or to a publish time")
        except Exception as exc:
            self.conn.error(request.request_id, exc)
            return False
        self.stop()
        self.released = True  # the client subscribes again at once: its lease is renewed then
        self.conn.consumers.pop(self.id, None)
        self.conn.send(command(Type.CLOSE_CONSUMER, close_consumer={"consumer_id": self.id, "request_id": 0}))
        self.conn.success(request.request_id)
        return True

    async def last_message_id(self, request_id: int) -> None:
        """GET_LAST_MESSAGE_ID: the topic's last entry (its last batch index when batched)."""
        try:
            ledger, entry = await self.conn.call(self.conn.broker.last_entry, self.topic)
            index = -1
            if entry >= 0:
                found = await self.conn.call(self.conn.broker.find_entry, self.topic, entry)
                if found is not None and found.batched:
                    index = found.num_messages - 1
        except Exception as exc:
            self.conn.error(request_id, exc)
            return
        response: dict[str, Any] = {"request_id": request_id,
                                    "last_message_id": message_id(ledger, entry, self.topic.partition_index, index)}
        mark = self.mark_delete_entry()
        if mark is not None:  # a reader's: what pulsar-client compares (has_message_available, start inclusive)
            response["consumer_mark_delete_position"] = message_id(ledger, mark, self.topic.partition_index)
        self.conn.send(command(Type.GET_LAST_MESSAGE_ID_RESPONSE, getLastMessageIdResponse=response))

    def mark_delete_entry(self) -> int | None:
        """The mark-delete position GET_LAST_MESSAGE_ID answers with (None: not given)."""
        return None

    async def release(self) -> None:
        """Detach from the subscription: the messages it held go to the others (or again to it)."""
        if self.released:
            return
        self.released = True
        await self._flush_acks()
        with contextlib.suppress(SubscriptionNotFound, NotAllowed):
            await self.conn.call(self.subscriptions.close_consumer, self.topic, self.subscription, self.name)


__all__ = ["Consumer", "open_consumer"]
