"""Reader: a non-durable consumer that leaves no cursor behind (Pulsar's Reader)."""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable
from typing import Any

from magnetar.api.wire import entry_from_wire
from magnetar.client import exceptions
from magnetar.client.crypto import MessageDecryptor
from magnetar.client.message import Message, MessageId
from magnetar.client.threads import Workers
from magnetar.client.transport import Transport, topic_path
from magnetar.core.naming import TopicName

POLL_S = 0.2
log = logging.getLogger(__name__)


class Reader:
    def __init__(self, transport: Transport, topic: TopicName, start_message_id: MessageId,
                 start_message_id_inclusive: bool = False, receiver_queue_size: int = 1000,
                 listener: Callable[[Reader, Message], None] | None = None,
                 decryptor: MessageDecryptor | None = None, read_compacted: bool = False) -> None:
        self._transport = transport
        self._topic = topic
        self._path = topic_path(topic)
        # is_read_compacted: the compacted view below the horizon, then the topic (api/routes/compaction.py)
        self._read_route = "compacted" if read_compacted and topic.is_persistent else "read"
        self._inclusive = start_message_id_inclusive
        self._decryptor = decryptor or MessageDecryptor()  # end-to-end encryption: keys, failure action
        self._batch = max(1, min(receiver_queue_size // 10, 1000))
        self._queue: collections.deque[Message] = collections.deque()
        self._closed = False
        self._position = 0  # next entry id to fetch
        self._skip_until: MessageId | None = None  # inside the first entry: messages up to this one
        self._place(start_message_id)
        self._listener = listener
        self._workers = Workers()
        if listener is not None:  # pulsar-client's reader_listener: messages pushed, in order, on one thread
            self._workers.start(self._listen, name=f"reader-{topic}")

    def _listen(self) -> None:
        assert self._listener is not None
        _run_listener(self, self._listener)

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
        _check_read_next(self._listener, timeout_millis)
        return self._next(timeout_millis)

    def _next(self, timeout_millis: int | None) -> Message:
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        while True:
            message = self._poll()
            if message is not None:
                return message
            if deadline is not None and time.monotonic() >= deadline:
                raise exceptions.Timeout("No message within the timeout")
            time.sleep(POLL_S if deadline is None else min(POLL_S, max(0.0, deadline - time.monotonic())))

    def _poll(self) -> Message | None:
        """The next message, fetching until the topic has no more now: None when it has none."""
        while True:
            if self._closed:
                raise exceptions.AlreadyClosed("Reader already closed")
            if self._queue:
                return self._queue.popleft()
            if not self._fetch():
                return None

    def has_message_available(self) -> bool:
        return bool(self._queue) or self._position <= self._last_entry()

    def seek(self, messageid: MessageId | int | float) -> None:
        """Move to a message id, or to the first message published at or after a time (ms, any number)."""
        if isinstance(messageid, MessageId):  # after it, as pulsar-client's (on it with start_message_id_inclusive)
            self._place(messageid)
            return
        if isinstance(messageid, bool) or not isinstance(messageid, int | float):
            raise ValueError(f"seek takes a MessageId or a timestamp in ms, not {type(messageid).__name__}")
        found = self._transport.call("GET", f"/magnetar/v1/reader/{self._path}/position?timestamp={int(messageid)}")
        self._queue.clear()
        self._skip_until = None
        self._position = int(found["entryId"])

    def close(self) -> None:
        self._closed = True
        self._workers.join()  # the listener, once its read returns

    def is_connected(self) -> bool:
        return not self._closed

    def _fetch(self) -> bool:
        body = {"startEntryId": self._position, "maxEntries": self._batch, "format": "entries"}
        page = self._transport.call("POST", f"/magnetar/v1/reader/{self._path}/{self._read_route}", body)
        for wire in page["entries"]:
            entry = entry_from_wire(wire, str(self._topic))
            masked = set(wire.get("ackedIndexes", ()))  # a compacted entry: its messages not in the view
            for message in Message.from_entry(entry, self._topic.partition_index, 0, masked):
                if self._skip_until is not None and message.message_id() <= self._skip_until:
                    continue
                opened = self._decryptor.open(message)  # None: FAIL or DISCARD skip it (no cursor)
                if opened is not None:
                    self._queue.append(opened)
        moved = int(page["nextEntryId"]) != self._position
        self._position = int(page["nextEntryId"])
        if moved:
            self._skip_until = None
        return bool(self._queue) or moved


class PartitionedReader:
    """pulsar-client's reader on a partitioned topic: a reader per partition, read in turn (each
    partition in order; no order across partitions, as in Pulsar). It starts at
    `MessageId.earliest` or `MessageId.latest` on every partition; `seek` takes those, a
    timestamp (every partition), or a message id (its own partition)."""

    def __init__(self, topic: str, readers: list[Reader],
                 listener: Callable[[PartitionedReader, Message], None] | None = None) -> None:
        self._topic = topic
        self._readers = readers
        self._turn = 0
        self._closed = False
        self._listener = listener
        self._workers = Workers()
        if listener is not None:
            self._workers.start(_run_listener, self, listener, name=f"reader-{topic}")

    def topic(self) -> str:
        return self._topic

    def read_next(self, timeout_millis: int | None = None) -> Message:
        _check_read_next(self._listener, timeout_millis)
        return self._next(timeout_millis)

    def _next(self, timeout_millis: int | None) -> Message:
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        while True:
            if self._closed:
                raise exceptions.AlreadyClosed("Reader already closed")
            for _ in range(len(self._readers)):
                reader = self._readers[self._turn]
                self._turn = (self._turn + 1) % len(self._readers)
                message = reader._poll()
                if message is not None:
                    return message
            if deadline is not None and time.monotonic() >= deadline:
                raise exceptions.Timeout("No message within the timeout")
            time.sleep(POLL_S if deadline is None else min(POLL_S, max(0.0, deadline - time.monotonic())))

    def has_message_available(self) -> bool:
        return any(r.has_message_available() for r in self._readers)

    def seek(self, messageid: MessageId | int | float) -> None:
        if isinstance(messageid, MessageId) and messageid.partition() >= 0:
            if messageid.partition() >= len(self._readers):
                raise exceptions.InvalidConfiguration(f"{self._topic} has no partition {messageid.partition()}")
            self._readers[messageid.partition()].seek(messageid)
        else:
            for reader in self._readers:
                reader.seek(messageid)

    def close(self) -> None:
        self._closed = True
        for reader in self._readers:
            reader.close()
        self._workers.join()

    def is_connected(self) -> bool:
        return not self._closed


def _run_listener(reader: Any, listener: Callable[[Any, Message], None]) -> None:
    """pulsar-client's reader_listener: each message, in order, handed to `listener` on this thread."""
    while not reader._closed:
        try:
            message = reader._next(1000)
        except exceptions.Timeout:
            continue
        except exceptions.PulsarException as exc:
            if reader._closed:
                return
            log.warning("reader listener: read failed; retrying: %r", exc)
            time.sleep(POLL_S)
            continue
        try:
            listener(reader, message)
        except Exception:
            log.exception("reader listener raised")


def _check_read_next(listener: object, timeout_millis: int | None) -> None:
    """pulsar-client's refusals of `read_next` (both readers)."""
    if listener is not None:
        raise exceptions.InvalidConfiguration("read_next() is not allowed on a reader with a reader_listener")
    if timeout_millis is not None and not isinstance(timeout_millis, int):
        raise ValueError(f"Argument timeout_millis is expected to be of type 'int' and not "
                         f"'{type(timeout_millis).__name__}'")
