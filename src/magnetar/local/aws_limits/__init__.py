"""AWS's service limits at the emulator's endpoint: a WSGI middleware around moto's app.

Every AWS client of the local stack (Magnetar's functions, the event-source mapping, tests,
boto3 in a shell) goes through it, so a limit holds for all of them together, as on AWS. A
refused request gets the error AWS answers with (code, HTTP status, message as AWS words it), so
botocore's retry logic treats it exactly as it would AWS's. Everything else passes through
unchanged. The model's approximations are in docs/architecture.md ("AWS limits, locally").
Modeled latency (`magnetar.local.aws_latency`) is added here too, after the request is applied
and outside the serialization lock.

The package, by responsibility:

- `endpoint`: `AwsEndpoint`, the WSGI middleware: which service and operation a request is,
  dispatch to the service's limits, the refusals' count (GET /_magnetar/aws-limits), latency.
- `base`: what the services' limits share: the endpoint's state and forwarding to moto, a
  request's account and region, the response type and the refusal marks.
- `buckets`: token buckets and the one-lock accounting they live in.
- `kinesis`, `dynamodb`, `s3`: each service's limits (its module docstring says which).
"""

from magnetar.local.aws_limits.base import (
    KB,
    MIB,
    REFUSALS_PATH,
    REFUSED_COUNT_HEADER,
    REFUSED_HEADER,
    SHARD_SPEND_PATH,
    Response,
    StartResponse,
)
from magnetar.local.aws_limits.buckets import Bucket
from magnetar.local.aws_limits.dynamodb import (
    DDB_BATCH_WRITE_MAX,
    DDB_ITEM_TOO_LARGE,
    DDB_MAX_ITEM,
    DDB_PARTITION_RCU_S,
    DDB_PARTITION_WCU_S,
    DDB_THROTTLED,
    DDB_TXN_MAX_BYTES,
    DDB_TXN_MAX_ITEMS,
    DDB_UPDATE_TOO_LARGE,
    attribute_size,
    dynamodb_error,
    item_size,
)
from magnetar.local.aws_limits.endpoint import AwsEndpoint
from magnetar.local.aws_limits.kinesis import (
    KINESIS_MAX_RECORD,
    KINESIS_PUT_RECORDS_BYTES,
    KINESIS_PUT_RECORDS_MAX,
    KINESIS_SHARD_ITERATOR_CALLS_S,
    KINESIS_SHARD_READ_BYTES_S,
    KINESIS_SHARD_READ_CALLS_S,
    KINESIS_SHARD_WRITE_BYTES_S,
    KINESIS_SHARD_WRITE_RECORDS_S,
    kinesis_error,
)
from magnetar.local.aws_limits.s3 import S3_PREFIX_READS_S, S3_PREFIX_WRITES_S, s3_slow_down

__all__ = [
    "DDB_BATCH_WRITE_MAX",
    "DDB_ITEM_TOO_LARGE",
    "DDB_MAX_ITEM",
    "DDB_PARTITION_RCU_S",
    "DDB_PARTITION_WCU_S",
    "DDB_THROTTLED",
    "DDB_TXN_MAX_BYTES",
    "DDB_TXN_MAX_ITEMS",
    "DDB_UPDATE_TOO_LARGE",
    "KB",
    "KINESIS_MAX_RECORD",
    "KINESIS_PUT_RECORDS_BYTES",
    "KINESIS_PUT_RECORDS_MAX",
    "KINESIS_SHARD_ITERATOR_CALLS_S",
    "KINESIS_SHARD_READ_BYTES_S",
    "KINESIS_SHARD_READ_CALLS_S",
    "KINESIS_SHARD_WRITE_BYTES_S",
    "KINESIS_SHARD_WRITE_RECORDS_S",
    "MIB",
    "REFUSALS_PATH",
    "REFUSED_COUNT_HEADER",
    "REFUSED_HEADER",
    "S3_PREFIX_READS_S",
    "S3_PREFIX_WRITES_S",
    "SHARD_SPEND_PATH",
    "AwsEndpoint",
    "Bucket",
    "Response",
    "StartResponse",
    "attribute_size",
    "dynamodb_error",
    "item_size",
    "kinesis_error",
    "s3_slow_down",
]
