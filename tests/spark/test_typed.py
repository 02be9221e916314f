"""Typed Spark reads of topics with a schema: the Avro -> Spark mapping of the Pulsar Spark
connector, a topic written under two schema versions read as one DataFrame under the latest,
JSON and primitive topics."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

import magnetar
from magnetar.schema import AvroSchema, Integer, JsonSchema, Long, Record, String, StringSchema
from magnetar_spark.typed import TypedTopic, spark_type


def test_avro_to_spark_types_as_the_pulsar_connector_maps_them() -> None:
    avro = {"type": "record", "name": "R", "fields": [
        {"name": "b", "type": "boolean"}, {"name": "i", "type": ["null", "int"]},
        {"name": "l", "type": "long"}, {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 4}},
        {"name": "arr", "type": {"type": "array", "items": ["null", "string"]}},
        {"name": "m", "type": {"type": "map", "values": "double"}},
        {"name": "wide", "type": ["int", "long"]},
        {"name": "either", "type": ["null", "string", "long"]},
        {"name": "inner", "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "string"}]}},
        {"name": "again", "type": ["null", "In"]},
    ]}
    data_type, nullable = spark_type(avro)
    assert not nullable and isinstance(data_type, StructType)
    types = {f.name: (f.dataType, f.nullable) for f in data_type.fields}
    inner = StructType([StructField("x", StringType(), False)])
    assert types == {
        "b": (types["b"][0], False), "i": (IntegerType(), True), "l": (LongType(), False), "d": (DateType(), False),
        "ts": (TimestampType(), False), "dec": (DecimalType(9, 2), False), "e": (StringType(), False),
        "f": (BinaryType(), False), "arr": (ArrayType(StringType(), True), False),
        "m": (MapType(StringType(), DoubleType(), False), False), "wide": (LongType(), False),
        "either": (StructType([StructField("member0", StringType(), True), StructField("member1", LongType(), True)]),
                   True),
        "inner": (inner, False), "again": (inner, True),
    }
    typed = TypedTopic.of([{"version": 0, "type": "AVRO", "data": __import__("json").dumps(avro)}])
    assert typed is not None
    row = typed.row({"payload": "", "schemaVersion": 7}, ("k",) * 6)  # undecodable bytes: a null row
    assert row[:len(data_type.fields)] == (None,) * len(data_type.fields)
    assert TypedTopic.of([{"version": 0, "type": "BYTES", "data": ""}]) is None
    value = {"b": True, "i": None, "l": 5, "d": 19000, "ts": 1_700_000_000_000, "dec": Decimal("1.25"), "e": "B",
             "f": b"abcd", "arr": ["x", None], "m": {"k": 0.5}, "wide": 3, "either": 9, "inner": {"x": "y"},
             "again": None}
    from magnetar_spark.typed import _convert

    converted = _convert(value, data_type, avro, {})
    assert converted[4] == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert converted[11] == (None, 9) and converted[12] == ("y",) and converted[13] is None


class UserV1(Record):
    name = String(required=True)
    age = Integer(required=True)


class UserV2(Record):
    name = String(required=True)
    age = Integer(required=True)
    email = String(default="unknown", required_default=True)
    visits = Long(default=0, required_default=True)


UserV1.__name__ = UserV2.__name__ = "User"


def _load(spark: Any, url: str, topic: str) -> Any:
    return spark.read.format("magnetar").option("service.url", url).option("topic", topic).load()


@pytest.mark.spark
def test_a_topic_with_two_schema_versions_reads_as_typed_columns(cluster: Any, spark: Any) -> None:
    topic = f"persistent://public/default/spark-typed-{uuid.uuid4().hex[:8]}"
    client = magnetar.Client(cluster.url)
    v1 = client.create_producer(topic, schema=AvroSchema(UserV1))
    for i in range(3):
        v1.send(UserV1(name=f"old-{i}", age=20 + i), partition_key=f"k{i}", properties={"v": "1"})
    v2 = client.create_producer(topic, schema=AvroSchema(UserV2))
    for i in range(2):
        v2.send(UserV2(name=f"new-{i}", age=30 + i, email=f"n{i}@example.com", visits=i))
    client.close()
    df = _load(spark, cluster.url, topic)
    assert df.columns == ["name", "age", "email", "visits", "__key", "__topic", "__messageId", "__publishTime",
                          "__eventTime", "__messageProperties"]
    types = {f.name: f.dataType for f in df.schema.fields}
    assert types["age"] == IntegerType() and types["visits"] == LongType() and types["email"] == StringType()
    rows = sorted((r.asDict() for r in df.collect()), key=lambda r: r["name"])
    assert [(r["name"], r["age"], r["email"], r["visits"]) for r in rows] == [
        ("new-0", 30, "n0@example.com", 0), ("new-1", 31, "n1@example.com", 1),
        ("old-0", 20, "unknown", 0), ("old-1", 21, "unknown", 0), ("old-2", 22, "unknown", 0)]
    old = next(r for r in rows if r["name"] == "old-1")
    assert old["__key"] == "k1" and old["__topic"] == topic and old["__messageProperties"] == {"v": "1"}
    assert len(old["__messageId"]) == 32 and old["__publishTime"] is not None
    assert df.filter("age > 21 AND email = 'unknown'").count() == 1  # typed columns in SQL


@pytest.mark.spark
def test_json_and_string_topics(cluster: Any, spark: Any) -> None:
    json_topic = f"persistent://public/default/spark-json-{uuid.uuid4().hex[:8]}"
    string_topic = f"persistent://public/default/spark-str-{uuid.uuid4().hex[:8]}"
    client = magnetar.Client(cluster.url)
    client.create_producer(json_topic, schema=JsonSchema(UserV1)).send(UserV1(name="j", age=7))
    client.create_producer(string_topic, schema=StringSchema()).send("hello")
    client.close()
    row = _load(spark, cluster.url, json_topic).collect()[0]
    assert (row["name"], row["age"]) == ("j", 7)
    df = _load(spark, cluster.url, string_topic)
    assert df.schema["value"].dataType == StringType() and df.collect()[0]["value"] == "hello"


@pytest.mark.spark
def test_a_typed_topic_streams_as_typed_columns(cluster: Any, spark: Any, tmp_path: Any) -> None:
    topic = f"persistent://public/default/spark-typed-stream-{uuid.uuid4().hex[:8]}"
    client = magnetar.Client(cluster.url)
    producer = client.create_producer(topic, schema=AvroSchema(UserV1))
    for i in range(3):
        producer.send(UserV1(name=f"s{i}", age=i))
    client.close()
    query = (
        spark.readStream.format("magnetar").option("service.url", cluster.url).option("topic", topic)
        .option("startingOffsets", "earliest").load()
        .writeStream.format("memory").queryName("typed_stream")
        .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
    )
    assert query.awaitTermination(180) and query.exception() is None
    rows = spark.sql("SELECT name, age FROM typed_stream ORDER BY age").collect()
    assert [(r["name"], r["age"]) for r in rows] == [("s0", 0), ("s1", 1), ("s2", 2)]
