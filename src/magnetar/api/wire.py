"""Between the HTTP API's bodies and the core's types, both ways (used by broker and SDK)."""

from __future__ import annotations

import base64
from typing import Any

from magnetar.api.models import (
    INT64_MAX,
    AckRequest,
    ConsumerMessage,
    OriginModel,
    ProduceRequest,
    decode_b64,
)
from magnetar.core.acks import Acks
from magnetar.core.compression import Codec
from magnetar.core.encryption import to_wire as encryption_to_wire
from magnetar.core.entry import Batch, ChunkInfo, Entry, Message, MessageIdData, Origin
from magnetar.core.errors import InvalidInput


def _replicate_to(clusters: list[str] | None, disabled: bool = False) -> tuple[str, ...] | None:
    return () if disabled else None if clusters is None else tuple(dict.fromkeys(clusters))


def _origin(model: OriginModel | None) -> Origin | None:
    if model is None:
        return None
    return Origin(model.cluster, model.ledgerId, model.entryId, model.producerName, model.sequenceId,
                  model.highestSequenceId, model.publishTime)


def batch_from_request(request: ProduceRequest) -> Batch:
    """A produce body as one batch: Pulsar's REST `messages`, or the SDK's encoded `batch`."""
    if request.messages is not None:
        targets = {_replicate_to(m.replicationClusters, m.disableReplication) for m in request.messages}
        if len(targets) > 1:
            raise InvalidInput("The messages of one publish share their replicationClusters and disableReplication")
        messages = [Message(b"" if m.is_null else decode_b64(m.payload or ""), m.key, m.properties, m.eventTime,
                            null_value=m.is_null, schema_version=request.schemaVersion if request.schemaVersion >= 0
                            else None) for m in request.messages]
        if request.sequenceId + len(messages) - 1 > INT64_MAX:
            raise InvalidInput("sequenceId + number of messages - 1 must fit in a signed 64-bit integer")
        return Batch.of(messages, batched=request.batched, sequence_id=request.sequenceId,
                        highest_sequence_id=max(request.highestSequenceId, request.sequenceId + len(messages) - 1),
                        replicate_to=targets.pop())
    b = request.batch
    assert b is not None  # the model requires one of the two
    chunk = ChunkInfo(b.chunk.uuid, b.chunk.chunkId, b.chunk.numChunks, b.chunk.totalSize) if b.chunk else None
    return Batch(decode_b64(b.payload), b.numMessages, Codec.parse(b.compression), b.uncompressedSize, b.key,
                 b.batched, request.sequenceId, max(request.highestSequenceId, request.sequenceId), b.deliverAt,
                 chunk, _origin(b.origin), _replicate_to(b.replicationClusters)).validated()


def acks_from_request(request: AckRequest, consumer: str = "") -> Acks:
    whole: set[int] = set()
    batch: dict[int, set[int]] = {}
    for text in request.messageIds:
        mid = MessageIdData.parse(text)
        size = request.batchSizes.get(str(mid.entry_id), 0)
        if mid.batch_index >= 0 and size > 1:
            batch.setdefault(mid.entry_id, set()).add(mid.batch_index)
        else:
            whole.add(mid.entry_id)
    cumulative = None
    if request.cumulative:
        mid = MessageIdData.parse(request.cumulative)
        cumulative = (mid.entry_id, request.batchSizes.get(str(mid.entry_id), 0), mid.batch_index)
    nacks = tuple(sorted({MessageIdData.parse(m).entry_id for m in request.nacks}))
    return Acks(
        tuple(sorted(whole)),
        tuple((e, request.batchSizes[str(e)], tuple(sorted(ix))) for e, ix in sorted(batch.items())),
        cumulative, nacks, request.nackDelayMs, request.epoch, consumer,
    )


def entry_to_wire(entry: Entry, partition: int, redelivery_count: int, acked_indexes: list[int]) -> dict[str, Any]:
    """An entry as the SDK receives it: metadata plus the still-compressed batch."""
    wire: dict[str, Any] = {
        "ledgerId": entry.ledger_id, "entryId": entry.entry_id, "partition": partition, "batched": entry.batched,
        "redeliveryCount": redelivery_count, "publishTime": entry.publish_time, "producerName": entry.producer_name,
        "sequenceId": entry.sequence_id, "numMessages": entry.num_messages, "compression": entry.compression.value,
        "uncompressedSize": entry.uncompressed_size, "payload": base64.b64encode(entry.payload).decode(),
    }
    if entry.key is not None:
        wire["key"] = entry.key
    if entry.origin is not None:
        wire["replicatedFrom"] = entry.origin.cluster
    if acked_indexes:
        wire["ackedIndexes"] = acked_indexes
    if entry.chunk is not None:
        c = entry.chunk
        wire["chunk"] = {"uuid": c.uuid, "chunkId": c.chunk_id, "numChunks": c.num_chunks, "totalSize": c.total_size}
    return wire


def entry_from_wire(wire: dict[str, Any], topic: str) -> Entry:
    chunk = wire.get("chunk")
    return Entry(
        topic, wire["ledgerId"], wire["entryId"], 0, wire["publishTime"], wire.get("producerName", ""),
        wire.get("sequenceId", -1), -1, wire["batched"], False, wire["numMessages"], Codec(wire["compression"]),
        wire["uncompressedSize"], wire.get("key"), 0,
        ChunkInfo(chunk["uuid"], chunk["chunkId"], chunk["numChunks"], chunk["totalSize"]) if chunk else None,
        base64.b64decode(wire["payload"]),
        Origin(wire["replicatedFrom"], -1, -1, wire.get("producerName", ""), wire.get("sequenceId", -1), -1,
               wire["publishTime"]) if wire.get("replicatedFrom") else None,
    )


def entry_messages(topic: str, partition: int, entry: Entry, redelivery_count: int = 0) -> list[dict[str, Any]]:
    """An entry's messages one by one, decompressed (Pulsar's WebSocket/REST message shape)."""
    out = []
    for i, m in enumerate(entry.messages):
        message = ConsumerMessage(
            messageId=str(entry.message_id(partition, i)), payload=base64.b64encode(m.payload).decode(),
            properties=m.properties, publishTime=entry.publish_time, eventTime=m.event_time,
            redeliveryCount=redelivery_count, key=m.key, producerName=entry.producer_name, topic=topic,
            nullValue=True if m.null_value else None,
        ).model_dump()
        if message["nullValue"] is None:
            del message["nullValue"]
        for absent in ("encryptionContext", "value", "schemaType", "valueError"):  # set below, or by a decoding read
            message.pop(absent, None)
        if m.schema_version is not None:  # the topic schema's version the value was written with
            message["schemaVersion"] = m.schema_version
        if entry.origin is not None:  # a replicated copy: the cluster it was published in
            message["replicatedFrom"] = entry.origin.cluster
        if m.encryption is not None:  # end to end encrypted: the ciphertext and what decrypts it (PIP-290)
            message["encryptionContext"] = encryption_to_wire(m.encryption)
        out.append(message)
    return out
