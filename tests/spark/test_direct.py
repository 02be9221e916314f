"""Direct reads (magnetar_spark.direct): executors fetch sealed segments from the emulated S3 with the
broker's presigned URLs and give exactly the rows of a read through the broker."""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from http_helpers import HTTP
from magnetar_spark import SCHEMA, MagnetarDataSource
from magnetar_spark.direct import DirectRange
from magnetar_spark.reading import TopicRange

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]


def wait_sealed(url: str, topic: str, count: int) -> None:
    """Until the read plan says the first `count` entries are sealed."""
    path = topic.replace("://", "/")
    deadline = time.monotonic() + 30
    while HTTP.post(f"{url}/magnetar/v1/reader/{path}/plan", json={"urls": False},
                     timeout=30).json()["sealedEntryId"] < count:
        assert time.monotonic() < deadline, f"{topic}: not sealed in time"
        time.sleep(0.2)


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=lambda r: r[3])  # by __messageId


def test_direct_reads_give_exactly_the_broker_rows(spark: Any, cluster: Any, orders: dict[str, Any]) -> None:
    topic = orders["topic"]
    wait_sealed(cluster.url, topic, 60)
    options = {"service.url": cluster.url, "topic": topic, "partitions": "3"}
    parts = MagnetarDataSource(options).reader(SCHEMA).partitions()
    assert len(parts) == 3 and all(isinstance(p, DirectRange) for p in parts)  # all sealed: no broker task
    assert next(s.first_entry for p in parts for s in p.slices) == 0
    direct = _rows(spark.read.format("magnetar").options(**options).load())
    broker = _rows(spark.read.format("magnetar").options(**options, directReads="false").load())
    assert len(direct) == 300 and direct == broker
    assert {bytes(r[0]) for r in direct} == {m["value"] for m in orders["messages"]}  # (Spark 4.0: bytearray)
    # a range inside the topic, cut inside segments
    ranged = {**options, "startingOffsets": f'{{"{topic}": 7}}', "endingOffsets": f'{{"{topic}": 51}}'}
    direct = _rows(spark.read.format("magnetar").options(**ranged).load())
    broker = _rows(spark.read.format("magnetar").options(**ranged, directReads="false").load())
    assert len(direct) == 44 * 5 and direct == broker


def test_a_range_past_the_seal_reads_its_tail_through_the_broker(cluster: Any, orders: dict[str, Any]) -> None:
    topic = orders["topic"]
    wait_sealed(cluster.url, topic, 60)
    options = {"service.url": cluster.url, "topic": topic, "partitions": "2"}
    reader = MagnetarDataSource(options).reader(SCHEMA)
    from magnetar_spark import direct

    parts = direct.plan(reader.opts, [(topic, 10, 60), (topic + "-unsealed-none", 0, 0)])
    assert all(isinstance(p, DirectRange) for p in parts)
    covered = [(s.first_entry, s.end_entry) for p in parts for s in p.slices]
    assert covered[0][0] == 10 and covered[-1][1] == 60
    assert all(a[1] == b[0] for a, b in itertools.pairwise(covered))
    # past the seal: entries not in any segment yet are the broker's (a range it waits on)
    beyond = direct.plan(reader.opts, [(topic, 50, 1_000)])
    assert isinstance(beyond[-1], TopicRange) and (beyond[-1].start, beyond[-1].end) == (60, 1_000)
    # forced off: broker ranges only
    forced = MagnetarDataSource({**options, "directReads": "false"}).reader(SCHEMA).partitions()
    assert all(isinstance(p, TopicRange) for p in forced)


def test_direct_tasks_need_no_aws_credentials(cluster: Any, orders: dict[str, Any], tmp_path: Path) -> None:
    """An executor's side alone, in a process with no AWS configuration at all: the URLs carry the
    authority. A slice whose URL no longer works (expired: 403; here a key that is not there: 404)
    is planned again."""
    topic = orders["topic"]
    wait_sealed(cluster.url, topic, 60)
    reader = MagnetarDataSource({"service.url": cluster.url, "topic": topic, "partitions": "1"}).reader(SCHEMA)
    (part,) = reader.partitions()
    assert isinstance(part, DirectRange)
    broken = DirectRange(0, [replace(s, url=s.url.replace(".seg?", ".seg-gone?")) for s in part.slices])
    assert HTTP.get(broken.slices[0].url, timeout=30).status_code == 404
    task = tmp_path / "task.pickle"
    task.write_bytes(pickle.dumps((reader.opts, [part, broken])))
    script = ("import pickle, sys\n"
              "from magnetar_spark import direct\n"
              "opts, parts = pickle.loads(open(sys.argv[1], 'rb').read())\n"
              "print([sum(b.num_rows for b in direct.read(opts, p)) for p in parts])\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(REPO / "spark"),
           "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent"}
    done = subprocess.run([sys.executable, "-c", script, str(task)], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[300, 300]"
