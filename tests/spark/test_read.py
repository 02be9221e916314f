"""`spark.read.format("magnetar")` against a local cluster (emulator + HTTP API) and a local Spark."""

from __future__ import annotations

import base64
import itertools
import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from magnetar_spark import (
    SCHEMA,
    MagnetarDataSource,
    message_id_bytes,
    message_id_from_bytes,
    split_range,
)

pyspark = pytest.importorskip("pyspark")

TOPIC = "persistent://public/default/spark-orders"
SHORT_TOPIC = "spark-orders"
EMPTY_TOPIC = "persistent://public/default/spark-empty"
ENTRIES = 60
PER_ENTRY = 5


def _java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return (
        bool(home and os.path.exists(os.path.join(home, "bin", "java"))) or shutil.which("java") is not None
    )


needs_jvm = pytest.mark.skipif(not _java_available(), reason="no JVM (set JAVA_HOME or put java on PATH)")


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


# --- fixtures ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from magnetar.local.cluster import LocalCluster, free_port

    c = LocalCluster(port=free_port(), aws_port=free_port()).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def produced(cluster: Any) -> list[dict[str, Any]]:
    """60 entries of 5 messages; what each message is and the id the broker gave it."""
    out: list[dict[str, Any]] = []
    with httpx.Client(base_url=cluster.url, timeout=30) as http:
        for e in range(ENTRIES):
            messages = []
            for b in range(PER_ENTRY):
                n = e * PER_ENTRY + b
                message: dict[str, Any] = {
                    "payload": base64.b64encode(f"order-{n}".encode() + bytes([n % 256])).decode(),
                    "properties": {"n": str(n), "entry": str(e)},
                }
                if n % 3:
                    message["key"] = f"k{n % 7}"
                if n % 2 == 0:
                    message["eventTime"] = 1_700_000_000_000 + n
                messages.append(message)
            response = http.post(
                "/topics/persistent/public/default/spark-orders", json={"messages": messages}
            )
            assert response.status_code == 200, response.text
            ids = [r["messageId"] for r in response.json()["messagePublishResults"]]
            assert len(ids) == PER_ENTRY
            for message, mid in zip(messages, ids, strict=True):
                out.append(
                    {
                        "value": base64.b64decode(message["payload"]),
                        "key": message.get("key"),
                        "properties": message["properties"],
                        "eventTime": message.get("eventTime"),
                        "messageId": mid,
                    }
                )
        response = http.put("/admin/v2/persistent/public/default/spark-empty")
        assert response.status_code in (204, 409), response.text
    return out


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    if not _java_available():
        pytest.skip("no JVM (set JAVA_HOME or put java on PATH)")
    # The Python workers must be this interpreter (the venv with magnetar and magnetar_spark).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("magnetar-spark-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(MagnetarDataSource)
    try:
        yield session
    finally:
        session.stop()


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
@needs_jvm
def test_read_whole_topic(cluster: Any, produced: list[dict[str, Any]], spark: Any) -> None:
    df = _load(spark, cluster.url, TOPIC)

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
    assert len(rows) == ENTRIES * PER_ENTRY == 300
    assert {bytes(r["value"]) for r in rows} == {p["value"] for p in produced}

    by_id = {p["messageId"]: p for p in produced}
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
        assert row["__topic"] == TOPIC
        assert row["publishMs"] is not None and row["publishMs"] > 1_600_000_000_000
    assert seen == set(by_id)


@pytest.mark.spark
@needs_jvm
def test_partitions_short_name_and_bounds(cluster: Any, produced: list[dict[str, Any]], spark: Any) -> None:
    def key(r: dict[str, Any]) -> tuple[bytes, bytes]:
        return bytes(r["__messageId"]), bytes(r["value"])

    whole = sorted(key(r) for r in _rows(_load(spark, cluster.url, TOPIC)))

    three = _load(spark, cluster.url, SHORT_TOPIC, partitions=3)
    assert three.rdd.getNumPartitions() == 3
    assert sorted(key(r) for r in _rows(three)) == whole

    # entries 10..19 inclusive; a small page size makes each task page several times
    bounded = _rows(
        _load(spark, cluster.url, TOPIC, startingEntryId=10, endingEntryId=19, pageSize=3, partitions=2)
    )
    entries = {int(message_id_from_bytes(bytes(r["__messageId"])).split(":")[1]) for r in bounded}
    assert len(bounded) == 10 * PER_ENTRY
    assert entries == set(range(10, 20))

    # an ending id past the end is capped at the snapshot; a start past the end reads nothing
    assert _load(spark, cluster.url, TOPIC, startingEntryId=55, endingEntryId=10_000).count() == 5 * PER_ENTRY
    assert _load(spark, cluster.url, TOPIC, startingEntryId=1_000).count() == 0


@pytest.mark.spark
@needs_jvm
def test_empty_topic(cluster: Any, produced: list[dict[str, Any]], spark: Any) -> None:
    df = _load(spark, cluster.url, EMPTY_TOPIC)
    assert df.count() == 0
    assert df.schema == SCHEMA


@pytest.mark.spark
@needs_jvm
def test_missing_topic_reports_the_reason(cluster: Any, spark: Any) -> None:
    with pytest.raises(Exception) as failure:
        _load(spark, cluster.url, "persistent://public/default/does-not-exist").collect()
    text = str(failure.value)
    assert "Topic persistent://public/default/does-not-exist not found" in text
    assert "HTTP 404" in text


@pytest.mark.spark
@needs_jvm
def test_missing_options_are_refused(cluster: Any, spark: Any) -> None:
    with pytest.raises(Exception, match=r"service\.url"):
        spark.read.format("magnetar").option("topic", TOPIC).load().collect()
    with pytest.raises(Exception, match="partitions"):
        _load(spark, cluster.url, TOPIC, partitions=0).collect()
