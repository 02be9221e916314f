"""Readers of the binary protocol: non-durable subscriptions (pulsar-client's `create_reader`).

A reader has no cursor: the proxy keeps its position (the next entry id) and reads entries from
it with the core's non-durable read (`Broker.read_entries`, what the SDK's readers and Spark use)
while the client grants permits. It starts at the SUBSCRIBE's start message id, inclusive (the
client drops what it was told to start after), `MessageId.earliest`/`latest`, or a rollback
duration. With `read_compacted` it reads the compacted view below the horizon, then the topic
(protocol/compacted.py). Acknowledgements mean nothing to it. A seek closes it (CLOSE_CONSUMER) and the position is
kept on the connection for its subscription name, where the client subscribes again; a client that
reconnects elsewhere (another proxy) sends its last message id as the start, as it does to a broker.
"""

from __future__ import annotations

import asyncio
from typing import Any

from magnetar.core.claims import DeliveredEntry
from magnetar.core.cursor import CursorState
from magnetar.core.ledger import ensure_topic
from magnetar.protocol import compacted
from magnetar.protocol.consumers import MAX_IDLE_POLL_S, Consumer
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.frames import Type, command

MAX_READ_ENTRIES = 100


class Reader(Consumer):
    position = 0

    @property
    def _key(self) -> tuple[str, str]:
        return str(self.topic), self.subscription

    async def start_at(self, request: Any) -> None:
        broker = self.conn.broker
        await self.conn.call(lambda: ensure_topic(broker.metadata, self.topic, broker.clock.now_ms()))
        seeked = self.conn.reader_positions.pop(self._key, None)
        if seeked is not None:
            self.position = seeked
        elif request.start_message_rollback_duration_sec > 0:
            since = broker.clock.now_ms() - request.start_message_rollback_duration_sec * 1000
            self.position = await self.conn.call(broker.entry_at_time, self.topic, since)
        elif request.HasField("start_message_id"):
            self.position = await self._entry_of(request.start_message_id)
        else:
            self.position = 0 if self.initial == "Earliest" else await self._entry_of(None)

    async def _entry_of(self, mid: Any) -> int:
        """Where a start message id puts the reader: the entry it names (inclusive); past the end
        with none (latest)."""
        if mid is None:
            return int((await self.conn.call(self.conn.broker.last_entry, self.topic))[1]) + 1
        return await self._position_of(mid)

    async def attach(self) -> CursorState:
        raise AssertionError("a reader has no cursor to attach to")

    def mark_delete_entry(self) -> int | None:
        return self.position - 1  # as a broker's non-durable cursor: just before what it reads next

    def start(self) -> None:
        self._tasks = [self.conn.spawn(self._dispatch()), self.conn.spawn(self._apply())]

    async def _fetch(self) -> list[DeliveredEntry] | None:
        """The next entries from the reader's position (the consumer's dispatch loop does the rest)."""
        limit = min(self.permits, MAX_READ_ENTRIES)  # a reader's position moves with what it reads: no more
        self.full = False
        try:
            if self.read_compacted:  # the compacted view below its horizon, then the topic
                delivered, self.position = await self.conn.call(compacted.read, self.conn.broker, self.topic,
                                                                self.position, limit)
                self.full = len(delivered) >= limit
                return delivered
            entries = await self.conn.call(self.conn.broker.read_entries, self.topic, self.position, limit)
        except Exception:
            await asyncio.sleep(MAX_IDLE_POLL_S)
            return None
        if entries:
            self.position = entries[-1].entry_id + 1
        self.full = len(entries) >= limit  # more may be ready now
        return [DeliveredEntry(entry, 0) for entry in entries]

    async def _expire_chunks(self) -> None:
        self.chunks.expired()  # nothing to acknowledge: dropped

    async def _acknowledge(self, cmds: list[Any]) -> None:
        self._receipts(cmds, None)  # nothing to acknowledge; receipts when asked for

    async def _redeliver(self, request: Any) -> None:
        return None  # a reader's client keeps what it has not read yet

    async def _seek(self, request: Any) -> bool:
        try:
            if request.HasField("message_publish_time"):
                position = await self.conn.call(self.conn.broker.entry_at_time, self.topic,
                                                request.message_publish_time)
            elif request.HasField("message_id"):
                position = await self._entry_of(request.message_id)
            else:
                raise ProtocolError("Seek to a message id or to a publish time")
        except Exception as exc:
            self.conn.error(request.request_id, exc)
            return False
        self.stop()
        self.conn.consumers.pop(self.id, None)
        self.conn.reader_positions[self._key] = position
        self.conn.send(command(Type.CLOSE_CONSUMER, close_consumer={"consumer_id": self.id, "request_id": 0}))
        self.conn.success(request.request_id)
        return True

    async def _unsubscribe(self, request_id: int) -> bool:
        self.stop()
        self.conn.consumers.pop(self.id, None)
        self.conn.success(request_id)
        return True

    async def release(self) -> None:
        self.released = True
