"""Acknowledgements a consumer has made and not sent yet (Pulsar's grouped acknowledgements), for
the long-polling consumer (client/consumer.py) and the WebSocket push consumer (client/push.py):
each keeps an `AckGroup` and writes what it takes in its own wire form."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from magnetar.client.message import MessageId


@dataclass
class Taken:
    """What `AckGroup.take` took: message id (in the consumer's wire text) -> messages in its entry
    (batch-index acknowledgement), negatively acknowledged ids, the cumulative acknowledgement."""

    acks: dict[str, int] = field(default_factory=dict)
    nacks: set[str] = field(default_factory=set)
    cumulative: MessageId | None = None

    def empty(self) -> bool:
        return not self.acks and not self.nacks and self.cumulative is None


class AckGroup:
    """Pending individual, negative and cumulative acknowledgements, under one lock.

    `wake` is set when acknowledgements start waiting (none were pending): the consumer's flusher
    waits on it, so an idle consumer has no timer running (a thousand idle consumers in one
    process must not wake ten times a second each). The owner may set it for its own reasons
    too (the close). `since` is when the oldest pending acknowledgement was made (0: none).
    """

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.since = 0.0
        self._lock = threading.Lock()
        self._acks: dict[str, int] = {}
        self._nacks: set[str] = set()
        self._cumulative: MessageId | None = None

    def ack(self, ids: Iterable[tuple[str, int]]) -> int:
        """Acknowledge (id, messages in its entry) pairs; how many individual acks now wait."""
        with self._lock:
            self._acks.update(ids)
            self._waiting()
            return len(self._acks)

    def nack(self, ids: Iterable[str]) -> int:
        """Negatively acknowledge ids; how many negative acks now wait."""
        with self._lock:
            self._nacks.update(ids)
            self._waiting()
            return len(self._nacks)

    def ack_cumulative(self, message_id: MessageId) -> None:
        """Acknowledge everything up to `message_id` (the furthest one given wins)."""
        with self._lock:
            if self._cumulative is None or self._cumulative < message_id:
                self._cumulative = message_id
            self._waiting()

    def take(self) -> Taken:
        """Everything pending, cleared here (to send; `restore` it if sending fails)."""
        with self._lock:
            taken = Taken(self._acks, self._nacks, self._cumulative)
            self._acks, self._nacks, self._cumulative = {}, set(), None
            self.since = 0.0
        return taken

    def restore(self, taken: Taken) -> None:
        """Taken acknowledgements that were not sent: pending again, with any made meanwhile."""
        if taken.empty():
            return
        with self._lock:
            self._waiting()
            self._acks.update(taken.acks)
            self._nacks.update(taken.nacks)
            if taken.cumulative is not None and (self._cumulative is None or self._cumulative < taken.cumulative):
                self._cumulative = taken.cumulative

    def clear(self) -> None:
        """Drop everything pending (a seek: the subscription moved, the acks are moot)."""
        with self._lock:
            self._acks, self._nacks, self._cumulative = {}, set(), None
            self.since = 0.0

    def _waiting(self) -> None:
        """Acknowledgements wait to be sent (the lock is held): the flusher wakes at the first."""
        if not self.since:
            self.since = time.monotonic()
            self.wake.set()
