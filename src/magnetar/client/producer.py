"""Producer: client-side batching (one batch = one entry = one request), order kept.

Messages wait in the current batch until it holds `batching_max_messages` messages or
`batching_max_allowed_size_in_bytes` bytes, or `batching_max_publish_delay_ms` has passed, or
`send()`/`flush()` asks for it. One batch is in flight at a time, so a producer's messages keep
their order; a failed batch is retried until `send_timeout_millis`.
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from magnetar.client import exceptions
from magnetar.client.message import MessageId
from magnetar.client.transport import Transport, topic_path
from magnetar.client.types import Result
from magnetar.core.naming import TopicName

SendCallback = Callable[[Result, MessageId | None], None]


@dataclass
class _Pending:
    wire: dict[str, Any]
    size: int
    future: Future[MessageId]
    callback: SendCallback | None


class Producer:
    def __init__(
        self,
        transport: Transport,
        topic: TopicName,
        producer_name: str | None,
        batching_enabled: bool,
        batching_max_messages: int,
        batching_max_allowed_size_in_bytes: int,
        batching_max_publish_delay_ms: int,
        send_timeout_millis: int,
    ) -> None:
        self._transport = transport
        self._topic = topic
        self._name = producer_name or f"magnetar-{uuid.uuid4().hex[:12]}"
        self._path = f"/topics/{topic_path(topic)}"
        self._batching = batching_enabled
        self._max_messages = batching_max_messages if batching_enabled else 1
        self._max_bytes = batching_max_allowed_size_in_bytes
        self._delay_s = batching_max_publish_delay_ms / 1000
        self._send_timeout_s = send_timeout_millis / 1000 if send_timeout_millis > 0 else 3600.0
        self._batch: list[_Pending] = []
        self._batch_bytes = 0
        self._batch_started = 0.0
        self._flush_requested = False
        self._closed = False
        self._sequence_id = -1
        self._cond = threading.Condition()
        self._inflight = 0
        self._sender = threading.Thread(target=self._run, name=f"producer-{self._name}", daemon=True)
        self._sender.start()

    # --- pulsar-client API -----------------------------------------------------------------
    def topic(self) -> str:
        return str(self._topic)

    def producer_name(self) -> str:
        return self._name

    def last_sequence_id(self) -> int:
        return self._sequence_id

    def send(
        self,
        content: bytes,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        event_timestamp: int | None = None,
    ) -> MessageId:
        future = self._enqueue(content, properties, partition_key, event_timestamp, None)
        self.flush()
        return future.result()

    def send_async(
        self,
        content: bytes,
        callback: SendCallback | None,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        event_timestamp: int | None = None,
    ) -> None:
        self._enqueue(content, properties, partition_key, event_timestamp, callback)

    def flush(self) -> None:
        """Send everything queued so far and wait until it is acknowledged (or failed)."""
        with self._cond:
            self._flush_requested = True
            self._cond.notify_all()
            while (self._batch or self._inflight) and not self._closed:
                self._cond.wait(0.05)

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._sender.join(timeout=5)

    def is_connected(self) -> bool:
        return not self._closed

    # --- batching ----------------------------------------------------------------------------
    def _enqueue(
        self,
        content: bytes,
        properties: dict[str, str] | None,
        partition_key: str | None,
        event_timestamp: int | None,
        callback: SendCallback | None,
    ) -> Future[MessageId]:
        if self._closed:
            raise exceptions.AlreadyClosed("Producer already closed")
        if not isinstance(content, bytes | bytearray | memoryview):
            raise TypeError("content must be bytes")
        if not content:
            raise exceptions.InvalidConfiguration("Empty payload")
        wire: dict[str, Any] = {"payload": base64.b64encode(bytes(content)).decode()}
        if properties:
            wire["properties"] = {str(k): str(v) for k, v in properties.items()}
        if partition_key is not None:
            wire["key"] = partition_key
        if event_timestamp:
            wire["eventTime"] = int(event_timestamp)
        pending = _Pending(wire, len(content), Future(), callback)
        with self._cond:
            if self._batch and (
                len(self._batch) >= self._max_messages or self._batch_bytes + pending.size > self._max_bytes
            ):
                self._flush_requested = True
                self._cond.notify_all()
                while self._batch and not self._closed:  # back-pressure: one batch waiting at most
                    self._cond.wait(0.05)
            if not self._batch:
                self._batch_started = time.monotonic()
            self._batch.append(pending)
            self._batch_bytes += pending.size
            if len(self._batch) >= self._max_messages or self._batch_bytes >= self._max_bytes:
                self._flush_requested = True
            self._cond.notify_all()
        return pending.future

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._batch:
                        due = self._batch_started + self._delay_s
                        if self._flush_requested or time.monotonic() >= due or self._closed:
                            break
                        self._cond.wait(max(0.0, due - time.monotonic()))
                    elif self._closed:
                        return
                    else:
                        self._flush_requested = False
                        self._cond.wait(0.5)
                batch, self._batch, self._batch_bytes = self._batch, [], 0
                self._inflight = len(batch)
                self._flush_requested = False
                self._cond.notify_all()
            self._publish(batch)
            with self._cond:
                self._inflight = 0
                self._cond.notify_all()

    def _publish(self, batch: list[_Pending]) -> None:
        first_sequence_id = self._sequence_id + 1
        body = {
            "producerName": self._name,
            "sequenceId": first_sequence_id,
            "batched": self._batching,
            "messages": [p.wire for p in batch],
        }
        try:
            response = self._transport.call("POST", self._path, body, deadline_s=self._send_timeout_s)
            ids = [MessageId.from_text(r["messageId"]) for r in response["messagePublishResults"]]
        except exceptions.PulsarException as exc:
            for p in batch:
                p.future.set_exception(exc)
                if p.callback:
                    _safe(p.callback, Result.from_exception(exc), None)
            return
        self._sequence_id = first_sequence_id + len(batch) - 1
        for p, message_id in zip(batch, ids, strict=True):
            p.future.set_result(message_id)
            if p.callback:
                _safe(p.callback, Result.Ok, message_id)


def _safe(callback: SendCallback, result: Result, message_id: MessageId | None) -> None:
    try:
        callback(result, message_id)
    except Exception:  # a user callback must not kill the sender thread
        import logging

        logging.getLogger(__name__).exception("send callback raised")
