"""`AvroSchema`: a record class (or an Avro schema given as a dict) encoded with fastavro.

A consumer decodes each message with the schema version it was written with (fetched once per
version from the registry) resolved into its own schema, as pulsar-client does: messages written
under several compatible versions read as objects of the consumer's class."""

from __future__ import annotations

import io
import json
import logging
from enum import Enum
from typing import Any

import fastavro

from magnetar.schema.definition import Record
from magnetar.schema.schema import Schema

log = logging.getLogger("magnetar.schema")


def _avro_value(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, Record):
        return {k: _avro_value(v) for k, v in value.__dict__.items() if k in value._fields}
    if isinstance(value, list):
        return [_avro_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _avro_value(v) for k, v in value.items()}
    return value


class AvroSchema(Schema):
    def __init__(self, record_cls: type[Record] | None, schema_definition: dict[str, Any] | None = None) -> None:
        if record_cls is None and schema_definition is None:
            raise AssertionError("The param record_cls and schema_definition shouldn't be both None.")
        self._schema: dict[str, Any] = record_cls.schema() if record_cls is not None else dict(schema_definition or {})
        self._parsed = fastavro.parse_schema(self._schema)
        self._writer_schemas: dict[tuple[str, int], Any] = {}
        super().__init__(record_cls, "AVRO", self._schema, "AVRO")

    def encode(self, obj: Any) -> bytes:
        if self._record_cls is not None:
            self._validate_object_type(obj)
            value = _avro_value(obj)
        elif isinstance(obj, dict):
            value = obj
        else:
            raise ValueError("If using the custom schema, the record data should be dict type.")
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, self._parsed, value)
        return buffer.getvalue()

    def encode_dict(self, d: dict[str, Any]) -> dict[str, Any]:
        return {k: _avro_value(v) for k, v in d.items()}

    def decode(self, data: bytes) -> Any:
        return self._decode_bytes(data, self._parsed)

    def decode_message(self, msg: Any) -> Any:
        version = msg.int_schema_version()
        if self._client is None or version < 0:
            return self.decode(msg.data())
        try:
            writer = self._writer_schema(msg.topic_name(), version)
        except Exception as exc:  # pulsar-client falls back to its own schema too
            log.warning("could not fetch schema version %s of %s (%s); decoding with the reader's", version,
                        msg.topic_name(), exc)
            return self.decode(msg.data())
        return self._decode_bytes(msg.data(), writer)

    def _writer_schema(self, topic: str, version: int) -> Any:
        key = (topic, version)
        if key not in self._writer_schemas:
            info = self._client.get_schema_info(topic, version)
            if info.schema_type() not in ("AVRO", "JSON"):
                raise RuntimeError(f'The schema type of topic "{topic}" and version {version} is {info.schema_type()}')
            definition = json.loads(info.schema())
            definition["name"] = self._schema.get("name", definition.get("name"))  # resolve by field, not name
            if "namespace" in self._schema or "namespace" in definition:
                definition["namespace"] = self._schema.get("namespace")
            self._writer_schemas[key] = fastavro.parse_schema(definition)
        return self._writer_schemas[key]

    def _decode_bytes(self, data: bytes, writer: Any) -> Any:
        value = fastavro.schemaless_reader(io.BytesIO(data), writer, self._parsed)
        return self._record_cls(**value) if self._record_cls is not None and isinstance(value, dict) else value
