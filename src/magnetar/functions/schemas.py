"""A topic's schema, as the function runtime uses it: the registry's schema of a topic turned
into one of the SDK's schemas (`magnetar.schema`), so that the SDK decodes the inputs (an Avro
or JSON topic's records arrive as dicts) and encodes the outputs.

Types: AVRO (the SDK's `AvroSchema` over the registered definition, resolving each message's
writer version through the registry), JSON (`GenericJsonSchema`: the registered definition, the
values as dicts), STRING, BOOLEAN, INT8/16/32/64, FLOAT, DOUBLE. Other types (BYTES, NONE,
KEY_VALUE, PROTOBUF_NATIVE) and topics without a schema: None (the SerDe's bytes)."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from magnetar.schema import (
    AvroSchema,
    BooleanSchema,
    DoubleSchema,
    FloatSchema,
    Int8Schema,
    Int16Schema,
    Int32Schema,
    Int64Schema,
    Schema,
    StringSchema,
)
from magnetar.schema.schema import _plain

if TYPE_CHECKING:
    from magnetar.client.transport import Transport

_FIXED: dict[str, type[Schema]] = {
    "STRING": StringSchema, "BOOLEAN": BooleanSchema, "INT8": Int8Schema, "INT16": Int16Schema,
    "INT32": Int32Schema, "INT64": Int64Schema, "FLOAT": FloatSchema, "DOUBLE": DoubleSchema,
}


class GenericJsonSchema(Schema):
    """A JSON topic's schema without a Record class: values are dicts (Records are accepted too)."""

    def __init__(self, definition: str) -> None:
        super().__init__(None, "JSON", definition, "JSON")

    def encode(self, obj: Any) -> bytes:
        return json.dumps(_plain(obj)).encode("utf-8")

    def decode(self, data: bytes) -> Any:
        return json.loads(data)


def schema_from_info(schema_type: str, definition: str) -> Schema | None:
    """The SDK schema for a registered schema (its type and definition), None for bytes."""
    kind = schema_type.upper()
    if kind == "AVRO":
        return AvroSchema(None, json.loads(definition))
    if kind == "JSON":
        return GenericJsonSchema(definition)
    fixed: Any = _FIXED.get(kind)  # each takes no argument
    if fixed is not None:
        schema: Schema = fixed()
        return schema
    return None


class TopicSchemas:
    """Topic -> its schema (looked up in the registry once per partitioned topic)."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._cache: dict[str, Schema | None] = {}
        self._lock = threading.Lock()

    def __call__(self, topic: str) -> Schema | None:
        from magnetar.client import exceptions
        from magnetar.client.schema import SchemaFetcher
        from magnetar.client.transport import topic_path
        from magnetar.core.naming import TopicName

        base = TopicName.parse(topic).partitioned_topic
        key = str(base)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        try:
            answer = self._transport.call("GET", "/admin/v2/schemas/" + topic_path(base).split("/", 1)[1] + "/schema")
        except exceptions.PulsarException as exc:
            if exc.status != 404:
                raise
            answer = None
        schema = schema_from_info(str(answer.get("type", "")), answer.get("data") or "") if answer else None
        if schema is not None:
            schema.attach_client(SchemaFetcher(self._transport))
        with self._lock:
            self._cache[key] = schema
        return schema
