"""`spark.read.format("magnetar")` against a local cluster (emulator + HTTP API) and a local Spark."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from magnetar_spark import (
    SCHEMA,
    message_id_bytes,
    message_id_from_bytes,
    split_range,
)

SHORT_TOPIC = "spark-orders"  # = persistent://public/default/spark-orders, the `orders` fixture's topic
PER_ENTRY = 5  # messages per entry in the `orders` fixture


# --- helpers without Spark ---------------------------------------------------------------------
def test_message_id_bytes_layout() -> None:
    data = message_id_bytes("7:42:-1:3")
    assert len(data) == 32
    assert data == (7).to_bytes(8, "big") + (42).to_bytes(8, "big") + (-1).to_bytes(8, "big", signed=True) + (
        3
    ).to_bytes(8, "big")
    assert message_id_from_bytes(data) == "7:42:-1:3"
    assert message_id_from_bytes(message_id_bytes("1:2")) == "1:2:-1:-1"


def test_split_range() -> None:
    assert split_range(0, 59, 4) == [(0, 14), (15, 29), (30, 44), (45, 59)]
    assert split_range(0, 9, 3) == [(0, 3), (4, 6), (7, 9)]
    assert split_range(5, 6, 4) == [(5, 5), (6, 6)]
    assert split_range(0, -1, 4) == []
    assert split_range(10, 5, 2) == []
    ranges = split_range(3, 1002, 7)
    assert ranges[0][0] == 3 and ranges[-1][1] == 1002
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(ranges))


def _load(spark: Any, url: str, topic: str, **options: Any) -> Any:
    reader = spark.read.format("magnetar").option("service.url", url).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, str(value))
    return reader.load()


def _rows(df: Any) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    selected = df.select(
        "value",
        "__key",
        "__topic",
        "__messageId",
        F.expr("unix_millis(__publishTime)").alias("publishMs"),
        F.expr("unix_millis(__eventTime)").alias("eventMs"),
        "__messageProperties",
    )
    return [row.asDict() for row in selected.collect()]


# --- reads -------------------------------------------------------------------------------------
@pytest.mark.spark
def test_read_whole_topic(cluster: Any, orders: dict[str, Any], spark: Any) -> None:
    df = _load(spark, cluster.url, orders["topic"])

    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("value", "binary"),
        ("__key", "string"),
        ("__topic", "string"),
        ("__messageId", "binary"),
        ("__publishTime", "timestamp"),
        ("__eventTime", "timestamp"),
        ("__messageProperties", "map<string,string>"),
    ]
    assert df.schema == SCHEMA
    assert df.rdd.getNumPartitions() == 4  # the default `partitions`

    rows = _rows(df)
    assert len(rows) == 300  # 60 entries of 5 messages
    assert {bytes(r["value"]) for r in rows} == {m["value"] for m in orders["messages"]}

    by_id = {m["messageId"]: m for m in orders["messages"]}
    seen = set()
    for row in rows:
        mid = message_id_from_bytes(bytes(row["__messageId"]))
        assert bytes(row["__messageId"]) == message_id_bytes(mid)
        expected = by_id[mid]  # every id is one the producer got back
        seen.add(mid)
        assert bytes(row["value"]) == expected["value"]
        assert row["__key"] == expected["key"]
        assert row["__messageProperties"] == expected["properties"]
        assert row["eventMs"] == expected["eventTime"]  # None where the producer set none
        assert row["__topic"] == orders["topic"]
        assert row["publishMs"] is not None and row["publishMs"] > 1_600_000_000_000
    assert seen == set(by_id)


@pytest.mark.spark
def test_partitions_short_name_and_bounds(cluster: Any, orders: dict[str, Any], spark: Any) -> None:
    topic = orders["topic"]

    def key(r: dict[str, Any]) -> tuple[bytes, bytes]:
        return bytes(r["__messageId"]), bytes(r["value"])

    whole = sorted(key(r) for r in _rows(_load(spark, cluster.url, topic)))

    three = _load(spark, cluster.url, SHORT_TOPIC, partitions=3)
    assert three.rdd.getNumPartitions() == 3
    assert sorted(key(r) for r in _rows(three)) == whole

    # entries 10..19 inclusive; a small page size makes each task page several times
    bounded = _rows(
        _load(spark, cluster.url, topic, startingEntryId=10, endingEntryId=19, pageSize=3, partitions=2)
    )
    entries = {int(message_id_from_bytes(bytes(r["__messageId"])).split(":")[1]) for r in bounded}
    assert len(bounded) == 10 * PER_ENTRY
    assert entries == set(range(10, 20))

    # an ending id past the end is capped at the snapshot; a start past the end reads nothing
    assert _load(spark, cluster.url, topic, startingEntryId=55, endingEntryId=10_000).count() == 5 * PER_ENTRY
    assert _load(spark, cluster.url, topic, startingEntryId=1_000).count() == 0


@pytest.mark.spark
def test_empty_topic(cluster: Any, orders: dict[str, Any], spark: Any) -> None:
    df = _load(spark, cluster.url, orders["empty_topic"])
    assert df.count() == 0
    assert df.schema == SCHEMA


@pytest.mark.spark
def test_missing_topic_reports_the_reason(cluster: Any, spark: Any) -> None:
    with pytest.raises(Exception) as failure:
        _load(spark, cluster.url, "persistent://public/default/does-not-exist").collect()
    text = str(failure.value)
    assert "Topic persistent://public/default/does-not-exist not found" in text
    assert "HTTP 404" in text


@pytest.mark.spark
def test_bad_options_are_refused(cluster: Any, spark: Any) -> None:
    with pytest.raises(Exception, match=r"service\.url"):
        spark.read.format("magnetar").option("topic", SHORT_TOPIC).load().collect()
    with pytest.raises(Exception, match="'partitions' must be >= 1"):
        _load(spark, cluster.url, SHORT_TOPIC, partitions=0).collect()
    with pytest.raises(Exception, match="Invalid topic"):
        _load(spark, cluster.url, "persistent://public/default/a/b").collect()
