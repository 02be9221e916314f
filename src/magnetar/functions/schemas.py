"""A topic's schema, as the function runtime uses it: the registry's schema of a topic turned
into one of the SDK's schemas (`magnetar.schema`), so that the SDK decodes the inputs (an Avro
or JSON topic's records arrive as dicts) and encodes the outputs.

Types: AVRO (the SDK's `AvroSchema` over the registered definition, resolving each message's
writer version through the registry), JSON (`GenericJsonSchema`: the registered definition, the
values as dicts), STRING, BOOLEAN, INT8/16/32/64, FLOAT, DOUBLE. Other types (BYTES, NONE,
KEY_VALUE, PROTOBUF_NATIVE) and topics without a schema: None (the SerDe's bytes).

The one lookup (`TopicSchemas`) serves both ways a function runs: `magnetar functions localrun`
reads the schemas through the broker's HTTP API, a registered function's invocation reads the
registry (`RegistrySchemaSource`)."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any, Protocol

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
    SchemaInfo,
    StringSchema,
)
from magnetar.schema.schema import _plain

if TYPE_CHECKING:
    from magnetar.client.transport import Transport
    from magnetar.core.naming import TopicName
    from magnetar.core.schema.registry import SchemaRegistry

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


class SchemaSource(Protocol):
    """Where the topics' schemas come from: the broker's HTTP API (`magnetar functions localrun`) or
    the registry itself (the dispatched path, in the function's Lambda function). Also the fetcher of
    writer versions Avro schemas are attached to (`Schema.attach_client`)."""

    def latest(self, topic: TopicName) -> tuple[str, str, int | None] | None:
        """The topic's schema now: (type, definition, version); None without one."""
        ...

    def get_schema_info(self, topic: str, version: int) -> SchemaInfo: ...


class HttpSchemaSource:
    """The schemas through the broker's admin API (`/admin/v2/schemas/...`)."""

    def __init__(self, transport: Transport) -> None:
        from magnetar.client.schema import SchemaFetcher

        self._transport = transport
        self._fetcher = SchemaFetcher(transport)

    def latest(self, topic: TopicName) -> tuple[str, str, int | None] | None:
        from magnetar.client import exceptions
        from magnetar.client.transport import topic_path

        try:
            answer = self._transport.call("GET", "/admin/v2/schemas/" + topic_path(topic).split("/", 1)[1] + "/schema")
        except exceptions.PulsarException as exc:
            if exc.status != 404:
                raise
            return None
        if not answer:
            return None
        version = answer.get("version")
        return str(answer.get("type", "")), answer.get("data") or "", int(version) if isinstance(version, int) else None

    def get_schema_info(self, topic: str, version: int) -> SchemaInfo:
        return self._fetcher.get_schema_info(topic, version)


class RegistrySchemaSource:
    """The schemas from the schema registry (core/schema/registry.py) on the broker's ports."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self._registry = registry

    def latest(self, topic: TopicName) -> tuple[str, str, int | None] | None:
        from magnetar.core.errors import NotFound

        try:
            stored = self._registry.latest(topic)
        except NotFound:
            return None
        return stored.schema.type, stored.schema.data, stored.version

    def get_schema_info(self, topic: str, version: int) -> SchemaInfo:
        from magnetar.core.naming import TopicName

        stored = self._registry.version(TopicName.parse(topic).partitioned_topic, int(version))
        return SchemaInfo(stored.schema.type, stored.schema.type, stored.schema.data, stored.schema.properties)


class TopicSchemas:
    """Topic -> its schema (looked up once per partitioned topic), from a `SchemaSource`; the
    version a topic's values are encoded with (`version`), which outputs carry."""

    def __init__(self, source: SchemaSource) -> None:
        self._source = source
        self._cache: dict[str, tuple[Schema | None, int | None]] = {}
        self._lock = threading.Lock()

    def _lookup(self, topic: str) -> tuple[Schema | None, int | None]:
        from magnetar.core.naming import TopicName

        base = TopicName.parse(topic).partitioned_topic
        key = str(base)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        found = self._source.latest(base)
        schema = schema_from_info(found[0], found[1]) if found else None
        if schema is not None:
            schema.attach_client(self._source)
        entry = (schema, found[2] if found and schema is not None else None)
        with self._lock:
            self._cache[key] = entry
        return entry

    def __call__(self, topic: str) -> Schema | None:
        return self._lookup(topic)[0]

    def version(self, topic: str) -> int | None:
        """The version of the topic's schema (None: no schema, or its version is not known)."""
        return self._lookup(topic)[1]
