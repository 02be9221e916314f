"""Schema types and payloads as Pulsar's REST API carries them (`PostSchemaPayload`).

AVRO and JSON schemas are Avro schema definitions (JSON text); PROTOBUF is too (Pulsar derives
an Avro schema from the message class); PROTOBUF_NATIVE is a descriptor whose text Magnetar
stores as given. KEY_VALUE carries `{"key": <schema>, "value": <schema>}` with the parts'
types in the properties `key.schema.type` / `value.schema.type` and the encoding in
`kv.encoding.type` (INLINE or SEPARATED), as Pulsar's admin API shows it. The other types
(STRING, the primitives, BYTES) have an empty definition.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import avro.errors
import avro.schema

from magnetar.core.errors import InvalidInput

PRIMITIVES = ("STRING", "BOOLEAN", "INT8", "INT16", "INT32", "INT64", "FLOAT", "DOUBLE", "BYTES", "NONE",
              "DATE", "TIME", "TIMESTAMP", "INSTANT", "LOCAL_DATE", "LOCAL_TIME", "LOCAL_DATE_TIME")
STRUCTS = ("AVRO", "JSON", "PROTOBUF")  # described by an Avro schema
SCHEMA_TYPES = (*PRIMITIVES, *STRUCTS, "PROTOBUF_NATIVE", "KEY_VALUE")
KV_ENCODINGS = ("INLINE", "SEPARATED")


@dataclass(frozen=True)
class SchemaData:
    """A schema as posted: its type, its definition (text) and its properties."""

    type: str
    data: str = ""
    properties: dict[str, str] = field(default_factory=dict)

    def same_as(self, other: SchemaData) -> bool:
        """Pulsar's schema identity (its hash of type and definition): the definition compared as
        JSON when it is JSON, so that whitespace and key order do not make a new version."""
        return self.type == other.type and _canonical(self.data) == _canonical(other.data)

    def key_value(self) -> tuple[SchemaData, SchemaData]:
        """A KEY_VALUE schema's key and value schemas."""
        parts = json.loads(self.data or "{}")
        props = self.properties

        def part(name: str) -> SchemaData:
            raw = parts.get(name, "")
            text = raw if isinstance(raw, str) else json.dumps(raw)
            return SchemaData(props.get(f"{name}.schema.type", "BYTES"), text)

        return part("key"), part("value")


@dataclass(frozen=True)
class StoredSchema:
    """One version of a topic's schema (or, `deleted`, the marker a delete leaves)."""

    version: int
    schema: SchemaData
    timestamp: int
    deleted: bool = False

    def response(self) -> dict[str, Any]:
        """Pulsar's GetSchemaResponse."""
        return {"version": self.version, "type": self.schema.type, "timestamp": self.timestamp,
                "data": self.schema.data, "properties": dict(self.schema.properties)}


def _canonical(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def avro_schema(text: str, what: str = "schema") -> avro.schema.Schema:
    """Parse an Avro schema definition; InvalidInput (400) with Avro's reason when it is not one."""
    try:
        return avro.schema.parse(text)
    except (avro.errors.AvroException, ValueError, TypeError, AttributeError) as exc:
        raise InvalidInput(f"Invalid {what}: not an Avro schema: {exc}") from None


def parse_schema(type_name: object, data: object, properties: object = None) -> SchemaData:
    """Check a posted schema (type, definition, properties) and give it normalized; InvalidInput
    (400, nothing stored) for an unknown type or a definition that does not parse."""
    if not isinstance(type_name, str) or type_name.upper() not in SCHEMA_TYPES:
        raise InvalidInput(f"Invalid schema type {type_name!r}: one of {', '.join(SCHEMA_TYPES)}")
    kind = type_name.upper()
    if data is None:
        data = ""
    if not isinstance(data, str):
        raise InvalidInput("Invalid schema: `schema` must be a string (the definition as text)")
    if properties is None:
        properties = {}
    if not isinstance(properties, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in properties.items()):
        raise InvalidInput("Invalid schema: `properties` must map strings to strings")
    schema = SchemaData(kind, data, dict(properties))
    if kind in STRUCTS:
        if not data.strip():
            raise InvalidInput(f"Invalid schema: a {kind} schema needs its Avro definition")
        avro_schema(data, f"{kind} schema")
    elif kind == "PROTOBUF_NATIVE":
        if not data.strip():
            raise InvalidInput("Invalid schema: a PROTOBUF_NATIVE schema needs its descriptor")
    elif kind == "KEY_VALUE":
        _check_key_value(schema)
    return schema


def _check_key_value(schema: SchemaData) -> None:
    try:
        parts = json.loads(schema.data or "{}")
    except ValueError:
        raise InvalidInput('Invalid KEY_VALUE schema: the definition must be {"key": ..., "value": ...}') from None
    if not isinstance(parts, dict) or set(parts) - {"key", "value"}:
        raise InvalidInput('Invalid KEY_VALUE schema: the definition must be {"key": ..., "value": ...}')
    encoding = schema.properties.get("kv.encoding.type", "INLINE")
    if encoding not in KV_ENCODINGS:
        raise InvalidInput(f"Invalid KEY_VALUE schema: kv.encoding.type {encoding!r}: one of INLINE, SEPARATED")
    for part in schema.key_value():
        if part.type == "KEY_VALUE":
            raise InvalidInput("Invalid KEY_VALUE schema: a part cannot be KEY_VALUE")
        parse_schema(part.type, part.data)
