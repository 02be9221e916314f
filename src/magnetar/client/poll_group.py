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
seal (at most `MAX_SEAL_WAIT_S`), as a lone consumer does. While there is a backlog (a round filled
a consumer's room) two loops poll half of the consumers each, at once: one broker invocation
stepping every consumer over a backlog is slower than two, and each request is full anyway.
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
LOOPS = 2  # poll loops per group: a backlog (a round filled a consumer's room) is polled in two halves at once


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
    """The poll loops of the partitioned-topic consumers of one client on one subscription."""

    def __init__(self, key: tuple[str, str]) -> None:
        self._key = key
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a round ended, a backlog began
        self._members: list[PartitionsPoller] = []
        self._busy: set[PartitionsPoller] = set()  # in a round, or waiting for its next seal
        self._backlog = False  # the last round filled a consumer's room: more is ready than one round takes
        self._round = 0
        self._ended = False  # its loops ended (every member closed): a new member starts a new group
        self.workers = Workers()

    def join(self, member: PartitionsPoller) -> bool:
        """Add `member` to the next rounds; False when this group's loops have ended."""
        with self._lock:
            if self._ended:
                return False
            self._members.append(member)
            if len(self._members) == 1:
                for k in range(LOOPS):
                    self.workers.start(self._run, k, name=f"poll-{self._key[0]}-{k}")
            return True

    def left(self) -> None:
        """A member closed: when it was the last, wait for the loops to end (a closed client leaves
        no thread behind)."""
        with self._changed:
            self._changed.notify_all()  # a loop waiting for a round to end sees it closed now
            last = all(m.closed.is_set() for m in self._members)
        if last:
            self.workers.join()

    def _take(self, loop: int) -> tuple[list[tuple[PartitionsPoller, int]], float] | None:
        """The next round's consumers with their room and its wait (ms); or no consumer and how
        long to wait before asking again (s); None (and the loop ends) when every member closed.
        The first loop polls whoever is ready; the others only share a backlog with it."""
        with self._lock:
            self._members = [m for m in self._members if not m.closed.is_set()]
            if not self._members:
                self._ended = True
                self._changed.notify_all()
                return None
            if (self._busy or loop > 0) and not self._backlog:
                return [], 1.0  # one round at a time but in a backlog: woken when a round ends
            ready = [(m, room) for m in self._members if m not in self._busy and m.children and (room := m.room()) > 0]
            if not ready:  # no room: the application has not taken its messages yet
                return [], 0.02 if loop == 0 else 1.0
            self._round += 1
            start = self._round % len(ready)
            ready = ready[start:] + ready[:start]
            partitions = sorted(ready[0][0].children)
            together: list[tuple[PartitionsPoller, int]] = []
            names = {m.name for m in self._busy}
            for m, room in ready:  # one consumer name once a round (two consumers may share a name)
                if sorted(m.children) == partitions and m.name not in names and len(together) < MAX_TOGETHER:
                    together.append((m, room))
                    names.add(m.name)
            if self._backlog and len(together) > 1:  # the other loop takes the other half
                together = together[:(len(together) + 1) // 2]
            self._busy.update(m for m, _ in together)
            everyone = len(together) + len(self._busy - {m for m, _ in together}) == len(self._members)
            return together, POLL_WAIT_MS if everyone else SHORT_WAIT_MS

    def _run(self, loop: int) -> None:
        while (taken := self._take(loop)) is not None:
            together, wait = taken
            if not together:
                with self._changed:
                    if not self._ended:
                        self._changed.wait(wait)
                continue
            try:
                self._round_of(together, int(wait))
            except exceptions.AlreadyClosed:
                return  # the client was closed under us
            finally:
                with self._changed:
                    self._busy.difference_update(m for m, _ in together)
                    self._changed.notify_all()

    def _round_of(self, together: list[tuple[PartitionsPoller, int]], wait_ms: int) -> None:
        """One long poll for `together`, their messages handed over, then (when each took
        everything ready for it) the wait for their next seal."""
        partitions = sorted(together[0][0].children)
        with contextlib.ExitStack() as turns:
            for m, _ in together:
                turns.enter_context(m.lock.poll())
                m.polling = True
            try:
                got = self._poll(together, partitions, wait_ms)
            finally:
                for m, _ in together:
                    m.polling = False
        full = any(len(got.get(m, ())) >= room for m, room in together)
        with self._changed:
            self._backlog = full
            self._changed.notify_all()
        for m, messages in got.items():
            m.deliver(messages)
        if got and any(got.values()) and not full:
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
