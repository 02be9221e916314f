"""Values of a schema's type to and from their bytes, on the broker: the REST producer's typed
messages (the value given as text, as Pulsar's REST producer takes it) and typed reads (Spark).

The encodings are Pulsar's, the SDK's (`magnetar.schema`): STRING as UTF-8, the primitive types
big-endian fixed width, BOOLEAN one byte, AVRO as Avro binary (fastavro), JSON as the JSON text,
BYTES as they are. A typed REST message's `payload` is the value as text: the string itself,
a number or `true`/`false`, the JSON document of an AVRO or JSON record, base64 for BYTES.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import io
import json
import struct
import uuid
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import fastavro

from magnetar.core.errors import InvalidInput
from magnetar.core.schema.types import SchemaData, StoredSchema

FIXED = {"BOOLEAN": ">?", "INT8": ">b", "INT16": ">h", "INT32": ">i", "INT64": ">q", "FLOAT": ">f", "DOUBLE": ">d"}


@lru_cache(maxsize=256)
def parsed_avro(definition: str) -> Any:
    return fastavro.parse_schema(json.loads(definition))


def _number(kind: str, text: str) -> Any:
    try:
        if kind == "BOOLEAN":
            if text not in ("true", "false"):
                raise ValueError(text)
            return text == "true"
        return float(text) if kind in ("FLOAT", "DOUBLE") else int(text)
    except ValueError:
        raise InvalidInput(f"Invalid {kind} value {text!r}") from None


def encode_text(schema: SchemaData, text: str) -> bytes:
    """The bytes of a value given as text (the REST producer's typed payload)."""
    kind = schema.type
    try:
        if kind == "STRING":
            return text.encode("utf-8")
        if kind in FIXED:
            return struct.pack(FIXED[kind], _number(kind, text))
        if kind == "BYTES":
            return base64.b64decode(text, validate=True)
        if kind in ("AVRO", "JSON"):
            value = json.loads(text)
            buffer = io.BytesIO()
            fastavro.schemaless_writer(buffer, parsed_avro(schema.data), value)  # validates against the schema
            return buffer.getvalue() if kind == "AVRO" else json.dumps(value).encode("utf-8")
    except InvalidInput:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, struct.error, binascii.Error) as exc:
        raise InvalidInput(f"Invalid {kind} value: {exc}") from None
    raise InvalidInput(f"The REST producer does not encode {kind} values; send them as bytes (base64)")


def decode_value(schema: SchemaData, data: bytes, reader: SchemaData | None = None) -> Any:
    """A value's bytes as Python data (records as dicts), resolved into `reader`'s schema when
    given (Avro: data written under an older version read under the latest)."""
    kind = schema.type
    if kind == "STRING":
        return data.decode("utf-8")
    if kind in FIXED:
        return struct.unpack(FIXED[kind], data)[0]
    if kind == "AVRO":
        target = parsed_avro(reader.data) if reader is not None and reader.type == "AVRO" else None
        return fastavro.schemaless_reader(io.BytesIO(data), parsed_avro(schema.data), target)
    if kind == "JSON":
        return json.loads(data)
    return data


def jsonable(value: Any) -> Any:
    """A decoded value as JSON data: bytes as base64, times and dates in ISO 8601, decimals and
    UUIDs as text (Avro's logical types), records and arrays through."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, float) and value != value:  # NaN has no JSON form
        return None
    return value


class ValueDecoder:
    """A topic's messages decoded for display (the reader's `decode`): each with the schema
    version it was written with, a message without one with the topic's current schema."""

    DECODED = ("STRING", "AVRO", "JSON", *FIXED)

    def __init__(self, history: Iterable[StoredSchema]) -> None:
        self.versions: dict[int, SchemaData] = {}
        self.current: SchemaData | None = None
        for stored in history:  # oldest first; a delete marker ends the current schema
            if stored.deleted:
                self.current = None
            else:
                self.versions[stored.version] = self.current = stored.schema

    def decode(self, payload: bytes, version: int | None) -> dict[str, Any]:
        """{"value", "schemaType"}, {"valueError", "schemaType"} when the bytes are not a value
        of the schema, or {} when there is no schema to decode with (or it is BYTES and the like)."""
        schema = self.versions.get(version) if version is not None else self.current
        if schema is None or schema.type not in self.DECODED:
            return {}
        try:
            return {"value": jsonable(decode_value(schema, payload)), "schemaType": schema.type}
        except Exception as exc:  # bytes that are not a value of the schema are shown as such
            return {"valueError": f"{type(exc).__name__}: {exc}"[:300], "schemaType": schema.type}
