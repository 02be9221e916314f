"""Typed values: `pulsar.schema`'s names (`from magnetar.schema import *` as `from pulsar.schema import *`).

    class User(Record):
        name = String(required=True)
        age = Integer()

    producer = client.create_producer(topic, schema=AvroSchema(User))
    producer.send(User(name="ada", age=36))
    consumer = client.subscribe(topic, "sub", schema=AvroSchema(User))
    consumer.receive().value()  # a User
"""

from magnetar.schema.definition import (
    Array,
    Boolean,
    Bytes,
    CustomEnum,
    Double,
    Field,
    Float,
    Integer,
    Long,
    Map,
    Null,
    Record,
    String,
)
from magnetar.schema.schema import (
    BooleanSchema,
    BytesSchema,
    DoubleSchema,
    FloatSchema,
    Int8Schema,
    Int16Schema,
    Int32Schema,
    Int64Schema,
    JsonSchema,
    KeyValueEncodingType,
    KeyValueSchema,
    Schema,
    SchemaInfo,
    StringSchema,
)
from magnetar.schema.schema_avro import AvroSchema
from magnetar.schema.schema_protobuf import ProtobufNativeSchema

__all__ = ["Array", "AvroSchema", "Boolean", "BooleanSchema", "Bytes", "BytesSchema", "CustomEnum", "Double",
           "DoubleSchema", "Field", "Float", "FloatSchema", "Int8Schema", "Int16Schema", "Int32Schema", "Int64Schema",
           "Integer", "JsonSchema", "KeyValueEncodingType", "KeyValueSchema", "Long", "Map", "Null",
           "ProtobufNativeSchema", "Record", "Schema", "SchemaInfo", "String", "StringSchema"]
