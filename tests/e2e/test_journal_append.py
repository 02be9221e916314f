"""The journal's append against the emulator's Kinesis limits: a group append's record may be most
of a MiB, and a shard takes 1 MiB/s, so a refused record is put again once the shard's budget has
refilled by about its size (not after the SDK's backoff of up to seconds)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import boto3
import pytest

from http_helpers import HTTP
from magnetar.adapters.aws.kinesis import KinesisJournal
from magnetar.core.errors import JournalRefused
from magnetar.local.cluster import free_port, start_emulator
from magnetar.local.fidelity import AwsFidelity


@pytest.fixture(scope="module")
def limited() -> Iterator[str]:
    port = free_port()
    proc = start_emulator("127.0.0.1", port, AwsFidelity(limits=True))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_records_refused_by_a_shards_write_throughput_are_put_again_promptly(
    limited: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {"AWS_ENDPOINT_URL": limited, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    stream = f"s-{uuid.uuid4().hex[:8]}"
    boto3.client("kinesis").create_stream(StreamName=stream, ShardCount=1)
    journal = KinesisJournal(stream)
    record = os.urandom(600 * 1024)
    started = time.monotonic()
    positions = [journal.append("hot", record) for _ in range(5)]  # 3 MB into a 1 MiB/s shard
    elapsed = time.monotonic() - started
    assert len({p.sequence for p in positions}) == 5
    assert positions[0].throttled_ms == 0  # the bucket starts full
    assert sum(p.throttled_ms for p in positions) >= 1000  # 3 MB at 1 MiB/s: the later ones waited
    refused = HTTP.get(f"{limited}/_magnetar/aws-limits").json()["refusals"]
    assert refused.get("kinesis.PutRecord:ProvisionedThroughputExceededException", 0) >= 2
    assert elapsed < 5.0, f"5 records of 600 KB took {elapsed:.1f} s (the shard's own pace is ~2.9 s)"


@pytest.fixture
def aws(limited: str, monkeypatch: pytest.MonkeyPatch) -> str:
    for name, value in {"AWS_ENDPOINT_URL": limited, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    return limited


def test_a_partitioned_topics_partitions_are_spread_evenly_over_the_shards(aws: str) -> None:
    """Kinesis would place each partition by the MD5 of its name (8 on 2 shards: often 6 to 2);
    explicit hash keys put 4 on each, and the tail reader finds each where it was written."""
    stream = f"s-{uuid.uuid4().hex[:8]}"
    kinesis = boto3.client("kinesis")
    kinesis.create_stream(StreamName=stream, ShardCount=2)
    journal = KinesisJournal(stream)
    for topic in ("spread", "other-name", "x"):
        names = [f"persistent://public/default/{topic}-partition-{i}" for i in range(8)]
        shards = [journal.append(name, b"entry").shard_id for name in names]
        assert sorted(shards.count(s) for s in set(shards)) == [4, 4], shards
        assert [journal.shard_for(name) for name in names] == shards
    other = journal.append("persistent://public/default/plain", b"entry")  # not a partition: Kinesis's own rule
    assert journal.shard_for("persistent://public/default/plain") == other.shard_id
    records = journal.read_after(names[3], None, 0, 10)
    assert [r.data for r in records] == [b"entry"]


def test_a_write_refused_on_every_attempt_is_reported_as_certainly_not_stored(aws: str) -> None:
    stream = f"s-{uuid.uuid4().hex[:8]}"
    boto3.client("kinesis").create_stream(StreamName=stream, ShardCount=1)
    journal = KinesisJournal(stream)
    record = os.urandom(900 * 1024)
    journal.append("hot", record)  # the shard's second of burst
    with pytest.raises(JournalRefused):
        journal.append("hot", record, patience_s=0.05)
    assert journal.append("hot", record).sequence  # the default patience (8 s) waits for the refill
