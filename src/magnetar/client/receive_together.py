"""A client's consumers of one subscription of one topic poll together.

Every poll is a request, a Lambda invocation, a look at the cursor (a read) and, when it gets
messages, a claim (a conditional write) and a segment read. Two consumers of a Shared subscription
in one process, each looking once a seal is due, made two looks and often two claims per seal —
the second finding what the first left, or losing its write to it. So a consumer that polls
carries the others of its client whose queues have room (`joined` in the receive: the broker steps
every consumer on the cursor in one look, writes the cursor once, and answers each its part, which
goes to that consumer's queue). A consumer is carried only while no request of its own (a poll,
a seek, a redelivery) is out: each holds its `_poll_lock` for its requests, and the carrying
consumer takes the others' non-blocking. One that wants to poll while another's request carries
it waits for that request (within its own wait) and takes what it brought.

Partitioned topics have their own shared poll (client/poll_group.py); WebSocket consumers poll
nothing.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from typing import TYPE_CHECKING, Any

from magnetar.client import exceptions
from magnetar.client.transport import ServiceSwitched

if TYPE_CHECKING:
    from magnetar.client.consumer import Consumer

MAX_TOGETHER = 32  # consumers one receive serves (the broker's limit)


class ReceiveTogether:
    """A client's polling consumers, by topic and subscription."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._members: dict[tuple[str, str], list[Consumer]] = {}

    def join(self, consumer: Consumer) -> None:
        with self._lock:
            members = self._members.setdefault(consumer._together_key, [])
            if consumer not in members:
                members.append(consumer)

    def leave(self, consumer: Consumer) -> None:
        with self._lock:
            members = self._members.get(consumer._together_key, [])
            if consumer in members:
                members.remove(consumer)
            if not members:
                self._members.pop(consumer._together_key, None)

    def riders(self, carrier: Consumer) -> list[Consumer]:
        """The other consumers `carrier`'s poll carries: those with room in their queue and no
        request of their own out, their poll locks taken (the caller releases them)."""
        with self._lock:
            others = [c for c in self._members.get(carrier._together_key, []) if c is not carrier]
        out: list[Consumer] = []
        names = {carrier._name}  # consumers sharing a name are one consumer to the broker: never together
        for other in others:
            if len(out) >= MAX_TOGETHER - 1:
                break
            if other._closed.is_set() or other._room() <= 0 or other._name in names:
                continue
            if other._poll_lock.acquire(blocking=False):
                out.append(other)
                names.add(other._name)
        return out


def poll_together(carrier: Consumer, riders: list[Consumer], wait_ms: int, min_messages: int,
                  max_messages: int | None) -> None:
    """One long poll for `carrier` (its wait and counts) and `riders` (each as much as its queue
    has room for), every consumer's acknowledgements riding along; each one's part of the answer
    goes to its queue. A poll that fails leaves every acknowledgement pending; a consumer whose
    lease lapsed (a long pause) makes the broker refuse it: all of them attach again, as a
    reconnecting client does."""
    transport = carrier._transport
    generation = transport.generation  # the poll and its acks stay on this service (client failover)
    everyone = [carrier, *riders]
    acks = [c._take_acks() for c in everyone]
    body: dict[str, Any] = {"maxMessages": max_messages or carrier._queue_size, "minMessages": min_messages,
                            "waitMs": wait_ms, "requestId": uuid.uuid4().hex}
    if acks[0]:
        body["acks"] = acks[0]
    body["joined"] = [{"consumer": r._name, "maxMessages": max(1, r._room()), **({"acks": a} if a else {})}
                      for r, a in zip(riders, acks[1:], strict=True)]
    try:
        response = transport.call("POST", f"{carrier._consumer_path}/receive", body,
                                  deadline_s=30 + wait_ms / 1000, generation=generation)
    except ServiceSwitched:
        return  # the client switched cluster: these acks belong to the former one
    except exceptions.SubscriptionNotFound:
        for consumer, taken in zip(everyone, acks, strict=True):
            consumer._restore_acks(taken)
        if carrier._closed.is_set():
            raise exceptions.AlreadyClosed("Consumer already closed") from None
        for consumer in everyone:
            if not consumer._closed.is_set():
                with contextlib.suppress(exceptions.PulsarException):
                    transport.call("PUT", consumer._consumer_path, consumer._subscribe_body)
        return
    except exceptions.PulsarException:
        for consumer, taken in zip(everyone, acks, strict=True):
            consumer._restore_acks(taken)
        raise
    joined = response.get("joined") or {}
    for k, (consumer, taken) in enumerate(zip(everyone, acks, strict=True)):
        consumer._take_part(response if k == 0 else joined.get(consumer._name) or {}, taken, generation)
