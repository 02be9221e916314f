"""In-memory `Outputs` and `Acks` (functions/runtime.py's ports): a topic is a list of
messages, acknowledgements are recorded, and every step lands in one event log so that the
order of publishes and acknowledgements can be read back. Unit tests and local experiments.

`MemoryBus(store_on_flush=True)` stores sends only at `flush` (as an SDK producer whose batch is
still in flight when the function returns); a topic in `failing` refuses every send."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from magnetar.functions.runtime import Done, OutputMessage

if TYPE_CHECKING:
    from magnetar.client.message import MessageId


@dataclass
class MemoryBus:
    store_on_flush: bool = False
    topics: dict[str, list[OutputMessage]] = field(default_factory=dict)
    acked: list[str] = field(default_factory=list)
    nacked: list[str] = field(default_factory=list)
    events: list[tuple[str, str]] = field(default_factory=list)  # ("publish", topic) / ("ack"|"nack", id)
    failing: set[str] = field(default_factory=set)
    dedup: bool = True  # a producer's sequence ids at or below its last are dropped, as the broker's
    _last_sequence: dict[tuple[str, str], int] = field(default_factory=dict)
    _queued: list[tuple[OutputMessage, Done]] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    # --- Outputs ---------------------------------------------------------------------------------
    def send(self, message: OutputMessage, done: Done) -> None:
        with self._lock:
            self._queued.append((message, done))
        if not self.store_on_flush:
            self.flush()

    def flush(self) -> None:
        from magnetar.client.message import MessageId

        with self._lock:
            queued, self._queued = self._queued, []
        for message, done in queued:
            if message.topic in self.failing:
                done(RuntimeError(f"{message.topic} refuses writes"), None)
                continue
            with self._lock:
                stored = self.topics.setdefault(message.topic, [])
                key = (message.topic, message.producer_name or "")
                duplicate = (self.dedup and message.sequence_id is not None and message.producer_name is not None
                             and message.sequence_id <= self._last_sequence.get(key, -1))
                if not duplicate:
                    stored.append(message)
                    self.events.append(("publish", message.topic))
                    if message.sequence_id is not None:
                        self._last_sequence[key] = message.sequence_id
                mid = MessageId(-1, 0, len(stored) - 1, -1, message.topic)
            done(None, mid)

    # --- Acks --------------------------------------------------------------------------------------
    def ack(self, message_id: MessageId) -> None:
        with self._lock:
            self.acked.append(str(message_id))
            self.events.append(("ack", str(message_id)))

    def nack(self, message_id: MessageId) -> None:
        with self._lock:
            self.nacked.append(str(message_id))
            self.events.append(("nack", str(message_id)))

    def payloads(self, topic: str) -> list[bytes]:
        with self._lock:
            return [m.payload for m in self.topics.get(topic, [])]
