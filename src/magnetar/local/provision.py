"""Create, on the emulator (or LocalStack), the resources the CDK stack declares.

Idempotent: running it against an endpoint that already has them changes nothing.
"""

from __future__ import annotations

import time

from botocore.exceptions import ClientError

from magnetar.adapters.aws.clients import client
from magnetar.config import BOOTSTRAP_ITEMS, LOCAL_SHARD_COUNT, ResourceNames


def provision(names: ResourceNames, shard_count: int = LOCAL_SHARD_COUNT) -> None:
    ddb, s3, kinesis = client("dynamodb"), client("s3"), client("kinesis")
    try:
        ddb.create_table(
            TableName=names.table,
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            BillingMode="PAY_PER_REQUEST",
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceInUseException":
            raise
    try:
        s3.create_bucket(Bucket=names.bucket)
    except ClientError as exc:
        if exc.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
    try:
        kinesis.create_stream(StreamName=names.stream, ShardCount=shard_count)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceInUseException":
            raise
    for _ in range(100):
        status = kinesis.describe_stream_summary(StreamName=names.stream)["StreamDescriptionSummary"]["StreamStatus"]
        if status == "ACTIVE":
            break
        time.sleep(0.1)
    for item in BOOTSTRAP_ITEMS:
        try:
            ddb.put_item(TableName=names.table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
