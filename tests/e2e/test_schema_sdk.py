"""Typed topics through the SDK: producers and consumers exchange records (Avro, JSON), each
type round-trips, an evolved schema's consumer reads messages of both versions, incompatible
producers and consumers are refused at creation with IncompatibleSchema, and
schemaValidationEnforced refuses a producer without a schema."""

from __future__ import annotations

import enum
import uuid
from typing import Any

import pytest

import magnetar
from http_helpers import HTTP
from magnetar.client import exceptions
from magnetar.client.admin import AdminClient
from magnetar.schema import (
    Array,
    AvroSchema,
    BooleanSchema,
    BytesSchema,
    DoubleSchema,
    Float,
    FloatSchema,
    Int8Schema,
    Int16Schema,
    Int32Schema,
    Int64Schema,
    Integer,
    JsonSchema,
    KeyValueEncodingType,
    KeyValueSchema,
    Map,
    Record,
    Schema,
    String,
    StringSchema,
)


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Address(Record):
    city = String()


class User(Record):
    name = String(required=True)
    age = Integer()
    color = Color
    address = Address()
    tags = Array(String())
    scores = Map(Float())


class UserV1(Record):  # the same record (by Avro name) before it grew a field
    _avro_name = "User"
    name = String(required=True)


class UserV2(Record):
    name = String(required=True)
    email = String(default="none", required_default=True)  # a default: FULL-compatible with v1


UserV1.__name__ = UserV2.__name__ = "User"  # one Avro record name across versions, as in one code base


class Incompatible(Record):
    name = Integer(required=True)  # the field changed type


Incompatible.__name__ = "User"


@pytest.fixture
def namespace(admin: AdminClient) -> str:
    name = f"public/sdk-{uuid.uuid4().hex[:8]}"
    admin.create_namespace(name)
    return name


def topic_in(namespace: str) -> str:
    return f"persistent://{namespace}/t-{uuid.uuid4().hex[:8]}"


def test_avro_records_from_producer_to_consumer(client: magnetar.Client, admin: AdminClient, namespace: str) -> None:
    topic = topic_in(namespace)
    consumer = client.subscribe(topic, "s", schema=AvroSchema(User), initial_position=magnetar.InitialPosition.Earliest)
    producer = client.create_producer(topic, schema=AvroSchema(User))
    sent = User(name="ada", age=36, color=Color.GREEN, address=Address(city="London"), tags=["math"],
                scores={"x": 1.5})
    producer.send(sent, partition_key="k")
    msg = consumer.receive(10_000)
    assert msg.value() == sent and isinstance(msg.value(), User)
    assert msg.value().address.city == "London" and msg.value().color is Color.GREEN
    assert msg.partition_key() == "k" and msg.int_schema_version() == 0
    # pulsar-client's form: the 8-byte version as text (its suite: `schema_version().encode()`)
    assert msg.schema_version() == "\x00" * 8 and msg.schema_version().encode() == b"\x00" * 8
    consumer.acknowledge(msg)
    assert admin.get_schema(topic)["type"] == "AVRO"
    # an untyped consumer sees the Avro bytes
    reader = client.create_reader(topic, magnetar.MessageId.earliest)
    raw = reader.read_next(10_000)
    assert raw.value() == AvroSchema(User).encode(sent) and raw.schema_version().encode() == b"\x00" * 8


def test_an_evolved_consumer_reads_both_versions_and_incompatible_ones_are_refused(
        client: magnetar.Client, namespace: str) -> None:
    topic = topic_in(namespace)
    v1 = client.create_producer(topic, schema=AvroSchema(UserV1))
    v1.send(UserV1(name="old"))
    v2 = client.create_producer(topic, schema=AvroSchema(UserV2))  # FULL: a field with a default
    v2.send(UserV2(name="new", email="n@example.com"))
    with pytest.raises(exceptions.IncompatibleSchema, match="Incompatible schema"):
        client.create_producer(topic, schema=AvroSchema(Incompatible))
    with pytest.raises(exceptions.IncompatibleSchema):
        client.subscribe(topic, "bad", schema=AvroSchema(Incompatible))
    with pytest.raises(exceptions.IncompatibleSchema):
        client.create_producer(topic, schema=StringSchema())  # another type
    reader = client.create_reader(topic, magnetar.MessageId.earliest, schema=AvroSchema(UserV2))
    first, second = reader.read_next(10_000), reader.read_next(10_000)
    assert (first.int_schema_version(), second.int_schema_version()) == (0, 1)
    assert second.schema_version().encode() == b"\x00" * 7 + b"\x01"
    assert first.value() == UserV2(name="old", email="none")  # v1 data resolved into v2: the default
    assert second.value() == UserV2(name="new", email="n@example.com")
    old_reader = client.create_reader(topic, magnetar.MessageId.earliest, schema=AvroSchema(UserV1))
    old_reader.read_next(10_000)
    assert old_reader.read_next(10_000).value() == UserV1(name="new")  # v2 data read by a v1 reader


KV_INLINE = KeyValueSchema(StringSchema(), AvroSchema(Address))
KV_SEPARATED = KeyValueSchema(Int64Schema(), JsonSchema(Address), KeyValueEncodingType.SEPARATED)


@pytest.mark.parametrize(("schema", "value"), [
    (StringSchema(), "héllo"), (BytesSchema(), b"\x00\x01"), (BooleanSchema(), True), (Int8Schema(), -8),
    (Int16Schema(), 1600), (Int32Schema(), -(2**31)), (Int64Schema(), 2**62), (FloatSchema(), 1.5),
    (DoubleSchema(), 2.25), (JsonSchema(User), User(name="j", tags=["a", "b"], color=Color.RED)),
    (AvroSchema(None, {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"}]}), {"x": 3}),
    (KV_INLINE, ("k1", Address(city="Paris"))), (KV_SEPARATED, (42, Address(city="Oslo"))),
], ids=lambda v: type(v).__name__ if isinstance(v, Schema) else None)
def test_every_type_round_trips(client: magnetar.Client, admin: AdminClient, namespace: str, schema: Schema,
                                value: Any) -> None:
    topic = topic_in(namespace)
    producer = client.create_producer(topic, schema=schema)
    producer.send(value)
    reader = client.create_reader(topic, magnetar.MessageId.earliest, schema=schema)
    assert reader.read_next(10_000).value() == value
    if not isinstance(schema, BytesSchema):
        assert admin.get_schema(topic)["type"] == schema.schema_info().schema_type()


def test_a_listener_gets_decoded_values(client: magnetar.Client, namespace: str) -> None:
    topic = topic_in(namespace)
    got: list[Any] = []
    client.subscribe(topic, "l", schema=JsonSchema(Address), initial_position=magnetar.InitialPosition.Earliest,
                     message_listener=lambda c, m: (got.append(m.value()), c.acknowledge(m)))
    client.create_producer(topic, schema=JsonSchema(Address)).send(Address(city="Rome"))
    import time
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        time.sleep(0.1)
    assert got == [Address(city="Rome")]


def test_schema_validation_enforced_refuses_producers_without_a_schema(
        cluster, client: magnetar.Client, namespace: str) -> None:  # type: ignore[no-untyped-def]
    topic = topic_in(namespace)
    bytes_producer = client.create_producer(topic, batching_enabled=False)
    bytes_producer.send(b"before any schema")  # no schema on the topic yet: fine
    client.create_producer(topic, schema=StringSchema()).send("typed")
    bytes_producer.send(b"not enforced: still accepted")
    response = HTTP.post(f"{cluster.url}/admin/v2/namespaces/{namespace}/schemaValidationEnforced", json=True)
    assert response.status_code == 204
    with pytest.raises(exceptions.IncompatibleSchema, match="schemaValidationEnforced"):
        client.create_producer(topic, batching_enabled=False).send(b"refused")
    client.create_producer(topic, schema=StringSchema()).send("typed still works")


def test_auto_update_off_admits_only_known_schemas(cluster, client: magnetar.Client, namespace: str) -> None:  # type: ignore[no-untyped-def]
    topic = topic_in(namespace)
    client.create_producer(topic, schema=AvroSchema(UserV1)).send(UserV1(name="a"))
    HTTP.post(f"{cluster.url}/admin/v2/namespaces/{namespace}/isAllowAutoUpdateSchema", json=False)
    with pytest.raises(exceptions.IncompatibleSchema, match="isAllowAutoUpdateSchema"):
        client.create_producer(topic, schema=AvroSchema(UserV2))
    client.create_producer(topic, schema=AvroSchema(UserV1)).send(UserV1(name="b"))  # a known version


def test_a_push_consumer_resolves_each_messages_version(client: magnetar.Client, namespace: str) -> None:
    topic = topic_in(namespace)
    consumer = client.subscribe(topic, "push", schema=AvroSchema(UserV2), delivery="push",
                                initial_position=magnetar.InitialPosition.Earliest)
    client.create_producer(topic, schema=AvroSchema(UserV1)).send(UserV1(name="pushed-old"))
    client.create_producer(topic, schema=AvroSchema(UserV2)).send(UserV2(name="pushed-new", email="e"))
    got = sorted(((m := consumer.receive(15_000)).schema_version().encode(), m.value().name, m.value().email) for _ in range(2))
    # the consumer's schema, first on the topic, registered as version 0 (as Pulsar does); v1 came as version 1
    assert got == [(b"\x00" * 8, "pushed-new", "e"), (b"\x00" * 7 + b"\x01", "pushed-old", "none")]


def _protobuf_class() -> Any:
    """A generated-style protobuf message class, built from its descriptor (no protoc needed)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name=f"orders_{uuid.uuid4().hex[:6]}.proto", package="shop",
                                              syntax="proto3")
    order = file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    order.field.add(name="quantity", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_native_messages_round_trip_and_register_pulsars_descriptor(
        client: magnetar.Client, admin: AdminClient, namespace: str) -> None:
    import base64
    import json

    from google.protobuf import descriptor_pb2

    from magnetar.schema import ProtobufNativeSchema

    order_cls = _protobuf_class()
    topic = topic_in(namespace)
    producer = client.create_producer(topic, schema=ProtobufNativeSchema(order_cls))
    producer.send(order_cls(id="o-1", quantity=3))
    consumer = client.subscribe(topic, "pb", schema=ProtobufNativeSchema(order_cls),
                                initial_position=magnetar.InitialPosition.Earliest)
    value = consumer.receive(10_000).value()
    assert isinstance(value, order_cls) and (value.id, value.quantity) == ("o-1", 3)
    stored = admin.get_schema(topic)
    assert stored["type"] == "PROTOBUF_NATIVE"
    definition = json.loads(stored["data"])
    assert definition["rootMessageTypeName"] == "shop.Order"
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(definition["fileDescriptorSet"]))
    assert [f.name for f in files.file] == [definition["rootFileDescriptorName"]]
    with pytest.raises(TypeError):
        producer.send("not a protobuf message")


class Person1(Record):  # pulsar-client's suite evolves records whose names differ
    name = String()
    age = Integer()


class Person2(Record):
    _sorted_fields = True
    name = String()
    age = Integer(required=True)


def test_a_record_of_another_name_evolves_a_topic_as_in_pulsar(client: magnetar.Client, admin: AdminClient,
                                                              namespace: str) -> None:
    """Pulsar's Avro check matches records by their fields, not their names (as its suite's
    test_schema_evolve: `User1` then `User2` under FORWARD)."""
    admin.set_schema_compatibility_strategy(namespace, "FORWARD")
    topic = topic_in(namespace)
    first = client.create_producer(topic, schema=AvroSchema(Person1))
    consumer = client.subscribe(topic, "s", schema=AvroSchema(Person1), initial_position=magnetar.InitialPosition.Earliest)
    second = client.create_producer(topic, schema=AvroSchema(Person2))  # was name_mismatch: IncompatibleSchema
    first.send(Person1(name="one", age=1))
    second.send(Person2(name="two", age=2))
    got = [consumer.receive(10_000).value() for _ in range(2)]
    assert [(p.name, p.age) for p in got] == [("one", 1), ("two", 2)]
    admin.set_schema_compatibility_strategy(namespace, "FULL")
    with pytest.raises(exceptions.IncompatibleSchema, match="FULL"):  # the fields still count
        client.create_producer(topic, schema=AvroSchema(Incompatible))
