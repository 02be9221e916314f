"""Reader: a non-durable consumer that leaves no cursor behind (Pulsar's Reader)."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

from magnetar.api.wire import entry_from_wire
from magnetar.client import exceptions
from magnetar.client.message import Message, MessageId
from magnetar.client.transport import Transport, topic_path
from magnetar.core.naming import TopicName

POLL_S = 0.2
log = logging.getLogger(__name__)


class Reader:
    def __init__(self, transport: Transport, topic: TopicName, start_message_id: MessageId,
                 start_message_id_inclusive: bool = False, receiver_queue_size: int = 1000,
                 listener: Callable[[Reader, Message], None] | None = None) -> None:
        self._transport = transport
        self._topic = topic
        self._path = topic_path(topic)
        self._inclusive = start_message_id_inclusive
        self._batch = max(1, min(receiver_queue_size // 10, 1000))
        self._queue: collections.deque[Message] = collections.deque()
        self._closed = False
        self._position = 0  # next entry id to fetch
        self._skip_until: MessageId | None = None  # inside the first entry: messages up to this one
        self._place(start_message_id)
        self._listener = listener
        if listener is not None:  # pulsar-client's reader_listener: messages pushed, in order, on one thread
            threading.Thread(target=self._listen, name=f"reader-{topic}", daemon=True).start()

    def _listen(self) -> None:
        assert self._listener is not None
        while not self._closed:
            try:
                message = self._next(1000)
            except exceptions.Timeout:
                continue
            except exceptions.PulsarException:
                if self._closed:
                    return
                log.warning("reader listener: read failed; retrying", exc_info=True)
                time.sleep(POLL_S)
                continue
            try:
                self._listener(self, message)
            except Exception:
                log.exception("reader listener raised")

    def _last_entry(self) -> int:
        last = self._transport.call("GET", f"/admin/v2/{self._path}/lastMessageId")
        return int(last["entryId"])

    def _place(self, start: MessageId) -> None:
        self._queue.clear()
        self._skip_until = None
        if start == MessageId.earliest:
            self._position = 0
        elif start == MessageId.latest:
            self._position = self._last_entry() + 1
        else:
            self._position = start.entry_id()
            if not self._inclusive:
                if start.batch_index() < 0:
                    self._position += 1
                else:
                    self._skip_until = start

    # --- pulsar-client API -----------------------------------------------------------------
    def topic(self) -> str:
        return str(self._topic)

    def read_next(self, timeout_millis: int | None = None) -> Message:
        if self._listener is not None:
            raise exceptions.InvalidConfiguration("read_next() is not allowed on a reader with a reader_listener")
        if timeout_millis is not None and not isinstance(timeout_millis, int):
            raise ValueError(f"Argument timeout_millis is expected to be of type 'int' and not "
                             f"'{type(timeout_millis).__name__}'")
        return self._next(timeout_millis)

    def _next(self, timeout_millis: int | None) -> Message:
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        while True:
            if self._closed:
                raise exceptions.AlreadyClosed("Reader already closed")
            if self._queue:
                return self._queue.popleft()
            if self._fetch():
                continue
            if deadline is not None and time.monotonic() >= deadline:
                raise exceptions.Timeout("No message within the timeout")
            time.sleep(POLL_S)

    def has_message_available(self) -> bool:
        return bool(self._queue) or self._position <= self._last_entry()

    def seek(self, messageid: MessageId | int) -> None:
        """Move to a message id, or to the first message published at or after a time (ms)."""
        target = messageid
        if isinstance(target, int):
            found = self._transport.call("GET", f"/magnetar/v1/reader/{self._path}/position?timestamp={target}")
            self._queue.clear()
            self._skip_until = None
            self._position = int(found["entryId"])
        else:
            self._inclusive = True  # Pulsar: seek positions on the given message
            self._place(target)

    def close(self) -> None:
        self._closed = True

    def is_connected(self) -> bool:
        return not self._closed

    def _fetch(self) -> bool:
        body = {"startEntryId": self._position, "maxEntries": self._batch, "format": "entries"}
        page = self._transport.call("POST", f"/magnetar/v1/reader/{self._path}/read", body)
        for wire in page["entries"]:
            entry = entry_from_wire(wire, str(self._topic))
            for message in Message.from_entry(entry, self._topic.partition_index, 0):
                if self._skip_until is not None and message.message_id() <= self._skip_until:
                    continue
                self._queue.append(message)
        moved = int(page["nextEntryId"]) != self._position
        self._position = int(page["nextEntryId"])
        if moved:
            self._skip_until = None
        return bool(self._queue) or moved
