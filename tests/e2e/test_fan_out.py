"""Enhanced fan-out, emulated (`X-Magnetar-Fan-Out-Consumer`, the mapping's `fan_out` mode).

A read tagged as an enhanced fan-out consumer's is accounted on that consumer's own per-shard
budget (2 MiB/s) and not on the shard's shared 5 GetRecords/s and 2 MiB/s; untagged readers keep
the shared limits. The mapping in fan-out mode delivers a record within about 70 ms of its arrival
and is never refused while untagged readers are; its read of an idle shard is held at the emulator
until the shard's next write, so an idle shard costs a read a hold.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from http_helpers import HTTP
from magnetar.local.cluster import free_port, start_emulator
from magnetar.local.esm import KinesisEventSourceMapping, tag_fan_out
from magnetar.local.fidelity import AwsFidelity

RAW = Config(retries={"total_max_attempts": 1})  # one attempt: the raw answer
SHARD = "shardId-000000000000"
KB = 1024


@pytest.fixture(scope="module")
def limited() -> Iterator[str]:
    port = free_port()
    proc = start_emulator("127.0.0.1", port, AwsFidelity(limits=True))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def kinesis(endpoint: str) -> Any:
    return boto3.client("kinesis", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test", config=RAW)


def stream(endpoint: str) -> str:
    name = f"s-{uuid.uuid4().hex[:8]}"
    kinesis(endpoint).create_stream(StreamName=name, ShardCount=1)
    return name


def iterator(c: Any, name: str) -> str:
    return str(c.get_shard_iterator(StreamName=name, ShardId=SHARD, ShardIteratorType="TRIM_HORIZON")["ShardIterator"])


def refusals(endpoint: str) -> dict[str, int]:
    return dict(HTTP.get(f"{endpoint}/_magnetar/aws-limits").json()["refusals"])


def test_a_fan_out_reader_is_not_refused_at_10_calls_a_second_while_shared_readers_are(limited: str) -> None:
    name = stream(limited)
    shared = kinesis(limited)
    shared.put_record(StreamName=name, Data=b"x", PartitionKey="k")
    fan_out = tag_fan_out(kinesis(limited), "journal-consumer")
    for _ in range(4):  # GetShardIterator: five in the consumer's own window, the shard's untouched
        fan_out.get_shard_iterator(StreamName=name, ShardId=SHARD, ShardIteratorType="LATEST")
    tagged = iterator(fan_out, name)
    iterator(shared, name)
    started = time.monotonic()
    for _ in range(20):  # 10 calls a second for 2 s: a subscription is not capped at 5 reads/s
        tagged = fan_out.get_records(ShardIterator=tagged)["NextShardIterator"]
        time.sleep(0.1)
    assert time.monotonic() - started < 3.0
    untagged = iterator(shared, name)  # the shard's own budgets are whole: five calls, then refused
    for _ in range(5):
        untagged = shared.get_records(ShardIterator=untagged)["NextShardIterator"]
    with pytest.raises(ClientError) as refused:
        shared.get_records(ShardIterator=untagged)
    assert refused.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    for _ in range(5):  # meanwhile the tagged reader goes on
        tagged = fan_out.get_records(ShardIterator=tagged)["NextShardIterator"]


def test_a_fan_out_consumer_has_its_own_2_mib_a_second(limited: str) -> None:
    name = stream(limited)
    shared = kinesis(limited)
    for _ in range(4):  # 3.6 MB on the shard (writes: 1 MiB/s)
        shared.put_record(StreamName=name, Data=os.urandom(900 * KB), PartitionKey="k")
        time.sleep(0.9)
    fan_out = tag_fan_out(kinesis(limited), "big-reader")
    tagged = iterator(fan_out, name)
    page = fan_out.get_records(ShardIterator=tagged)
    assert len(page["Records"]) == 4  # 1.5 MB over the consumer's 2 MiB: its next read is refused...
    with pytest.raises(ClientError) as refused:
        fan_out.get_records(ShardIterator=page["NextShardIterator"])
    assert refused.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    other = tag_fan_out(kinesis(limited), "another-consumer")  # ...another consumer's is not
    assert len(other.get_records(ShardIterator=iterator(other, name), Limit=1)["Records"]) == 1
    assert len(shared.get_records(ShardIterator=iterator(shared, name), Limit=1)["Records"]) == 1  # nor the shard's
    time.sleep(1.0)  # the debt is paid at 2 MiB/s
    fan_out.get_records(ShardIterator=page["NextShardIterator"])


class _Recorder:
    """A stand-in for the journal consumer: when each record was delivered."""

    name = "recorder"

    def __init__(self) -> None:
        self.delivered: dict[bytes, float] = {}
        self.lock = threading.Lock()

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        import base64

        with self.lock:
            for r in event["Records"]:
                self.delivered.setdefault(base64.b64decode(r["kinesis"]["data"]), time.monotonic())
        return {}


def test_the_fan_out_mapping_delivers_in_about_70_ms_and_is_never_refused(
        limited: str, monkeypatch: pytest.MonkeyPatch) -> None:
    name = stream(limited)
    monkeypatch.setenv("AWS_ENDPOINT_URL", limited)  # the mapping's own client reads the environment
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    recorder = _Recorder()
    esm = KinesisEventSourceMapping(recorder, name, 100, 0, fan_out=True)  # type: ignore[arg-type]
    esm.kinesis = tag_fan_out(kinesis(limited), esm.consumer)  # the test's emulator, whatever the cache holds
    assert esm.batching_window_s == 0 and esm.poll_interval_s == pytest.approx(0.07)
    before = refusals(limited).get("kinesis.GetRecords:ProvisionedThroughputExceededException", 0)
    esm.start()
    try:
        shared = kinesis(limited)
        sent: dict[bytes, float] = {}
        for i in range(10):
            data = f"m{i}".encode()
            sent[data] = time.monotonic()
            shared.put_record(StreamName=name, Data=data, PartitionKey="k")
            time.sleep(0.2)
        deadline = time.monotonic() + 5
        while len(recorder.delivered) < len(sent) and time.monotonic() < deadline:
            time.sleep(0.05)
        delays = sorted(recorder.delivered[d] - sent[d] for d in sent)
        assert delays[len(delays) // 2] < 0.3, delays  # pushed within ~70 ms, no batching window
        untagged = iterator(shared, name)  # the mapping's reads are not the shard's: its 5 are whole
        for _ in range(5):
            untagged = shared.get_records(ShardIterator=untagged)["NextShardIterator"]
    finally:
        esm.stop()
    assert refusals(limited).get("kinesis.GetRecords:ProvisionedThroughputExceededException", 0) == before


def test_an_idle_shards_fan_out_read_is_held_until_its_next_write(limited: str) -> None:
    """A fan-out read asking to be held answers at the shard's next write (a random part of 70 ms
    later), or empty when its hold runs out; a read that does not ask answers at once."""
    from magnetar.local.aws_limits.fan_out_push import HELD_HEADER, HOLD_HEADER

    name = stream(limited)
    fan_out = tag_fan_out(kinesis(limited), "held-reader")
    fan_out.meta.events.register("before-sign.kinesis.GetRecords",
                                 lambda request, **_: request.headers.__setitem__(HOLD_HEADER, "600"))
    start = iterator(fan_out, name)
    began = time.monotonic()
    empty = fan_out.get_records(ShardIterator=start)
    assert empty["Records"] == [] and 0.5 <= time.monotonic() - began < 2.0  # held for its 600 ms
    assert HELD_HEADER in empty["ResponseMetadata"]["HTTPHeaders"]
    writer = threading.Timer(0.3, lambda: kinesis(limited).put_record(StreamName=name, Data=b"w", PartitionKey="k"))
    began = time.monotonic()
    writer.start()
    page = fan_out.get_records(ShardIterator=start)
    waited = time.monotonic() - began
    writer.join()
    assert [r["Data"] for r in page["Records"]] == [b"w"] and 0.25 <= waited < 0.55, waited  # woken by the write
    asked_nothing = tag_fan_out(kinesis(limited), "plain-reader")
    began = time.monotonic()
    answer = asked_nothing.get_records(ShardIterator=page["NextShardIterator"])
    assert answer["Records"] == [] and time.monotonic() - began < 0.3
    assert HELD_HEADER not in answer["ResponseMetadata"]["HTTPHeaders"]


def test_the_fan_out_mapping_reads_an_idle_shard_once_a_hold(limited: str, monkeypatch: pytest.MonkeyPatch) -> None:
    name = stream(limited)
    monkeypatch.setenv("AWS_ENDPOINT_URL", limited)
    recorder = _Recorder()
    esm = KinesisEventSourceMapping(recorder, name, 100, 0, fan_out=True)  # type: ignore[arg-type]
    esm.kinesis = tag_fan_out(kinesis(limited), esm.consumer)
    reads: list[float] = []
    esm.kinesis.meta.events.register("before-send.kinesis.GetRecords", lambda **_: reads.append(time.monotonic()))
    esm.start()
    try:
        time.sleep(2.5)
        idle_reads = len(reads)
        while len(reads) == idle_reads and time.monotonic() < reads[-1] + 5:  # a read's hold begins
            time.sleep(0.01)
        time.sleep(0.1)  # into the hold: unwoken, the read would answer ~0.9 s from now
        sent = time.monotonic()
        kinesis(limited).put_record(StreamName=name, Data=b"after-idle", PartitionKey="k")
        deadline = sent + 5
        while b"after-idle" not in recorder.delivered and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        esm.stop()
    assert idle_reads <= 4, idle_reads  # one read a second's hold, not one every 70 ms (~35)
    delivered = recorder.delivered[b"after-idle"]
    # woken by the write: the held read itself returned the record (unwoken, it would have answered
    # empty ~0.9 s later and a read begun after the write would have fetched it)
    assert not [r for r in reads if sent < r < delivered], (reads, sent, delivered)
    assert delivered - sent < 0.9
