"""Non-persistent topics: a publish fanned out at once to the connections open at that moment.

Non-persistent topics have no journal, no segments and no cursor: the broker fans a publish out
at once to the consumers connected at that moment, one per subscription chosen by its type,
each message taking a permit; a subscription without a consumer with permits drops it. A
connection's permits live in its item (an acknowledgement frame gives one back, or a permit frame
in pull mode); a reader is a subscription of its own.
"""

from __future__ import annotations

import itertools
import random
import uuid

from magnetar.core.entry import Message, MessageIdData
from magnetar.core.errors import InvalidInput
from magnetar.core.key_shared import HASH_RANGE, key_hash
from magnetar.core.naming import TopicName
from magnetar.core.ports.push import Connection, ConnectionRegistry, PushGateway
from magnetar.core.push.common import ConnectionCache, Namespaces
from magnetar.core.push.dispatch import Dispatcher, PushReport
from magnetar.core.websocket import message_frame


class NonPersistentFanout:
    def __init__(self, registry: ConnectionRegistry, gateway: PushGateway, known: ConnectionCache,
                 namespaces: Namespaces, dispatcher: Dispatcher) -> None:
        self.registry = registry
        self.gateway = gateway
        self.known = known
        self.namespaces = namespaces
        self.dispatcher = dispatcher  # its pool sends to the connections in parallel
        self.clock = dispatcher.clock
        self._round_robin = itertools.count(random.randrange(1 << 16))

    def publish(self, topic: TopicName, messages: list[Message], producer: str) -> list[MessageIdData]:
        """Fan a publish out to the consumers connected now; the ids, `-1:-1` for a message
        delivered nowhere (as Pulsar answers for a dropped message)."""
        if not messages:
            raise InvalidInput("No messages to publish")
        self.namespaces.check(topic)
        now = self.clock.now_ms()
        partition = topic.partition_index
        targets = [c for c in self.registry.of_topic(str(topic)) if c.role in ("consumer", "reader")]
        groups: dict[str, list[Connection]] = {}
        for c in sorted(targets, key=lambda c: c.name):
            groups.setdefault(c.subscription if c.role == "consumer" else f"\0reader:{c.connection_id}", []).append(c)
        permits = {c.connection_id: c.permits for c in targets}
        frames: dict[str, list[str]] = {}
        ledger, base = now, uuid.uuid4().int & ((1 << 40) - 1)
        ids: list[MessageIdData] = []
        for i, message in enumerate(messages):
            mid = MessageIdData(ledger, base + i, partition, -1)
            delivered = False
            for members in groups.values():
                target = self._pick(members, message, permits, partition)
                if target is None:
                    continue
                permits[target.connection_id] -= 1
                frames.setdefault(target.connection_id, []).append(message_frame(message, mid, now, 0, producer))
                delivered = True
            ids.append(mid if delivered else MessageIdData(-1, -1, partition, -1))
        by_id = {c.connection_id: c for c in targets}

        def deliver(conn: Connection, out: list[str]) -> PushReport:
            report = PushReport()
            if not self.registry.take_permits(conn, len(out), len(out)):
                return report  # another publish took its permits meanwhile: dropped, as without permits
            report.pushed = self.gateway.send(conn.connection_id, out)
            if report.pushed < len(out) and not self.dispatcher.opening(conn, report.pushed):
                self.known.drop(conn)  # gone (one still opening misses these live messages, as before it opened)
            return report

        self.dispatcher.run([lambda c=by_id[cid], out=out: deliver(c, out) for cid, out in frames.items()])  # type: ignore[misc]
        return ids

    def _pick(self, members: list[Connection], message: Message, permits: dict[str, int],
              partition: int) -> Connection | None:
        """The consumer of one subscription a message goes to, by the subscription's type."""
        kind = members[0].subscription_type if members[0].role == "consumer" else "Exclusive"
        if kind == "Shared":
            ready = [c for c in members if permits[c.connection_id] > 0]
            return ready[next(self._round_robin) % len(ready)] if ready else None
        if kind == "Key_Shared":
            chosen = members[key_hash(message.key) * len(members) // HASH_RANGE]
        elif kind == "Failover":
            chosen = members[max(partition, 0) % len(members)]
        else:
            chosen = members[0]
        return chosen if permits[chosen.connection_id] > 0 else None
