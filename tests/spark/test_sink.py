"""`df.write.format("magnetar")` / `writeStream`: rows published, batched, deduplicated on retry."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.spark.test_sources import load, make_namespace, make_partitioned, produce

from http_helpers import HTTP


def dedup_namespace(url: str) -> str:
    ns = make_namespace(url)
    response = HTTP.post(f"{url}/admin/v2/namespaces/{ns}/deduplication", json=True, timeout=30)
    assert response.status_code in (200, 204), response.text
    return ns


def test_a_task_run_twice_publishes_once(cluster: Any) -> None:
    """The same write task twice (a Spark retry): same producer, same sequence ids -> duplicates."""
    from pyspark.sql import Row
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    from magnetar_spark import MagnetarDataSource

    ns = dedup_namespace(cluster.url)
    topic = f"persistent://{ns}/sink-retry"
    schema = StructType([StructField("value", BinaryType()), StructField("__key", StringType())])
    source = MagnetarDataSource({"service.url": cluster.url, "topic": topic, "batchSize": "7"})
    writer = source.writer(schema, False)
    rows = [Row(value=f"m{i}".encode(), __key=f"k{i % 3}") for i in range(50)]

    first = writer.write(iter(rows))
    assert (first.published, first.duplicates) == (50, 0)
    again = writer.write(iter(rows))  # the retried task
    assert (again.published, again.duplicates) == (0, 50)

    path = topic.replace("://", "/")
    last = HTTP.get(f"{cluster.url}/admin/v2/{path}/lastMessageId", timeout=30).json()["entryId"]
    assert last == 7  # 50 messages in entries of 7: 8 entries, 0..7, stored once


def test_a_target_without_deduplication_is_warned_about(cluster: Any, caplog: pytest.LogCaptureFixture) -> None:
    from magnetar_spark.options import SourceOptions
    from magnetar_spark.sink import deduplication_status

    plain = f"persistent://{make_namespace(cluster.url)}/sink-plain"
    produce(cluster.url, plain, ["x"])
    with caplog.at_level("WARNING", logger="magnetar_spark"):
        assert deduplication_status(SourceOptions({"service.url": cluster.url, "topic": plain}, sink=True)) == "Disabled"
    assert "deduplication is off" in caplog.text
    deduped = f"persistent://{dedup_namespace(cluster.url)}/sink-deduped"
    produce(cluster.url, deduped, ["x"])
    assert deduplication_status(SourceOptions({"service.url": cluster.url, "topic": deduped}, sink=True)) == "Enabled"
    missing = f"persistent://{make_namespace(cluster.url)}/not-yet"
    assert deduplication_status(SourceOptions({"service.url": cluster.url, "topic": missing}, sink=True)) is None


@pytest.mark.spark
def test_write_and_write_stream(cluster: Any, spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    ns = dedup_namespace(cluster.url)
    target = f"persistent://{ns}/sink-parted"
    make_partitioned(cluster.url, target, 2)
    rows = [(f"v{i}".encode(), f"k{i % 5}", {"i": str(i)}, datetime(2026, 1, 1, 0, 0, i, tzinfo=UTC))
            for i in range(20)]
    df = spark.createDataFrame(rows, "value binary, __key string, __messageProperties map<string,string>, "
                                     "__eventTime timestamp").repartition(2)
    df.write.format("magnetar").option("service.url", cluster.url).option("topic", target).mode("append").save()

    back = load(spark, cluster.url, topics=target).collect()
    assert sorted(bytes(r["value"]).decode() for r in back) == sorted(f"v{i}" for i in range(20))
    for r in back:
        i = int(r["__messageProperties"]["i"])
        assert r["__key"] == f"k{i % 5}"
        assert r["__eventTime"].replace(tzinfo=UTC) == datetime(2026, 1, 1, 0, 0, i, tzinfo=UTC)
    by_key: dict[str, set[str]] = {}
    for r in back:
        by_key.setdefault(r["__key"], set()).add(r["__topic"])
    assert all(len(topics) == 1 for topics in by_key.values())  # a key goes to one partition

    # a stream copying a topic into another, __topic from the rows
    source = f"persistent://{ns}/sink-source"
    copy = f"persistent://{ns}/sink-copy"
    produce(cluster.url, source, [f"s{i}" for i in range(6)])
    query = (
        spark.readStream.format("magnetar").option("service.url", cluster.url).option("topics", source)
        .option("startingOffsets", "earliest").load()
        .select("value", "__key", F.lit(copy).alias("__topic"))
        .writeStream.format("magnetar").option("service.url", cluster.url)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start()
    )
    assert query.awaitTermination(180) and query.exception() is None
    copied = load(spark, cluster.url, topics=copy).collect()
    assert sorted(bytes(r["value"]).decode() for r in copied) == [f"s{i}" for i in range(6)]

    # the sink's commit of the last micro-batch lost (a crash after publishing): the restarted
    # query replays that batch under the same producer and sequence ids -> stored once
    commits = tmp_path / "checkpoint" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)  # Hadoop's checksum beside it
    query = (
        spark.readStream.format("magnetar").option("service.url", cluster.url).option("topics", source)
        .option("startingOffsets", "earliest").load()
        .select("value", "__key", F.lit(copy).alias("__topic"))
        .writeStream.format("magnetar").option("service.url", cluster.url)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start()
    )
    assert query.awaitTermination(180) and query.exception() is None
    assert any(p["numInputRows"] == 6 for p in query.recentProgress), "the batch was not replayed"
    assert load(spark, cluster.url, topics=copy).count() == 6
