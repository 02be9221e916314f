"""In-memory push-delivery ports: WebSocket connections and the gateway that pushes frames to them
(push delivery's unit tests; the AWS adapters are DynamoDB's connection table and API Gateway's
management API)."""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any

from magnetar.core.ports.push import Connection


class MemoryConnectionRegistry:
    """WebSocket connections by id and by topic (push delivery's unit tests)."""

    def __init__(self) -> None:
        self.connections: dict[str, Connection] = {}  # on their topics
        self.by_id: dict[str, Connection] = {}  # as at connect, kept after removal
        self.index: dict[str, int] = {}  # topic -> last connect
        self._lock = threading.Lock()

    def add(self, connection: Connection) -> None:
        with self._lock:
            self.connections[connection.connection_id] = connection
            self.by_id[connection.connection_id] = connection
            self.index[connection.topic] = max(self.index.get(connection.topic, 0), connection.connected_at)

    def get(self, connection_id: str) -> Connection | None:
        return self.by_id.get(connection_id)

    def of_topic(self, topic: str) -> list[Connection]:
        with self._lock:
            return [c for c in self.connections.values() if c.topic == topic]

    def of_topics(self, topics: list[str]) -> dict[str, list[Connection]]:
        found = {topic: self.of_topic(topic) for topic in topics}
        return {topic: conns for topic, conns in found.items() if conns}

    def current(self, connection: Connection) -> Connection | None:
        return self.connections.get(connection.connection_id)

    def remove(self, connection: Connection) -> Connection | None:
        with self._lock:
            return self.connections.pop(connection.connection_id, None)

    def add_acks(self, connection: Connection, acks: list[str]) -> Connection | None:
        return self._change(connection, lambda c: True, acks=lambda c: c.acks | frozenset(acks))

    def clear_acks(self, connection: Connection, acks: frozenset[str]) -> None:
        self._change(connection, lambda c: True, acks=lambda c: c.acks - acks)

    def _change(self, connection: Connection, check: Any, **changes: Any) -> Connection | None:
        with self._lock:
            stored = self.connections.get(connection.connection_id)
            if stored is None or not check(stored):
                return None
            updated = dataclasses.replace(stored, **{k: v(stored) for k, v in changes.items()})
            self.connections[connection.connection_id] = updated
            return updated

    def add_permits(self, connection: Connection, count: int) -> Connection | None:
        return self._change(connection, lambda c: True, permits=lambda c: c.permits + count)

    def take_permits(self, connection: Connection, count: int, need: int) -> bool:
        return self._change(connection, lambda c: c.permits >= need, permits=lambda c: c.permits - count) is not None

    def advance_reader(self, connection: Connection, position: int, skip: int, sent: int) -> bool:
        return self._change(
            connection, lambda c: (c.position, c.skip) == (connection.position, connection.skip),
            position=lambda c: position, skip=lambda c: skip, inflight=lambda c: c.inflight + sent,
        ) is not None

    def reader_acked(self, connection: Connection, count: int) -> Connection | None:
        return self._change(connection, lambda c: True, inflight=lambda c: max(0, c.inflight - count))

    def topics(self) -> dict[str, int]:
        return dict(self.index)

    def forget_topic(self, topic: str, last_connect: int) -> None:
        with self._lock:
            if self.index.get(topic) == last_connect:
                del self.index[topic]


class MemoryPushGateway:
    """Frames pushed per connection; `close` (or `gone`) makes a connection refuse pushes."""

    def __init__(self) -> None:
        self.frames: dict[str, list[str]] = {}
        self.open: set[str] = set()
        self.requests = 0
        self._lock = threading.Lock()

    def opened(self, connection_id: str) -> None:
        with self._lock:
            self.open.add(connection_id)
            self.frames.setdefault(connection_id, [])

    def send(self, connection_id: str, frames: list[str]) -> int:
        with self._lock:
            sent = 0
            for frame in frames:
                self.requests += 1
                if connection_id not in self.open:
                    break
                self.frames[connection_id].append(frame)
                sent += 1
            return sent

    def connected(self, connection_id: str) -> bool:
        with self._lock:
            self.requests += 1
            return connection_id in self.open

    def close(self, connection_id: str) -> None:
        with self._lock:
            self.requests += 1
            self.open.discard(connection_id)

    def take(self, connection_id: str) -> list[dict[str, Any]]:
        """The frames pushed to a connection since the last take, decoded."""
        with self._lock:
            out = [json.loads(f) for f in self.frames.get(connection_id, [])]
            if connection_id in self.frames:
                self.frames[connection_id] = []
            return out
