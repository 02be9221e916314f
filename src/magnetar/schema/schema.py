"""Schemas: how a producer encodes values and a consumer decodes them, with pulsar-client's names.

`Schema(record_cls, schema_type, schema_definition, schema_name)` is the base; `encode(obj) ->
bytes`, `decode(data)`, `decode_message(msg)` (which may use the version the message was written
with), `schema_info()`. pulsar-client's Python package has `BytesSchema`, `StringSchema`,
`JsonSchema`, `AvroSchema`; Magnetar adds the primitive schemas Pulsar's other clients have
(`BooleanSchema`, `Int8Schema` ... `DoubleSchema`, each encoded as Pulsar encodes them: big-endian,
1/2/4/8 bytes) and `KeyValueSchema` (Pulsar's KEY_VALUE, INLINE or SEPARATED).
"""

from __future__ import annotations

import base64
import enum
import json
import struct
from typing import Any

from magnetar.schema.definition import Record


class SchemaInfo:
    """What a schema registers: its type, name and definition (pulsar-client's `SchemaInfo`)."""

    def __init__(self, schema_type: str, name: str, schema: str, properties: dict[str, str] | None = None) -> None:
        self._type, self._name, self._schema = schema_type, name, schema
        self._properties = dict(properties or {})

    def schema_type(self) -> str:
        return self._type

    def name(self) -> str:
        return self._name

    def schema(self) -> str:
        return self._schema

    def properties(self) -> dict[str, str]:
        return dict(self._properties)

    def payload(self) -> dict[str, Any]:
        """Pulsar's PostSchemaPayload for the registry (the SDK's registration route)."""
        return {"type": self._type, "schema": self._schema, "properties": self._properties}

    def __repr__(self) -> str:
        return f"SchemaInfo({self._type}, {self._name!r})"


class Schema:
    def __init__(self, record_cls: Any, schema_type: str, schema_definition: Any, schema_name: str,
                 properties: dict[str, str] | None = None) -> None:
        self._record_cls = record_cls
        definition = "" if schema_definition is None else (
            schema_definition if isinstance(schema_definition, str) else json.dumps(schema_definition, indent=True))
        self._schema_info = SchemaInfo(schema_type, schema_name, definition, properties)
        self._client: Any = None

    def encode(self, obj: Any) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:
        raise NotImplementedError

    def decode_message(self, msg: Any) -> Any:
        return self.decode(msg.data())

    def schema_info(self) -> SchemaInfo:
        return self._schema_info

    def attach_client(self, client: Any) -> None:
        """The SDK gives the schema a way to fetch the topic's other versions (`writer_schema`)."""
        self._client = client

    def _validate_object_type(self, obj: Any) -> None:
        if not isinstance(obj, self._record_cls):
            raise TypeError(f"Invalid record obj of type {type(obj)} - expected type is {self._record_cls}")


class BytesSchema(Schema):
    """No schema: values are bytes (the default of producers, consumers and readers)."""

    def __init__(self) -> None:
        super().__init__(bytes, "BYTES", None, "BYTES")

    def encode(self, data: Any) -> bytes:
        self._validate_object_type(data)
        return bytes(data)

    def decode(self, data: bytes) -> bytes:
        return data

    def __str__(self) -> str:
        return "BytesSchema"


class StringSchema(Schema):
    def __init__(self) -> None:
        super().__init__(str, "STRING", None, "STRING")

    def encode(self, obj: Any) -> bytes:
        self._validate_object_type(obj)
        return str(obj).encode("utf-8")

    def decode(self, data: bytes) -> str:
        return data.decode("utf-8")

    def __str__(self) -> str:
        return "StringSchema"


class _FixedSchema(Schema):
    """A primitive value in Pulsar's encoding (big-endian fixed width)."""

    _format = ""
    _type_name = ""
    _python: Any = int

    def __init__(self) -> None:
        super().__init__(self._python, self._type_name, None, self._type_name)

    def encode(self, obj: Any) -> bytes:
        if isinstance(obj, bool) and self._python is not bool:
            raise TypeError(f"Invalid value of type bool for {self._type_name}")
        self._validate_object_type(obj)
        try:
            return struct.pack(self._format, obj)
        except struct.error as exc:
            raise ValueError(f"{obj!r} does not fit {self._type_name}: {exc}") from None

    def decode(self, data: bytes) -> Any:
        value = struct.unpack(self._format, data)[0]
        return bool(value) if self._python is bool else value

    def __str__(self) -> str:
        return type(self).__name__


class BooleanSchema(_FixedSchema):
    _format, _type_name, _python = ">?", "BOOLEAN", bool


class Int8Schema(_FixedSchema):
    _format, _type_name = ">b", "INT8"


class Int16Schema(_FixedSchema):
    _format, _type_name = ">h", "INT16"


class Int32Schema(_FixedSchema):
    _format, _type_name = ">i", "INT32"


class Int64Schema(_FixedSchema):
    _format, _type_name = ">q", "INT64"


class FloatSchema(_FixedSchema):
    _format, _type_name, _python = ">f", "FLOAT", (float, int)


class DoubleSchema(_FixedSchema):
    _format, _type_name, _python = ">d", "DOUBLE", (float, int)


_RESERVED = ("_default", "_required", "_required_default")


def _plain(value: Any) -> Any:
    """A record's values as JSON-able data (pulsar-client's JSON layout)."""
    if isinstance(value, Record):
        return {k: _plain(v) for k, v in value.__dict__.items() if k not in _RESERVED}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class JsonSchema(Schema):
    """A record class's values as JSON; the schema registered is the class's Avro schema (type
    JSON), as pulsar-client registers it."""

    def __init__(self, record_cls: type[Record]) -> None:
        super().__init__(record_cls, "JSON", record_cls.schema(), "JSON")

    def encode(self, obj: Any) -> bytes:
        self._validate_object_type(obj)
        return json.dumps(_plain(obj), indent=True).encode("utf-8")

    def decode(self, data: bytes) -> Any:
        return self._record_cls(**json.loads(data))


class KeyValueEncodingType(enum.Enum):
    """Where a KEY_VALUE schema puts the key: INLINE (key and value together in the payload) or
    SEPARATED (the key as the message's key, base64 when not text, the value as the payload)."""

    INLINE = 0
    SEPARATED = 1


class KeyValueSchema(Schema):
    """Pulsar's KeyValue schema (Java's `Schema.KeyValue`): values are `(key, value)` tuples.

    INLINE encodes `[4-byte key length][key][4-byte value length][value]` as Pulsar does;
    SEPARATED sends the encoded key as the message key (the producer does it) and the value as
    the payload."""

    def __init__(self, key_schema: Schema, value_schema: Schema,
                 encoding: KeyValueEncodingType = KeyValueEncodingType.INLINE) -> None:
        self.key_schema, self.value_schema, self.encoding = key_schema, value_schema, encoding
        key_info, value_info = key_schema.schema_info(), value_schema.schema_info()

        def part(info: SchemaInfo) -> Any:
            return json.loads(info.schema()) if info.schema() else ""

        definition = {"key": part(key_info), "value": part(value_info)}
        properties = {"key.schema.name": key_info.name(), "key.schema.type": key_info.schema_type(),
                      "value.schema.name": value_info.name(), "value.schema.type": value_info.schema_type(),
                      "kv.encoding.type": encoding.name}
        super().__init__(tuple, "KEY_VALUE", definition, "KeyValue", properties)

    def encode(self, obj: Any) -> bytes:
        key, value = self._pair(obj)
        encoded_value = self.value_schema.encode(value)
        if self.encoding is KeyValueEncodingType.SEPARATED:
            return encoded_value
        encoded_key = self.key_schema.encode(key)
        return struct.pack(">i", len(encoded_key)) + encoded_key + struct.pack(">i", len(encoded_value)) + encoded_value

    def key_text(self, obj: Any) -> str:
        """SEPARATED: the message key carrying the encoded key (text for a STRING key schema,
        else base64, as Pulsar's partitionKeyB64Encoded)."""
        encoded = self.key_schema.encode(self._pair(obj)[0])
        if isinstance(self.key_schema, StringSchema):
            return encoded.decode("utf-8")
        return base64.b64encode(encoded).decode("ascii")

    @staticmethod
    def _pair(obj: Any) -> tuple[Any, Any]:
        if not isinstance(obj, tuple) or len(obj) != 2:
            raise TypeError(f"A KeyValueSchema value is a (key, value) tuple, not {type(obj).__name__}")
        return obj[0], obj[1]

    def decode(self, data: bytes, key: bytes | None = None) -> tuple[Any, Any]:
        if self.encoding is KeyValueEncodingType.SEPARATED:
            return (None if key is None else self.key_schema.decode(key)), self.value_schema.decode(data)
        (key_length,) = struct.unpack_from(">i", data, 0)
        encoded_key = data[4:4 + key_length]
        (value_length,) = struct.unpack_from(">i", data, 4 + key_length)
        encoded_value = data[8 + key_length:8 + key_length + value_length]
        return self.key_schema.decode(encoded_key), self.value_schema.decode(encoded_value)

    def decode_message(self, msg: Any) -> tuple[Any, Any]:
        if self.encoding is KeyValueEncodingType.SEPARATED:
            text = msg.partition_key()
            key = text.encode("utf-8") if isinstance(self.key_schema, StringSchema) else base64.b64decode(text)
            return self.decode(msg.data(), key)
        return self.decode(msg.data())

    def __str__(self) -> str:
        return f"KeyValueSchema({self.key_schema}, {self.value_schema}, {self.encoding.name})"
