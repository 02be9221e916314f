"""AWS's service limits and modeled latency at the emulator's endpoint (`--limits on`, `--latency`).

Each test starts from a fresh stream, table or bucket on an emulator process of its own, and
talks to it with plain boto3: retries off where the raw error is asserted, botocore's standard
retries where a retry is shown to engage. The S3 per-prefix rates (3,500 writes, 5,500 reads a
second) are more than the emulator serves on a laptop, so their flood is sent to the middleware
in-process with a frozen clock.
"""

from __future__ import annotations

import io
import os
import statistics
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
from magnetar.local.aws_limits import MIB, SHARD_SPEND_PATH, AwsEndpoint
from magnetar.local.cluster import free_port, start_emulator
from magnetar.local.fidelity import AwsFidelity

RAW = Config(retries={"total_max_attempts": 1})  # no retry at all (max_attempts 1 still allows one)
STANDARD = Config(retries={"mode": "standard", "max_attempts": 8})
KB = 1024


def _emulator(fidelity: AwsFidelity) -> Iterator[str]:
    port = free_port()
    proc = start_emulator("127.0.0.1", port, fidelity)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def limited() -> Iterator[str]:
    yield from _emulator(AwsFidelity(limits=True))


@pytest.fixture(scope="module")
def unlimited() -> Iterator[str]:
    yield from _emulator(AwsFidelity(limits=False))


@pytest.fixture(scope="module")
def slow() -> Iterator[str]:
    yield from _emulator(AwsFidelity(latency=True, seed=7))


def client(service: str, endpoint: str, config: Config = RAW) -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",  # type: ignore[call-overload]
                        aws_secret_access_key="test", config=config)


def attempts(c: Any) -> list[int]:
    """A counter of HTTP attempts made by client `c` (one per retry too)."""
    count = [0]
    c.meta.events.register("before-send", lambda **_: count.__setitem__(0, count[0] + 1))
    return count


def stream(endpoint: str) -> str:
    name = f"s-{uuid.uuid4().hex[:8]}"
    client("kinesis", endpoint).create_stream(StreamName=name, ShardCount=1)
    return name


def table(endpoint: str) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    client("dynamodb", endpoint).create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}])
    return name


def code(exc: ClientError) -> str:
    return str(exc.response["Error"]["Code"])


# --- Kinesis ----------------------------------------------------------------------------------
def test_a_hot_shard_is_throttled_and_a_standard_retry_gets_through(limited: str) -> None:
    kinesis, name, record = client("kinesis", limited), stream(limited), os.urandom(300 * KB)
    with pytest.raises(ClientError) as refused:
        for _ in range(100):  # 1 MiB/s per shard: faster than that, a 300 KB record is refused
            kinesis.put_record(StreamName=name, Data=record, PartitionKey="hot")
    assert code(refused.value) == "ProvisionedThroughputExceededException"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "Rate exceeded for shard shardId-000000000000" in refused.value.response["Error"]["Message"]
    retrying = client("kinesis", limited, STANDARD)
    tries = attempts(retrying)
    # the shard's budget spent again now: making the client above may take long enough on a busy
    # machine for the budget to refill before the retried writes, which then need no retry
    spent = HTTP.post(f"{limited}{SHARD_SPEND_PATH}", json={"stream": name, "shard": "shardId-000000000000",
                                                          "bytes": MIB})
    assert spent.status_code == 200, spent.text
    for _ in range(3):
        retrying.put_record(StreamName=name, Data=record, PartitionKey="hot")
    assert tries[0] > 3  # throttled, backed off, written
    refusals = HTTP.get(f"{limited}/_magnetar/aws-limits").json()["refusals"]  # what the limits refused
    assert refusals["kinesis.PutRecord:ProvisionedThroughputExceededException"] >= 2


def test_a_shards_write_budget_spent_from_outside_refuses_the_writes_that_follow(limited: str) -> None:
    """Another writer's share of a shard, taken at once (into debt): a record of a few bytes is
    refused until the budget has refilled, and then written. Bad asks get a reason; with the
    limits off (latency alone) there is no budget to spend."""
    kinesis, name = client("kinesis", limited), stream(limited)
    spent = HTTP.post(f"{limited}{SHARD_SPEND_PATH}", json={"stream": name, "shard": "shardId-000000000000",
                                                              "bytes": 2 * MIB})
    assert spent.status_code == 200 and spent.json()["budgetBytes"] < -MIB + 1, spent.text
    with pytest.raises(ClientError) as refused:
        kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="any")
    assert code(refused.value) == "ProvisionedThroughputExceededException"
    time.sleep(1.2)  # the debt (about 1 MiB) paid at 1 MiB/s
    assert kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="any")["ShardId"] == "shardId-000000000000"
    for body, status in (({"stream": name, "shard": "shardId-000000000009", "bytes": 1}, 404),
                         ({"stream": "no-such-stream", "shard": "shardId-000000000000", "bytes": 1}, 404),
                         ({"stream": name, "shard": "shardId-000000000000", "bytes": -1}, 400),
                         ({"stream": name}, 400)):
        answer = HTTP.post(f"{limited}{SHARD_SPEND_PATH}", json=body)
        assert (answer.status_code, bool(answer.json()["reason"])) == (status, True), body
    status: list[str] = []
    latency_only = AwsEndpoint(lambda environ, start: [], limits=False)  # (in-process: nothing reaches moto)
    body = b"".join(latency_only({"REQUEST_METHOD": "POST", "PATH_INFO": SHARD_SPEND_PATH, "CONTENT_LENGTH": "2",
                                  "wsgi.input": io.BytesIO(b"{}")}, lambda s, h, e=None: status.append(s)))
    assert status == ["409 Conflict"] and b"off" in body


def test_put_records_fails_record_by_record(limited: str) -> None:
    kinesis, name = client("kinesis", limited), stream(limited)
    records = [{"Data": b"x", "PartitionKey": f"k{i}"} for i in range(500)]
    answers = [kinesis.put_records(StreamName=name, Records=records) for _ in range(4)]  # 1,000 records/s
    failed = [r for a in answers for r in a["Records"] if "ErrorCode" in r]
    assert sum(a["FailedRecordCount"] for a in answers) == len(failed) > 0
    assert {r["ErrorCode"] for r in failed} == {"ProvisionedThroughputExceededException"}
    assert all("SequenceNumber" in r for a in answers for r in a["Records"] if "ErrorCode" not in r)
    with pytest.raises(ClientError) as too_many:
        kinesis.put_records(StreamName=name, Records=records + records[:1])
    assert code(too_many.value) == "ValidationException"


def test_a_sixth_get_records_within_a_second_is_refused(limited: str) -> None:
    kinesis, name = client("kinesis", limited), stream(limited)
    kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="k")
    iterator = kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000",
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    for _ in range(5):  # shared by every reader of the shard
        iterator = kinesis.get_records(ShardIterator=iterator)["NextShardIterator"]
    with pytest.raises(ClientError) as refused:
        kinesis.get_records(ShardIterator=iterator)
    assert code(refused.value) == "ProvisionedThroughputExceededException"
    time.sleep(1.0)
    kinesis.get_records(ShardIterator=iterator)
    with pytest.raises(ClientError) as iterators:  # GetShardIterator: 5 a second per shard too
        for _ in range(6):
            kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000", ShardIteratorType="LATEST")
    assert code(iterators.value) == "ProvisionedThroughputExceededException"


def test_a_record_over_1_mib_is_refused(limited: str) -> None:
    kinesis, name = client("kinesis", limited), stream(limited)
    with pytest.raises(ClientError) as refused:
        kinesis.put_record(StreamName=name, Data=b"x" * (1024 * KB + 1), PartitionKey="k")
    assert code(refused.value) == "ValidationException"
    assert "less than or equal to 1048576" in refused.value.response["Error"]["Message"]


# --- DynamoDB ---------------------------------------------------------------------------------
def test_an_item_over_400_kb_is_refused(limited: str) -> None:
    ddb, name = client("dynamodb", limited), table(limited)
    with pytest.raises(ClientError) as refused:
        ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "sk": {"S": "b"}, "v": {"S": "x" * 401 * KB}})
    assert code(refused.value) == "ValidationException"
    assert refused.value.response["Error"]["Message"] == "Item size has exceeded the maximum allowed size"
    with pytest.raises(ClientError) as update:
        ddb.update_item(TableName=name, Key={"pk": {"S": "a"}, "sk": {"S": "b"}}, UpdateExpression="SET v = :v",
                        ExpressionAttributeValues={":v": {"S": "x" * 401 * KB}})
    assert update.value.response["Error"]["Message"] == "Item size to update has exceeded the maximum allowed size"


def test_a_transaction_of_101_items_is_refused(limited: str) -> None:
    ddb, name = client("dynamodb", limited), table(limited)
    items = [{"Put": {"TableName": name, "Item": {"pk": {"S": f"p{i}"}, "sk": {"S": "s"}}}} for i in range(101)]
    with pytest.raises(ClientError) as refused:
        ddb.transact_write_items(TransactItems=items)
    assert code(refused.value) == "ValidationException"
    ddb.transact_write_items(TransactItems=items[:100])
    with pytest.raises(ClientError) as batch:
        ddb.batch_write_item(RequestItems={name: [{"PutRequest": {"Item": i["Put"]["Item"]}} for i in items[:26]]})
    assert code(batch.value) == "ValidationException"


def test_a_hot_key_is_throttled_and_a_standard_retry_gets_through(limited: str) -> None:
    ddb, name = client("dynamodb", limited), table(limited)
    value = {"S": "x" * 300 * KB}  # 300 write units: a partition's 1,000 a second last 3 of them
    with pytest.raises(ClientError) as refused:
        for i in range(50):
            ddb.put_item(TableName=name, Item={"pk": {"S": "hot"}, "sk": {"S": str(i)}, "v": value})
    assert code(refused.value) == "ProvisionedThroughputExceededException"
    reasons: Any = refused.value.response.get("ThrottlingReasons")
    assert reasons[0]["reason"] == "TableWriteKeyRangeThroughputExceeded"
    ddb.put_item(TableName=name, Item={"pk": {"S": "cold"}, "sk": {"S": "0"}, "v": value})  # another key: fine
    with pytest.raises(ClientError) as txn:  # a transaction on the hot key is cancelled, item by item
        ddb.transact_write_items(TransactItems=[
            {"Put": {"TableName": name, "Item": {"pk": {"S": "elsewhere"}, "sk": {"S": "0"}}}},
            {"Put": {"TableName": name, "Item": {"pk": {"S": "hot"}, "sk": {"S": "t"}, "v": value}}}])
    assert code(txn.value) == "TransactionCanceledException"
    assert [r["Code"] for r in txn.value.response["CancellationReasons"]] == ["None", "ThrottlingError"]
    retrying = client("dynamodb", limited, STANDARD)
    tries = attempts(retrying)
    for i in range(8):
        retrying.put_item(TableName=name, Item={"pk": {"S": "hot"}, "sk": {"S": f"r{i}"}, "v": value})
    assert tries[0] > 8


# --- S3 ---------------------------------------------------------------------------------------
def test_an_s3_prefix_flood_gets_slow_down(limited: str) -> None:
    s3, bucket = client("s3", limited), f"b-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="seg/a", Body=b"x")  # through the emulator: passes
    # the flood, in-process: the emulator itself serves far fewer than 3,500 requests a second
    served: list[str] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        served.append(environ["PATH_INFO"])
        start_response("200 OK", [("Content-Length", "0")])
        return [b""]

    endpoint = AwsEndpoint(app, clock=lambda: 1000.0)  # time stands still: no refill
    auth = "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0"

    def request(method: str, key: str) -> str:
        status: list[str] = []
        environ = {"REQUEST_METHOD": method, "PATH_INFO": f"/{bucket}/{key}", "HTTP_HOST": "127.0.0.1",
                   "HTTP_AUTHORIZATION": auth, "CONTENT_LENGTH": "1", "wsgi.input": io.BytesIO(b"x")}
        body = b"".join(endpoint(environ, lambda s, h, e=None: status.append(s)))
        assert not status[0].startswith("503") or b"<Code>SlowDown</Code>" in body
        return status[0]

    puts = [request("PUT", f"seg/{i}") for i in range(3500)]
    assert all(s.startswith("200") for s in puts)
    assert request("PUT", "seg/one-more").startswith("503")
    assert request("PUT", "other/x").startswith("200")  # another prefix has its own rate
    gets = [request("GET", f"seg/{i}") for i in range(5500)]
    assert all(s.startswith("200") for s in gets) and request("HEAD", "seg/0").startswith("503")
    assert len(served) == 3500 + 1 + 5500


# --- limits off, latency on -------------------------------------------------------------------
def test_with_limits_off_nothing_is_refused(unlimited: str) -> None:
    kinesis, name = client("kinesis", unlimited), stream(unlimited)
    for _ in range(15):
        kinesis.put_record(StreamName=name, Data=os.urandom(100 * KB), PartitionKey="hot")
    kinesis.put_record(StreamName=name, Data=b"x" * (1024 * KB + 1), PartitionKey="k")  # moto takes it
    iterator = kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000",
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    for _ in range(8):
        iterator = kinesis.get_records(ShardIterator=iterator, Limit=1)["NextShardIterator"]
    ddb, t = client("dynamodb", unlimited), table(unlimited)
    for i in range(20):
        ddb.put_item(TableName=t, Item={"pk": {"S": "hot"}, "sk": {"S": str(i)}, "v": {"S": "x" * 100 * KB}})


def _median_s(call: Any, n: int = 15) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def test_latency_adds_about_the_modeled_delay_without_serializing(slow: str, unlimited: str) -> None:
    from magnetar.local.aws_latency import MODEL

    buckets = {}
    for endpoint in (slow, unlimited):
        s3, bucket = client("s3", endpoint, STANDARD), f"b-{uuid.uuid4().hex[:8]}"
        s3.create_bucket(Bucket=bucket)
        buckets[endpoint] = _median_s(lambda s3=s3, bucket=bucket: s3.put_object(Bucket=bucket, Key="k", Body=b"x"))
    p50 = MODEL[("s3", "PUT")].p50_ms / 1000
    # the modeled latency is waited out from the request's arrival (it includes moto's own time):
    # the slow median is about the model's, and what it adds to moto's is at most about that much
    assert 0.5 * p50 < buckets[slow] and buckets[slow] - buckets[unlimited] < 2.0 * p50
    ddb, t = client("dynamodb", slow, STANDARD), table(slow)
    key = {"pk": {"S": "a"}, "sk": {"S": "b"}}
    median = _median_s(lambda: ddb.get_item(TableName=t, Key=key))
    assert median < 5 * MODEL[("dynamodb", "GetItem")].p99_ms / 1000
    # eight PUTs at once take about one modeled PUT, not eight: the wait is outside moto's lock
    s3 = client("s3", slow, Config(retries={"total_max_attempts": 1}, max_pool_connections=16))
    bucket = f"b-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    threads = [threading.Thread(target=s3.put_object, kwargs={"Bucket": bucket, "Key": f"k{i}", "Body": b"x"})
               for i in range(8)]
    started = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert time.perf_counter() - started < 8 * p50


def test_perfs_raw_limit_counts_only_the_records_the_shards_stored(limited: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`magnetar perf`'s raw Kinesis limit with limits on is the shards' throughput, not the
    emulator's: records refused in a PutRecords answer are not counted as written."""
    from magnetar.perf.limits import kinesis_put_records

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    limit = kinesis_put_records(limited, 10 * KB, 200 * 1024 * KB, max_seconds=2.0)
    # two shards of 1 MiB/s (~100 records of 10 KiB a second each) with a second of burst, for the
    # run's own time (about 2 s; a loaded machine's last call ends later: 2.9 s once)
    assert limit.calls >= 2
    assert limit.operations <= 2 * (100 * limit.seconds + 100) + 50


def test_the_endpoint_counts_the_conditional_writes_dynamodb_declined(limited: str) -> None:
    """Not a limit: the races optimistic concurrency lost, counted so a benchmark can show them."""
    ddb, name = client("dynamodb", limited), table(limited)
    item = {"pk": {"S": "cursor"}, "sk": {"S": "SUB#s"}, "version": {"N": "1"}}
    ddb.put_item(TableName=name, Item=item, ConditionExpression="attribute_not_exists(pk)")
    before = HTTP.get(f"{limited}/_magnetar/aws-limits").json()["declined"]
    with pytest.raises(ClientError):
        ddb.put_item(TableName=name, Item=item, ConditionExpression="attribute_not_exists(pk)")
    with pytest.raises(ClientError):
        ddb.transact_write_items(TransactItems=[{"Put": {"TableName": name, "Item": item,
                                                         "ConditionExpression": "version = :v",
                                                         "ExpressionAttributeValues": {":v": {"N": "0"}}}}])
    ddb.get_item(TableName=name, Key={"pk": {"S": "nothing"}, "sk": {"S": "x"}})  # a plain read: not counted
    after = HTTP.get(f"{limited}/_magnetar/aws-limits").json()["declined"]
    grown = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert grown == {"dynamodb.PutItem:ConditionalCheckFailedException": 1,
                     "dynamodb.TransactWriteItems:TransactionCanceledException": 1}
