"""The raw limits of the AWS endpoint, measured in the same run: what the emulator itself can do
for the same bytes, with no Magnetar in the path. Ratios to these are what a benchmark quotes."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

import boto3
from botocore.config import Config


@dataclass(frozen=True)
class Limit:
    operations: int
    calls: int
    seconds: float
    per_s: float
    mb_per_s: float


def endpoint_for(service: str, endpoint: str) -> str:
    """`endpoint` is the general one; when it is the environment's AWS_ENDPOINT_URL, a per-service
    AWS_ENDPOINT_URL_<SERVICE> wins, as in every AWS SDK (LocalStack with DynamoDB Local beside it)."""
    if endpoint == os.environ.get("AWS_ENDPOINT_URL"):
        return os.environ.get(f"AWS_ENDPOINT_URL_{service.upper()}") or endpoint
    return endpoint


def _client(service: str, endpoint: str) -> Any:
    return boto3.client(  # type: ignore[call-overload]
        service, endpoint_url=endpoint_for(service, endpoint), region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
        config=Config(retries={"mode": "standard", "max_attempts": 3}),
    )


def kinesis_put_records(endpoint: str, record_bytes: int, total_bytes: int, max_seconds: float = 10.0) -> Limit:
    """PutRecords of `record_bytes`-byte records, 500 per call, until `total_bytes` or `max_seconds`;
    the rate of the records stored (refused ones are not retried, nor counted)."""
    kinesis = _client("kinesis", endpoint)
    stream = f"magnetar-limit-{uuid.uuid4().hex[:6]}"
    kinesis.create_stream(StreamName=stream, ShardCount=2)
    deadline = time.monotonic() + 30  # LocalStack creates streams asynchronously; moto at once
    while (kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE"
           and time.monotonic() < deadline):
        time.sleep(0.1)
    payload = os.urandom(record_bytes)
    records = [{"Data": payload, "PartitionKey": f"k{i}"} for i in range(500)]
    sent = calls = 0
    started = time.perf_counter()
    while sent * record_bytes < total_bytes and time.perf_counter() - started < max_seconds:
        answer = kinesis.put_records(StreamName=stream, Records=records)
        # with AWS limits on, the shards refuse what is over their throughput: count what was stored
        sent += len(records) - int(answer.get("FailedRecordCount", 0))
        calls += 1
    elapsed = time.perf_counter() - started
    kinesis.delete_stream(StreamName=stream, EnforceConsumerDeletion=True)
    return Limit(sent, calls, elapsed, sent / elapsed, sent * record_bytes / elapsed / 1e6)


def s3_put_object(endpoint: str, object_bytes: int, max_seconds: float = 3.0) -> Limit:
    """PutObject of segment-sized objects for `max_seconds`."""
    s3 = _client("s3", endpoint)
    bucket = f"magnetar-limit-{uuid.uuid4().hex[:6]}"
    s3.create_bucket(Bucket=bucket)
    body = os.urandom(object_bytes)
    count = 0
    started = time.perf_counter()
    while time.perf_counter() - started < max_seconds:
        s3.put_object(Bucket=bucket, Key=f"o/{count}", Body=body)
        count += 1
    elapsed = time.perf_counter() - started
    return Limit(count, count, elapsed, count / elapsed, count * object_bytes / elapsed / 1e6)


def dynamodb_put_item(endpoint: str, item_bytes: int = 1024, max_seconds: float = 3.0) -> Limit:
    """Single-item PutItem writes of `item_bytes` for `max_seconds`."""
    ddb = _client("dynamodb", endpoint)
    table = f"magnetar-limit-{uuid.uuid4().hex[:6]}"
    ddb.create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    value = "x" * item_bytes
    count = 0
    started = time.perf_counter()
    while time.perf_counter() - started < max_seconds:
        ddb.put_item(TableName=table, Item={"pk": {"S": str(count)}, "v": {"S": value}})
        count += 1
    elapsed = time.perf_counter() - started
    return Limit(count, count, elapsed, count / elapsed, count * item_bytes / elapsed / 1e6)


def measure_all(endpoint: str, message_bytes: int, total_bytes: int, segment_bytes: int) -> dict[str, dict[str, float]]:
    return {
        "kinesis_put_records": asdict(kinesis_put_records(endpoint, message_bytes, total_bytes)),
        "s3_put_object": asdict(s3_put_object(endpoint, max(segment_bytes, 1024))),
        "dynamodb_put_item": asdict(dynamodb_put_item(endpoint)),
    }
