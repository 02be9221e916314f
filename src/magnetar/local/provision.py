"""Create, on the emulator (or LocalStack), the resources the CDK stack declares.

Idempotent: running it against an endpoint that already has them changes nothing.
"""

from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import ClientError

from magnetar.adapters.aws.clients import client
from magnetar.config import BOOTSTRAP_ITEMS, CLUSTER_NAME, LOCAL_SHARD_COUNT, ResourceNames


def _create_table(ddb: Any, name: str) -> None:
    try:
        ddb.create_table(
            TableName=name,
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


def provision(names: ResourceNames, shard_count: int = LOCAL_SHARD_COUNT, cluster_name: str = CLUSTER_NAME) -> None:
    """The cluster's table, bucket and stream; with an instance's configuration store
    (`names.config_table`), that table in its home region too. The default tenant and namespace
    go to the configuration store, the tenant allowing `cluster_name`."""
    ddb, s3, kinesis = client("dynamodb"), client("s3"), client("kinesis")
    _create_table(ddb, names.table)
    config_ddb, config_table = ddb, names.table
    if names.config_table:
        config_ddb, config_table = client("dynamodb", names.config_region or None), names.config_table
        _create_table(config_ddb, config_table)
    try:
        region = s3.meta.region_name
        s3.create_bucket(Bucket=names.bucket, **({} if region in (None, "us-east-1") else
                                                 {"CreateBucketConfiguration": {"LocationConstraint": region}}))
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
        if "allowedClusters" in item:
            item = {**item, "allowedClusters": {"L": [{"S": cluster_name}]}}
        try:
            config_ddb.put_item(TableName=config_table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
