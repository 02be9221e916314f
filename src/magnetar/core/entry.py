"""Entries and their wire format.

An entry is Pulsar's unit of storage: one produce request (a batch of messages) becomes one
entry with one entry id; each message inside it is addressed by its batch index. The same bytes
are the Kinesis journal record and a slice of an S3 segment object, so sealing copies bytes and
never re-encodes.

Format: a msgpack array (msgpack: compact, fast, schema-free, well maintained — no need for a
hand-written framing). The metadata fields come first and are readable without touching the
payload (`peek_header`); the payload is the batch's messages, msgpack-encoded then compressed
with the entry's codec, as Pulsar compresses a batch and keeps its metadata in the clear.
`FORMAT_VERSION` guards changes.

A journal record holds one entry (the bytes above) or an *envelope* of several consecutive
entries of one topic partition (`encode_envelope`: a msgpack array `[ENVELOPE_VERSION, entry
bytes, ...]`), written by one group append: one Kinesis record, so its entries are stored all
together or not at all. Readers of the journal go through `record_entries`, which understands
both (records written before envelopes existed stay readable); a segment holds plain entries
only, so sealing an envelope copies its entries' bytes, still without re-encoding.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import msgpack

from magnetar.core.compression import Codec, compress, decompress
from magnetar.core.encryption import check as check_encryption
from magnetar.core.errors import InvalidInput

FORMAT_VERSION = 2
ENVELOPE_VERSION = -2  # first element of an envelope record (an entry starts with FORMAT_VERSION)
ENVELOPE_OVERHEAD = 6  # bytes an envelope adds: its array header and the version
ENVELOPE_ITEM_OVERHEAD = 5  # bytes an envelope adds per entry (a msgpack bin header)
_HEADER_FIELDS = 17  # everything before the payload


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
    ordering_key: str | None = None
    # Pulsar's optional message metadata, encoded in one trailing map (`_EXTRA_FIELDS`) only when set,
    # so a message without them costs no byte more and older batches stay readable.
    null_value: bool = False  # a tombstone: the value is null (not empty bytes); compaction deletes its key
    schema_version: int | None = None  # the topic schema's version the value was written with
    encryption: dict[str, Any] | None = None  # end-to-end encryption context (keys, algorithm, parameters)


# Message field -> its key in the trailing map (short: it is written with every message that has it)
_EXTRA_FIELDS = {"null_value": "n", "schema_version": "sv", "encryption": "enc"}


def _extras(m: Message) -> dict[str, Any] | None:
    # `is`, not `in (None, False)`: schema version 0 equals False and must be kept
    extras = {key: v for name, key in _EXTRA_FIELDS.items() if (v := getattr(m, name)) is not None and v is not False}
    return extras or None


@dataclass(frozen=True)
class ChunkInfo:
    """One chunk of a message too large for one entry (Pulsar's chunking)."""

    uuid: str
    chunk_id: int
    num_chunks: int
    total_size: int


def encode_messages(messages: list[Message] | tuple[Message, ...]) -> bytes:
    rows: list[list[Any]] = []
    for m in messages:
        row: list[Any] = [m.payload, m.key, m.properties or None, m.event_time, m.ordering_key]
        extras = _extras(m)
        if extras is not None:
            row.append(extras)
        rows.append(row)
    data: bytes = msgpack.packb(rows, use_bin_type=True)
    return data


def _message(row: list[Any]) -> Message:
    extras: dict[str, Any] = row[5] if len(row) > 5 and isinstance(row[5], dict) else {}
    return Message(bytes(row[0]), row[1], {str(k): str(v) for k, v in (row[2] or {}).items()}, int(row[3] or 0),
                   row[4], **{name: extras[key] for name, key in _EXTRA_FIELDS.items() if key in extras})


def decode_messages(data: bytes) -> tuple[Message, ...]:
    try:
        items: list[Any] = msgpack.unpackb(data, raw=False)
        return tuple(_message(m) for m in items)
    except InvalidInput:
        raise
    except Exception as exc:  # malformed bytes raise several types
        raise InvalidInput(f"Undecodable batch: {exc}") from None


def decode_message_columns(data: bytes) -> tuple[list[bytes], list[str | None], list[dict[str, str]], list[int]]:
    """A batch's messages as columns (payloads, keys, properties, event times) without a `Message`
    each: for bulk readers that build columns (Spark's direct reads). The same values
    `decode_messages` gives."""
    try:
        items: tuple[Any, ...] = msgpack.unpackb(data, raw=False, use_list=False)  # tuples: cheaper to build
        return ([m[0] for m in items], [m[1] for m in items],  # msgpack's bin is bytes already
                [{str(k): str(v) for k, v in m[2].items()} if m[2] else {} for m in items],
                [int(m[3] or 0) for m in items])
    except Exception as exc:  # malformed bytes raise several types
        raise InvalidInput(f"Undecodable batch: {exc}") from None


@dataclass(frozen=True)
class Origin:
    """Where a replicated entry was first stored (Pulsar's `replicated_from`): the cluster, the
    entry's id there, and the metadata it was published with, which the copy keeps."""

    cluster: str
    ledger_id: int
    entry_id: int
    producer_name: str
    sequence_id: int
    highest_sequence_id: int
    publish_time: int

    def pack(self) -> list[Any]:
        return [self.cluster, self.ledger_id, self.entry_id, self.producer_name, self.sequence_id,
                self.highest_sequence_id, self.publish_time]

    @classmethod
    def unpack(cls, row: list[Any]) -> Origin:
        return cls(str(row[0]), int(row[1]), int(row[2]), str(row[3]), int(row[4]), int(row[5]), int(row[6]))


@dataclass(frozen=True)
class Entry:
    topic: str
    ledger_id: int
    entry_id: int
    reserved_at: int
    publish_time: int
    producer_name: str
    sequence_id: int
    highest_sequence_id: int
    batched: bool
    hole: bool
    num_messages: int
    compression: Codec
    uncompressed_size: int
    key: str | None  # the batch's key: what Key_Shared dispatch routes on
    deliver_at: int  # 0: at once; else not before this instant (ms), on Shared/Key_Shared
    chunk: ChunkInfo | None
    payload: bytes  # codec(msgpack(messages))
    # geo-replication: where a replicated entry comes from (None: published here), and the clusters
    # a publish asked for (pulsar-client's replication_clusters; () with disable_replication;
    # None: those of the topic's policies)
    origin: Origin | None = None
    replicate_to: tuple[str, ...] | None = None

    @property
    def replicated_from(self) -> str:
        return self.origin.cluster if self.origin is not None else ""

    @property
    def size(self) -> int:
        return len(self.payload)

    @cached_property
    def messages(self) -> tuple[Message, ...]:
        return decode_messages(decompress(self.compression, self.payload, self.uncompressed_size))

    def message_id(self, partition: int, index: int) -> MessageIdData:
        return MessageIdData(self.ledger_id, self.entry_id, partition, index if self.batched else -1)


@dataclass(frozen=True)
class Batch:
    """What a producer hands to the ledger: an encoded, maybe compressed, batch and its metadata."""

    payload: bytes
    num_messages: int
    compression: Codec = Codec.NONE
    uncompressed_size: int = 0
    key: str | None = None
    batched: bool = True
    sequence_id: int = -1
    highest_sequence_id: int = -1
    deliver_at: int = 0
    chunk: ChunkInfo | None = None
    # a replicator's copy: the entry's origin; its sequence id (deduplication by the replicator's
    # producer) is the origin's entry id, the stored entry keeps the origin's producer and sequence ids
    origin: Origin | None = None
    replicate_to: tuple[str, ...] | None = None

    @classmethod
    def of(cls, messages: list[Message], codec: Codec = Codec.NONE, **metadata: Any) -> Batch:
        raw = encode_messages(messages)
        key = next((m.ordering_key or m.key for m in messages if (m.ordering_key or m.key)), None)
        return cls(compress(codec, raw), len(messages), codec, len(raw), metadata.pop("key", key), **metadata)

    def validated(self) -> Batch:
        """Decompress and decode once: a batch that would poison consumers is refused here.
        (A chunk is a slice of a compressed message: consumers check it once reassembled.)"""
        if self.chunk is not None:
            if self.num_messages != 1 or not self.payload or not 0 <= self.chunk.chunk_id < self.chunk.num_chunks:
                raise InvalidInput("Invalid chunk")
            return self
        messages = decode_messages(decompress(self.compression, self.payload, self.uncompressed_size))
        if len(messages) != self.num_messages or not messages:
            raise InvalidInput(f"Batch holds {len(messages)} messages, declared {self.num_messages}")
        if any(m.null_value and m.payload for m in messages):
            raise InvalidInput("A null value carries no payload")
        for m in messages:  # an end-to-end encrypted message: its context must be well formed
            if m.encryption is not None:
                check_encryption(m.encryption)
        return self


def hole_entry(topic: str, ledger_id: int, entry_id: int, now_ms: int) -> Entry:
    """The tombstone written in place of an entry whose writer died after reserving its id."""
    return Entry(topic, ledger_id, entry_id, now_ms, now_ms, "", -1, -1, False, True, 0, Codec.NONE, 0, None, 0,
                 None, b"")


def make_entry(topic: str, ledger_id: int, entry_id: int, reserved_at: int, publish_time: int,
               producer_name: str, batch: Batch) -> Entry:
    origin = batch.origin
    if origin is not None:  # a replicated copy keeps what its origin was published with
        producer_name, publish_time = origin.producer_name, origin.publish_time
        sequence, highest = origin.sequence_id, origin.highest_sequence_id
    else:
        sequence, highest = batch.sequence_id, batch.highest_sequence_id
    return Entry(topic, ledger_id, entry_id, reserved_at, publish_time, producer_name, sequence,
                 highest, batch.batched, False, batch.num_messages, batch.compression,
                 batch.uncompressed_size, batch.key, batch.deliver_at, batch.chunk, batch.payload,
                 origin, batch.replicate_to)


def encode_entry(entry: Entry) -> bytes:
    chunk = None
    if entry.chunk is not None:
        chunk = [entry.chunk.uuid, entry.chunk.chunk_id, entry.chunk.num_chunks, entry.chunk.total_size]
    body = [
        FORMAT_VERSION, entry.topic, entry.ledger_id, entry.entry_id, entry.reserved_at, entry.publish_time,
        entry.producer_name, entry.sequence_id, entry.highest_sequence_id, entry.batched, entry.hole,
        entry.num_messages, entry.compression.value, entry.uncompressed_size, entry.key, entry.deliver_at, chunk,
    ]
    # the replication fields, in one map before the payload and only when set: an entry without
    # them is byte for byte what it was before they existed (and those stay readable)
    extras: dict[str, Any] = {}
    if entry.origin is not None:
        extras["o"] = entry.origin.pack()
    if entry.replicate_to is not None:
        extras["rt"] = list(entry.replicate_to)
    if extras:
        body.append(extras)
    body.append(entry.payload)
    data: bytes = msgpack.packb(body, use_bin_type=True)
    return data


def _entry_from_fields(fields: list[Any], payload: bytes, extras: dict[str, Any] | None = None) -> Entry:
    (version, topic, ledger_id, entry_id, reserved_at, publish_time, producer, seq, highest, batched, hole,
     num, codec, usize, key, deliver_at, chunk) = fields
    if version != FORMAT_VERSION:
        raise InvalidInput(f"Unknown entry format version {version}")
    info = ChunkInfo(chunk[0], chunk[1], chunk[2], chunk[3]) if chunk else None
    origin = replicate_to = None
    if extras:
        origin = Origin.unpack(extras["o"]) if "o" in extras else None
        replicate_to = tuple(str(c) for c in extras["rt"]) if "rt" in extras else None
    return Entry(topic, ledger_id, entry_id, reserved_at, publish_time, producer, seq, highest, batched, hole, num,
                 Codec(codec), usize, key, deliver_at, info, payload, origin, replicate_to)


def decode_entry(data: bytes) -> Entry:
    try:
        body: list[Any] = msgpack.unpackb(data, raw=False)
        extras = body[_HEADER_FIELDS] if len(body) > _HEADER_FIELDS + 1 else None
        return _entry_from_fields(body[:_HEADER_FIELDS], bytes(body[-1]), extras)
    except InvalidInput:
        raise
    except Exception as exc:
        raise InvalidInput(f"Undecodable entry: {exc}") from None


def peek_header(data: bytes) -> Entry:
    """The entry's metadata without its payload (the returned entry's payload is empty)."""
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=len(data) + 16)
    unpacker.feed(data[:4096])
    try:
        count = unpacker.read_array_header()
        fields = [unpacker.unpack() for _ in range(_HEADER_FIELDS)]
        extras = unpacker.unpack() if count > _HEADER_FIELDS + 1 else None
        return _entry_from_fields(fields, b"", extras)
    except InvalidInput:
        raise
    except Exception as exc:
        raise InvalidInput(f"Undecodable entry header: {exc}") from None


def encode_envelope(entries: list[bytes]) -> bytes:
    """One journal record carrying consecutive entries (encoded) of one topic partition; a single
    entry is written as itself, so a one-entry append costs no byte more than before."""
    if len(entries) == 1:
        return entries[0]
    data: bytes = msgpack.packb([ENVELOPE_VERSION, *entries], use_bin_type=True)
    return data


def envelope_size(entry_sizes: list[int]) -> int:
    """An upper bound of the record `encode_envelope` makes of entries of these sizes."""
    if len(entry_sizes) == 1:
        return entry_sizes[0]
    return ENVELOPE_OVERHEAD + sum(entry_sizes) + ENVELOPE_ITEM_OVERHEAD * len(entry_sizes)


def record_entries(data: bytes) -> list[bytes]:
    """The encoded entries a journal record carries: itself when it is one entry, or the
    entries of an envelope, in entry-id order. InvalidInput when undecodable."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(data[:16])  # the array header and the first element decide
    try:
        count = unpacker.read_array_header()
        if count < 1 or unpacker.unpack() != ENVELOPE_VERSION:
            return [data]
        items: list[Any] = msgpack.unpackb(data, raw=False)
        return [bytes(item) for item in items[1:]]
    except Exception as exc:
        raise InvalidInput(f"Undecodable journal record: {exc}") from None


def batch_topics(records: Iterable[bytes]) -> dict[str, int]:
    """The topic partitions a journal batch holds, each with its lowest entry id there (records
    that do not decode are skipped: the sealer reports them)."""
    first: dict[str, int] = {}
    for data in records:
        try:
            headers = [peek_header(item) for item in record_entries(data)]
        except InvalidInput:
            continue
        for header in headers:
            first[header.topic] = min(first.get(header.topic, header.entry_id), header.entry_id)
    return first


def record_headers(data: bytes) -> list[tuple[bytes, Entry]]:
    """Each entry of a journal record with its header (`peek_header`)."""
    return [(item, peek_header(item)) for item in record_entries(data)]
