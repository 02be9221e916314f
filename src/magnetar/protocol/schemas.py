"""Schemas over the binary protocol: a producer's or consumer's schema checked against the topic's
in the schema registry (`Broker.schemas`, the same rules as the SDK's and the REST API's), the
version a producer writes with, GET_SCHEMA and GET_OR_CREATE_SCHEMA.

On the wire a schema is a `Schema` (Pulsar's type enum, the definition as bytes, properties) and a
version is 8 bytes, a big-endian long, as Pulsar's brokers store them. KEY_VALUE (its definition is
binary on the wire, JSON in Magnetar's registry) and PROTOBUF_NATIVE (a binary descriptor) are not
translated yet.
"""

from __future__ import annotations

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
_NOT_YET = ("KEY_VALUE", "PROTOBUF_NATIVE")
_VERSION = struct.Struct(">q")


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
    if kind in _NOT_YET:
        raise IncompatibleSchema(f"{kind} schemas are not served by the binary protocol proxy yet")
    try:
        definition = schema.schema_data.decode("utf-8")
    except UnicodeDecodeError:
        raise IncompatibleSchema(f"the {kind} schema's definition is not text") from None
    return parse_schema(kind, definition, {kv.key: kv.value for kv in schema.properties})


def to_wire(topic: TopicName, stored: StoredSchema) -> Any:
    wire = pb.Schema(name=topic.partitioned_topic.local_name, schema_data=stored.schema.data.encode(),
                     type=_WIRE.get(stored.schema.type, 0))
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
