"""Pulsar's WebSocket API: paths, query parameters, message ids and frames.

The shapes follow Pulsar's WebSocket proxy (`pulsar-websocket`): the producer sends
`{"payload", "properties", "context", "key", ...}` and gets `{"result": "ok", "messageId",
"context"}` or `{"result": "send-error:<code>", "errorMsg", "context"}`; a consumer or reader is
pushed `{"messageId", "payload", "properties", "publishTime", "redeliveryCount", "key"}` and
answers with `{"messageId"}` (ack), `{"type": "negativeAcknowledge", "messageId"}`,
`{"type": "permit", "permitMessages"}` (pull mode), `{"type": "unsubscribe"}`,
`{"type": "isEndOfTopic"}`.

A message id on the wire is the base64 of the SDK's 32-byte serialization (`MessageId.serialize`:
ledger, entry, partition, batch index, big-endian 64-bit), the one format everywhere.
Frames may carry fields Pulsar clients ignore: `batchSize` (messages in the entry, for
batch-index acknowledgement) and `producerName`.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from magnetar.core import encryption
from magnetar.core.cursor import SUBSCRIPTION_TYPES
from magnetar.core.entry import Entry, Message, MessageIdData
from magnetar.core.errors import InvalidInput
from magnetar.core.naming import TopicName, check_consumer_name, check_subscription

ROLES = ("producer", "consumer", "reader")
MAX_QUEUE_SIZE = 1000  # Pulsar's WebSocket proxy caps receiverQueueSize at 1000 (its default)
DEFAULT_NACK_DELAY_MS = 60_000  # Pulsar's negativeAckRedeliveryDelay default
# A push consumer's lease covers API Gateway's 2 h connection limit; $disconnect (or a push that
# finds the connection gone) detaches it sooner.
PUSH_LEASE_MS = (2 * 60 + 10) * 60_000
MAX_CONNECTION_MS = 2 * 60 * 60_000  # API Gateway closes every WebSocket connection after 2 h
MAX_FRAME_BYTES = 128 * 1024  # API Gateway's WebSocket message limit (PostToConnection data)
MAX_REPLICATION_CLUSTERS = 64  # as the produce API's replicationClusters
_ID = struct.Struct(">qqqq")

# Pulsar's WebSocketError codes (send-error:<code>)
FAILED_TO_DESERIALIZE = 3
PAYLOAD_ENCODING_ERROR = 7
UNKNOWN_ERROR = 8


def encode_message_id(mid: MessageIdData) -> str:
    return base64.b64encode(_ID.pack(mid.ledger_id, mid.entry_id, mid.partition, mid.batch_index)).decode()


def decode_message_id(text: object) -> MessageIdData:
    if not isinstance(text, str) or not text:
        raise InvalidInput("messageId is required (base64)")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"Invalid messageId {text!r}: not base64") from None
    if len(raw) != _ID.size:
        raise InvalidInput(f"Invalid messageId {text!r}: {len(raw)} bytes, expected {_ID.size}")
    return MessageIdData(*_ID.unpack(raw))


def iso_time(ms: int) -> str:
    """Pulsar's DateFormatter: ISO-8601 with milliseconds and the offset."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def parse_time(value: object) -> int:
    """An event time as Pulsar's WebSocket producer sends it (ISO-8601), or epoch milliseconds."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        if value.isdigit():
            return int(value)
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(f"Invalid eventTime {value!r}") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return int(parsed.timestamp() * 1000)
    raise InvalidInput(f"Invalid eventTime {value!r}")


def message_frame(message: Message, message_id: MessageIdData, publish_time: int, redelivery_count: int,
                  producer_name: str = "", batch_size: int = 0, replicated_from: str = "") -> str:
    """One pushed message, as Pulsar's ConsumerMessage (plus fields its clients ignore:
    `replicatedFrom`, the cluster a replicated copy was published in, as in REST reads)."""
    frame: dict[str, Any] = {
        "messageId": encode_message_id(message_id),
        "payload": base64.b64encode(message.payload).decode(),
        "properties": message.properties,
        "publishTime": iso_time(publish_time),
        "redeliveryCount": redelivery_count,
    }
    if message.event_time:
        frame["eventTime"] = iso_time(message.event_time)
    if message.key is not None:
        frame["key"] = message.key
    if message.null_value:
        frame["nullValue"] = True  # a tombstone: "payload" is "" as for empty bytes, this tells them apart
    if message.encryption is not None:  # end to end encrypted: the ciphertext and what decrypts it (PIP-290)
        frame["encryptionContext"] = encryption.to_wire(message.encryption)
    if message.schema_version is not None:  # the topic schema's version the value was written with
        frame["schemaVersion"] = message.schema_version
    if batch_size:
        frame["batchSize"] = batch_size
    if producer_name:
        frame["producerName"] = producer_name
    if replicated_from:
        frame["replicatedFrom"] = replicated_from
    text = json.dumps(frame, separators=(",", ":"))
    if len(text.encode()) > MAX_FRAME_BYTES:  # API Gateway would refuse it: say so rather than lose it
        frame.update(payload="", payloadTooLarge=len(message.payload),
                     error=f"message of {len(message.payload)} bytes exceeds the WebSocket frame limit "
                           f"({MAX_FRAME_BYTES} bytes); read it over the HTTP API")
        text = json.dumps(frame, separators=(",", ":"))
    return text


def entry_frames(entry: Entry, partition: int, redelivery_count: int, skip: set[int] | frozenset[int] = frozenset(),
                 first_index: int = 0, limit: int | None = None) -> list[str]:
    """The frames of a stored entry's messages from `first_index`, minus those in `skip`.

    A chunk of a large message is pushed as it is stored (its bytes and a `chunk` field): Pulsar's
    proxy reassembles chunked messages, Magnetar's WebSocket API does not."""
    if entry.hole:
        return []
    if entry.chunk is not None:
        c = entry.chunk
        frame: dict[str, Any] = {
            "messageId": encode_message_id(entry.message_id(partition, 0)),
            "payload": base64.b64encode(entry.payload).decode(), "properties": {},
            "publishTime": iso_time(entry.publish_time), "redeliveryCount": redelivery_count,
            "chunk": {"uuid": c.uuid, "chunkId": c.chunk_id, "numChunks": c.num_chunks, "totalSize": c.total_size},
        }
        if entry.origin is not None:
            frame["replicatedFrom"] = entry.origin.cluster
        return [json.dumps(frame, separators=(",", ":"))] if first_index == 0 else []
    out: list[str] = []
    size = entry.num_messages if entry.batched else 0
    for i, m in enumerate(entry.messages):
        if i < first_index or i in skip:
            continue
        if limit is not None and len(out) >= limit:
            break
        out.append(message_frame(m, entry.message_id(partition, i), entry.publish_time, redelivery_count,
                                 entry.producer_name, size, entry.replicated_from))
    return out


def producer_ack(message_id: MessageIdData, context: object, throttled_ms: int = 0) -> str:
    """A publish's answer; `throttledMs` (as in the HTTP publish response) when the journal write
    waited that long for its shard's write budget: a producer that sees it should slow down."""
    ack: dict[str, Any] = {"result": "ok", "messageId": encode_message_id(message_id)}
    if context is not None:
        ack["context"] = context
    if throttled_ms > 0:
        ack["throttledMs"] = throttled_ms
    return json.dumps(ack)


def producer_error(code: int, reason: str, context: object) -> str:
    ack: dict[str, Any] = {"result": f"send-error:{code}", "errorMsg": reason}
    if context is not None:
        ack["context"] = context
    return json.dumps(ack)


@dataclass(frozen=True)
class OpenRequest:
    """A WebSocket connect: the Pulsar path and query parameters, validated."""

    role: str
    topic: TopicName
    subscription: str = ""
    name: str = ""  # consumerName, producerName or readerName as the client gave it ("" if none)
    subscription_type: str = "Exclusive"
    initial_position: str = "Latest"
    queue_size: int = MAX_QUEUE_SIZE
    ack_timeout_ms: int = 0
    nack_delay_ms: int = DEFAULT_NACK_DELAY_MS
    pull_mode: bool = False
    start: str = "latest"  # reader: earliest, latest or a base64 message id
    # Magnetar's extension (pulsar-client's start_message_id_inclusive): a consumer's subscription
    # created at Latest starts at the last entry; a reader starts at its message id, not after it
    start_inclusive: bool = False
    priority_level: int = 0  # consumer: Pulsar's priorityLevel (a Failover subscription's active consumers)
    encryption_keys: str = ""  # producer: its pre-encrypted messages' keys (PIP-290), as `Connection` keeps them


def parse_open(path: str, params: dict[str, str]) -> OpenRequest:
    """`/ws/v2/{producer|consumer|reader}/{domain}/{tenant}/{namespace}/{topic}[/{subscription}]`."""
    if not isinstance(path, str) or not path.startswith("/ws/v2/"):
        raise InvalidInput(f"Invalid WebSocket path {path!r}: expected /ws/v2/{{producer|consumer|reader}}/...")
    parts = path[len("/ws/v2/"):].split("/")
    role = parts[0]
    if role not in ROLES:
        raise InvalidInput(f"Invalid WebSocket path {path!r}: {role!r} is not producer, consumer or reader")
    expected = 6 if role == "consumer" else 5
    if len(parts) != expected or not all(parts):
        shape = "{domain}/{tenant}/{namespace}/{topic}" + ("/{subscription}" if role == "consumer" else "")
        raise InvalidInput(f"Invalid WebSocket path {path!r}: expected /ws/v2/{role}/{shape}")
    topic = TopicName.of(parts[1], parts[2], parts[3], parts[4])
    if role == "producer":
        _check_producer_params(params)
        name = params.get("producerName", "")
        if name:
            check_consumer_name(name)
        return OpenRequest(role, topic, name=name, encryption_keys=_encryption_keys(params))
    queue = _int_param(params, "receiverQueueSize", MAX_QUEUE_SIZE, 0)
    queue = max(1, min(queue, MAX_QUEUE_SIZE))  # as Pulsar: at most 1000, 0 means 1
    if role == "reader":
        name = params.get("readerName", "")
        start = params.get("messageId", "") or "latest"
        if start not in ("earliest", "latest"):
            decode_message_id(start)
        return OpenRequest(role, topic, name=name, queue_size=queue, start=start,
                           start_inclusive=_flag_param(params, "startMessageIdInclusive"))
    subscription = check_subscription(parts[5])
    sub_type = params.get("subscriptionType", "Exclusive")
    if sub_type not in SUBSCRIPTION_TYPES:
        raise InvalidInput(f"Invalid query params: Invalid subscriptionType {sub_type}")
    position = params.get("subscriptionInitialPosition", "Latest")
    if position not in ("Earliest", "Latest"):
        raise InvalidInput(f"Invalid query params: Invalid subscriptionInitialPosition {position}")
    mode = params.get("subscriptionMode", "Durable")
    if mode != "Durable":
        raise InvalidInput(f"Invalid query params: subscriptionMode {mode} is not supported (Durable only; "
                           "use the reader endpoint for a non-durable read)")
    for unsupported in ("maxRedeliverCount", "deadLetterTopic"):
        if unsupported in params:
            raise InvalidInput(f"Invalid query params: {unsupported} (dead-letter topics) is not supported over "
                               "the WebSocket API; use the SDK's dead_letter_policy")
    name = params.get("consumerName", "")
    if name:
        check_consumer_name(name)
        if len(name) > 200:
            raise InvalidInput("Invalid query params: consumerName longer than 200 characters")
    priority = _int_param(params, "priorityLevel", 0, 0)
    # Pulsar's values are accepted; the broker holds no key, so an encrypted message is always passed
    # on with its encryptionContext (as Pulsar's CONSUME)
    action = params.get("cryptoFailureAction")
    if action is not None and action not in ("FAIL", "DISCARD", "CONSUME"):
        raise InvalidInput(f"Invalid query params: Invalid cryptoFailureAction {action}")
    return OpenRequest(
        role, topic, subscription, name, sub_type, position, queue,
        ack_timeout_ms=_int_param(params, "ackTimeoutMillis", 0, 0),
        nack_delay_ms=_int_param(params, "negativeAckRedeliveryDelay", DEFAULT_NACK_DELAY_MS, 0),
        pull_mode=params.get("pullMode", "false").lower() == "true",
        start_inclusive=_flag_param(params, "startMessageIdInclusive"),
        priority_level=priority,
    )


def _flag_param(params: dict[str, str], name: str) -> bool:
    value = params.get(name, "false").lower()
    if value not in ("true", "false"):
        raise InvalidInput(f"Invalid query params: {name}={params[name]!r} is not true or false")
    return value == "true"


def _int_param(params: dict[str, str], name: str, default: int, minimum: int) -> int:
    if name not in params:
        return default
    try:
        value = int(params[name])
    except ValueError:
        raise InvalidInput(f"Invalid query params: {name}={params[name]!r} is not an integer") from None
    if value < minimum:
        raise InvalidInput(f"Invalid query params: {name} must be at least {minimum}")
    return value


def _check_producer_params(params: dict[str, str]) -> None:
    """Pulsar's producer parameters: checked, and (one message per frame) mostly without effect."""
    for name in ("sendTimeoutMillis", "batchingMaxMessages", "maxPendingMessages", "batchingMaxPublishDelay",
                 "initialSequenceId"):
        _int_param(params, name, 0, 0)
    routing = params.get("messageRoutingMode")
    if routing is not None and routing not in ("SinglePartition", "RoundRobinPartition", "CustomPartition"):
        raise InvalidInput(f"Invalid query params: Invalid messageRoutingMode {routing}")
    compression = params.get("compressionType")
    if compression is not None and compression not in ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"):
        raise InvalidInput(f"Invalid query params: Invalid compressionType {compression}")
    hashing = params.get("hashingScheme")
    if hashing is not None and hashing not in ("JavaStringHash", "Murmur3_32Hash"):
        raise InvalidInput(f"Invalid query params: Invalid hashingScheme {hashing}")


def parse_frame(body: str | None) -> dict[str, Any]:
    """A client frame: a JSON object."""
    try:
        frame = json.loads(body or "")
    except ValueError:
        raise InvalidInput("Failed to de-serialize from JSON") from None
    if not isinstance(frame, dict):
        raise InvalidInput("Failed to de-serialize from JSON: expected an object")
    return frame


@dataclass(frozen=True)
class ProducerFrame:
    message: Message
    context: object = None
    sequence_id: int = -1
    deliver_at: int = 0  # ms since the epoch, 0: at once
    deliver_after_ms: int = 0
    # the clusters the message is stored in (Pulsar's replicationClusters; None or []: the topic's;
    # (): this cluster only, Magnetar's disableReplication as in the REST producer)
    replicate_to: tuple[str, ...] | None = None


def producer_frame(frame: dict[str, Any], encryption_keys: str = "") -> ProducerFrame:
    """A producer's message frame (Pulsar's ProducerMessage); `encryption_keys`: the connection's
    (`Connection.encryption_keys`), for a pre-encrypted message's context."""
    context = frame.get("context")
    payload = frame.get("payload")
    # a null value (a tombstone): "payload": null, or "nullValue": true without a payload
    null_value = ("payload" in frame and payload is None) or frame.get("nullValue") is True
    if null_value:
        if payload:
            raise InvalidInput("A null value (nullValue) carries no payload")
        payload = ""
    if not isinstance(payload, str):
        raise InvalidInput("payload is required (base64)")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("Invalid Base64 message-payload") from None
    properties = frame.get("properties") or {}
    if not isinstance(properties, dict):
        raise InvalidInput("properties must be an object of strings")
    key = frame.get("key")
    if key is not None and not isinstance(key, str):
        raise InvalidInput("key must be a string")
    event_time = parse_time(frame["eventTime"]) if frame.get("eventTime") is not None else 0
    numbers: dict[str, int] = {}
    for name, default in (("sequenceId", -1), ("deliverAt", 0), ("deliverAfterMs", 0)):
        value = frame.get(name, default)
        if value is None:
            value = default
        if not isinstance(value, int) or isinstance(value, bool) or value < default:
            raise InvalidInput(f"{name} must be a non-negative integer")
        numbers[name] = value
    message = Message(data, key, {str(k): str(v) for k, v in properties.items()}, event_time, null_value=null_value,
                      encryption=_frame_encryption(frame, encryption_keys))
    schema_version = frame.get("schemaVersion")  # the value's schema version (registered with the topic)
    if schema_version is not None:
        if not isinstance(schema_version, int) or isinstance(schema_version, bool) or schema_version < 0:
            raise InvalidInput("schemaVersion must be a non-negative integer")
        message = replace(message, schema_version=schema_version)
    return ProducerFrame(message, context, numbers["sequenceId"], numbers["deliverAt"], numbers["deliverAfterMs"],
                         _frame_replication(frame))


def _frame_replication(frame: dict[str, Any]) -> tuple[str, ...] | None:
    """A producer frame's `replicationClusters` (Pulsar's: a list of cluster names; empty or
    absent, the topic's replication clusters) and `disableReplication` (Magnetar's, as the REST
    producer's: this cluster only)."""
    disabled = frame.get("disableReplication", False)
    if not isinstance(disabled, bool):
        raise InvalidInput("disableReplication must be a boolean")
    clusters = frame.get("replicationClusters")
    if clusters is not None and (not isinstance(clusters, list) or len(clusters) > MAX_REPLICATION_CLUSTERS
                                 or not all(isinstance(c, str) and 0 < len(c) <= 255 for c in clusters)):
        raise InvalidInput(f"replicationClusters must be a list of at most {MAX_REPLICATION_CLUSTERS} cluster names")
    if disabled:
        return ()
    return tuple(dict.fromkeys(clusters)) if clusters else None


def _encryption_keys(params: dict[str, str]) -> str:
    """PIP-290's producer parameters: `encryptionKeys` (key names, comma-separated), `encryptionKeyValues`
    (for each, the base64 of the data key encrypted with it, comma-separated) and `encryptionKeyMetadata`
    (base64 of a JSON object of strings, or of a list of them, one per key): JSON as `Connection` keeps it."""
    names = [n for n in params.get("encryptionKeys", "").split(",") if n]
    values = [v.replace(" ", "+") for v in params.get("encryptionKeyValues", "").split(",") if v]  # a bare + is a space
    if not names and not values:
        return ""
    if len(names) != len(values):
        raise InvalidInput("Invalid query params: encryptionKeys and encryptionKeyValues must name as many keys")
    metadata: list[dict[str, str]] = [{} for _ in names]
    if params.get("encryptionKeyMetadata"):
        try:
            parsed = json.loads(base64.b64decode(params["encryptionKeyMetadata"], validate=True))
        except (binascii.Error, ValueError):
            raise InvalidInput("Invalid query params: encryptionKeyMetadata must be base64 JSON") from None
        parsed = [parsed] * len(names) if isinstance(parsed, dict) else parsed
        if not (isinstance(parsed, list) and len(parsed) == len(names) and all(isinstance(m, dict) for m in parsed)):
            raise InvalidInput("Invalid query params: encryptionKeyMetadata must be an object (or one per key)")
        metadata = [{str(k): str(v) for k, v in m.items()} for m in parsed]
    keys = {name: {"keyValue": value, "metadata": meta} for name, value, meta in zip(names, values, metadata, strict=True)}
    encryption.from_wire({"keys": keys, "param": base64.b64encode(bytes(encryption.IV_BYTES)).decode()})  # checked
    return json.dumps([[name, value, meta] for name, value, meta in zip(names, values, metadata, strict=True)])


def _frame_encryption(frame: dict[str, Any], encryption_keys: str = "") -> dict[str, Any] | None:
    """A pre-encrypted message's context: `encryptionContext` as consumers receive it, where Pulsar's
    per-message `encryptionParam`, `compressionType` and `uncompressedMessageSize` may stand instead of
    its `param`, `compressionType` and `uncompressedMessageSize`; or (PIP-290) those per-message fields
    with the keys the producer gave at the connect."""
    context = frame.get("encryptionContext")
    if context is None:
        if encryption_keys:
            if "encryptionParam" not in frame:
                raise InvalidInput("This producer encrypts (encryptionKeys at the connect): each message "
                                   "carries its encryptionParam")
            context = {"keys": {name: {"keyValue": value, "metadata": meta}
                                for name, value, meta in json.loads(encryption_keys)}}
        elif "encryptionParam" in frame:
            raise InvalidInput("encryptionParam needs the keys: encryptionKeys and encryptionKeyValues at the "
                               "connect, or the message's encryptionContext")
        else:
            return None
    if not isinstance(context, dict):
        raise InvalidInput("Invalid encryptionContext: expected an object")
    merged = dict(context)
    for field, name in (("encryptionParam", "param"), ("compressionType", "compressionType"),
                        ("uncompressedMessageSize", "uncompressedMessageSize")):
        if frame.get(field) is not None:
            merged.setdefault(name, frame[field])
    return encryption.from_wire(merged)
