"""A client's producers of one topic publish together.

Each publish request is an API Gateway request, a Lambda invocation, a reservation (`UpdateItem`)
and a journal record (`PutRecord`) whatever it carries, and a producer sends one per batching
delay while it has messages: two producers of one topic in one process, each lingering 100 ms,
made twice the requests of one producer sending all their messages. So when one of them sends, it
takes along what the others of its client have ready — their ready batches and the batch each is
filling — as more entries of the same request (`batches`, each naming its producer): the broker
appends them with one reservation and one record, every entry under its own producer's name and
sequence ids, each producer's stats counting its own messages.

What keeps each producer's guarantees:
- a producer whose own request is out is not taken from (its next messages must not overtake it),
  and one whose messages another's request carries sends nothing until that request is answered;
- delayed and chunked messages travel alone, as always: a producer is taken from only up to them;
- only Shared producers publish together: an exclusive producer's request must not carry another
  producer's entries (the broker refuses any request naming a producer other than the lease's
  holder while the lease lives);
- with deduplication (a namespace policy the client does not see) the broker appends each
  producer's batches as a group of their own: the request costs what separate requests would.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from magnetar.client.producer import Producer
    from magnetar.client.producer_entries import Pending


class PublishGroups:
    """A client's Shared producers by topic (partition)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_topic: dict[str, list[Producer]] = {}

    def join(self, topic: str, producer: Producer) -> None:
        with self._lock:
            self._by_topic.setdefault(topic, []).append(producer)

    def leave(self, topic: str, producer: Producer) -> None:
        with self._lock:
            members = self._by_topic.get(topic, [])
            if producer in members:
                members.remove(producer)
            if not members:
                self._by_topic.pop(topic, None)

    def riders(self, topic: str, sender: Producer) -> list[tuple[Producer, list[list[Pending]]]]:
        """What the other producers of `topic` hand over to `sender`'s request: each one's batches
        (nothing from a producer whose own request is out, or that has nothing)."""
        with self._lock:
            others = [p for p in self._by_topic.get(topic, []) if p is not sender]
        out = []
        for other in others:
            work = other._hand_over()
            if work:
                out.append((other, work))
        return out
