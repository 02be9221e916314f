"""What the connection lifecycle and dispatch share: the connections a container knows (its
cache of their connect-time fields, and letting one go: forgetting and detaching it), the check
that a non-persistent topic's namespace exists, and the acknowledgement codes of a connection's
inbox.

A consumer connection's acknowledgement frames go to its inbox (the connection's item) as codes,
"entry" or "entry:size:index" inside a batch; a dispatch writes them to the cursor, and so does a
disconnect before the consumer is detached.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import replace

from magnetar.core.acks import NO_ACKS, Acks
from magnetar.core.broker import Broker
from magnetar.core.cursor import CursorState
from magnetar.core.errors import NotFound
from magnetar.core.naming import TopicName
from magnetar.core.ports import SubscriptionView
from magnetar.core.ports.push import Connection, ConnectionRegistry

NON_PERSISTENT_POLL_REASON = (
    "Non-persistent topics deliver by push only: consume over the WebSocket API "
    "(/ws/v2/consumer/non-persistent/{tenant}/{namespace}/{topic}/{subscription})"
)
KNOWN_CONNECTIONS = 10_000  # connections remembered per container (their connect-time fields never change)
NAMESPACE_CACHE_MS = 10_000
# a dispatch step's cursor write loses its condition to a parallel one (frames of one
# subscription arrive in parallel invocations): it steps again this often, backing off
CLAIM_RETRIES = 40  # conflicting cursor writes (parallel frames of one subscription), backing off
MAX_BACKOFF_S = 0.25
# A consumer's inbox acknowledgements, once a claim wrote them to the cursor, are taken off its
# connection's item only when this many have gathered or a step finds nothing to push: until then
# every claim applies them again, which changes nothing (an acknowledgement is idempotent), so a
# low-rate consumer costs one inbox write per acknowledgement, not two.
INBOX_CLEAR_AT = 32


def inbox_acks(codes: Iterable[str], consumer: str, base: Acks = NO_ACKS) -> Acks:
    """Acknowledgements from inbox entries ("entry" or "entry:size:index"), added to `base`."""
    whole = set(base.entries)
    batch: dict[int, tuple[int, set[int]]] = {e: (n, set(ix)) for e, n, ix in base.batch}
    for code in codes:
        parts = code.split(":")
        try:
            numbers = [int(p) for p in parts]
        except ValueError:
            continue
        if len(numbers) == 1:
            whole.add(numbers[0])
        elif len(numbers) == 3:
            batch.setdefault(numbers[0], (numbers[1], set()))[1].add(numbers[2])
    return Acks(tuple(sorted(whole)), tuple((e, n, tuple(sorted(ix))) for e, (n, ix) in sorted(batch.items())),
                base.cumulative, base.nacks, base.nack_delay_ms, base.epoch, consumer or base.consumer)


class Namespaces:
    """Whether a non-persistent topic's namespace exists (they have no topic of their own to
    check), remembered for a few seconds."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.clock = broker.clock
        self._namespaces: dict[str, tuple[int, bool]] = {}

    def check(self, topic: TopicName) -> None:
        name = str(topic.namespace_name)
        now = self.clock.now_ms()
        cached = self._namespaces.get(name)
        if cached is None or now - cached[0] > NAMESPACE_CACHE_MS:
            cached = (now, self.broker.metadata.get_namespace(topic.namespace_name) is not None)
            self._namespaces[name] = cached
        if not cached[1]:
            raise NotFound(f"Namespace {topic.namespace_name} does not exist")


class ConnectionCache:
    """The connections this container knows (looked up in the registry once, then remembered:
    their connect-time fields never change), and letting one go."""

    def __init__(self, broker: Broker, registry: ConnectionRegistry) -> None:
        self.broker = broker
        self.registry = registry
        self._known: OrderedDict[str, Connection] = OrderedDict()
        self._lock = threading.Lock()

    def lookup(self, connection_id: str) -> Connection | None:
        with self._lock:
            conn = self._known.get(connection_id)
            if conn is not None:
                self._known.move_to_end(connection_id)
                return conn
        conn = self.registry.get(connection_id)
        if conn is not None:
            self.remember(conn)
        return conn

    def remember(self, conn: Connection) -> None:
        with self._lock:
            self._known[conn.connection_id] = conn
            while len(self._known) > KNOWN_CONNECTIONS:
                self._known.popitem(last=False)

    def drop(self, conn: Connection) -> None:
        """Forget a connection and detach what it was attached as (idempotent)."""
        with self._lock:
            self._known.pop(conn.connection_id, None)
        if conn.role != "consumer" or not TopicName.parse(conn.topic).is_persistent:
            self.registry.remove(conn)
            self.detach(conn)
            return
        # detached before it leaves its topic: a connect that finds the subscription busy finds
        # this connection too (and waits for it), never a consumer with no connection to evict
        current = self.registry.current(conn)
        inbox = current.acks if current is not None else frozenset()
        self.detach(conn, inbox)
        last = self.registry.remove(conn)
        if last is not None and last.acks - inbox:  # acknowledged meanwhile
            with contextlib.suppress(NotFound):
                self.broker.subscriptions.acknowledge(TopicName.parse(conn.topic), conn.subscription,
                                                      inbox_acks(last.acks - inbox, conn.name))

    def detach(self, conn: Connection, acks: frozenset[str] = frozenset()) -> None:
        topic = TopicName.parse(conn.topic)
        if not topic.is_persistent:
            return
        try:
            if conn.role == "consumer":
                if acks:  # acknowledged before it left: not redelivered
                    self.broker.subscriptions.acknowledge(topic, conn.subscription, inbox_acks(acks, conn.name))
                self.broker.subscriptions.close_consumer(topic, conn.subscription, conn.name)
            elif conn.role == "producer":
                self.broker.writer.detach_producer(topic, conn.name)
        except NotFound:
            pass


def outstanding(state: CursorState, consumer: str) -> int:
    """Entries handed to `consumer` and not acknowledged: its part of the window."""
    return sum(d.end - d.start for d in state.deliveries if d.sent and d.consumer == consumer)


def sealed_only(view: SubscriptionView) -> None:
    """Pushes serve sealed entries (and what the journal consumer put in the cache): never the
    journal tail, which a dispatch per frame would read far beyond Kinesis' 5 reads/s per shard.
    Newer entries are pushed by the journal consumer once it has sealed them."""
    if view.writer is not None and view.writer.next_entry > view.seal.next_entry:
        view.writer = replace(view.writer, next_entry=view.seal.next_entry)
