"""The journal's append against the emulator's Kinesis limits: a group append's record may be most
of a MiB, and a shard takes 1 MiB/s, so a refused record is put again once the shard's budget has
refilled by about its size (not after the SDK's backoff of up to seconds)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import boto3
import httpx
import pytest

from magnetar.adapters.aws.kinesis import KinesisJournal
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
    refused = httpx.get(f"{limited}/_magnetar/aws-limits").json()["refusals"]
    assert refused.get("kinesis.PutRecord:ProvisionedThroughputExceededException", 0) >= 2
    assert elapsed < 5.0, f"5 records of 600 KB took {elapsed:.1f} s (the shard's own pace is ~2.9 s)"
