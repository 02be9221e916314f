"""The consumers of one client on one subscription of one partitioned topic poll together.

Pulsar multiplexes a client's consumers over one connection per broker; here every poll is a
request, a Lambda invocation and a look at the partitions' cursors, so several consumers of one
subscription in one process (worker threads, each with its consumer) would each look at every
partition after each seal, and on a Key_Shared or Failover subscription most of those looks find
only other consumers' messages. A `PollGroup` makes one long poll for all of them
(`receive` with `joined`: the broker steps each consumer on each cursor in one look and writes
each changed cursor once) and hands each consumer its part.

Each round asks for every consumer whose queue has room and whose partitions are the same as the
first's (a consumer whose partitions differ, as while a pattern consumer discovers new ones, goes
in the next round); who leads the round rotates. While a consumer sits a round out (no room in its
queue) the round's long poll waits only briefly, so that it is not kept from its messages. After a
round in which every consumer took everything ready for it, the next waits for the partitions' next
seal (at most `MAX_SEAL_WAIT_S`), as a lone consumer does.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from magnetar.client import exceptions
from magnetar.client.consumer import SEAL_VISIBLE_S
from magnetar.client.threads import Workers
from magnetar.client.transport import ServiceSwitched

if TYPE_CHECKING:
    from magnetar.client.partitioned import PartitionsPoller, PollAsk

log = logging.getLogger(__name__)

POLL_WAIT_MS = 5_000  # a round's long-poll wait (it returns as soon as any consumer gets messages)
SHORT_WAIT_MS = 250  # the wait while a consumer sits the round out (no room in its queue)
MAX_SEAL_WAIT_S = 1.0  # the longest a round that took everything ready waits for the next seal
MAX_TOGETHER = 32  # consumers one receive serves (the broker's limit)


class PollGroups:
    """A client's poll groups, one per partitioned topic and subscription."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: dict[tuple[str, str], PollGroup] = {}

    def join(self, member: PartitionsPoller, subscription: str) -> PollGroup:
        key = (str(member.parent), subscription)
        with self._lock:
            group = self._groups.get(key)
            if group is None or not group.join(member):
                group = self._groups[key] = PollGroup(key)
                group.join(member)
            return group


class PollGroup:
    """One poll loop for the partitioned-topic consumers of one client on one subscription."""

    def __init__(self, key: tuple[str, str]) -> None:
        self._key = key
        self._lock = threading.Lock()
        self._members: list[PartitionsPoller] = []
        self._round = 0
        self._ended = False  # its loop ended (every member closed): a new member starts a new group
        self.workers = Workers()

    def join(self, member: PartitionsPoller) -> bool:
        """Add `member` to the next rounds; False when this group's loop has ended."""
        with self._lock:
            if self._ended:
                return False
            self._members.append(member)
            if len(self._members) == 1:
                self.workers.start(self._run, name=f"poll-{self._key[0]}")
            return True

    def left(self) -> None:
        """A member closed: when it was the last, wait for the loop to end (a closed client leaves
        no thread behind)."""
        with self._lock:
            last = all(m.closed.is_set() for m in self._members)
        if last:
            self.workers.join()

    def _open(self) -> list[PartitionsPoller] | None:
        """The members still open; None (and the loop ends) when none is."""
        with self._lock:
            self._members = [m for m in self._members if not m.closed.is_set()]
            if not self._members:
                self._ended = True
                return None
            return list(self._members)

    def _run(self) -> None:
        while (members := self._open()) is not None:
            rooms = [(m, m.room()) for m in members]
            ready = [(m, room) for m, room in rooms if room > 0 and m.children]
            if not ready:
                time.sleep(0.02)
                continue
            self._round += 1
            start = self._round % len(ready)
            ready = ready[start:] + ready[:start]
            partitions = sorted(ready[0][0].children)
            together: list[tuple[PartitionsPoller, int]] = []
            names: set[str] = set()
            for m, room in ready:  # one consumer name once a round (two consumers may share a name)
                if sorted(m.children) == partitions and m.name not in names and len(together) < MAX_TOGETHER:
                    together.append((m, room))
                    names.add(m.name)
            wait_ms = POLL_WAIT_MS if len(together) == len(members) else SHORT_WAIT_MS
            with contextlib.ExitStack() as turns:
                for m, _ in together:
                    turns.enter_context(m.lock.poll())
                    m.polling = True
                try:
                    got = self._poll(together, partitions, wait_ms)
                except exceptions.AlreadyClosed:
                    return  # the client was closed under us
                finally:
                    for m, _ in together:
                        m.polling = False
            for m, messages in got.items():
                m.deliver(messages)
            if got and any(got.values()) and all(len(got[m]) < room for m, room in together):
                self._until_next_seal([m for m, _ in together])

    def _until_next_seal(self, members: list[PartitionsPoller]) -> None:
        """Every consumer of the round took everything ready for it: nothing more is readable
        before the first of their partitions' next seals, so the next round waits until then
        instead of a look that would find nothing. Their acks ride on it meanwhile (a poll is
        coming), and the wait is never longer than a busy topic's seal interval."""
        due = [m.next_seal_at for m in members if m.next_seal_at is not None]
        if not due:
            return
        wait = min(min(due) + SEAL_VISIBLE_S - time.monotonic(), MAX_SEAL_WAIT_S)
        if wait > 0:
            for m in members:
                m.polling = True  # the acks wait for the poll to come
            try:
                members[0].closed.wait(wait)
            finally:
                for m in members:
                    m.polling = False

    def _poll(self, together: list[tuple[PartitionsPoller, int]], partitions: list[int],
              wait_ms: int) -> dict[PartitionsPoller, list[Any]]:
        """One long poll for the round's consumers: what each got (nothing when it failed: their
        acks are kept for the next one)."""
        lead = together[0][0]
        transport = lead.transport()
        generation = transport.generation  # the poll and its acks stay on this service (client failover)
        asks: list[tuple[PartitionsPoller, PollAsk]] = [(m, m.ask(room)) for m, room in together]
        body: dict[str, Any] = {"partitions": partitions, "minMessages": 1, "waitMs": wait_ms,
                                "requestId": uuid.uuid4().hex, **asks[0][1].body}
        if len(asks) > 1:
            body["joined"] = [{"consumer": m.name, **ask.body} for m, ask in asks[1:]]
        try:
            response = transport.call("POST", lead.path("receive"), body, deadline_s=30 + wait_ms / 1000,
                                      generation=generation)
        except ServiceSwitched:
            return {}  # the client switched cluster: these acks belong to the former one
        except exceptions.SubscriptionNotFound:
            self._attach_again(asks, transport, generation)
            return {}
        except exceptions.AlreadyClosed:
            raise
        except exceptions.PulsarException as exc:
            for m, ask in asks:
                m.restore(ask)
            if not lead.closed.is_set():
                log.warning("partitioned poll failed; retrying: %r", exc)
                time.sleep(0.5)
            return {}
        joined = response.get("joined") or {}
        return {m: m.accept(response if k == 0 else joined.get(m.name) or {}, ask, generation)
                for k, (m, ask) in enumerate(asks)}

    @staticmethod
    def _attach_again(asks: list[tuple[PartitionsPoller, PollAsk]], transport: Any, generation: int | None) -> None:
        """A lease lapsed (a long pause): attach every partition of the round's consumers again,
        as a reconnecting client does, then send their acks (nothing of the refused poll was
        written)."""
        try:
            for m, ask in asks:
                if not m.closed.is_set():  # a consumer closed during the poll is not attached again
                    m.attach_again(ask, transport, generation)
        except ServiceSwitched:
            return
        except exceptions.PulsarException as exc:
            for m, ask in asks:
                m.restore(ask)
            log.warning("re-attaching the partitions failed; retrying: %r", exc)
            time.sleep(0.5)
