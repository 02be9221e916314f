"""The SDK's side of topic schemas (`magnetar.schema`): producers, consumers and readers created
with `schema=` register or check it with the topic's registry when they are created (Pulsar's
client does it when it connects), then encode and decode values.

- a producer's schema is registered (`POST /magnetar/v1/schema/.../producer`): the version it
  writes with goes into each message; a schema the namespace's strategy refuses fails
  `create_producer` with `IncompatibleSchema`;
- a consumer's or reader's schema is checked (`.../consumer`): one that cannot read the topic's
  fails `subscribe`/`create_reader` with `IncompatibleSchema`; its messages' `value()` decodes,
  with the version each was written with when the schema resolves versions (Avro);
- `BytesSchema` (the default) asks nothing of the registry: a producer without a schema is
  refused by the broker when it publishes to a topic with a schema and schemaValidationEnforced.

The typed objects are thin wrappers of the untyped ones (every other method is theirs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from magnetar.client.message import Message, MessageId
from magnetar.client.transport import Transport, topic_path
from magnetar.core.naming import TopicName
from magnetar.schema import BytesSchema, KeyValueEncodingType, KeyValueSchema, Schema, SchemaInfo

DEFAULT_SCHEMA = BytesSchema()


def untyped(schema: Schema) -> bool:
    return isinstance(schema, BytesSchema)


class SchemaFetcher:
    """What `Schema.attach_client` gets: a topic's schema of a given version, from the registry."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    def get_schema_info(self, topic: str, version: int) -> SchemaInfo:
        base = TopicName.parse(topic).partitioned_topic
        path = "/admin/v2/schemas/" + topic_path(base).split("/", 1)[1] + f"/schema/{int(version)}"
        answer = self._transport.call("GET", path)
        return SchemaInfo(answer["type"], answer["type"], answer.get("data") or "", answer.get("properties"))


def _register(transport: Transport, topic: TopicName, schema: Schema, role: str) -> int | None:
    path = f"/magnetar/v1/schema/{topic_path(topic.partitioned_topic)}/{role}"
    version = transport.call("POST", path, schema.schema_info().payload()).get("version")
    return None if version is None else int(version)


# --- producers -----------------------------------------------------------------------------
def typed_producer(transport: Transport, topic: TopicName, producer: Any, schema: Schema) -> Any:
    """`producer` writing `schema`'s values (registered now), or itself for BytesSchema."""
    if untyped(schema):
        return producer
    version = _register(transport, topic, schema, "producer")
    for part in getattr(producer, "_producers", None) or [producer]:
        part._schema_version = version
    return TypedProducer(producer, schema)


class TypedProducer:
    """A producer whose `send`/`send_async` take values of its schema (pulsar-client's behaviour)."""

    def __init__(self, producer: Any, schema: Schema) -> None:
        self._producer = producer
        self._schema = schema

    def __getattr__(self, name: str) -> Any:
        return getattr(self._producer, name)

    def _encoded(self, content: Any, partition_key: str | None) -> tuple[bytes | None, str | None]:
        if content is None:  # a null value (a tombstone) stays one
            return None, partition_key
        schema = self._schema
        if isinstance(schema, KeyValueSchema) and schema.encoding is KeyValueEncodingType.SEPARATED:
            return schema.encode(content), schema.key_text(content)
        return schema.encode(content), partition_key

    def send(self, content: Any, properties: dict[str, str] | None = None, partition_key: str | None = None,
             ordering_key: str | None = None, sequence_id: int | None = None,
             replication_clusters: list[str] | None = None, disable_replication: bool = False,
             event_timestamp: int | None = None, deliver_at: int | None = None,
             deliver_after: timedelta | int | None = None) -> MessageId:
        data, key = self._encoded(content, partition_key)
        result: MessageId = self._producer.send(
            data, properties=properties, partition_key=key, ordering_key=ordering_key, sequence_id=sequence_id,
            replication_clusters=replication_clusters, disable_replication=disable_replication,
            event_timestamp=event_timestamp, deliver_at=deliver_at, deliver_after=deliver_after)
        return result

    def send_async(self, content: Any, callback: Any, properties: dict[str, str] | None = None,
                   partition_key: str | None = None, ordering_key: str | None = None, sequence_id: int | None = None,
                   replication_clusters: list[str] | None = None, disable_replication: bool = False,
                   event_timestamp: int | None = None, deliver_at: int | None = None,
                   deliver_after: timedelta | int | None = None) -> None:
        data, key = self._encoded(content, partition_key)
        self._producer.send_async(
            data, callback, properties=properties, partition_key=key, ordering_key=ordering_key,
            sequence_id=sequence_id, replication_clusters=replication_clusters,
            disable_replication=disable_replication, event_timestamp=event_timestamp, deliver_at=deliver_at,
            deliver_after=deliver_after)

    def schema(self) -> Schema:
        return self._schema

    def __repr__(self) -> str:
        return f"TypedProducer({self._producer!r}, {self._schema})"


# --- consumers and readers -------------------------------------------------------------------
def check_consumer_schema(transport: Transport, topics: Iterable[str], schema: Schema) -> None:
    """Check `schema` against each topic's (once per partitioned topic); IncompatibleSchema if not."""
    if untyped(schema):
        return
    schema.attach_client(SchemaFetcher(transport))
    for base in sorted({str(TopicName.parse(t).partitioned_topic) for t in topics}):
        _register(transport, TopicName.parse(base), schema, "consumer")


def with_schema(message: Message, schema: Schema) -> Message:
    message._schema = schema
    return message


def typed_listener(listener: Callable[[Any, Message], None] | None, schema: Schema
                   ) -> Callable[[Any, Message], None] | None:
    if listener is None or untyped(schema):
        return listener
    typed = listener

    def decode_then(consumer: Any, message: Message) -> None:
        typed(consumer, with_schema(message, schema))

    return decode_then


def typed_consumer(consumer: Any, schema: Schema) -> Any:
    return consumer if untyped(schema) else TypedConsumer(consumer, schema)


class TypedConsumer:
    """A consumer whose messages' `value()` decodes with its schema."""

    def __init__(self, consumer: Any, schema: Schema) -> None:
        self._consumer = consumer
        self._schema = schema

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)

    def receive(self, timeout_millis: int | None = None) -> Message:
        return with_schema(self._consumer.receive(timeout_millis), self._schema)

    def batch_receive(self) -> list[Message]:
        return [with_schema(m, self._schema) for m in self._consumer.batch_receive()]

    def __repr__(self) -> str:
        return f"TypedConsumer({self._consumer!r}, {self._schema})"


def typed_reader(reader: Any, schema: Schema) -> Any:
    return reader if untyped(schema) else TypedReader(reader, schema)


class TypedReader:
    def __init__(self, reader: Any, schema: Schema) -> None:
        self._reader = reader
        self._schema = schema

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)

    def read_next(self, timeout_millis: int | None = None) -> Message:
        return with_schema(self._reader.read_next(timeout_millis), self._schema)

    def __repr__(self) -> str:
        return f"TypedReader({self._reader!r}, {self._schema})"
