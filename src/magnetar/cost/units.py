"""Unit conversions shared by the workload model and by measured runs: DynamoDB request units, API Gateway
and SQS metering increments, Kinesis billing units, base64 growth and the encoded size of an entry."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from magnetar.cost.prices import KiB

if TYPE_CHECKING:
    from magnetar.cost.workload import Parameters


def wru(item_bytes: float, transactional: bool = False) -> int:
    """DynamoDB write request units for one item: 1 per KB, doubled in a transaction."""
    units = max(1, math.ceil(item_bytes / KiB))
    return units * (2 if transactional else 1)


def rru(item_bytes: float, strongly_consistent: bool = True) -> float:
    """DynamoDB read request units for one item: 1 per 4 KB strongly consistent, half eventually consistent."""
    units = max(1, math.ceil(item_bytes / (4 * KiB)))
    return float(units) if strongly_consistent else units / 2


def apigw_units(payload_bytes: float) -> int:
    """HTTP API requests are metered in 512 KB increments."""
    return max(1, math.ceil(payload_bytes / (512 * KiB)))


def kinesis_ondemand_ingest_bytes(record_bytes: float) -> float:
    """On-demand ingestion bills each record rounded up to 1 KB."""
    return max(1, math.ceil(record_bytes / KiB)) * KiB


def kinesis_put_payload_units(record_bytes: float) -> int:
    """Provisioned mode bills 25 KB PUT payload units per record."""
    return max(1, math.ceil(record_bytes / (25 * KiB)))


def sqs_chunks(payload_bytes: float) -> int:
    """SQS and SNS bill each 64 KB chunk of a request's payload as one request."""
    return max(1, math.ceil(payload_bytes / (64 * KiB)))


def base64_bytes(n: float) -> float:
    return 4 * math.ceil(n / 3)


def batch_payload_bytes(batch_size: float, message_bytes: float, p: Parameters) -> float:
    """The encoded (and possibly compressed) messages of one entry, without the entry header."""
    return batch_size * (message_bytes + p.per_message_overhead_bytes) * p.compression_ratio


XRAY_RESERVOIR_PER_S = 1.0  # Lambda's sampling with active tracing: the first request each second,
XRAY_FIXED_RATE = 0.05  # then 5 % of the rest, per function


def xray_traces_per_s(invocations_per_s: float) -> float:
    """Traces one function records per second under Lambda's sampling (active tracing)."""
    first = min(invocations_per_s, XRAY_RESERVOIR_PER_S)
    return first + XRAY_FIXED_RATE * (invocations_per_s - first)
