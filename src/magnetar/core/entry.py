"""Entries and their wire format.

An entry is Pulsar's unit of storage: one produce request (a batch of messages) becomes one
entry with one entry id; each message inside it is addressed by its batch index. The same bytes
are the Kinesis journal record and a slice of an S3 segment object, so sealing copies bytes and
never re-encodes.

Format: a msgpack array (msgpack: compact, fast, schema-free, well maintained — no need for a
hand-written framing). Field order is the format; `FORMAT_VERSION` guards changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack

from magnetar.core.errors import InvalidInput

FORMAT_VERSION = 1


@dataclass(frozen=True, order=True)
class MessageIdData:
    """Pulsar's message id: (ledgerId, entryId, partition, batchIndex), all 64-bit integers.

    Entry ids are dense and increasing across the whole topic partition; the ledger id only says
    which ledger (rollover unit) holds the entry, and grows with the entry id, so ordering by
    (ledger, entry, batch) and by entry alone agree.
    """

    ledger_id: int
    entry_id: int
    partition: int = -1
    batch_index: int = -1

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}:{self.partition}:{self.batch_index}"

    @classmethod
    def parse(cls, text: str) -> MessageIdData:
        parts = text.split(":") if isinstance(text, str) else []
        if len(parts) not in (2, 3, 4):
            raise InvalidInput(f"Invalid message id: {text!r} (expected ledger:entry[:partition[:batch]])")
        try:
            values = [int(p) for p in parts]
        except ValueError:
            raise InvalidInput(f"Invalid message id: {text!r}") from None
        if values[0] < -1 or values[1] < -1:
            raise InvalidInput(f"Invalid message id: {text!r}")
        return cls(*values)


@dataclass(frozen=True)
class Message:
    payload: bytes
    key: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    event_time: int = 0


@dataclass(frozen=True)
class Entry:
    topic: str
    ledger_id: int
    entry_id: int
    reserved_at: int
    publish_time: int
    producer_name: str
    sequence_id: int
    batched: bool
    messages: tuple[Message, ...]
    hole: bool = False

    @property
    def size(self) -> int:
        return sum(len(m.payload) for m in self.messages)

    def message_id(self, partition: int, index: int) -> MessageIdData:
        return MessageIdData(self.ledger_id, self.entry_id, partition, index if self.batched else -1)


def hole_entry(topic: str, ledger_id: int, entry_id: int, now_ms: int) -> Entry:
    """The tombstone written in place of an entry whose writer died after reserving its id."""
    return Entry(topic, ledger_id, entry_id, now_ms, now_ms, "", -1, False, (), hole=True)


def encode_entry(entry: Entry) -> bytes:
    messages = [[m.payload, m.key, m.properties or None, m.event_time] for m in entry.messages]
    body = [
        FORMAT_VERSION,
        entry.topic,
        entry.ledger_id,
        entry.entry_id,
        entry.reserved_at,
        entry.publish_time,
        entry.producer_name,
        entry.sequence_id,
        entry.batched,
        entry.hole,
        len(messages),
        messages,
    ]
    data: bytes = msgpack.packb(body, use_bin_type=True)
    return data


def decode_entry(data: bytes) -> Entry:
    try:
        body: list[Any] = msgpack.unpackb(data, raw=False)
        version, topic, ledger_id, entry_id, reserved_at, publish_time, producer, seq, batched, hole, _n, msgs = body
    except Exception as exc:  # any malformed bytes: msgpack raises several types
        raise InvalidInput(f"Undecodable entry: {exc}") from None
    if version != FORMAT_VERSION:
        raise InvalidInput(f"Unknown entry format version {version}")
    messages = tuple(Message(m[0], m[1], m[2] or {}, m[3]) for m in msgs)
    return Entry(topic, ledger_id, entry_id, reserved_at, publish_time, producer, seq, batched, messages, hole)


@dataclass(frozen=True)
class EntryHeader:
    topic: str
    ledger_id: int
    entry_id: int
    reserved_at: int
    message_count: int


def peek_header(data: bytes) -> EntryHeader:
    """The header of an encoded entry, read without decoding its payloads."""
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=len(data) + 16)
    unpacker.feed(data[:2048])
    try:
        unpacker.read_array_header()
        fields = [unpacker.unpack() for _ in range(11)]
    except Exception as exc:
        raise InvalidInput(f"Undecodable entry header: {exc}") from None
    version, topic, ledger_id, entry_id, reserved_at = fields[:5]
    if version != FORMAT_VERSION:
        raise InvalidInput(f"Unknown entry format version {version}")
    return EntryHeader(topic, ledger_id, entry_id, reserved_at, fields[10])
