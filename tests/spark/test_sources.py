"""Batch reads of several topics, partitioned topics and patterns; offsets; failOnDataLoss."""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any

import httpx
import pytest

from http_helpers import HTTP
from magnetar_spark import message_id_from_bytes


def produce(url: str, topic: str, values: list[str], key: str | None = None) -> None:
    """One entry per value (so entry ids are dense and known)."""
    path = topic.replace("://", "/")
    with httpx.Client(base_url=url, timeout=30) as http:
        for v in values:
            message: dict[str, Any] = {"payload": base64.b64encode(v.encode()).decode()}
            if key:
                message["key"] = key
            response = http.post(f"/topics/{path}", json={"messages": [message]})
            assert response.status_code == 200, response.text


def make_namespace(url: str) -> str:
    name = f"public/spark-{uuid.uuid4().hex[:8]}"
    response = HTTP.put(f"{url}/admin/v2/namespaces/{name}", timeout=30)
    assert response.status_code in (200, 204), response.text
    return name


def make_partitioned(url: str, topic: str, partitions: int) -> None:
    path = topic.replace("://", "/")
    response = HTTP.put(f"{url}/admin/v2/{path}/partitions", json=partitions, timeout=30)
    assert response.status_code in (200, 204), response.text


def wait_readable(url: str, topic: str, count: int) -> None:
    """Until the first `count` entries of `topic` are readable (sealed)."""
    path = topic.replace("://", "/")
    deadline = time.monotonic() + 30
    while True:
        body = HTTP.post(f"{url}/magnetar/v1/reader/{path}/read", json={"startEntryId": 0, "maxEntries": 1000},
                          timeout=30).json()
        if len(body.get("messages") or []) >= count:
            return
        assert time.monotonic() < deadline, f"{topic}: entries not readable in time"
        time.sleep(0.2)


def load(spark: Any, url: str, **options: Any) -> Any:
    reader = spark.read.format("magnetar").option("service.url", url)
    for name, value in options.items():
        reader = reader.option(name, value if isinstance(value, str) else json.dumps(value))
    return reader.load()


def values(df: Any) -> list[str]:
    return sorted(bytes(r["value"]).decode() for r in df.select("value").collect())


@pytest.mark.spark
def test_topics_partitioned_and_pattern(cluster: Any, spark: Any) -> None:
    ns = make_namespace(cluster.url)
    plain, parted, other = (f"persistent://{ns}/{n}" for n in ("orders-eu", "orders-us", "audit"))
    make_partitioned(cluster.url, parted, 3)
    produce(cluster.url, plain, ["eu-0", "eu-1"])
    for i in range(3):
        produce(cluster.url, f"{parted}-partition-{i}", [f"us-{i}-0", f"us-{i}-1"])
    produce(cluster.url, other, ["audit-0"])

    whole = load(spark, cluster.url, topic=parted)  # every partition
    assert values(whole) == sorted(f"us-{i}-{j}" for i in range(3) for j in range(2))
    assert {r["__topic"] for r in whole.select("__topic").collect()} == {f"{parted}-partition-{i}" for i in range(3)}

    both = load(spark, cluster.url, topics=f"{plain},{parted}")
    assert len(values(both)) == 8

    matched = load(spark, cluster.url, topicsPattern=f"{ns}/orders-.*")
    assert values(matched) == values(both)

    # per-partition offsets: a JSON map of entry ids (start inclusive, end exclusive)
    sliced = load(spark, cluster.url, topics=f"{plain},{parted}",
                  startingOffsets={plain: 1, f"{parted}-partition-2": 1},
                  endingOffsets={f"{parted}-partition-0": 1})
    assert values(sliced) == ["eu-1", "us-0-0", "us-1-0", "us-1-1", "us-2-1"]
    ids = {message_id_from_bytes(bytes(r["__messageId"])) for r in sliced.collect()}
    assert len(ids) == 5
    assert load(spark, cluster.url, topic=plain, startingOffsets="latest").count() == 0


@pytest.mark.spark
def test_fail_on_data_loss(cluster: Any, spark: Any) -> None:
    ns = make_namespace(cluster.url)
    topic = f"persistent://{ns}/trimmed"
    produce(cluster.url, topic, [f"old-{i}" for i in range(6)])
    wait_readable(cluster.url, topic, 6)
    # no subscription, no retention: the maintenance run deletes the sealed segments
    response = HTTP.post(f"{cluster.url}/_magnetar/local/schedules/maintenance", json={"topics": [topic]},
                          timeout=120)
    assert response.status_code == 200, response.text
    path = topic.replace("://", "/")
    first = HTTP.post(f"{cluster.url}/magnetar/v1/reader/{path}/read", json={"startEntryId": 0, "maxEntries": 1},
                       timeout=30).json()["firstEntryId"]
    assert first > 0, "the run trimmed nothing"
    produce(cluster.url, topic, ["new-0", "new-1"])

    # a read that points below what retention kept fails, naming the missing range
    with pytest.raises(Exception, match=rf"data loss on {topic}: entries 0\.\.{first - 1} were deleted"):
        load(spark, cluster.url, topic=topic, startingOffsets={topic: 0}, partitions="1").collect()
    # failOnDataLoss=false: skipped (a warning), the rest is read
    kept = load(spark, cluster.url, topic=topic, startingOffsets={topic: 0}, failOnDataLoss="false")
    assert values(kept) == sorted([f"old-{i}" for i in range(first, 6)] + ["new-0", "new-1"])
    # earliest means what is kept: no error
    assert values(load(spark, cluster.url, topic=topic)) == values(kept)
