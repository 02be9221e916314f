"""Consumer of one topic partition over push: Pulsar's WebSocket API (`/ws/v2/consumer/...`).

The broker pushes messages as they come (no request open while idle): the only way to consume a
non-persistent topic, and the cheap way to keep many mostly-idle consumers of persistent ones.

- A background thread reads the frames into the receive queue; the server bounds what is pushed
  and not acknowledged by `receiverQueueSize` (at most 1000).
- Acknowledgements and negative acknowledgements are grouped into `messageIds` frames (Magnetar's
  extension of Pulsar's one-id frame), flushed every 100 ms or at 100 ids.
- Cumulative acknowledgement has no WebSocket frame: `acknowledge_cumulative` raises
  `NotAllowedError` (acknowledge each message, or consume over long polling).
- `redeliver_unacknowledged_messages` has no frame: it reconnects, and the broker redelivers what
  the closed connection held (persistent topics; a non-persistent one only drops the local queue).
- An unexpected close reconnects with backoff under the same consumer name; the broker redelivers
  what the lost connection held unacknowledged (persistent topics). The broker names the consumer
  `{consumer_name}-{connection id}` (one consumer per connection), as its stats show.
- A client failover (client/failover.py) closes the connection and reconnects to the new
  cluster; acknowledgements of messages the former cluster pushed are dropped (it redelivers them).
"""

from __future__ import annotations

import base64
import collections
import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI, WebSocketException
from websockets.sync.client import ClientConnection, connect

from magnetar.client import exceptions
from magnetar.client.acks import AckGroup, Taken
from magnetar.client.compacted import CompactedFilter
from magnetar.client.consumer_base import ConsumerBase
from magnetar.client.crypto import MessageDecryptor
from magnetar.client.message import Message, MessageId, acknowledged_id
from magnetar.client.threads import Workers
from magnetar.client.transport import Transport, topic_path
from magnetar.client.types import (
    ConsumerBatchReceivePolicy,
    ConsumerType,
    InitialPosition,
    check_type,
)
from magnetar.core import encryption
from magnetar.core.errors import InvalidInput
from magnetar.core.naming import TopicName

log = logging.getLogger(__name__)
ACK_FLUSH_S = 0.1
ACK_FLUSH_IDS = 100
MAX_QUEUE_SIZE = 1000  # the WebSocket API's receiverQueueSize cap
RECONNECT_MAX_S = 5.0
OPEN_TIMEOUT_S = 10.0


def websocket_base(service_url: str) -> str:
    """The WebSocket endpoint of a service URL: http -> ws, https -> wss (one host and port locally)."""
    url = service_url.rstrip("/")
    if url.startswith("https://"):
        return "wss://" + url[len("https://"):]
    if url.startswith("http://"):
        return "ws://" + url[len("http://"):]
    return url


def _millis(value: object) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value:
        with contextlib.suppress(ValueError):
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    return 0


def _refusal(exc: InvalidStatus) -> exceptions.PulsarException:
    status = exc.response.status_code
    body = bytes(exc.response.body or b"")
    reason = ""
    with contextlib.suppress(ValueError, AttributeError):
        reason = str(json.loads(body).get("reason") or "")
    return exceptions.from_response(status, reason or body.decode(errors="replace") or f"HTTP {status}")


def open_websocket(transport: Transport, url: str) -> ClientConnection:
    """A WebSocket connection to `url`, with the transport's credentials (fresh at each connect: a
    rotated token, a new signature); a refusal raises as the SDK's exceptions (ConnectError when
    trying again may help)."""
    try:
        auth = transport.authentication
        headers = auth.websocket_headers(url) if auth is not None else None
        # entered, as websockets >= 17.1 asks of a connection not used in a `with` block
        return connect(url, additional_headers=headers, open_timeout=OPEN_TIMEOUT_S, close_timeout=2,
                       max_size=None).__enter__()
    except InvalidStatus as exc:
        raise _refusal(exc) from None
    except InvalidURI as exc:
        raise exceptions.InvalidConfiguration(f"Invalid WebSocket URL {url!r}: {exc}") from None
    except (OSError, TimeoutError, WebSocketException) as exc:  # a refused handshake, or a connection
        # reset or closed during it (a cluster going down as the consumer reconnects): try again
        raise exceptions.ConnectError(f"WebSocket connect to {url}: {exc}") from exc


class PushConsumer(ConsumerBase):
    def __init__(
        self,
        transport: Transport,
        websocket_url: str,
        topic: TopicName,
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        consumer_name: str | None = None,
        initial_position: InitialPosition = InitialPosition.Latest,
        unacked_messages_timeout_ms: int | None = None,
        receiver_queue_size: int = 1000,
        batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
        negative_ack_redelivery_delay_ms: int = 60_000,
        message_listener: Callable[[PushConsumer, Message], None] | None = None,
        decryptor: MessageDecryptor | None = None,
        read_compacted: bool = False,
        start_message_id_inclusive: bool = False,
        priority_level: int = 0,
    ) -> None:
        self._transport = transport
        self._topic = topic
        self._subscription = subscription_name
        self._name = consumer_name or f"consumer-{uuid.uuid4().hex[:12]}"
        self._type = consumer_type
        self._queue_size = max(1, min(receiver_queue_size, MAX_QUEUE_SIZE))
        self._batch_policy = batch_receive_policy or ConsumerBatchReceivePolicy()
        self._decryptor = decryptor or MessageDecryptor()  # end-to-end encryption: keys, failure action
        params = {
            "subscriptionType": consumer_type.value,
            "subscriptionInitialPosition": initial_position.value,
            "consumerName": self._name,
            "receiverQueueSize": str(self._queue_size),
            "negativeAckRedeliveryDelay": str(max(0, negative_ack_redelivery_delay_ms)),
        }
        if unacked_messages_timeout_ms:
            params["ackTimeoutMillis"] = str(int(unacked_messages_timeout_ms))
        if start_message_id_inclusive:  # a subscription created at Latest starts at the last entry
            params["startMessageIdInclusive"] = "true"
        if priority_level:
            params["priorityLevel"] = str(priority_level)
        # is_read_compacted: what the view (as at subscribe) does not hold below its horizon is
        # acknowledged here, never handed out, as the long-polling consumer does (client/compacted.py)
        self._compacted = CompactedFilter.load(transport, topic) if read_compacted and topic.is_persistent else None
        self._ws_base = websocket_base(websocket_url)  # the current cluster's (a client failover changes it)
        self._ws_path = f"/ws/v2/consumer/{topic_path(topic)}/{quote(subscription_name, safe='')}?{urlencode(params)}"
        self._generation = transport.generation  # the service of the connection (Transport.generation)
        self._http_path = f"/magnetar/v1/consumer/{topic_path(topic)}/{quote(subscription_name, safe='')}"
        self._queue: collections.deque[Message] = collections.deque()
        self._cond = threading.Condition()
        # grouped acks, by base64 message id; its event wakes the flusher (an idle consumer has no timer running)
        self._pending = AckGroup()
        self._send_lock = threading.Lock()
        self._closed = threading.Event()
        self._connected = threading.Event()
        self._reconnect_now = threading.Event()  # a client failover (or the close) ends a reconnect's backoff
        self._errors: collections.deque[str] = collections.deque(maxlen=10)  # error frames from the broker
        self._ws: ClientConnection = self._connect()  # a refusal raises here, as the SDK's exceptions
        transport.add_switch_listener(self._on_switch)
        self._workers = Workers()
        self._reader = self._workers.start(self._read, name=f"push-{self._name}")
        self._workers.start(self._flush_loop, name=f"push-acks-{self._name}")
        if message_listener is not None:
            self._workers.start(self._listen, message_listener, name=f"listener-{self._name}")

    # --- pulsar-client API -----------------------------------------------------------------
    def is_connected(self) -> bool:
        return self._connected.is_set() and not self._closed.is_set()

    def receive(self, timeout_millis: int | None = None) -> Message:
        """The next pushed message; raises `Timeout` if none arrives within `timeout_millis`."""
        if timeout_millis is not None:
            check_type(int, timeout_millis, "timeout_millis")
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        with self._cond:
            while True:
                self._check_open()
                if self._queue:
                    return self._queue.popleft()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise exceptions.Timeout("No message received within the timeout")
                self._cond.wait(1.0 if left is None else min(left, 1.0))

    def batch_receive(self) -> list[Message]:
        """Up to the batch-receive policy's count and bytes, waiting at most its timeout."""
        limit = self._batch_limit()
        deadline = time.monotonic() + max(0, self._batch_policy.timeout_ms) / 1000
        with self._cond:
            self._check_open()
            while len(self._queue) < limit and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
                self._check_open()
            return self._take_batch(limit)

    def acknowledge(self, message: Message | MessageId) -> None:
        message_id = acknowledged_id(message, "acknowledge")
        if not self._admit_ack(message_id):
            return
        if self._pending.ack([(self._wire(message_id), message_id._batch_size)]) >= ACK_FLUSH_IDS:
            self._flush_acks()

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        acknowledged_id(message, "acknowledge_cumulative")
        raise exceptions.NotAllowedError(
            "Cumulative acknowledgement is not supported over the WebSocket API (no such frame): acknowledge "
            "each message, or subscribe with delivery='poll' (persistent topics)")

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Redeliver this message after the consumer's `negative_ack_redelivery_delay_ms` (persistent
        topics; a non-persistent topic keeps nothing, the message is only released)."""
        message_id = acknowledged_id(message, "negative_acknowledge")
        if not self._admit_ack(message_id):
            return
        if self._pending.nack([self._wire(message_id)]) >= ACK_FLUSH_IDS:
            self._flush_acks()

    def redeliver_unacknowledged_messages(self) -> None:
        """No frame asks for it: the consumer reconnects, and the broker redelivers at once what the
        closed connection held unacknowledged (persistent topics; a non-persistent topic keeps
        nothing, so only the local queue is dropped)."""
        self._check_open()
        self._flush_acks()  # acknowledged before the close: not redelivered
        with self._cond:
            self._queue.clear()
        if self._topic.is_persistent:
            with contextlib.suppress(Exception):
                self._ws.close()  # the reader thread reconnects

    def seek(self, messageid: MessageId | int | float) -> None:
        """Reset the subscription to a message id, or to a publish time (ms, any number); the broker
        pushes from there to its WebSocket consumers (persistent topics)."""
        if not isinstance(messageid, MessageId | int | float) or isinstance(messageid, bool):
            raise ValueError(f"seek takes a MessageId or a timestamp in ms, not {type(messageid).__name__}")
        if not self._topic.is_persistent:
            raise exceptions.NotAllowedError("A non-persistent topic keeps no messages to seek to")
        body: dict[str, Any] = {"messageId": messageid.wire()} if isinstance(messageid, MessageId) else {
            "timestamp": int(messageid)}
        self._pending.clear()
        self._transport.call("POST", f"{self._http_path}/seek", body)
        with self._cond:
            self._queue.clear()

    def unsubscribe(self) -> None:
        """The `unsubscribe` frame: the broker deletes the subscription and closes the connection."""
        self._check_open()
        with contextlib.suppress(exceptions.PulsarException):
            self._flush_acks()
        if not self._topic.is_persistent:
            self.close()
            return
        errors = len(self._errors)
        self._closed.set()  # the close that follows is expected: no reconnect
        self._send({"type": "unsubscribe"})
        self._reader.join(timeout=10)
        if len(self._errors) > errors:
            raise exceptions.from_response(409 if "onsumer" in self._errors[-1] else 400, self._errors[-1])
        self.close()

    def close(self) -> None:
        self._transport.remove_switch_listener(self._on_switch)
        with contextlib.suppress(exceptions.PulsarException):
            self._flush_acks()
        self._closed.set()
        self._reconnect_now.set()
        self._pending.wake.set()  # the flusher sees the close
        with self._cond:
            self._cond.notify_all()
        with contextlib.suppress(Exception):
            self._ws.close()
        self._connected.clear()
        self._workers.join()  # the frames' reader, the acknowledgements' flusher, a listener

    # --- internals -------------------------------------------------------------------------
    @property
    def _url(self) -> str:
        return self._ws_base + self._ws_path

    def _admit_ack(self, message_id: MessageId) -> bool:
        """Whether an acknowledgement of `message_id` goes to the pending ones: not for a message
        pushed by another cluster than the current one (before a client failover)."""
        return message_id._generation is None or message_id._generation == self._transport.generation

    def _on_switch(self) -> None:
        """The client switched to another cluster: reconnect there (the reader thread does); what
        the former cluster pushed and was not acknowledged is redelivered by it."""
        self._ws_base = websocket_base(self._transport.websocket_url or self._transport.base)
        self._pending.clear()
        with self._cond:
            self._queue.clear()
        self._reconnect_now.set()
        with contextlib.suppress(Exception):
            self._ws.close()

    @staticmethod
    def _wire(message_id: MessageId) -> str:
        return base64.b64encode(message_id.serialize()).decode()

    def _connect(self) -> ClientConnection:
        generation = self._transport.generation
        ws = open_websocket(self._transport, self._url)
        self._generation = generation
        self._connected.set()
        return ws

    def _send(self, frame: dict[str, Any]) -> None:
        try:
            with self._send_lock:
                self._ws.send(json.dumps(frame, separators=(",", ":")))
        except ConnectionClosed as exc:
            raise exceptions.ConnectError(f"WebSocket connection closed: {exc}") from exc

    def _read(self) -> None:
        backoff = 0.1
        while True:
            try:
                for text in self._ws:
                    self._on_frame(text)
                    backoff = 0.1
            except ConnectionClosed:
                pass
            except Exception:  # a frame we cannot read must not stop the consumer
                log.exception("push consumer %s: reading frames failed", self._name)
            self._connected.clear()
            if self._closed.is_set():
                return
            log.warning("push consumer %s: connection closed, reconnecting", self._name)
            while not self._closed.is_set():
                self._reconnect_now.clear()
                try:
                    ws = self._connect()
                except exceptions.PulsarException as exc:
                    log.warning("push consumer %s: reconnect failed: %s", self._name, exc.reason)
                    self._reconnect_now.wait(backoff)
                    backoff = min(backoff * 2, RECONNECT_MAX_S)
                    continue
                if self._generation != self._transport.generation:  # the client switched cluster meanwhile
                    with contextlib.suppress(Exception):
                        ws.close()
                    continue
                with self._send_lock:
                    self._ws = ws
                if self._topic.is_persistent:
                    with self._cond:
                        self._queue.clear()  # the broker redelivers what the old connection held
                break
            if self._closed.is_set():
                with contextlib.suppress(Exception):
                    self._ws.close()
                return

    def _on_frame(self, text: str | bytes) -> None:
        frame = json.loads(text)
        if not isinstance(frame, dict):
            return
        if "payload" not in frame or "messageId" not in frame:
            if frame.get("result") == "error":
                reason = str(frame.get("errorMsg", ""))
                log.warning("push consumer %s: broker error: %s", self._name, reason)
                self._errors.append(reason)
            return
        if frame.get("error"):
            log.warning("push consumer %s: %s", self._name, frame["error"])
        topic = str(self._topic)
        raw = MessageId.deserialize(base64.b64decode(frame["messageId"]))
        mid = MessageId(raw.partition(), raw.ledger_id(), raw.entry_id(), raw.batch_index(), topic,
                        int(frame.get("batchSize", 0)))
        mid._generation = self._generation
        if self._compacted is not None:
            masked = self._compacted.masked(mid.entry_id(), max(mid._batch_size, 1))
            if masked is not None and max(mid.batch_index(), 0) in masked:
                self.acknowledge(mid)  # not in the compacted view: acknowledged for the application
                return
        message = Message(
            base64.b64decode(frame["payload"]), mid, topic, frame.get("properties") or {}, frame.get("key") or "",
            _millis(frame.get("publishTime")), _millis(frame.get("eventTime")), int(frame.get("redeliveryCount", 0)),
            str(frame.get("producerName", "")), _null_value=bool(frame.get("nullValue")),
            _schema_version=frame["schemaVersion"] if isinstance(frame.get("schemaVersion"), int) else None,
            _replicated_from=str(frame.get("replicatedFrom") or ""),
        )
        if frame.get("encryptionContext") is not None:  # the ciphertext, with what decrypts it
            try:
                message._encryption = encryption.from_wire(frame["encryptionContext"])
                opened = self._decryptor.open(message, self.acknowledge)
            except InvalidInput as exc:  # encrypted, but with no usable context: it cannot be decrypted
                opened = self._decryptor.failed(message, exc.reason, self.acknowledge)
            if opened is None:
                return
            message = opened
        with self._cond:
            self._queue.append(message)
            self._cond.notify()

    def _flush_acks(self) -> None:
        taken = self._pending.take()
        acks, nacks = taken.acks, taken.nacks  # no cumulative: `acknowledge_cumulative` refuses it
        if not acks and not nacks:
            return
        try:
            if acks:
                frame: dict[str, Any] = {"messageIds": sorted(acks)}
                sizes = {str(MessageId.deserialize(base64.b64decode(m)).entry_id()): n
                         for m, n in acks.items() if n > 1}
                if sizes:
                    frame["batchSizes"] = sizes
                self._send(frame)
                acks = {}
            if nacks:
                self._send({"type": "negativeAcknowledge", "messageIds": sorted(nacks)})
        except exceptions.PulsarException:
            self._pending.restore(Taken(acks, nacks))  # sent again after the reconnect
            raise

    def _flush_loop(self) -> None:
        """Acknowledgements grouped over ACK_FLUSH_S, sent as one frame. Asleep while there are none:
        a thousand idle consumers in one process must not wake ten times a second each."""
        wake = self._pending.wake
        while True:
            wake.wait()
            if self._closed.wait(ACK_FLUSH_S):  # the acknowledgements of the next 100 ms go too
                return
            wake.clear()
            if not self._connected.is_set():  # kept for after the reconnect
                wake.set()
                continue
            try:
                self._flush_acks()
            except exceptions.PulsarException:
                log.debug("push consumer %s: acknowledgements wait for the reconnect", self._name)
