"""`spark.readStream.format("magnetar")`: offsets in the checkpoint, restart, availableNow, rate cap,
new partitions and new pattern-matching topics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.spark.test_sources import make_namespace, make_partitioned, produce

from http_helpers import HTTP


def run_available_now(spark: Any, url: str, checkpoint: Path, output: Path, **options: str) -> Any:
    """One availableNow run of topic(s) -> Parquet: the backlog, then the query stops by itself."""
    reader = spark.readStream.format("magnetar").option("service.url", url)
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (
        reader.load()
        .selectExpr("cast(value as string) as v", "__topic", "hex(__messageId) as id")
        .writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "availableNow did not stop"
    assert query.exception() is None
    return query


def written(spark: Any, output: Path) -> list[str]:
    rows = spark.read.parquet(str(output)).collect()
    assert len({r["id"] + r["__topic"] for r in rows}) == len(rows), "a message written twice"
    return sorted(r["v"] for r in rows)


@pytest.mark.spark
def test_restart_reads_every_message_exactly_once(cluster: Any, spark: Any, tmp_path: Path) -> None:
    ns = make_namespace(cluster.url)
    topic = f"persistent://{ns}/stream"
    make_partitioned(cluster.url, topic, 2)
    produce(cluster.url, f"{topic}-partition-0", [f"a{i}" for i in range(5)])
    produce(cluster.url, f"{topic}-partition-1", [f"b{i}" for i in range(4)])
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"

    # a rate cap of 3 entries per micro-batch: the backlog of 9 in several micro-batches
    query = run_available_now(spark, cluster.url, checkpoint, output, topics=topic, startingOffsets="earliest",
                              maxEntriesPerTrigger="3")
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(batches) >= 3 and all(p["numInputRows"] <= 3 for p in batches)
    assert written(spark, output) == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(4)])
    offsets = batches[-1]["sources"][0]["endOffset"]
    assert '"persistent://' in str(offsets) and "-partition-1" in str(offsets)

    # stopped; more messages, a new partition; the restart goes on from the checkpoint
    produce(cluster.url, f"{topic}-partition-0", ["a5", "a6"])
    response = HTTP.post(f"{cluster.url}/admin/v2/{topic.replace('://', '/')}/partitions", json=3, timeout=30)
    assert response.status_code in (200, 204), response.text
    produce(cluster.url, f"{topic}-partition-2", ["c0", "c1"])
    run_available_now(spark, cluster.url, checkpoint, output, topics=topic, startingOffsets="earliest")
    assert written(spark, output) == sorted(
        [f"a{i}" for i in range(7)] + [f"b{i}" for i in range(4)] + ["c0", "c1"])

    # nothing new: a third run adds nothing
    run_available_now(spark, cluster.url, checkpoint, output, topics=topic)
    assert len(written(spark, output)) == 13


@pytest.mark.spark
def test_pattern_picks_up_new_topics(cluster: Any, spark: Any, tmp_path: Path) -> None:
    ns = make_namespace(cluster.url)
    produce(cluster.url, f"persistent://{ns}/events-1", ["e1-0", "e1-1"])
    produce(cluster.url, f"persistent://{ns}/other", ["nope"])
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"
    options = {"topicsPattern": f"{ns}/events-.*", "startingOffsets": "earliest"}
    run_available_now(spark, cluster.url, checkpoint, output, **options)
    assert written(spark, output) == ["e1-0", "e1-1"]
    produce(cluster.url, f"persistent://{ns}/events-2", ["e2-0"])
    run_available_now(spark, cluster.url, checkpoint, output, **options)
    assert written(spark, output) == ["e1-0", "e1-1", "e2-0"]
