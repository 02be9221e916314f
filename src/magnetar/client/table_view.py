"""pulsar-client's TableView: a key -> latest value map of a topic, kept up to date.

Built on a compacted read (a reader with `is_read_compacted`, from the earliest message): the
compacted view gives every key's latest value up to the compaction horizon in one pass, then the
topic's tail keeps the map current. As in Pulsar, a message without a key is ignored, and a null
value (a tombstone) removes its key; listeners are called with each update (`None` for a removal).
`create_table_view` returns once the map holds what the topic held when it was created.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from magnetar.client import exceptions
from magnetar.client.message import Message
from magnetar.client.threads import Workers

log = logging.getLogger(__name__)
CATCH_UP_WAIT_MS = 5_000  # a message published just before the view was created is sealed within it
POLL_MS = 500


class TableView:
    def __init__(self, table_view: Any, topic: str, subscription: str | None, schema: Any) -> None:
        """`table_view`: the compacted reader the map is built from (pulsar-client: its native view)."""
        self._reader = table_view
        self._topic = topic
        self._subscription = subscription
        self._schema = schema
        self._data: dict[str, bytes] = {}
        self._listeners: list[Callable[[str, Any], None]] = []
        self._lock = threading.RLock()
        self._closed = False
        self._catch_up()
        self._workers = Workers()
        self._workers.start(self._follow, name=f"table-view-{topic}")

    # --- pulsar-client API -----------------------------------------------------------------
    def get(self, key: str) -> Any | None:
        """The value of `key`, or None when the table has no such key."""
        with self._lock:
            value = self._data.get(key)
        return None if value is None else self._decode(value)

    def for_each(self, callback: Callable[[str, Any], None]) -> None:
        """Call `callback(key, value)` for every entry of the table."""
        for key, value in self._snapshot():
            callback(key, self._decode(value))

    def for_each_and_listen(self, callback: Callable[[str, Any], None]) -> None:
        """`for_each`, then `callback(key, value)` on every later update (value None: the key was removed)."""
        with self._lock:  # no update slips between the snapshot and the registration
            snapshot = list(self._data.items())
            self._listeners.append(callback)
        for key, value in snapshot:
            callback(key, self._decode(value))

    def close(self) -> None:
        self._closed = True
        self._reader.close()
        self._workers.join()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __str__(self) -> str:
        if self._subscription is None:
            return f"TableView(topic={self._topic})"
        return f"TableView(topic={self._topic}, subscription={self._subscription})"

    __repr__ = __str__

    # --- Magnetar's mapping conveniences ----------------------------------------------------------
    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._data)

    def values(self) -> list[Any]:
        return [self._decode(v) for _, v in self._snapshot()]

    def items(self) -> list[tuple[str, Any]]:
        return [(k, self._decode(v)) for k, v in self._snapshot()]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    # --- the map's upkeep ---------------------------------------------------------------------
    def _snapshot(self) -> list[tuple[str, bytes]]:
        with self._lock:
            return list(self._data.items())

    def _decode(self, value: bytes) -> Any:
        decode = getattr(self._schema, "decode", None)
        return decode(value) if callable(decode) else value

    def _apply(self, message: Message) -> None:
        key = message.partition_key()
        if not key:
            return  # as in Pulsar: only keyed messages make the table
        removed = message.has_null_value() or not message.data()
        with self._lock:
            if removed:
                self._data.pop(key, None)
            else:
                self._data[key] = message.data()
            listeners = list(self._listeners)
        value = None if removed else self._decode(message.data())
        for listener in listeners:
            try:
                listener(key, value)
            except Exception:
                log.exception("table view listener raised")

    def _catch_up(self) -> None:
        """Read until the reader has read what the topic held at the start."""
        while self._reader.has_message_available():
            try:
                self._apply(self._reader.read_next(CATCH_UP_WAIT_MS))
            except exceptions.Timeout:
                return

    def _follow(self) -> None:
        while not self._closed:
            try:
                message = self._reader.read_next(POLL_MS)
            except exceptions.Timeout:
                continue
            except exceptions.PulsarException as exc:
                if self._closed:
                    return
                log.warning("table view on %s: read failed; retrying: %r", self._topic, exc)
                threading.Event().wait(POLL_MS / 1000)
                continue
            self._apply(message)
