"""Acknowledgements a consumer has made and not sent yet (Pulsar's grouped acknowledgements), for
the long-polling consumer (client/consumer.py) and the WebSocket push consumer (client/push.py):
each keeps an `AckGroup` and writes what it takes in its own wire form (the HTTP API's below).
Grouped acknowledgements ride on the consumer's next poll; `ack_flush_due` says when they go in a
request of their own."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from magnetar.client.message import MessageId

ACK_GROUP_S = 0.1  # Pulsar's acknowledgmentGroupTime
ACK_MAX_DELAY_S = 1.0


def ack_flush_due(waited_s: float, polling: bool) -> bool:
    """Whether acknowledgements that have waited `waited_s` go in a request of their own: they
    ride on the next poll, so only when none has carried them for the grouping time (Pulsar's
    acknowledgmentGroupTime) and none is in flight, or after ACK_MAX_DELAY_S whatever happens.
    An application acking between receives starts its next poll at once: no request of their own."""
    return waited_s >= ACK_MAX_DELAY_S or (waited_s >= ACK_GROUP_S and not polling)


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


def http_acks(taken: Taken, epoch: int, nack_delay_ms: int) -> dict[str, Any] | None:
    """Taken acknowledgements as the HTTP API's `acks` body of a poll or an ack request (None: none):
    the ids, the sizes of the batch entries acknowledged message by message, the cumulative id, the
    negative acks and their delay, under the consumer's `epoch`."""
    if taken.empty():
        return None
    sizes = {MessageId.from_text(m).entry_id(): n for m, n in taken.acks.items() if n > 1}
    body: dict[str, Any] = {"messageIds": sorted(taken.acks), "epoch": epoch}
    if taken.cumulative is not None:
        body["cumulative"] = taken.cumulative.wire()
        if taken.cumulative._batch_size > 1:
            sizes[taken.cumulative.entry_id()] = taken.cumulative._batch_size
    if sizes:
        body["batchSizes"] = {str(e): n for e, n in sizes.items()}
    if taken.nacks:
        body["nacks"] = sorted(taken.nacks)
        body["nackDelayMs"] = nack_delay_ms
    return body


def taken_of_http_acks(body: dict[str, Any]) -> Taken:
    """The acknowledgements an `acks` body held (`http_acks`), to be pending again when it was not sent."""
    sizes = body.get("batchSizes", {})
    taken = Taken({m: sizes.get(str(MessageId.from_text(m).entry_id()), 0) for m in body["messageIds"]},
                  set(body.get("nacks", ())))
    if "cumulative" in body:
        taken.cumulative = MessageId.from_text(body["cumulative"])
        taken.cumulative._batch_size = sizes.get(str(taken.cumulative.entry_id()), 0)
    return taken
