"""One client connection: the handshake, lookups, and routing commands to producers and consumers.

Commands are read in order and handled without blocking the reader: requests run as tasks of
their own; a producer's SENDs and a consumer's acknowledgements go through a queue each, so they
are applied in the order the client sent them (`producers.Producer`, `consumers.Consumer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from magnetar.core.authz import ANONYMOUS, Access, Principal, Target
from magnetar.core.naming import TopicName
from magnetar.protocol import pulsar_api_pb2 as pb
from magnetar.protocol.errors import ProtocolError, send_error, server_error
from magnetar.protocol.frames import ChecksumMismatch, Frame, FrameError, FrameReader, Type, command, encode
from magnetar.protocol.frames import encode_with_payload as encode_payload
from magnetar.protocol.lookups import (
    get_or_create_schema,
    get_schema,
    lookup,
    partitions,
    topics_of_namespace,
)

if TYPE_CHECKING:
    from magnetar.core.broker import Broker
    from magnetar.protocol.consumers import Consumer
    from magnetar.protocol.producers import Producer
    from magnetar.protocol.server import ProxyServer

log = logging.getLogger(__name__)
T = TypeVar("T")

READ_BYTES = 256 * 1024
# Headroom under the journal's record limit for what the writer adds to a message (entry header)
ENTRY_OVERHEAD_BYTES = 16 * 1024


class Connection:
    def __init__(self, server: ProxyServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.frames = FrameReader()
        self.connected = False
        self.protocol_version = 0
        self.principal: Principal = ANONYMOUS
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self.reader_positions: dict[tuple[str, str], int] = {}  # a reader's position across its seek
        self.tasks: set[asyncio.Task[Any]] = set()
        self.task: asyncio.Task[Any] | None = None  # the task serving this connection
        self.closed = False
        self.received_at = time.monotonic()
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    @property
    def broker(self) -> Broker:
        return self.server.broker

    # --- plumbing -----------------------------------------------------------------------------
    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A (blocking) core call on the proxy's thread pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.server.executor, functools.partial(fn, *args, **kwargs))

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def send(self, cmd: Any) -> None:
        if not self.closed:
            self.writer.write(encode(cmd))

    def send_payload(self, cmd: Any, metadata: Any, payload: bytes) -> None:
        if not self.closed:
            self.writer.write(encode_payload(cmd, metadata, payload))

    async def drain(self) -> None:
        if not self.closed:
            with contextlib.suppress(ConnectionError):
                await self.writer.drain()

    def error(self, request_id: int, exc: BaseException) -> None:
        code, message = server_error(exc)
        self.send(command(Type.ERROR, error={"request_id": request_id, "error": code, "message": message}))

    def success(self, request_id: int) -> None:
        self.send(command(Type.SUCCESS, success={"request_id": request_id}))

    async def authorize(self, access: Access, topic: TopicName, subscription: str | None = None) -> None:
        if self.broker.authz.settings.enabled:
            await self.call(self.broker.authz.check, self.principal, access, Target.of_topic(topic, subscription))

    @property
    def max_message_size(self) -> int:
        return max(self.broker.journal.max_record_bytes - ENTRY_OVERHEAD_BYTES, 1024)

    # --- the connection's life ----------------------------------------------------------------
    async def serve(self) -> None:
        self.spawn(self._keep_alive())
        try:
            while not self.closed:
                data = await self.reader.read(READ_BYTES)
                if not data:
                    break
                self.received_at = time.monotonic()
                for frame in self.frames.feed(data):
                    self.handle(frame)
                await self.drain()
        except FrameError as exc:
            log.info("binary protocol: closing %s: %s", self.peer, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            await self.close()

    async def _keep_alive(self) -> None:
        """Pulsar's keep-alive from the server's side: a PING after an interval of silence, the
        connection closed after two (a client gone without closing must not keep its consumers'
        leases, and so their messages, forever)."""
        interval = self.server.settings.keep_alive_s
        while not self.closed:
            await asyncio.sleep(interval / 2)
            silent = time.monotonic() - self.received_at
            if silent >= 2 * interval:
                log.info("binary protocol: %s silent for %.0f s: closing", self.peer, silent)
                self.writer.transport.abort()  # the reading loop ends and closes the rest
                return
            if silent >= interval and self.connected:
                self.send(command(Type.PING, ping={}))
                await self.drain()

    def abort(self) -> None:
        """Drop the connection at once (a proxy shutting down: nothing is cleaned up, as in a crash)."""
        self.closed = True
        for task in list(self.tasks):
            task.cancel()
        for consumer in self.consumers.values():
            consumer.stop()
        self.writer.transport.abort()

    async def close(self) -> None:
        """The client went away: its producers and consumers are closed (their messages redelivered)."""
        if self.closed:
            return
        self.closed = True
        for consumer in self.consumers.values():
            consumer.stop()
        for task in list(self.tasks):
            task.cancel()
        for producer in list(self.producers.values()):
            await _quietly(producer.release())
        for consumer in list(self.consumers.values()):
            await _quietly(consumer.release())
        self.producers.clear()
        self.consumers.clear()
        with contextlib.suppress(Exception):
            self.writer.close()

    # --- commands -----------------------------------------------------------------------------
    def handle(self, frame: Frame | ChecksumMismatch) -> None:
        if isinstance(frame, ChecksumMismatch):
            self._checksum_error(frame.command)
            return
        cmd = frame.command
        kind = cmd.type
        if not self.connected and kind != Type.CONNECT:
            self.spawn(self._refuse_and_close(cmd, "Send CONNECT first"))
            return
        if kind == Type.SEND:
            producer = self.producers.get(cmd.send.producer_id)
            if producer is None:
                self._send_error(cmd.send, ProtocolError("Unknown producer", pb.ProducerBusy))
            else:
                producer.enqueue(frame)
            return
        handler = _HANDLERS.get(kind)
        if handler is None:
            self._unsupported(cmd)
            return
        handler(self, cmd)

    def _checksum_error(self, cmd: Any) -> None:
        if cmd.type == Type.SEND:
            self._send_error(cmd.send, ProtocolError("Checksum mismatch", pb.ChecksumError))

    def _send_error(self, send: Any, exc: BaseException) -> None:
        code, message = send_error(exc)
        self.send(command(Type.SEND_ERROR, send_error={"producer_id": send.producer_id,
                                                       "sequence_id": send.sequence_id,
                                                       "error": code, "message": message}))

    def _unsupported(self, cmd: Any) -> None:
        """A command the proxy does not serve: refused by its request id, never left unanswered."""
        name = pb.BaseCommand.Type.Name(cmd.type) if cmd.type in pb.BaseCommand.Type.values() else str(cmd.type)
        reason = f"{name} is not supported by the Magnetar binary protocol proxy"
        request_id = _request_id(cmd)
        if cmd.type == Type.GET_SCHEMA:
            self.send(command(Type.GET_SCHEMA_RESPONSE, getSchemaResponse={
                "request_id": request_id or 0, "error_code": pb.TopicNotFound, "error_message": reason}))
        elif cmd.type == Type.GET_OR_CREATE_SCHEMA:
            self.send(command(Type.GET_OR_CREATE_SCHEMA_RESPONSE, getOrCreateSchemaResponse={
                "request_id": request_id or 0, "error_code": pb.NotAllowedError, "error_message": reason}))
        elif request_id is not None:
            self.error(request_id, ProtocolError(reason))
        else:
            log.info("binary protocol: %s from %s ignored: %s", name, self.peer, reason)

    async def _refuse_and_close(self, cmd: Any, reason: str, code: int = pb.NotAllowedError) -> None:
        request_id = _request_id(cmd)  # none (a CONNECT): -1, as a broker answers a refused handshake
        self.error((1 << 64) - 1 if request_id is None else request_id, ProtocolError(reason, code))
        await self.drain()
        await self.close()

    def _connect(self, cmd: Any) -> None:
        connect = cmd.connect
        if self.connected:
            self.spawn(self._refuse_and_close(cmd, "Already connected"))
            return
        if self.broker.authz.settings.enabled:
            self.principal = _principal(connect)
            if not self.principal.authenticated:
                self.spawn(self._refuse_and_close(cmd, f"Authentication failed: {self.principal.refused}",
                                                  pb.AuthenticationError))
                return
        from magnetar.protocol.server import MAX_PROTOCOL_VERSION, SERVER_VERSION

        self.protocol_version = min(connect.protocol_version, MAX_PROTOCOL_VERSION)
        self.connected = True
        self.send(command(Type.CONNECTED, connected={"server_version": SERVER_VERSION,
                                                     "protocol_version": self.protocol_version,
                                                     "max_message_size": self.max_message_size}))

    def _ping(self, cmd: Any) -> None:
        self.send(command(Type.PONG, pong={}))

    def _pong(self, cmd: Any) -> None:
        pass

    def _lookup(self, cmd: Any) -> None:
        lookup(self, cmd.lookupTopic)

    def _partitioned_metadata(self, cmd: Any) -> None:
        self.spawn(partitions(self, cmd.partitionMetadata))

    def _topics_of_namespace(self, cmd: Any) -> None:
        self.spawn(topics_of_namespace(self, cmd.getTopicsOfNamespace))

    def _get_schema(self, cmd: Any) -> None:
        self.spawn(get_schema(self, cmd.getSchema))

    def _get_or_create_schema(self, cmd: Any) -> None:
        self.spawn(get_or_create_schema(self, cmd.getOrCreateSchema))

    def _producer(self, cmd: Any) -> None:
        from magnetar.protocol.producers import open_producer

        self.spawn(open_producer(self, cmd.producer))

    def _close_producer(self, cmd: Any) -> None:
        request = cmd.close_producer
        producer = self.producers.get(request.producer_id)
        if producer is None:
            self.success(request.request_id)  # already closed: closing is idempotent
        else:
            producer.enqueue_close(request.request_id)

    def _subscribe(self, cmd: Any) -> None:
        from magnetar.protocol.consumers import open_consumer

        self.spawn(open_consumer(self, cmd.subscribe))

    def _consumer_command(self, cmd: Any, consumer_id: int, request_id: int | None) -> Consumer | None:
        consumer = self.consumers.get(consumer_id)
        if consumer is None and request_id is not None:
            self.error(request_id, ProtocolError(f"Consumer {consumer_id} not found", pb.ConsumerNotFound))
        return consumer

    def _flow(self, cmd: Any) -> None:
        consumer = self.consumers.get(cmd.flow.consumer_id)
        if consumer is not None:
            consumer.flow(cmd.flow.messagePermits)

    def _ack(self, cmd: Any) -> None:
        consumer = self._consumer_command(cmd, cmd.ack.consumer_id, None)
        if consumer is not None:
            consumer.enqueue(cmd)

    def _redeliver(self, cmd: Any) -> None:
        consumer = self._consumer_command(cmd, cmd.redeliverUnacknowledgedMessages.consumer_id, None)
        if consumer is not None:
            consumer.enqueue(cmd)

    def _close_consumer(self, cmd: Any) -> None:
        request = cmd.close_consumer
        consumer = self.consumers.get(request.consumer_id)
        if consumer is None:
            self.success(request.request_id)
        else:
            consumer.enqueue(cmd)

    def _unsubscribe(self, cmd: Any) -> None:
        request = cmd.unsubscribe
        consumer = self._consumer_command(cmd, request.consumer_id, request.request_id)
        if consumer is not None:
            consumer.enqueue(cmd)

    def _seek(self, cmd: Any) -> None:
        request = cmd.seek
        consumer = self._consumer_command(cmd, request.consumer_id, request.request_id)
        if consumer is not None:
            consumer.enqueue(cmd)

    def _last_message_id(self, cmd: Any) -> None:
        request = cmd.getLastMessageId
        consumer = self._consumer_command(cmd, request.consumer_id, request.request_id)
        if consumer is not None:
            self.spawn(consumer.last_message_id(request.request_id))


_HANDLERS: dict[int, Callable[[Connection, Any], None]] = {
    Type.CONNECT: Connection._connect,
    Type.PING: Connection._ping,
    Type.PONG: Connection._pong,
    Type.LOOKUP: Connection._lookup,
    Type.PARTITIONED_METADATA: Connection._partitioned_metadata,
    Type.PRODUCER: Connection._producer,
    Type.CLOSE_PRODUCER: Connection._close_producer,
    Type.SUBSCRIBE: Connection._subscribe,
    Type.FLOW: Connection._flow,
    Type.ACK: Connection._ack,
    Type.REDELIVER_UNACKNOWLEDGED_MESSAGES: Connection._redeliver,
    Type.CLOSE_CONSUMER: Connection._close_consumer,
    Type.UNSUBSCRIBE: Connection._unsubscribe,
    Type.SEEK: Connection._seek,
    Type.GET_LAST_MESSAGE_ID: Connection._last_message_id,
    Type.GET_TOPICS_OF_NAMESPACE: Connection._topics_of_namespace,
    Type.GET_SCHEMA: Connection._get_schema,
    Type.GET_OR_CREATE_SCHEMA: Connection._get_or_create_schema,
}


def _request_id(cmd: Any) -> int | None:
    """The request id of whatever sub-command a BaseCommand carries, if it has one."""
    for descriptor, value in cmd.ListFields():
        if descriptor.name != "type" and hasattr(value, "request_id"):
            return int(value.request_id)
    return None


def _principal(connect: Any) -> Principal:
    """The role of a CONNECT's credentials: Pulsar's `token` method (the token's subject) or
    `basic` (data `user:password`, as the official clients' AuthenticationBasic sends it: the user)."""
    method = connect.auth_method_name
    if method not in ("token", "basic") or not connect.auth_data:
        return Principal(refused="the proxy accepts the token and basic authentication methods")
    data = connect.auth_data.decode("utf-8", "replace")
    if method == "basic":
        from magnetar.security.basic import InvalidCredentials, authenticate, split_credentials

        try:
            return Principal(authenticate(*split_credentials(data)))
        except (InvalidCredentials, ValueError, OSError) as exc:
            return Principal(refused=str(exc))
    from magnetar.security.identity import validator_from_environment
    from magnetar.security.tokens import InvalidToken

    try:
        return Principal(validator_from_environment().role(data.strip()))
    except (InvalidToken, ValueError) as exc:
        return Principal(refused=str(exc))


async def _quietly(coro: Awaitable[Any]) -> None:
    try:
        await coro
    except Exception as exc:
        log.debug("binary protocol: cleanup failed: %s", exc)
