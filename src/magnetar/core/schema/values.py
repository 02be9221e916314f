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
import io
import json
import struct
from functools import lru_cache
from typing import Any

import fastavro

from magnetar.core.errors import InvalidInput
from magnetar.core.schema.types import SchemaData

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
