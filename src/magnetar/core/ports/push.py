"""The ports of push delivery over WebSocket connections (`magnetar.core.push`): the connections'
items (`ConnectionRegistry`, DynamoDB) and API Gateway's management API (`PushGateway`), and the
record that crosses them. Implementations: `magnetar.adapters.memory_push` (unit tests) and
`magnetar.adapters.aws.connections`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from magnetar.core.naming import TopicName


@dataclass(frozen=True)
class Connection:
    """A WebSocket connection (API Gateway's connection id) and what it was opened as.

    Everything but the counters is fixed at $connect. The counters change with pushes and
    frames and are current only when read from the topic's connection items (`of_topic`,
    `of_topics`, `current`, and what the counter writes return)."""

    connection_id: str
    role: str  # "producer", "consumer" or "reader"
    topic: str
    connected_at: int
    name: str = ""  # consumer: the cursor's consumer name (one per connection); producer/reader name
    subscription: str = ""
    subscription_type: str = "Exclusive"
    pull_mode: bool = False
    queue_size: int = 1000  # receiverQueueSize: the unacknowledged window of a consumer or reader
    nack_delay_ms: int = 60_000
    ack_timeout_ms: int = 0
    permits: int = 0  # pull mode and non-persistent consumers: messages it may still be sent
    position: int = 0  # reader: the next entry to send
    skip: int = -1  # reader: messages of `position`'s entry up to this batch index were sent
    inflight: int = 0  # reader: messages sent and not acknowledged
    # consumer: acknowledgements not yet written to the cursor ("entry" or "entry:size:index")
    acks: frozenset[str] = frozenset()
    # producer: the encrypted data key of its pre-encrypted messages, for each key name, given at the
    # connect (PIP-290): JSON [[name, base64 value, {metadata}], ...]; "" for a producer that does not encrypt
    encryption_keys: str = ""

    @property
    def has_backlog(self) -> bool:
        """A consumer or reader of a persistent topic: what is stored is pushed after the connect."""
        return self.role != "producer" and TopicName.parse(self.topic).is_persistent


class ConnectionRegistry(Protocol):
    """WebSocket connections, found by topic (one query) and by connection id (one read)."""

    def add(self, connection: Connection) -> None:
        """Record a connection (its topic's item, its id's item; then its id in the topic index):
        two requests."""
        ...

    def get(self, connection_id: str) -> Connection | None:
        """The connection as recorded at connect (counters as they were then): one read."""
        ...

    def of_topic(self, topic: str) -> list[Connection]:
        """A topic's connections with their current counters: one query."""
        ...

    def of_topics(self, topics: list[str]) -> dict[str, list[Connection]]:
        """Several topics' connections with their current counters (a journal batch's topics),
        in a few requests whatever the number of topics (the topic index, then the connections:
        one BatchGetItem per 100 each); topics without connections are left out."""
        ...

    def current(self, connection: Connection) -> Connection | None:
        """One connection with its current counters (None: removed): one read."""
        ...

    def remove(self, connection: Connection) -> Connection | None:
        """Take a connection off its topic (and its id off the topic index), returning it as it
        was (None: already removed): two requests. `get` still finds it until it expires, so frames that arrive after its
        $disconnect are understood."""
        ...

    def add_acks(self, connection: Connection, acks: list[str]) -> Connection | None:
        """Record acknowledgements in the connection's inbox (no condition, so acknowledgement
        frames never conflict): one write; the connection as it is now, None when removed."""
        ...

    def clear_acks(self, connection: Connection, acks: frozenset[str]) -> None:
        """Take acknowledgements written to the cursor out of the inbox: one write."""
        ...

    def add_permits(self, connection: Connection, count: int) -> Connection | None:
        """Add `count` permits (negative: take them, even below zero): one write; None when removed."""
        ...

    def take_permits(self, connection: Connection, count: int, need: int) -> bool:
        """Take `count` permits if the connection still has at least `need` (a batch entry may
        overshoot, as in Pulsar): one conditional write."""
        ...

    def advance_reader(self, connection: Connection, position: int, skip: int, sent: int) -> bool:
        """Move a reader to (`position`, `skip`) with `sent` more messages in flight, if it is still
        where `connection` says (another dispatcher did not move it first): one conditional write."""
        ...

    def reader_acked(self, connection: Connection, count: int) -> Connection | None:
        """A reader acknowledged `count` messages (its window opens): one write; None when removed."""
        ...

    def topics(self) -> dict[str, int]:
        """Topics that had connections (topic -> time of the last connect): one query per 1 MB."""
        ...

    def forget_topic(self, topic: str, last_connect: int) -> None:
        """Drop a topic from the index unless a connection arrived since `last_connect`."""
        ...


class PushGateway(Protocol):
    """Frames to WebSocket connections (API Gateway's management API)."""

    def send(self, connection_id: str, frames: list[str]) -> int:
        """Send text frames in order, one request each; the number sent (fewer: the connection is gone)."""
        ...

    def connected(self, connection_id: str) -> bool:
        """Whether the connection is open (established and not closed): one request."""
        ...

    def close(self, connection_id: str) -> None:
        """Close the connection (its $disconnect follows): one request; closing a gone one is harmless."""
        ...
