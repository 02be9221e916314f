"""Chunked messages over the binary protocol, both ways.

Pulsar's producer compresses (and encrypts) a message too large for one frame, then sends it in
chunks: SENDs sharing its sequence id, each with `uuid`, `chunk_id`, `num_chunks_from_msg` and
`total_chunk_msg_size` in its metadata, the payload a slice of the whole. Magnetar's chunks (the
SDK's, client/producer.py) are entries whose payloads are slices of the whole *entry payload* (the
message encoded with Magnetar's entry format, then compressed), so a chunked message is one entry
cut in pieces and every door reassembles it the same way.

- In (`Assembly`): the proxy holds a producer's chunks until the last arrives, and answers none of
  them before: a proxy that dies meanwhile has acknowledged nothing, and the client sends every
  chunk again to the next one (the proxy stays stateless). The whole message is then appended as
  Magnetar's chunks (`store`), each receipt answered in order.
- Out (`Reassembly`): a consumer's chunk entries are held until all of a message's have come; the
  message is then sent as Pulsar's chunks, one per stored chunk, each with that entry's id, so that
  the client's acknowledgement of the message (every chunk's id) acknowledges every entry.
"""

from __future__ import annotations

import time
import uuid as uuids
from dataclasses import dataclass, field
from typing import Any

from magnetar.core.compression import Codec, compress, decompress
from magnetar.core.entry import Batch, ChunkInfo, Entry, decode_messages, encode_messages
from magnetar.core.errors import InvalidInput
from magnetar.protocol import pulsar_api_pb2 as pb
from magnetar.protocol.frames import Frame
from magnetar.protocol.messages import codec_of, entry_message, is_encrypted, replicate_to, single_message

CHUNK_BYTES = 900 * 1024  # a stored chunk: the SDK's (client/producer.py MAX_ENTRY_BYTES)
MAX_HELD_BYTES = 64 * 1024 * 1024  # chunks one producer or consumer may hold before completing
EXPIRE_S = 60.0  # incomplete chunks held longer are dropped (pulsar-client's expireTimeOfIncompleteChunkedMessage)


@dataclass
class _Partial:
    frames: list[Frame] = field(default_factory=list)
    size: int = 0
    since: float = field(default_factory=time.monotonic)


@dataclass
class Complete:
    """A chunked message received whole: its SENDs (one receipt each) and the batches to append."""

    frames: list[Frame]
    batches: list[Batch]


class Assembly:
    """A producer's chunked messages in the making (one at a time per producer in practice)."""

    def __init__(self) -> None:
        self.partial: dict[str, _Partial] = {}

    def add(self, frame: Frame) -> Complete | None:
        """One chunk SEND: the completed message after its last chunk, else None (held).
        InvalidInput (the held chunks of that message dropped) for a chunk out of order."""
        metadata = frame.metadata
        if is_encrypted(metadata):  # Pulsar encrypts each chunk on its own: no one ciphertext to store
            raise InvalidInput("Encrypted chunked messages are not supported by the binary protocol proxy")
        key = metadata.uuid or f"{metadata.producer_name}-{metadata.sequence_id}"
        total = metadata.num_chunks_from_msg
        if metadata.chunk_id == 0:
            self.partial[key] = _Partial()
        held = self.partial.get(key)
        if held is None or metadata.chunk_id != len(held.frames) or not 0 < total <= 100_000:
            self.partial.pop(key, None)
            raise InvalidInput(f"Chunk {metadata.chunk_id} of {key} out of order")
        held.frames.append(frame)
        held.size += len(frame.payload)
        if sum(p.size for p in self.partial.values()) > MAX_HELD_BYTES:
            self.partial.pop(key, None)
            raise InvalidInput(f"Chunked messages in the making exceed {MAX_HELD_BYTES} bytes")
        if len(held.frames) < total:
            return None
        del self.partial[key]
        return Complete(held.frames, store(held.frames))

    def expired(self) -> list[Frame]:
        """Chunks of messages whose rest never came: dropped (their sends fail)."""
        now = time.monotonic()
        out: list[Frame] = []
        for key in [k for k, p in self.partial.items() if now - p.since > EXPIRE_S]:
            out += self.partial.pop(key).frames
        return out


def store(frames: list[Frame]) -> list[Batch]:
    """A Pulsar chunked message as Magnetar's chunks (the SDK's format): its message encoded as one
    entry payload with the client's codec, cut in `CHUNK_BYTES` pieces. Only the last chunk carries
    the sequence id: with deduplication on, the pieces before it must not count as the message
    (they would make the last one a duplicate of the first)."""
    last = frames[-1].metadata
    payload = b"".join(f.payload for f in frames)
    if last.HasField("total_chunk_msg_size") and len(payload) != last.total_chunk_msg_size:
        raise InvalidInput(f"Chunked message of {len(payload)} bytes, declared {last.total_chunk_msg_size}")
    message = single_message(last, payload)
    codec = codec_of(last)
    raw = encode_messages([message])
    packed = compress(codec, raw)
    pieces = [packed[i:i + CHUNK_BYTES] for i in range(0, len(packed), CHUNK_BYTES)]
    chunk_uuid = f"{last.uuid or last.producer_name}-{uuids.uuid4().hex[:8]}"
    key = message.ordering_key or message.key
    send = frames[-1].command.send
    out = []
    for index, piece in enumerate(pieces):
        sequence = send.sequence_id if index == len(pieces) - 1 else -1
        out.append(Batch(piece, 1, codec, len(raw), key, batched=False, sequence_id=sequence,
                         highest_sequence_id=sequence, chunk=ChunkInfo(chunk_uuid, index, len(pieces), len(packed)),
                         replicate_to=replicate_to(last)).validated())
    return out


@dataclass
class _Held:
    entries: dict[int, Entry] = field(default_factory=dict)
    redelivery: int = 0
    since: float = field(default_factory=time.monotonic)


class Reassembly:
    """A consumer's chunk entries until each message is whole."""

    def __init__(self) -> None:
        self.held: dict[str, _Held] = {}

    def clear(self) -> None:
        self.held.clear()

    def add(self, entry: Entry, redelivery: int) -> list[tuple[Entry, Any, bytes]] | None:
        """One chunk entry: the message's Pulsar chunks (entry, metadata, payload) once all are
        here, else None."""
        chunk = entry.chunk
        assert chunk is not None
        held = self.held.setdefault(chunk.uuid, _Held())
        held.entries[chunk.chunk_id] = entry
        held.redelivery = max(held.redelivery, redelivery)
        if len(held.entries) < chunk.num_chunks:
            return None
        del self.held[chunk.uuid]
        parts = [held.entries[i] for i in range(chunk.num_chunks)]
        return pulsar_chunks(parts)

    def expired(self) -> list[Entry]:
        """Chunk entries of messages whose rest never came (to acknowledge, as the SDK does)."""
        now = time.monotonic()
        out: list[Entry] = []
        for key in [k for k, h in self.held.items() if now - h.since > EXPIRE_S]:
            out += self.held.pop(key).entries.values()
        return out


def pulsar_chunks(parts: list[Entry]) -> list[tuple[Entry, Any, bytes]]:
    """A stored chunked message (its entries in order) as Pulsar's chunks: the message's payload
    (as a single message goes out: uncompressed, or the ciphertext) cut in as many pieces."""
    last = parts[-1]
    blob = b"".join(e.payload for e in parts)
    decoded = decode_messages(decompress(last.compression, blob, last.uncompressed_size))
    if len(decoded) != 1:
        raise InvalidInput("A chunked message holds one message")
    body = encode_messages(decoded)
    whole = Entry(last.topic, last.ledger_id, last.entry_id, last.reserved_at, last.publish_time,
                  last.producer_name, last.sequence_id, last.highest_sequence_id, False, False, 1, Codec.NONE,
                  len(body), last.key, last.deliver_at, None, body, last.origin, last.replicate_to)
    metadata, payload = entry_message(whole)
    size = -(-len(payload) // len(parts)) or 1
    chunk_uuid = parts[0].chunk.uuid if parts[0].chunk else ""
    out = []
    for index, entry in enumerate(parts):
        piece = pb.MessageMetadata()
        piece.CopyFrom(metadata)
        piece.uuid = chunk_uuid
        piece.chunk_id = index
        piece.num_chunks_from_msg = len(parts)
        piece.total_chunk_msg_size = len(payload)
        out.append((entry, piece, payload[index * size:(index + 1) * size]))
    return out


__all__ = ["Assembly", "Complete", "Reassembly", "pulsar_chunks", "store"]
