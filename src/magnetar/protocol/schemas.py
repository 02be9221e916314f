"""Schemas over the binary protocol: a producer's or consumer's schema checked against the topic's
in the schema registry (`Broker.schemas`, the same rules as the SDK's and the REST API's), the
version a producer writes with, GET_SCHEMA and GET_OR_CREATE_SCHEMA.

On the wire a schema is a `Schema` (Pulsar's type enum, the definition as bytes, properties) and a
version is 8 bytes, a big-endian long, as Pulsar's brokers store them. Definitions are text (JSON)
but for KEY_VALUE's, which Pulsar encodes as `[4-byte length][key schema][4-byte length][value
schema]` (KeyValueSchemaInfo) and Magnetar's registry keeps as `{"key": ..., "value": ...}`: it is
translated both ways, the parts' types in the properties (`key.schema.type`, ...) as in both.
PROTOBUF_NATIVE's definition is Pulsar's ProtobufNativeSchemaData JSON, stored as given.
"""

from __future__ import annotations

import json
import struct
from typing import TYPE_CHECKING, Any

from magnetar.core.naming import TopicName
from magnetar.core.schema.registry import IncompatibleSchema, SchemaPolicy
from magnetar.core.schema.types import SchemaData, StoredSchema, parse_schema
from magnetar.protocol import pulsar_api_pb2 as pb

if TYPE_CHECKING:
    from magnetar.core.broker import Broker

# Pulsar's Schema.Type values; 0 (None) is BYTES
_TYPES = {0: "BYTES", 1: "STRING", 2: "JSON", 3: "PROTOBUF", 4: "AVRO", 5: "BOOLEAN", 6: "INT8", 7: "INT16",
          8: "INT32", 9: "INT64", 10: "FLOAT", 11: "DOUBLE", 12: "DATE", 13: "TIME", 14: "TIMESTAMP",
          15: "KEY_VALUE", 16: "INSTANT", 17: "LOCAL_DATE", 18: "LOCAL_TIME", 19: "LOCAL_DATE_TIME",
          20: "PROTOBUF_NATIVE", 21: "AUTO_CONSUME"}
_WIRE = {name: number for number, name in _TYPES.items()} | {"NONE": 0}
_VERSION = struct.Struct(">q")
_LENGTH = struct.Struct(">i")


def version_bytes(version: int) -> bytes:
    return _VERSION.pack(version)


def version_of(data: bytes) -> int | None:
    """A schema version from the wire (8 bytes, big-endian); None when absent or not one."""
    return _VERSION.unpack(data)[0] if len(data) == _VERSION.size else None


def schema_data(schema: Any) -> SchemaData | None:
    """A client's schema as the registry's; None for one that reads anything (AUTO_CONSUME)."""
    kind = _TYPES.get(schema.type)
    if kind is None:
        raise IncompatibleSchema(f"unknown schema type {schema.type}")
    if kind == "AUTO_CONSUME":
        return None
    properties = {kv.key: kv.value for kv in schema.properties}
    data = bytes(schema.schema_data)
    if kind == "KEY_VALUE":
        return parse_schema(kind, _key_value_definition(data), properties)
    try:
        definition = data.decode("utf-8")
    except UnicodeDecodeError:
        raise IncompatibleSchema(f"the {kind} schema's definition is not text") from None
    return parse_schema(kind, definition, properties)


def _key_value_definition(data: bytes) -> str:
    """Pulsar's binary KEY_VALUE definition as the registry's JSON (each part's definition as JSON
    when it is, as text when not, "" for a primitive part)."""
    parts: list[Any] = []
    offset = 0
    for _ in range(2):
        if offset + _LENGTH.size > len(data):
            raise IncompatibleSchema("the KEY_VALUE schema's definition is not Pulsar's key/value encoding")
        (size,) = _LENGTH.unpack_from(data, offset)
        offset += _LENGTH.size
        if size < 0:  # -1: no definition
            parts.append("")
            continue
        if offset + size > len(data):
            raise IncompatibleSchema("the KEY_VALUE schema's definition is truncated")
        text = data[offset:offset + size].decode("utf-8", "replace")
        offset += size
        try:
            parts.append(json.loads(text) if text.strip() else "")
        except ValueError:
            parts.append(text)
    return json.dumps({"key": parts[0], "value": parts[1]})


def _key_value_wire(definition: str) -> bytes:
    parts = json.loads(definition or "{}")
    out = b""
    for name in ("key", "value"):
        part = parts.get(name, "")
        text = (part if isinstance(part, str) else json.dumps(part)).encode()
        out += _LENGTH.pack(len(text)) + text
    return out


def to_wire(topic: TopicName, stored: StoredSchema) -> Any:
    kind = stored.schema.type
    data = _key_value_wire(stored.schema.data) if kind == "KEY_VALUE" else stored.schema.data.encode()
    wire = pb.Schema(name=topic.partitioned_topic.local_name, schema_data=data, type=_WIRE.get(kind, 0))
    for key, value in stored.schema.properties.items():
        wire.properties.add(key=key, value=value)
    return wire


def _policy(broker: Broker, topic: TopicName) -> SchemaPolicy:
    return SchemaPolicy.of(broker.admin.get_namespace(topic.namespace_name).policies)


def producer_version(broker: Broker, topic: TopicName, request: Any) -> int | None:
    """The version a connecting producer writes with (None: no schema); IncompatibleSchema if refused."""
    schema = schema_data(request.schema) if request.HasField("schema") else None
    return broker.schemas.for_producer(topic, schema, _policy(broker, topic))


def check_consumer(broker: Broker, topic: TopicName, request: Any) -> None:
    """A subscribing consumer's (or reader's) schema must read the topic's; IncompatibleSchema if not."""
    if not request.HasField("schema"):
        return
    schema = schema_data(request.schema)
    if schema is not None:
        broker.schemas.for_consumer(topic, schema, _policy(broker, topic))


def get_schema(broker: Broker, topic: TopicName, version: int | None) -> StoredSchema:
    return broker.schemas.latest(topic) if version is None else broker.schemas.version(topic, version)


def get_or_create(broker: Broker, topic: TopicName, schema: Any) -> int | None:
    data = schema_data(schema)
    return broker.schemas.for_producer(topic, data, _policy(broker, topic))
