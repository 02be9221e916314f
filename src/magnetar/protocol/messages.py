"""Between Pulsar's messages on the wire and Magnetar's entries, both ways.

A SEND carries a MessageMetadata and a payload: one message (its key, properties and event time
in the metadata), or a batch (`num_messages_in_batch` set) whose payload, once decompressed, is
each message in turn as `[4-byte size][SingleMessageMetadata][payload]`. It becomes one Magnetar
`Batch` (one entry): the same messages, stored compressed with the codec the client chose, so the
ids it gets back (ledger, entry, batch index) are the ones every other door shows.

The reverse: an entry becomes one MESSAGE: a batched entry as Pulsar's batch (batch indexes are the
entry's message indexes), a non-batched one as a single message. Payloads go out uncompressed (the
proxy and its clients are close; this spares re-compressing every entry).
"""

from __future__ import annotations

import struct
from typing import Any

from magnetar.core import encryption
from magnetar.core.compression import Codec, decompress
from magnetar.core.entry import Batch, Entry, Message
from magnetar.core.errors import InvalidInput
from magnetar.protocol import pulsar_api_pb2 as pb
from magnetar.protocol.schemas import version_bytes, version_of

_U32 = struct.Struct(">I")
_U64 = (1 << 64) - 1
LOCAL_ONLY = "__local__"  # replicate_to of the clients' disable_replication

CODECS = {pb.NONE: Codec.NONE, pb.LZ4: Codec.LZ4, pb.ZLIB: Codec.ZLIB, pb.ZSTD: Codec.ZSTD, pb.SNAPPY: Codec.SNAPPY}
_WIRE_CODECS = {codec: wire for wire, codec in CODECS.items()}


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def _properties(items: Any) -> dict[str, str]:
    return {kv.key: kv.value for kv in items}


def is_chunk(send: Any, metadata: Any) -> bool:
    """A SEND carrying one chunk of a message too large for one (protocol/chunks.py)."""
    return bool(send.is_chunk or (metadata.HasField("chunk_id") and metadata.num_chunks_from_msg > 1))


def codec_of(metadata: Any) -> Codec:
    codec = CODECS.get(metadata.compression)
    if codec is None:
        raise InvalidInput(f"Unknown compression type {metadata.compression}")
    return codec


def is_encrypted(metadata: Any) -> bool:
    return bool(metadata.encryption_keys) or metadata.HasField("encryption_param")


def encryption_context(metadata: Any) -> dict[str, Any]:
    """A message's end-to-end encryption as Magnetar stores it (core/encryption.py): the encrypted
    data keys, the IV and the compression the plaintext went through before it was encrypted. The
    payload stays the client's ciphertext: the proxy never holds a key, as a broker never does."""
    codec = codec_of(metadata)
    context: dict[str, Any] = {
        "keys": [[k.key, bytes(k.value), _properties(k.metadata)] for k in metadata.encryption_keys],
        "iv": bytes(metadata.encryption_param), "algo": metadata.encryption_algo or encryption.ALGORITHM}
    if codec is not Codec.NONE:
        context.update(codec=codec.value, size=metadata.uncompressed_size)
    return encryption.check(context)


def single_message(metadata: Any, payload: bytes) -> Message:
    """A non-batched message (a single SEND's, or a chunked message's once reassembled): its
    payload as sent (compressed, or encrypted: ciphertext kept with its context)."""
    version = version_of(metadata.schema_version) if metadata.HasField("schema_version") else None
    context = None
    if is_encrypted(metadata):
        context = encryption_context(metadata)
        value = payload
    else:
        codec = codec_of(metadata)
        value = decompress(codec, payload, metadata.uncompressed_size if codec is not Codec.NONE else len(payload))
    return Message(
        b"" if metadata.null_value else value, metadata.partition_key or None, _properties(metadata.properties),
        metadata.event_time, _text(metadata.ordering_key) if metadata.HasField("ordering_key") else None,
        null_value=metadata.null_value, schema_version=version, encryption=context)


def batch_from_send(send: Any, metadata: Any, payload: bytes) -> Batch:
    """A SEND (its command, metadata and payload) as the batch the ledger writer appends."""
    if metadata.HasField("txnid_most_bits") or send.txnid_most_bits or send.txnid_least_bits:
        raise InvalidInput("Transactions are not supported")
    codec = codec_of(metadata)
    if metadata.HasField("num_messages_in_batch"):
        if is_encrypted(metadata):  # Pulsar encrypts a batch as one; Magnetar keeps each message's own
            raise InvalidInput("An encrypted batch cannot be stored message by message: produce encrypted "
                               "messages with batching disabled (docs/semantics.md)")
        size = metadata.uncompressed_size if codec is not Codec.NONE else len(payload)
        version = version_of(metadata.schema_version) if metadata.HasField("schema_version") else None
        messages = _batch_messages(decompress(codec, payload, size), metadata.num_messages_in_batch, version)
        batched = True
    else:
        messages = [single_message(metadata, payload)]
        batched = False
        if messages[0].encryption is not None:
            codec = Codec.NONE  # ciphertext does not compress (the context names the plaintext's codec)
    highest = max(send.highest_sequence_id, send.sequence_id, send.sequence_id + len(messages) - 1 if batched else 0)
    return Batch.of(messages, codec, batched=batched, sequence_id=send.sequence_id, highest_sequence_id=highest,
                    deliver_at=max(metadata.deliver_at_time, 0), replicate_to=replicate_to(metadata)).validated()


def replicate_to(metadata: Any) -> tuple[str, ...] | None:
    """MessageMetadata's `replicate_to` as the entry's: none, the topic's replication clusters;
    the clients' `disable_replication` sends `["__local__"]` (a name no remote cluster has, so
    Pulsar's replicators skip the message): this cluster only, ()."""
    names = [str(c) for c in metadata.replicate_to]
    if not names:
        return None
    return tuple(dict.fromkeys(c for c in names if c != LOCAL_ONLY))


def set_replication(metadata: Any, entry: Entry) -> None:
    """An entry's replication on an outgoing MessageMetadata, as Pulsar's broker delivers what
    the producer sent: `replicated_from` for a replicated copy, `replicate_to` when the publish
    named clusters (`["__local__"]` for this cluster only)."""
    if entry.origin is not None:
        metadata.replicated_from = entry.origin.cluster
    if entry.replicate_to is not None:
        metadata.replicate_to.extend(entry.replicate_to or (LOCAL_ONLY,))


def _batch_messages(raw: bytes, count: int, version: int | None) -> list[Message]:
    """Pulsar's batch payload: `count` times [size][SingleMessageMetadata][payload]."""
    if count <= 0:
        raise InvalidInput(f"Invalid number of messages in batch: {count}")
    out, offset = [], 0
    for _ in range(count):
        if offset + 4 > len(raw):
            raise InvalidInput("Truncated batch")
        (size,) = _U32.unpack_from(raw, offset)
        offset += 4
        single = pb.SingleMessageMetadata()
        try:
            single.ParseFromString(raw[offset:offset + size])
        except Exception as exc:
            raise InvalidInput(f"Undecodable message metadata in batch: {exc}") from None
        offset += size
        end = offset + single.payload_size
        if single.payload_size < 0 or end > len(raw):
            raise InvalidInput("Truncated batch")
        value = raw[offset:end]
        offset = end
        out.append(Message(
            b"" if single.null_value else value, single.partition_key or None, _properties(single.properties),
            single.event_time, _text(single.ordering_key) if single.HasField("ordering_key") else None,
            null_value=single.null_value, schema_version=version))
    return out


def message_id(ledger_id: int, entry_id: int, partition: int, batch_index: int = -1) -> Any:
    """Pulsar's MessageIdData; -1 (a deduplicated publish's answer) travels as the uint64 2**64 - 1."""
    mid = pb.MessageIdData(ledgerId=ledger_id & _U64, entryId=entry_id & _U64, partition=partition)
    if batch_index >= 0:
        mid.batch_index = batch_index
    return mid


def entry_message(entry: Entry) -> tuple[Any, bytes]:
    """An entry as one MESSAGE's metadata and payload (Pulsar's batch format when it is batched)."""
    metadata = pb.MessageMetadata(producer_name=entry.producer_name or "magnetar",
                                  sequence_id=max(entry.sequence_id, 0), publish_time=max(entry.publish_time, 0))
    messages = entry.messages
    version = next((m.schema_version for m in messages if m.schema_version is not None), None)
    if version is not None:  # one per MESSAGE on the wire: a batch's messages share their producer's
        metadata.schema_version = version_bytes(version)
    if entry.batched:
        parts = []
        for m in messages:
            single = pb.SingleMessageMetadata(payload_size=len(m.payload), event_time=max(m.event_time, 0))
            _describe(single, m)
            body = single.SerializeToString()
            parts += [_U32.pack(len(body)), body, m.payload]
        payload = b"".join(parts)
        metadata.num_messages_in_batch = len(messages)
        if entry.highest_sequence_id > entry.sequence_id:
            metadata.highest_sequence_id = entry.highest_sequence_id
    else:
        m = messages[0]
        _describe(metadata, m)
        if m.event_time > 0:
            metadata.event_time = m.event_time
        payload = m.payload
    metadata.uncompressed_size = len(payload)
    set_replication(metadata, entry)
    encrypted = next((m.encryption for m in messages if m.encryption is not None), None)
    if encrypted is not None:
        # A message the SDK (or an official producer) encrypted goes out as Pulsar's: ciphertext, its
        # keys and IV, the plaintext's codec. (In a batched entry each message has its own IV, which
        # Pulsar's batch, encrypted as one, cannot say: the client fails to decrypt it and applies its
        # crypto failure action; docs/semantics.md.)
        set_encryption(metadata, encrypted)
    return metadata, payload


def set_encryption(metadata: Any, context: dict[str, Any]) -> None:
    for name, value, key_metadata in context["keys"]:
        key = metadata.encryption_keys.add(key=name, value=bytes(value))
        for k, v in key_metadata.items():
            key.metadata.add(key=k, value=v)
    metadata.encryption_param = bytes(context["iv"])
    metadata.encryption_algo = str(context.get("algo", ""))
    codec = Codec.parse(str(context.get("codec", "NONE")))
    metadata.compression = _WIRE_CODECS[codec]
    if codec is not Codec.NONE:
        metadata.uncompressed_size = int(context.get("size", 0))


def _describe(target: Any, m: Message) -> None:
    """Key, ordering key, properties and null value of a message (MessageMetadata or SingleMessageMetadata)."""
    if m.key is not None:
        target.partition_key = m.key
    if m.ordering_key is not None:
        target.ordering_key = m.ordering_key.encode()
    for k, v in m.properties.items():
        target.properties.add(key=k, value=v)
    if m.null_value:
        target.null_value = True


def ack_set(acked: list[int], size: int) -> list[int]:
    """Pulsar's ack set of a batch: a bit per index (64 per word), set while not acknowledged."""
    words = [0] * ((size + 63) // 64)
    done = set(acked)
    for i in range(size):
        if i not in done:
            words[i // 64] |= 1 << (i % 64)
    return [w - (1 << 64) if w >= 1 << 63 else w for w in words]  # int64 on the wire


def acked_indexes(words: list[int], size: int) -> list[int]:
    """The acknowledged indexes of an ack set (bits cleared) among `size` messages."""
    out = []
    for i in range(size):
        word = words[i // 64] if i // 64 < len(words) else 0
        if not (word >> (i % 64)) & 1:
            out.append(i)
    return out
