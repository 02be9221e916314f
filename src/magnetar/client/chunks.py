"""Chunked messages (Pulsar's chunking): a consumer collects a message's chunks, in whatever order
redeliveries bring them, and delivers the whole message once every chunk is there. A message whose
producer died mid-way never completes: its chunks expire and are acknowledged."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from magnetar.client.message import Message, MessageId
from magnetar.core.compression import decompress
from magnetar.core.entry import Entry, decode_messages


@dataclass
class _Pending:
    parts: dict[int, bytes] = field(default_factory=dict)
    ids: list[MessageId] = field(default_factory=list)
    first_seen: float = field(default_factory=time.monotonic)


class ChunkAssembler:
    def __init__(self, expiry_s: float) -> None:
        self.expiry_s = expiry_s
        self._pending: dict[str, _Pending] = {}

    def add(self, entry: Entry, partition: int, redelivery: int) -> Message | None:
        """One chunk; the whole message when this chunk completes it."""
        chunk = entry.chunk
        assert chunk is not None
        state = self._pending.setdefault(chunk.uuid, _Pending())
        if chunk.chunk_id in state.parts:
            return None
        state.parts[chunk.chunk_id] = entry.payload
        state.ids.append(MessageId(partition, entry.ledger_id, entry.entry_id, -1, entry.topic))
        if len(state.parts) < chunk.num_chunks:
            return None
        del self._pending[chunk.uuid]
        blob = b"".join(state.parts[i] for i in range(chunk.num_chunks))
        message = decode_messages(decompress(entry.compression, blob, entry.uncompressed_size))[0]
        full_id = MessageId(partition, entry.ledger_id, entry.entry_id, -1, entry.topic)
        full_id._chunks = tuple(state.ids)
        return Message(message.payload, full_id, entry.topic, message.properties, message.key or "",
                       entry.publish_time, message.event_time, redelivery, entry.producer_name,
                       message.ordering_key or "", _encryption=message.encryption,
                       _replicated_from=entry.replicated_from)

    def expired(self) -> list[MessageId]:
        """The chunk ids of messages that did not complete in time (forgotten here: acknowledge them)."""
        now = time.monotonic()
        out: list[MessageId] = []
        for key in [k for k, c in self._pending.items() if now - c.first_seen > self.expiry_s]:
            out += self._pending.pop(key).ids
        return out

    def clear(self) -> None:
        self._pending.clear()
