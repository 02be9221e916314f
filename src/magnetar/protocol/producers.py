"""Producers of the binary protocol: PRODUCER, SEND, CLOSE_PRODUCER.

A producer's SENDs are appended in the order they arrived, through the core's ledger writer (the
same path as the HTTP producer: deduplication, policies, quotas and ids are shared). SENDs that
queued up while an append was under way go together as one group append (`append_group`:
consecutive entries, one reservation and one journal record), and each gets its SEND_RECEIPT, in
order. A producer that keeps sending (its last append took more than one SEND) appends at most once
per `ProxySettings.append_interval_ms`: what it sends meanwhile waits for that append, as an SDK
producer's batches wait for its request in flight (fewer reservations, journal records and seals).
While the topic's journal shard is saturated, appends are paced as the SDK's requests are
(core/publish_pacing.py): SENDs wait in the queue and go in fuller groups, and the client feels
the back pressure as a broker's, through receipts that come later. An exclusive producer renews
its claim on the topic while it lives; if another producer takes the topic, the proxy closes it
(CLOSE_PRODUCER), as a broker closes a fenced producer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from magnetar.core.authz import Access
from magnetar.core.compression import decompress
from magnetar.core.entry import Batch, decode_messages
from magnetar.core.errors import InvalidInput, MagnetarError, ProducerFenced
from magnetar.core.naming import TopicName
from magnetar.core.publish_pacing import PublishPacer
from magnetar.protocol import pulsar_api_pb2 as pb
from magnetar.protocol.chunks import Assembly, Complete
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.frames import Frame, Type, command
from magnetar.protocol.messages import batch_from_send, is_chunk, message_id
from magnetar.protocol.schemas import producer_version, version_bytes

if TYPE_CHECKING:
    from magnetar.protocol.connection import Connection

log = logging.getLogger(__name__)

MAX_GROUP = 100  # SENDs appended together at most
_ACCESS_MODES = {pb.Shared: "Shared", pb.Exclusive: "Exclusive", pb.WaitForExclusive: "WaitForExclusive",
                 pb.ExclusiveWithFencing: "ExclusiveWithFencing"}
WAIT_FOR_EXCLUSIVE_S = 1.0  # a WaitForExclusive producer tries to take the topic this often
_CLOSE = object()


async def open_producer(conn: Connection, request: Any) -> None:
    """PRODUCER: register the producer (access mode, admission checks) and answer its last sequence id."""
    try:
        if request.producer_id in conn.producers:
            raise ProtocolError(f"Producer id {request.producer_id} is already in use on this connection",
                                pb.ProducerBusy)
        topic = TopicName.parse(request.topic)
        mode = _ACCESS_MODES.get(request.producer_access_mode)
        if not topic.is_persistent and mode != "Shared":
            raise ProtocolError(f"A non-persistent topic has no {mode} producers")
        if mode is None:
            raise ProtocolError(f"Access mode {pb.ProducerAccessMode.Name(request.producer_access_mode)} is not "
                                "supported by the binary protocol proxy yet")
        if request.txn_enabled:
            raise ProtocolError("Transactions are not supported")
        await conn.authorize(Access.PRODUCE, topic)
        name = request.producer_name if request.HasField("producer_name") and request.producer_name else (
            f"magnetar-{uuid.uuid4().hex[:12]}")
        writer = conn.broker.writer
        lease = conn.server.settings.producer_lease_ms
        if not topic.is_persistent:  # nothing stored: no topic to attach to, no sequence to resume
            last = -1
        else:
            if mode == "WaitForExclusive":
                await _wait_for_exclusive(conn, request, topic, name)
                mode = "Exclusive"
            elif mode == "ExclusiveWithFencing":  # takes the topic (the writer's fence), then holds it as Exclusive
                await conn.call(writer.attach_producer, topic, name, mode, lease)
                mode = "Exclusive"
            else:
                await conn.call(writer.attach_producer, topic, name, mode, lease)
            last = await conn.call(writer.metadata.last_sequence_id, topic, name)
        version = await conn.call(producer_version, conn.broker, topic, request)
    except Exception as exc:
        conn.error(request.request_id, exc)
        return
    producer = Producer(conn, request.producer_id, topic, name, mode)
    conn.producers[request.producer_id] = producer
    producer.start()
    success: dict[str, Any] = {"request_id": request.request_id, "producer_name": name, "last_sequence_id": last}
    if version is not None:
        success["schema_version"] = version_bytes(version)
    conn.send(command(Type.PRODUCER_SUCCESS, producer_success=success))


async def _wait_for_exclusive(conn: Connection, request: Any, topic: TopicName, name: str) -> None:
    """Pulsar's WaitForExclusive: answered "not ready" while another producer holds the topic, then
    "ready" (a second PRODUCER_SUCCESS for the same request) once this one has taken it."""
    told = False
    while not conn.closed:
        try:
            await conn.call(conn.broker.writer.attach_producer, topic, name, "Exclusive",
                            conn.server.settings.producer_lease_ms)
            return
        except ProducerFenced:
            if not told:
                conn.send(command(Type.PRODUCER_SUCCESS, producer_success={
                    "request_id": request.request_id, "producer_name": name, "producer_ready": False}))
                await conn.drain()
                told = True
            await asyncio.sleep(WAIT_FOR_EXCLUSIVE_S)
    raise ProtocolError("Connection closed while waiting for exclusive access")


class Producer:
    def __init__(self, conn: Connection, producer_id: int, topic: TopicName, name: str, mode: str) -> None:
        self.conn = conn
        self.id = producer_id
        self.topic = topic
        self.name = name
        self.mode = mode
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.arrived = asyncio.Event()  # set by every enqueue: a waiting group looks again
        self.closed = False
        self.chunks = Assembly()  # chunked messages held until whole
        # spaces appends while the topic's journal shard is saturated: the producer's own until the
        # broker names the shard, then the one the proxy's producers on that shard share
        self.pacer = PublishPacer()

    def start(self) -> None:
        self.conn.spawn(self._run())
        if self.mode == "Exclusive":
            self.conn.spawn(self._renew())

    def enqueue(self, frame: Frame) -> None:
        self.queue.put_nowait(frame)
        self.arrived.set()

    def enqueue_close(self, request_id: int) -> None:
        self.queue.put_nowait((_CLOSE, request_id))
        self.arrived.set()

    async def _run(self) -> None:
        began = 0.0  # when the last append began (monotonic)
        streaming = False  # the last append took more than one SEND: more are coming
        while True:
            item = await self.queue.get()
            if isinstance(item, tuple):  # CLOSE_PRODUCER, after every SEND before it
                await self._close(item[1])
                return
            group = [item]
            if self.topic.is_persistent:  # a saturated shard's pace: SENDs gather meanwhile
                await self._gather(group, time.monotonic() + self.pacer.delay(time.monotonic()))
            if streaming and self.topic.is_persistent:
                await self._gather(group, began + self.conn.server.settings.append_interval_ms / 1000)
            self._take_queued(group)
            streaming = len(group) > 1
            began = time.monotonic()
            await self._append(group)

    def _take_queued(self, group: list[Frame]) -> None:
        """The SENDs queued behind `group`'s, up to MAX_GROUP (a close stays queued, after them)."""
        while len(group) < MAX_GROUP and not self.queue.empty():
            peek = self.queue._queue[0]  # type: ignore[attr-defined]  # asyncio.Queue's deque
            if isinstance(peek, tuple):
                break
            group.append(self.queue.get_nowait())

    async def _gather(self, group: list[Frame], until: float) -> None:
        """Let more SENDs join `group` until `until`, a close or a full group (MAX_GROUP SENDs or a
        journal record's worth): they share its append. SENDs queued meanwhile are taken in order."""
        limit = self.conn.max_message_size
        while (left := until - time.monotonic()) > 0:
            self._take_queued(group)
            if (len(group) >= MAX_GROUP or sum(len(f.payload) for f in group) >= limit
                    or not self.queue.empty()):  # full, or a close waits behind the group
                return
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), left)

    async def _append(self, frames: list[Frame]) -> None:
        """Each SEND as a batch, in order; a chunk is held until its message is whole (chunks.py),
        which then goes as Magnetar's chunks, each alone, with what came before it appended first."""
        run: list[tuple[Frame, Batch]] = []
        for frame in frames:
            send, metadata = frame.command.send, frame.metadata
            try:
                if not is_chunk(send, metadata):
                    run.append((frame, batch_from_send(send, metadata, frame.payload)))
                    continue
                if not self.topic.is_persistent:
                    raise InvalidInput("Chunked messages are not supported on non-persistent topics")
                complete = self.chunks.add(frame)
            except Exception as exc:
                self.conn._send_error(send, exc)
                continue
            if complete is not None:
                await self._append_run(run)
                run = []
                await self._append_chunked(complete)
        await self._append_run(run)
        for frame in self.chunks.expired():
            self.conn._send_error(frame.command.send, InvalidInput("The rest of this chunked message never came"))
        await self.conn.drain()

    async def _append_run(self, batches: list[tuple[Frame, Batch]]) -> None:
        if not self.topic.is_persistent:
            await self._publish_non_persistent(batches)
            return
        for group in _within_record(batches, self.conn.max_message_size):
            await asyncio.sleep(self.pacer.delay(time.monotonic()))  # a saturated shard's pace
            started, nbytes = time.monotonic(), sum(len(b.payload) for _, b in group)
            self.pacer.starting(started, nbytes)
            try:
                results = await self.conn.call(self.conn.broker.writer.append_group, self.topic,
                                               [b for _, b in group], self.name)
                if results[0].journal_shard:
                    self.pacer = self.conn.server.pacers.of(results[0].journal_shard)
                self.pacer.answered(started, time.monotonic(), nbytes, results[0].throttled_ms)
            except ProducerFenced:
                self._fenced()
                return
            except Exception as exc:
                for frame, _ in group:
                    self.conn._send_error(frame.command.send, exc)
                continue
            for (frame, _), result in zip(group, results, strict=True):
                self._receipt(frame, result)

    async def _publish_non_persistent(self, batches: list[tuple[Frame, Batch]]) -> None:
        """A non-persistent topic: each SEND's messages fanned out to the consumers connected now
        (the push service, as the REST and WebSocket producers' are); nothing is stored."""
        for frame, batch in batches:
            try:
                messages = decode_messages(decompress(batch.compression, batch.payload, batch.uncompressed_size))
                ids = await self.conn.call(self.conn.server.push.publish_non_persistent, self.topic, messages,
                                           self.name)
            except Exception as exc:
                self.conn._send_error(frame.command.send, exc)
                continue
            self._receipt(frame, ids[0])

    async def _append_chunked(self, complete: Complete) -> None:
        """A whole chunked message: its stored chunks one append each (a chunk fills a journal
        record), then a receipt per SEND: the first stored chunk's id for the first, the last's for
        the last (the client's message id spans them)."""
        results = []
        for batch in complete.batches:
            try:
                results += await self.conn.call(self.conn.broker.writer.append_group, self.topic, [batch], self.name)
            except ProducerFenced:
                self._fenced()
                return
            except Exception as exc:
                for frame in complete.frames:
                    self.conn._send_error(frame.command.send, exc)
                return
        count = len(complete.frames)
        for index, frame in enumerate(complete.frames):
            self._receipt(frame, results[-1] if index == count - 1 else results[min(index, len(results) - 1)])

    def _receipt(self, frame: Frame, result: Any) -> None:
        send = frame.command.send
        receipt = {"producer_id": self.id, "sequence_id": send.sequence_id,
                   "message_id": message_id(result.ledger_id, result.entry_id, self.topic.partition_index)}
        if send.HasField("highest_sequence_id"):
            receipt["highest_sequence_id"] = send.highest_sequence_id
        self.conn.send(command(Type.SEND_RECEIPT, send_receipt=receipt))

    async def _close(self, request_id: int) -> None:
        self.conn.producers.pop(self.id, None)
        try:
            await self.release()
        except MagnetarError as exc:
            log.info("binary protocol: closing producer %s: %s", self.name, exc)
        self.conn.success(request_id)

    async def release(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.topic.is_persistent:  # a non-persistent topic's producer was never attached
            await self.conn.call(self.conn.broker.writer.detach_producer, self.topic, self.name)

    def _fenced(self) -> None:
        """Another producer took the topic (ExclusiveWithFencing): closed as a broker closes a fenced
        producer. The client's reconnect of this producer is refused ProducerFenced, which fails
        its pending sends for good; a SEND_ERROR instead would make the client reset the whole
        connection and resend, its other producers' claims released meanwhile (a race it may win)."""
        if self.closed:
            return
        self.conn.producers.pop(self.id, None)
        self.closed = True
        self.conn.send(command(Type.CLOSE_PRODUCER, close_producer={"producer_id": self.id, "request_id": 0}))

    async def _renew(self) -> None:
        """Keep an exclusive producer's claim; fenced: CLOSE_PRODUCER to the client."""
        lease = self.conn.server.settings.producer_lease_ms
        while not self.closed:
            await asyncio.sleep(lease / 3000)
            if self.closed:
                return
            try:
                await self.conn.call(self.conn.broker.writer.attach_producer, self.topic, self.name, self.mode, lease)
            except ProducerFenced:
                self._fenced()
                return
            except Exception as exc:  # a transient failure: the lease outlives a few of them
                log.info("binary protocol: renewing producer %s: %s", self.name, exc)


def _within_record(batches: list[tuple[Frame, Batch]], limit: int) -> list[list[tuple[Frame, Batch]]]:
    """Consecutive groups whose payloads fit one journal record together (a big batch goes alone)."""
    groups: list[list[tuple[Frame, Batch]]] = []
    size = 0
    for item in batches:
        cost = len(item[1].payload) + 512
        if not groups or size + cost > limit:
            groups.append([])
            size = 0
        groups[-1].append(item)
        size += cost
    return groups
