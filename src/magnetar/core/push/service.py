"""`PushService`: the one object the WebSocket function, the journal consumer, the maintenance run
and the REST routes use. It wires the parts together (one of each per container) and hands each
call to the part that owns it."""

from __future__ import annotations

from magnetar.core.authz import ANONYMOUS, Principal
from magnetar.core.broker import Broker
from magnetar.core.entry import Message, MessageIdData
from magnetar.core.naming import TopicName
from magnetar.core.ports import JournalRecord
from magnetar.core.ports.push import Connection, ConnectionRegistry, PushGateway
from magnetar.core.push.common import ConnectionCache, Namespaces
from magnetar.core.push.connections import Connections
from magnetar.core.push.dispatch import BACKLOG_WAIT_S, DISPATCH_WORKERS, Dispatcher, PushReport
from magnetar.core.push.fanout import NonPersistentFanout
from magnetar.core.push.journal_batch import JournalBatchPush, JournalPlan


class PushService:
    def __init__(self, broker: Broker, registry: ConnectionRegistry, gateway: PushGateway,
                 workers: int = DISPATCH_WORKERS) -> None:
        self.broker = broker
        self.registry = registry
        self.gateway = gateway
        self.clock = broker.clock
        self.workers = workers
        self.known = ConnectionCache(broker, registry)
        namespaces = Namespaces(broker)
        self.dispatcher = Dispatcher(broker, registry, gateway, self.known, workers)
        self.journal_batch = JournalBatchPush(broker, self.dispatcher)
        self.fanout = NonPersistentFanout(registry, gateway, self.known, namespaces, self.dispatcher)
        self.connections = Connections(broker, registry, gateway, self.known, namespaces, self.dispatcher,
                                       self.fanout)

    # --- the connection lifecycle, frames (connections.py) ------------------------------------
    def connect(self, connection_id: str, path: str, params: dict[str, str],
                principal: Principal = ANONYMOUS) -> Connection:
        """$connect: authorize, validate the Pulsar path and parameters, attach, record the connection."""
        return self.connections.connect(connection_id, path, params, principal)

    def disconnect(self, connection_id: str) -> None:
        """$disconnect: detach, and push what it released to its subscription's other consumers."""
        self.connections.disconnect(connection_id)

    def receive_frame(self, connection_id: str, body: str | None) -> str | None:
        """$default: one client frame; returns the frame to answer with (the route response), if any."""
        return self.connections.receive_frame(connection_id, body)

    def after_seek(self, topic: TopicName, subscription: str) -> None:
        """Drop the push consumers' unwritten acknowledgements, then push from the new position."""
        self.connections.after_seek(topic, subscription)

    # --- dispatch (dispatch.py, journal_batch.py) ------------------------------------------------------------
    def deliver_backlog(self, connection_id: str, wait_s: float = BACKLOG_WAIT_S) -> int:
        """After a connect, once API Gateway has opened the connection: push what is there for it."""
        return self.dispatcher.deliver_backlog(connection_id, wait_s)

    def dispatch_topic(self, topic: str, connections: list[Connection] | None = None,
                       new_messages: int = 0) -> PushReport:
        """Push to a topic's connected consumers and readers."""
        return self.dispatcher.dispatch_topic(topic, connections, new_messages)

    def plan_journal_batch(self, records: list[JournalRecord]) -> JournalPlan:
        """Before sealing: the batch's seal states and the entries it settles, by topic."""
        return self.journal_batch.plan(records)

    def dispatch_journal_batch(self, plan: JournalPlan) -> PushReport:
        """After sealing: push to the batch's topics' connections, entries served from memory."""
        return self.journal_batch.dispatch(plan)

    def redispatch(self) -> PushReport:
        """For the maintenance run: push what is due to every connected subscription and reader."""
        return self.dispatcher.redispatch()

    # --- non-persistent topics (fanout.py) ---------------------------------------------------
    def publish_non_persistent(self, topic: TopicName, messages: list[Message], producer: str) -> list[MessageIdData]:
        """Fan a publish out to the consumers connected now (`-1:-1` for a message delivered nowhere)."""
        return self.fanout.publish(topic, messages, producer)
