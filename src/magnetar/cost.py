"""Magnetar's AWS bill: a cost model per workload, and the same prices applied to measured runs.

Three entry points share one price table (`PRICES`) and one pricing function (`price_usage`):

- `monthly_cost(workload)`: the monthly bill of a workload by component (API Gateway, Lambda
  requests and compute, Kinesis, DynamoDB, S3 requests and storage, EventBridge, CloudWatch Logs),
  for both Kinesis capacity modes, and the end-to-end cost per million messages;
- `compare(workload)`: the same workload on Amazon SQS (unbatched, batched, client-side packed),
  on Kinesis Data Streams used directly, and on self-managed Pulsar on EC2;
- `cost_of_measured_run(...)`: request counts measured by `magnetar perf` turned into cost per
  million messages with the same unit conversions.

Every per-operation request count and item size is a named field of `Parameters` (documented
there), so a measured count can replace a modeled one through a workload file's `parameters:`.

Conventions: a "GB" of data is 2**30 bytes (AWS bills GB-months and GB transferred in binary
gigabytes); free tiers are ignored (a production account has used them up); prices are
us-east-1 list prices, on-demand, as of `PRICES_AS_OF`.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
SECONDS_PER_HOUR = 3600.0
HOURS_PER_MONTH = 730.0
INF = math.inf

PRICES_AS_OF = "2026-11-22"

# ----------------------------------------------------------------------------------------------
# The price table
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    """One list price: `usd` per `per` units of `unit`, optionally tiered by monthly volume.

    `tiers` are (cumulative upper bound in units, usd per `per` units); the first tier's price is
    `usd`. `source` is the official pricing page; `checked` says how the number was confirmed on
    `PRICES_AS_OF` (or that it was not).
    """

    key: str
    service: str
    item: str
    usd: float
    per: float
    unit: str
    source: str
    checked: str
    tiers: tuple[tuple[float, float], ...] = ()

    def cost(self, quantity: float, *, tiered: bool = True) -> float:
        """USD for `quantity` units in one month (tiers apply to the month's total)."""
        if quantity <= 0:
            return 0.0
        if not tiered or not self.tiers:
            return quantity * self.usd / self.per
        total, lower = 0.0, 0.0
        for upper, usd in self.tiers:
            if quantity <= lower:
                break
            total += (min(quantity, upper) - lower) * usd / self.per
            lower = upper
        return total

    @property
    def display(self) -> str:
        per = {1.0: "", 1_000.0: "1,000 ", 1_000_000.0: "1M "}.get(self.per, f"{self.per:g} ")
        text = f"${_money(self.usd)} per {per}{self.unit}"
        if self.tiers and len(self.tiers) > 1:
            text += " (tiered: " + ", ".join(f"${_money(usd)}" + (f" to {up:,.0f}" if up != INF else " above") for up, usd in self.tiers) + ")"
        return text


def _money(usd: float) -> str:
    return f"{usd:.10f}".rstrip("0").rstrip(".") if usd < 0.01 else f"{usd:.4f}".rstrip("0").rstrip(".")


_APIGW = "https://aws.amazon.com/api-gateway/pricing/"
_LAMBDA = "https://aws.amazon.com/lambda/pricing/"
_KINESIS = "https://aws.amazon.com/kinesis/data-streams/pricing/"
_DDB = "https://aws.amazon.com/dynamodb/pricing/on-demand/"
_S3 = "https://aws.amazon.com/s3/pricing/"
_EVENTBRIDGE = "https://aws.amazon.com/eventbridge/pricing/"
_SQS = "https://aws.amazon.com/sqs/pricing/"
_SNS = "https://aws.amazon.com/sns/pricing/"
_EC2 = "https://aws.amazon.com/ec2/pricing/on-demand/"
_EBS = "https://aws.amazon.com/ebs/pricing/"
_CW = "https://aws.amazon.com/cloudwatch/pricing/"

_NOT_CONFIRMED = "not confirmed: no stored page showed this figure; value recalled from the AWS on-demand price list, verify before relying on it"

_PRICE_LIST = (
    Price(
        "apigw.http.request", "API Gateway", "HTTP API request (metered per 512 KB)", 1.00, 1e6, "requests", _APIGW,
        "confirmed: 512 KB metering in docs.aws.amazon.com whitepaper 'best-practices-api-gateway-private-apis-integration'; "
        "$1.00 first 300M / $0.90 after in learnaws.org and apigatewaycost.com (2025-2026)",
        ((300e6, 1.00), (INF, 0.90)),
    ),
    Price(
        "apigw.websocket.message", "API Gateway", "WebSocket message (metered per 32 KB)", 1.00, 1e6, "messages", _APIGW,
        "confirmed: 32 KB metering on the AWS pricing page; $1.00 first 1B in awsforengineers.com (May 2025); "
        "$0.80 above 1B not confirmed",
        ((1e9, 1.00), (INF, 0.80)),
    ),
    Price(
        "apigw.websocket.connection_minute", "API Gateway", "WebSocket connection minute", 0.25, 1e6, "connection-minutes",
        _APIGW, "confirmed: stormit.cloud, apigatewaycost.com",
    ),
    Price(
        "lambda.request", "Lambda", "invocation request", 0.20, 1e6, "requests", _LAMBDA,
        "confirmed: cloudchipr.com 'AWS Lambda pricing' (us-east-1)",
    ),
    Price(
        "lambda.arm64.gb_second", "Lambda", "duration, arm64", 0.0000133334, 1.0, "GB-second", _LAMBDA,
        "confirmed: cloudchipr.com (tiers 7.5B / 11.25B GB-s); third tier $0.0000106667 not confirmed",
        ((7.5e9, 0.0000133334), (18.75e9, 0.0000120001), (INF, 0.0000106667)),
    ),
    Price(
        "lambda.x86_64.gb_second", "Lambda", "duration, x86_64", 0.0000166667, 1.0, "GB-second", _LAMBDA,
        "confirmed: cloudchipr.com (tiers 6B / 9B GB-s)",
        ((6e9, 0.0000166667), (15e9, 0.000015), (INF, 0.0000133334)),
    ),
    Price(
        "kinesis.ondemand.stream_hour", "Kinesis Data Streams", "on-demand stream-hour", 0.04, 1.0, "stream-hour", _KINESIS,
        "confirmed: trek10.com on-demand vs provisioned comparison (us-east-1, Sep 2023); the AWS page confirms the "
        "dimensions (per stream-hour, per GB in, per GB out) but its stored copy shows no figures",
    ),
    Price(
        "kinesis.ondemand.ingest_gb", "Kinesis Data Streams", "on-demand data ingested (records rounded up to 1 KB)", 0.08,
        1.0, "GB", _KINESIS, "confirmed: trek10.com (Sep 2023); 1 KB rounding per record on the AWS page",
    ),
    Price(
        "kinesis.ondemand.retrieval_gb", "Kinesis Data Streams", "on-demand data retrieved (shared-throughput consumers)",
        0.04, 1.0, "GB", _KINESIS, "confirmed: trek10.com (Sep 2023)",
    ),
    Price(
        "kinesis.provisioned.shard_hour", "Kinesis Data Streams", "provisioned shard-hour (1 MB/s, 1,000 records/s in; 2 MB/s out)",
        0.015, 1.0, "shard-hour", _KINESIS, "confirmed: trek10.com (Sep 2023), kindatechnical.com",
    ),
    Price(
        "kinesis.provisioned.put_payload_unit", "Kinesis Data Streams", "provisioned PUT payload unit (25 KB of a record)",
        0.014, 1e6, "PUT payload units", _KINESIS,
        "confirmed: trek10.com (Sep 2023); 25 KB unit definition and 'getting records is free' on the AWS page",
    ),
    Price(
        "dynamodb.ondemand.wru", "DynamoDB", "on-demand write request unit (1 KB; transactional 2x)", 0.625, 1e6,
        "write request units", _DDB, "confirmed: airbyte.com, jusdb.com (after the Nov 2024 50% cut)",
    ),
    Price(
        "dynamodb.ondemand.rru", "DynamoDB", "on-demand read request unit (4 KB strongly consistent)", 0.125, 1e6,
        "read request units", _DDB, "confirmed: airbyte.com, jusdb.com (after the Nov 2024 50% cut)",
    ),
    Price(
        "dynamodb.storage_gb_month", "DynamoDB", "Standard table storage", 0.25, 1.0, "GB-month", _DDB,
        "confirmed: engineering-ed7 / infratally DynamoDB notes; first 25 GB free (ignored here)",
    ),
    Price(
        "s3.standard.gb_month", "S3", "S3 Standard storage", 0.023, 1.0, "GB-month", _S3,
        "confirmed: devnotes.tech, deepeshsoni.com ($0.023 first 50 TB); lower tiers not confirmed",
        ((50 * 1024, 0.023), (500 * 1024, 0.022), (INF, 0.021)),
    ),
    Price(
        "s3.put_request", "S3", "PUT, COPY, POST, LIST request", 0.005, 1_000.0, "requests", _S3,
        "confirmed: devnotes.tech",
    ),
    Price(
        "s3.get_request", "S3", "GET, SELECT and other requests", 0.0004, 1_000.0, "requests", _S3,
        "confirmed: devnotes.tech",
    ),
    Price(
        "eventbridge.scheduler.invocation", "EventBridge", "Scheduler invocation", 1.00, 1e6, "invocations", _EVENTBRIDGE,
        "confirmed: cloudburn.io EventBridge pricing (Mar 2026); 14M invocations/month free (ignored here)",
    ),
    Price(
        "cloudwatch.logs.ingest_gb", "CloudWatch", "Logs ingestion, Standard class (Lambda logs first tier)", 0.50, 1.0,
        "GB", _CW, "confirmed: duckbillgroup.com (Lambda log tiers, May 2025), hykell.com",
    ),
    Price(
        "sqs.standard.request", "SQS", "Standard queue request (each 64 KB chunk of payload is one request)", 0.40, 1e6,
        "requests", _SQS, "confirmed: cloudburn.io (Mar 2026), unanswered.io, factualminds.com (Jun 2026)",
        ((100e9, 0.40), (200e9, 0.30), (INF, 0.24)),
    ),
    Price(
        "sns.standard.publish", "SNS", "Standard topic publish (per 64 KB chunk); deliveries to SQS free", 0.50, 1e6,
        "publishes", _SNS,
        "confirmed: factualminds.com, awsnegotiations.com; free SQS deliveries and PublishBatch billed by payload "
        "chunk not confirmed",
    ),
    Price(
        "ec2.t3.small.hour", "EC2", "t3.small on-demand Linux (ZooKeeper)", 0.0208, 1.0, "instance-hour", _EC2, _NOT_CONFIRMED,
    ),
    Price(
        "ec2.c5.2xlarge.hour", "EC2", "c5.2xlarge on-demand Linux (broker)", 0.34, 1.0, "instance-hour", _EC2,
        "confirmed: docs.aws.amazon.com Auto Scaling 'Spot price per unit hour example' (us-east-1 on-demand column)",
    ),
    Price("ec2.i3.xlarge.hour", "EC2", "i3.xlarge on-demand Linux (bookie, 1 x 950 GB NVMe)", 0.312, 1.0, "instance-hour", _EC2, _NOT_CONFIRMED),
    Price("ec2.i3.2xlarge.hour", "EC2", "i3.2xlarge on-demand Linux (bookie, 1 x 1.9 TB NVMe)", 0.624, 1.0, "instance-hour", _EC2, _NOT_CONFIRMED),
    Price("ec2.i3.4xlarge.hour", "EC2", "i3.4xlarge on-demand Linux (bookie, 2 x 1.9 TB NVMe)", 1.248, 1.0, "instance-hour", _EC2, _NOT_CONFIRMED),
    Price("ec2.i3.8xlarge.hour", "EC2", "i3.8xlarge on-demand Linux (bookie, 4 x 1.9 TB NVMe)", 2.496, 1.0, "instance-hour", _EC2, _NOT_CONFIRMED),
    Price("ec2.i3.16xlarge.hour", "EC2", "i3.16xlarge on-demand Linux (bookie, 8 x 1.9 TB NVMe)", 4.992, 1.0, "instance-hour", _EC2, _NOT_CONFIRMED),
    Price("ebs.gp3.gb_month", "EBS", "gp3 volume (3,000 IOPS, 125 MB/s included)", 0.08, 1.0, "GB-month", _EBS, _NOT_CONFIRMED),
    Price(
        "ec2.transfer.cross_az_gb", "EC2", "data transfer between AZs (charged out and in: $0.01 each way)", 0.02, 1.0, "GB",
        "https://aws.amazon.com/ec2/pricing/on-demand/#Data_Transfer_within_the_same_AWS_Region",
        "confirmed: finopsforge.com, usage.ai (Jun 2026): $0.01/GB in each direction",
    ),
)

PRICES: dict[str, Price] = {p.key: p for p in _PRICE_LIST}


def price_table() -> list[dict[str, str]]:
    """The price table as rows (for the CLI, the docs and the JSON output)."""
    return [
        {"key": p.key, "service": p.service, "item": p.item, "price": p.display, "as_of": PRICES_AS_OF,
         "source": p.source, "checked": p.checked}
        for p in _PRICE_LIST
    ]


def _cost(key: str, quantity: float, tiered: bool = True) -> float:
    return PRICES[key].cost(quantity, tiered=tiered)


# ----------------------------------------------------------------------------------------------
# Per-operation parameters
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Parameters:
    """Every per-operation count and size the model assumes; override any of them by name in a
    workload file's `parameters:` mapping (e.g. with counts measured by `magnetar perf`).

    Sizes are bytes; counts are per operation named in the field.
    """

    # --- what an entry weighs (measured with magnetar.core.entry.encode_entry on 2026-11-22) ---
    per_message_overhead_bytes: float = 8.0  # msgpack framing of one message in an entry (16 with an event time)
    per_entry_overhead_bytes: float = 100.0  # entry header: topic, ids, times, producer, flags (90 B before the batch format)
    compression_ratio: float = 1.0  # compressed / raw batch payload (LZ4, ZSTD…); 1 = no compression
    produce_json_bytes_per_message: float = 60.0  # {"payload": …, "properties": {}, "key": null, "eventTime": 0}
    consume_json_bytes_per_message: float = 230.0  # messageId, properties, times, key, producerName, topic
    http_envelope_bytes: float = 300.0  # JSON envelope of a request or a response
    apigw_meter_response: float = 1.0  # 1: a receive's response size also counts toward the 512 KB metering (conservative)

    # --- produce: per entry -------------------------------------------------------------------
    writer_updates_per_entry: float = 1.0  # DynamoDB UpdateItem on the writer counter
    writer_item_bytes: float = 250.0  # the writer counter item (< 1 KB: 1 WRU)
    journal_puts_per_entry: float = 1.0  # Kinesis PutRecord

    # --- seal: the journal consumer, per event-source batch ------------------------------------
    esm_batch_size: float = 500.0  # JOURNAL_BATCH_SIZE
    esm_window_s: float = 1.0  # JOURNAL_MAX_BATCHING_WINDOW_S
    esm_max_payload_bytes: float = 6 * MiB  # Lambda's invocation payload limit
    seal_batchgets_per_invocation: float = 1.0  # BatchGetItem of the seal states present
    seal_item_bytes: float = 400.0  # seal state item (strongly consistent: 1 RRU per 4 KB)
    segment_puts_per_partition: float = 1.0  # S3 PutObject per topic partition present in a batch
    segment_item_base_bytes: float = 250.0  # segment item without its offsets
    segment_offset_bytes_per_entry: float = 8.0  # packed uint64 offset per entry
    esm_getrecords_per_shard_per_s: float = 1.0  # the mapping polls each shard about once a second

    # --- consume: per receive (per subscription) ------------------------------------------------
    receive_max_entries: float = 100.0  # MAX_ENTRIES_PER_RECEIVE
    receive_max_messages: float = 1000.0  # the SDK's default maxMessages (whole entries only)
    receive_max_bytes: float = 4 * MiB  # MAX_RECEIVE_BYTES
    receive_batchgets: float = 1.0  # BatchGetItem (cursor + seal state + writer counter) per receive
    cursor_item_bytes: float = 2048.0  # the cursor item: "a few KB" (JSON state)
    cursor_puts_per_receive: float = 1.0  # conditional PutItem of the cursor (acks ride along)
    tail_read_fraction: float = 1.0  # share of receives served from the Kinesis tail (keeping up) vs S3 (backlog)
    tail_read_amplification: float = 0.0  # bytes retrieved / bytes delivered on a tail read; 0 = auto (partitions per shard)
    getshard_iterators_per_tail_read: float = 1.0  # GetShardIterator per tail receive (free; limit 5/s per shard)
    getrecords_per_tail_read: float = 1.0  # GetRecords per tail receive (free per call; limit 5/s per shard)
    backlog_queries_per_receive: float = 1.0  # DynamoDB Query of segment items per backlog receive
    backlog_gets_per_receive: float = 1.0  # S3 ranged GET per backlog receive (one segment)
    ack_flushes_per_receive: float = 0.0  # separate acknowledgement requests; 0 while busy (acks ride on receives)
    entry_cache_hit_fraction: float = 0.0  # receives answered from a warm broker container's entry cache (no read)

    # --- idle consumers (long polls with nothing to deliver) -------------------------------------
    idle_poll_wait_s: float = 20.0  # MAX_WAIT_MS
    idle_poll_interval_s: float = 0.2  # POLL_INTERVAL_S: the broker re-reads the cursor view while it waits
    request_latency_s: float = 0.01  # one DynamoDB round trip inside the poll loop
    lease_renew_interval_s: float = 15.0  # the lease (30 s) is renewed when half spent

    # --- fixed -------------------------------------------------------------------------------------
    maintenance_interval_s: float = 60.0  # EventBridge schedule of the maintenance function
    log_bytes_per_invocation: float = 300.0  # Lambda's START/END/REPORT lines; 0 with system log level WARN
    ondemand_min_shards: float = 4.0  # an on-demand stream starts with 4 MB/s of write capacity
    provisioned_target_utilization: float = 0.8  # shard sizing headroom (partitions hash unevenly onto shards)

    # --- alternatives -------------------------------------------------------------------------------
    sqs_batch: float = 10.0  # SendMessageBatch / ReceiveMessage / DeleteMessageBatch entries
    sqs_messages_per_receive: float = 10.0  # batched receives come back full (best case for SQS)
    sqs_max_message_bytes: float = 1 * MiB  # SQS message and batch payload limit since 2025
    kinesis_direct_record_overhead_bytes: float = 20.0  # KPL aggregation framing per record (+8 per message)
    kinesis_direct_getrecords_per_shard_per_s: float = 1.0  # each consumer application (KCL) polls each shard ~1/s
    pulsar_write_quorum: float = 2.0  # managedLedgerDefaultWriteQuorum (ensemble 2, ack quorum 2)
    pulsar_disk_fill: float = 0.8  # usable fraction of a bookie's disks (GC and compaction headroom)
    pulsar_broker_max_mb_per_s: float = 100.0  # in+out traffic one c5.2xlarge broker carries comfortably (assumption)
    pulsar_root_volume_gb: float = 30.0  # gp3 root/data volume per instance (ZooKeeper data lives here)
    pulsar_cross_az_fraction: float = 2.0 / 3.0  # clients and replicas spread over 3 AZs


PARAMETER_NAMES = frozenset(f.name for f in fields(Parameters))
DEFAULT_PARAMETERS = Parameters()


# ----------------------------------------------------------------------------------------------
# The workload (pydantic at the boundary)
# ----------------------------------------------------------------------------------------------

KINESIS_MAX_RECORD_BYTES = 1 * MiB


class Workload(BaseModel):
    """A steady workload: what the producers send and how many subscriptions read it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    message_bytes: int = Field(gt=0, le=1 * MiB, description="payload bytes per message")
    batch_size: int = Field(ge=1, le=10_000, description="messages per produce request (one entry)")
    produce_rate_msgs_per_s: float = Field(gt=0, description="messages per second, all producers")
    subscriptions: int = Field(default=1, ge=0, description="subscriptions, each reading every message once")
    retention_hours: float = Field(default=24.0, ge=0, description="how long sealed segments are kept in S3")
    entries_per_receive: float = Field(default=5.0, gt=0, le=100, description="entries a receive returns on average")
    topic_partitions: int = Field(default=1, ge=1, le=10_000)
    idle_consumer_hours_per_month: float = Field(default=0.0, ge=0, description="consumer-hours spent long-polling an idle topic")
    lambda_architecture: Literal["arm64", "x86_64"] = "arm64"
    lambda_memory_mb: int = Field(default=1024, ge=128, le=10_240)
    produce_lambda_ms: float = Field(default=30.0, gt=0, description="broker duration of a produce")
    receive_lambda_ms: float = Field(default=100.0, gt=0, description="broker duration of a receive that delivers")
    seal_lambda_ms: float = Field(default=40.0, gt=0, description="journal consumer: fixed part of an invocation")
    seal_lambda_ms_per_partition: float = Field(default=60.0, ge=0, description="journal consumer: per partition sealed")
    maintenance_lambda_ms: float = Field(default=500.0, ge=0, description="maintenance function, per scheduled run")
    hours_per_month: float = Field(default=HOURS_PER_MONTH, gt=0, le=744)
    parameters: dict[str, float] = Field(default_factory=dict, description="overrides of magnetar.cost.Parameters")

    @field_validator("parameters")
    @classmethod
    def _known_parameters(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - PARAMETER_NAMES)
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, PARAMETER_NAMES, n=1)
                hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
            raise ValueError(f"unknown parameter(s) {', '.join(hints)}; the names are the fields of magnetar.cost.Parameters")
        negative = sorted(k for k, v in value.items() if v < 0)
        if negative:
            raise ValueError(f"parameter(s) must not be negative: {', '.join(negative)}")
        return value

    @model_validator(mode="after")
    def _entry_fits_a_record(self) -> Workload:
        p = self.params()
        record = batch_payload_bytes(self.batch_size, self.message_bytes, p) + p.per_entry_overhead_bytes
        if record > KINESIS_MAX_RECORD_BYTES:
            raise ValueError(
                f"an entry of {self.batch_size} x {self.message_bytes} bytes is {record:,.0f} bytes encoded, over the "
                f"1 MiB Kinesis record limit: lower batch_size or message_bytes"
            )
        return self

    def params(self) -> Parameters:
        return replace(DEFAULT_PARAMETERS, **self.parameters)

    @property
    def entries_per_s(self) -> float:
        return self.produce_rate_msgs_per_s / self.batch_size

    @property
    def messages_per_month(self) -> float:
        return self.produce_rate_msgs_per_s * self.hours_per_month * SECONDS_PER_HOUR


class WorkloadError(ValueError):
    """A workload file that cannot be read or does not validate; the message says where and why."""


def load_workload(path: Path | str) -> Workload:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise WorkloadError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise WorkloadError(f"{path}: expected a mapping of workload fields, got {type(raw).__name__}")
    try:
        return Workload.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc']) or 'workload'}: {e['msg']}" for e in exc.errors()
        )
        raise WorkloadError(f"{path}: invalid workload: {problems}") from None


# ----------------------------------------------------------------------------------------------
# Unit conversions (shared by the model and by measured runs)
# ----------------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------------
# Usage: quantities of one step over one period, priced by `price_usage`
# ----------------------------------------------------------------------------------------------

COMPONENTS = (
    "api_gateway",
    "lambda_requests",
    "lambda_compute",
    "kinesis",
    "dynamodb",
    "s3_requests",
    "s3_storage",
    "eventbridge",
    "cloudwatch_logs",
)
Mode = Literal["on_demand", "provisioned"]
MODES: tuple[Mode, Mode] = ("on_demand", "provisioned")


@dataclass
class Usage:
    """Billable quantities (not dollars) of one step over one period."""

    apigw_requests: float = 0.0  # metered 512 KB units
    lambda_requests: float = 0.0
    lambda_gb_s: float = 0.0
    dynamodb_wru: float = 0.0
    dynamodb_rru: float = 0.0
    dynamodb_gb_month: float = 0.0
    kinesis_od_stream_hours: float = 0.0
    kinesis_od_ingest_gb: float = 0.0
    kinesis_od_retrieval_gb: float = 0.0
    kinesis_shard_hours: float = 0.0
    kinesis_ppu: float = 0.0
    s3_put_requests: float = 0.0
    s3_get_requests: float = 0.0
    s3_gb_month: float = 0.0
    eventbridge_invocations: float = 0.0
    logs_gb: float = 0.0

    def scaled(self, factor: float) -> Usage:
        return Usage(**{k: v * factor for k, v in asdict(self).items()})

    def __add__(self, other: Usage) -> Usage:
        a, b = asdict(self), asdict(other)
        return Usage(**{k: a[k] + b[k] for k in a})


# Which price key each quantity is billed at, and under which component.
def _lines(usage: Usage, mode: Mode, architecture: str) -> list[tuple[str, str, float]]:
    out = [
        ("api_gateway", "apigw.http.request", usage.apigw_requests),
        ("lambda_requests", "lambda.request", usage.lambda_requests),
        ("lambda_compute", f"lambda.{architecture}.gb_second", usage.lambda_gb_s),
        ("dynamodb", "dynamodb.ondemand.wru", usage.dynamodb_wru),
        ("dynamodb", "dynamodb.ondemand.rru", usage.dynamodb_rru),
        ("dynamodb", "dynamodb.storage_gb_month", usage.dynamodb_gb_month),
        ("s3_requests", "s3.put_request", usage.s3_put_requests),
        ("s3_requests", "s3.get_request", usage.s3_get_requests),
        ("s3_storage", "s3.standard.gb_month", usage.s3_gb_month),
        ("eventbridge", "eventbridge.scheduler.invocation", usage.eventbridge_invocations),
        ("cloudwatch_logs", "cloudwatch.logs.ingest_gb", usage.logs_gb),
    ]
    if mode == "on_demand":
        out += [
            ("kinesis", "kinesis.ondemand.stream_hour", usage.kinesis_od_stream_hours),
            ("kinesis", "kinesis.ondemand.ingest_gb", usage.kinesis_od_ingest_gb),
            ("kinesis", "kinesis.ondemand.retrieval_gb", usage.kinesis_od_retrieval_gb),
        ]
    else:
        out += [
            ("kinesis", "kinesis.provisioned.shard_hour", usage.kinesis_shard_hours),
            ("kinesis", "kinesis.provisioned.put_payload_unit", usage.kinesis_ppu),
        ]
    return out


def price_usage(
    steps: Mapping[str, Usage], mode: Mode, architecture: str = "arm64", *, tiered: bool = True
) -> dict[str, dict[str, float]]:
    """USD by step and component. Tiers apply to each price's total over all steps (one account-month);
    each step gets its share of that total in proportion to its quantity."""
    per_step = {step: _lines(usage, mode, architecture) for step, usage in steps.items()}
    totals: dict[str, float] = {}
    for lines in per_step.values():
        for _, key, qty in lines:
            totals[key] = totals.get(key, 0.0) + qty
    usd_of = {key: _cost(key, qty, tiered) for key, qty in totals.items()}
    out: dict[str, dict[str, float]] = {}
    for step, lines in per_step.items():
        comp = dict.fromkeys(COMPONENTS, 0.0)
        for component, key, qty in lines:
            if qty > 0:
                comp[component] += usd_of[key] * qty / totals[key]
        out[step] = comp
    return out


def _sum_components(parts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    total = dict.fromkeys(COMPONENTS, 0.0)
    for part in parts:
        for k, v in part.items():
            total[k] += v
    return total


# ----------------------------------------------------------------------------------------------
# The Magnetar model
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """Derived per-second quantities of a workload in one Kinesis mode."""

    entries_per_s: float
    record_bytes: float
    shards: int
    busy_shards: int
    partitions_per_shard: float
    tail_amplification: float
    seal_invocations_per_s: float
    partitions_per_seal: float
    entries_per_segment: float
    entries_per_receive: float
    receives_per_s: float
    response_bytes: float


@dataclass(frozen=True)
class ModeCost:
    mode: Mode
    kinesis_shards: int
    by_step: dict[str, dict[str, float]]  # step -> component -> USD per month
    components: dict[str, float]  # component -> USD per month (active workload, no idle consumers)
    monthly_usd: float  # active workload
    idle_usd: float  # idle consumer-hours of the month
    total_usd: float  # monthly_usd + idle_usd
    usd_per_million_messages: float  # monthly_usd / millions of messages produced

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CostReport:
    workload: Workload
    messages_per_month: float
    on_demand: ModeCost
    provisioned: ModeCost
    requests_per_million_messages: dict[str, dict[str, float]]  # mode -> "service.Operation" -> count
    idle_usd_per_consumer_hour: float
    websocket_idle_usd_per_consumer_hour: float
    warnings: list[str]
    notes: list[str]
    prices_as_of: str = PRICES_AS_OF

    def mode(self, mode: Mode) -> ModeCost:
        return self.on_demand if mode == "on_demand" else self.provisioned

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload.model_dump(),
            "prices_as_of": self.prices_as_of,
            "messages_per_month": self.messages_per_month,
            "on_demand": self.on_demand.to_dict(),
            "provisioned": self.provisioned.to_dict(),
            "requests_per_million_messages": self.requests_per_million_messages,
            "idle_usd_per_consumer_hour": self.idle_usd_per_consumer_hour,
            "websocket_idle_usd_per_consumer_hour": self.websocket_idle_usd_per_consumer_hour,
            "warnings": self.warnings,
            "notes": self.notes,
        }


def _kinesis_shards(w: Workload, p: Parameters, mode: Mode, record_bytes: float) -> tuple[int, float]:
    """Shards of the journal stream, and the tail-read amplification that goes with them."""
    e = w.entries_per_s
    write_bps = e * record_bytes
    if mode == "on_demand":
        shards = max(
            int(p.ondemand_min_shards),
            math.ceil(2 * write_bps / MiB),  # on-demand keeps room for twice the recent peak
            math.ceil(2 * e / 1000),
        )
        return shards, _amplification(w, p, shards)
    u = p.provisioned_target_utilization or 1.0
    shards = 1
    for _ in range(20):  # read volume depends on amplification, which depends on shards: iterate to a fixed point
        amp = _amplification(w, p, shards)
        read_bps = write_bps * (1 + w.subscriptions * _tail_share(p) * amp)
        needed = max(1, math.ceil(write_bps / (MiB * u)), math.ceil(e / (1000 * u)), math.ceil(read_bps / (2 * MiB * u)))
        # a topic partition's records all go to one shard: shards beyond the partition count stay idle
        needed = min(needed, w.topic_partitions)
        if needed == shards:
            break
        shards = needed
    return shards, _amplification(w, p, shards)


def _tail_share(p: Parameters) -> float:
    """Share of receives that read the Kinesis tail."""
    return p.tail_read_fraction * (1 - min(p.entry_cache_hit_fraction, 1.0))


def _amplification(w: Workload, p: Parameters, shards: int) -> float:
    if p.tail_read_amplification > 0:
        return p.tail_read_amplification
    busy = min(w.topic_partitions, shards)
    # a tail read pages through its shard and keeps only its partition's records: it retrieves
    # every record of the partitions sharing that shard
    return max(1.0, w.topic_partitions / busy)


def _shape(w: Workload, p: Parameters, mode: Mode) -> Shape:
    e = w.entries_per_s
    b, m = w.batch_size, w.message_bytes
    record = batch_payload_bytes(b, m, p) + p.per_entry_overhead_bytes
    shards, amp = _kinesis_shards(w, p, mode, record)
    busy = min(w.topic_partitions, shards)
    pps = w.topic_partitions / busy
    r_s = e / busy  # records per second on a busy shard
    inv = min(r_s, max(1 / p.esm_window_s, r_s / p.esm_batch_size, r_s * record / p.esm_max_payload_bytes))
    records_per_inv = r_s / inv if inv > 0 else 0.0
    present = pps * (1 - math.exp(-records_per_inv / pps)) if pps > 0 else 0.0
    present = max(min(present, records_per_inv), 1.0 if records_per_inv > 0 else 0.0)
    epr = min(
        w.entries_per_receive,
        p.receive_max_entries,
        max(1.0, math.floor(p.receive_max_messages / b)),
        max(1.0, math.floor(p.receive_max_bytes / (b * m))),
    )
    response = epr * b * (base64_bytes(m) + p.consume_json_bytes_per_message) + p.http_envelope_bytes
    return Shape(
        entries_per_s=e,
        record_bytes=record,
        shards=shards,
        busy_shards=busy,
        partitions_per_shard=pps,
        tail_amplification=amp,
        seal_invocations_per_s=busy * inv,
        partitions_per_seal=present,
        entries_per_segment=records_per_inv / present if present else 0.0,
        entries_per_receive=epr,
        receives_per_s=w.subscriptions * e / epr,
        response_bytes=response,
    )


def _gb_s(w: Workload, ms: float) -> float:
    return ms / 1000 * w.lambda_memory_mb / 1024


def _magnetar_usage(w: Workload, p: Parameters, mode: Mode) -> tuple[Shape, dict[str, Usage], dict[str, float]]:
    """Per-second usage by step (scaled to the month by the caller), and request counts per second."""
    s = _shape(w, p, mode)
    e = s.entries_per_s
    b, m = w.batch_size, w.message_bytes
    logs = p.log_bytes_per_invocation / GiB

    # produce: per entry
    produce_body = b * (base64_bytes(m * p.compression_ratio) + p.produce_json_bytes_per_message) + p.http_envelope_bytes
    produce = Usage(
        apigw_requests=e * apigw_units(produce_body),
        lambda_requests=e,
        lambda_gb_s=e * _gb_s(w, w.produce_lambda_ms),
        dynamodb_wru=e * p.writer_updates_per_entry * wru(p.writer_item_bytes),
        kinesis_od_ingest_gb=e * p.journal_puts_per_entry * kinesis_ondemand_ingest_bytes(s.record_bytes) / GiB,
        kinesis_ppu=e * p.journal_puts_per_entry * kinesis_put_payload_units(s.record_bytes),
        logs_gb=e * logs,
    )

    # seal: per event-source invocation, per partition present in it
    inv = s.seal_invocations_per_s
    sealed = inv * s.partitions_per_seal  # segments per second
    segment_item = p.segment_item_base_bytes + p.segment_offset_bytes_per_entry * s.entries_per_segment
    seal = Usage(
        lambda_requests=inv,
        lambda_gb_s=inv * _gb_s(w, w.seal_lambda_ms + w.seal_lambda_ms_per_partition * s.partitions_per_seal),
        dynamodb_rru=inv * p.seal_batchgets_per_invocation * s.partitions_per_seal * rru(p.seal_item_bytes),
        dynamodb_wru=sealed * (wru(segment_item, transactional=True) + wru(p.seal_item_bytes, transactional=True)),
        s3_put_requests=sealed * p.segment_puts_per_partition,
        kinesis_od_retrieval_gb=e * s.record_bytes / GiB,  # the event-source mapping reads every record once
        logs_gb=inv * logs,
    )

    # consume: per receive, per subscription
    r = s.receives_per_s
    reads = r * (1 - min(p.entry_cache_hit_fraction, 1.0))  # receives that read the journal or a segment
    tail, backlog = reads * p.tail_read_fraction, reads * (1 - p.tail_read_fraction)
    metered = max(p.http_envelope_bytes, s.response_bytes if p.apigw_meter_response else 0.0)
    receive_rru = rru(p.cursor_item_bytes) + rru(p.seal_item_bytes) + rru(p.writer_item_bytes)
    flushes = r * p.ack_flushes_per_receive
    consume = Usage(
        apigw_requests=r * apigw_units(metered) + flushes,
        lambda_requests=r + flushes,
        lambda_gb_s=(r + flushes) * _gb_s(w, w.receive_lambda_ms),
        dynamodb_rru=(r * p.receive_batchgets + flushes) * receive_rru
        + backlog * p.backlog_queries_per_receive * rru(segment_item),
        dynamodb_wru=(r * p.cursor_puts_per_receive + flushes) * wru(p.cursor_item_bytes),
        s3_get_requests=backlog * p.backlog_gets_per_receive,
        kinesis_od_retrieval_gb=w.subscriptions * e * (tail / r if r else 0.0) * s.record_bytes * s.tail_amplification / GiB,
        logs_gb=(r + flushes) * logs,
    )

    # storage: sealed segments for the retention window (steady state), segment items alike
    retention_s = w.retention_hours * SECONDS_PER_HOUR
    month_fraction = 1 / (w.hours_per_month * SECONDS_PER_HOUR)  # per-second rates are scaled by the month's seconds
    storage = Usage(
        s3_gb_month=e * s.record_bytes * retention_s / GiB * (w.hours_per_month / HOURS_PER_MONTH) * month_fraction,
        dynamodb_gb_month=sealed * segment_item * retention_s / GiB * (w.hours_per_month / HOURS_PER_MONTH) * month_fraction,
    )

    # fixed: the stream, the shards, the maintenance schedule
    maint = 1 / p.maintenance_interval_s
    fixed = Usage(
        kinesis_od_stream_hours=1 / SECONDS_PER_HOUR,
        kinesis_shard_hours=s.shards / SECONDS_PER_HOUR,
        eventbridge_invocations=maint,
        lambda_requests=maint,
        lambda_gb_s=maint * _gb_s(w, w.maintenance_lambda_ms),
        logs_gb=maint * logs,
    )

    requests = {
        "apigateway.HttpRequest": e + r + flushes,
        "lambda.Invoke.broker": e + r + flushes,
        "lambda.Invoke.journal_consumer": inv,
        "dynamodb.UpdateItem": e * p.writer_updates_per_entry,
        "dynamodb.BatchGetItem": inv * p.seal_batchgets_per_invocation + r * p.receive_batchgets + flushes,
        "dynamodb.TransactWriteItems": sealed,
        "dynamodb.PutItem": r * p.cursor_puts_per_receive + flushes,
        "dynamodb.Query": backlog * p.backlog_queries_per_receive,
        "kinesis.PutRecord": e * p.journal_puts_per_entry,
        "kinesis.GetRecords": s.shards * p.esm_getrecords_per_shard_per_s + tail * p.getrecords_per_tail_read,
        "kinesis.GetShardIterator": tail * p.getshard_iterators_per_tail_read,
        "s3.PutObject": sealed * p.segment_puts_per_partition,
        "s3.GetObject": backlog * p.backlog_gets_per_receive,
    }
    return s, {"produce": produce, "seal": seal, "consume": consume, "storage": storage, "fixed": fixed}, requests


def _idle_usage_per_consumer_hour(w: Workload, p: Parameters) -> Usage:
    """An idle consumer long-polls: each poll is one request held for the full wait, re-reading the
    cursor view every poll interval, and renewing its lease when half spent."""
    polls = SECONDS_PER_HOUR / (p.idle_poll_wait_s + p.request_latency_s)
    reads_per_poll = p.idle_poll_wait_s / (p.idle_poll_interval_s + p.request_latency_s) + 1
    receive_rru = rru(p.cursor_item_bytes) + rru(p.seal_item_bytes) + rru(p.writer_item_bytes)
    return Usage(
        apigw_requests=polls,
        lambda_requests=polls,
        lambda_gb_s=polls * _gb_s(w, p.idle_poll_wait_s * 1000),
        dynamodb_rru=polls * reads_per_poll * receive_rru,
        dynamodb_wru=SECONDS_PER_HOUR / p.lease_renew_interval_s * wru(p.cursor_item_bytes),
        logs_gb=polls * p.log_bytes_per_invocation / GiB,
    )


def _warnings(w: Workload, p: Parameters, s: Shape, requests: Mapping[str, float]) -> list[str]:
    out: list[str] = []
    per_partition_entries = s.entries_per_s / w.topic_partitions
    per_partition_bytes = per_partition_entries * s.record_bytes
    if per_partition_bytes > MiB or per_partition_entries > 1000:
        out.append(
            f"each topic partition writes {per_partition_bytes / MiB:.2f} MiB/s in {per_partition_entries:,.0f} records/s "
            "to ONE Kinesis shard (limit 1 MiB/s and 1,000 records/s): add topic partitions"
        )
    else:
        load = max(per_partition_bytes / MiB, per_partition_entries / 1000)
        if load > p.provisioned_target_utilization:
            out.append(
                f"each topic partition uses {load:.0%} of one Kinesis shard's write capacity (all its records go to one "
                f"shard): no headroom for bursts above {p.provisioned_target_utilization:.0%}; consider more topic partitions"
            )
    if per_partition_entries > 1000:
        out.append(
            f"each topic partition reserves {per_partition_entries:,.0f} entry ids/s on one DynamoDB item "
            "(~1,000 writes/s per partition key): add topic partitions or batch more"
        )
    tail_reads_per_shard = (
        s.partitions_per_shard * (s.receives_per_s / w.topic_partitions) * _tail_share(p) * p.getrecords_per_tail_read
        if w.subscriptions
        else 0.0
    )
    getrecords_per_shard = p.esm_getrecords_per_shard_per_s + tail_reads_per_shard
    if getrecords_per_shard > 5:
        out.append(
            f"~{getrecords_per_shard:.1f} GetRecords/s on a busy shard (event-source mapping + tail reads of "
            f"{w.subscriptions} subscription(s)); Kinesis allows 5/s per shard: tail readers will be throttled "
            "(add topic partitions, read sealed segments from S3, or use enhanced fan-out)"
        )
    read_bps = (s.record_bytes * s.entries_per_s / s.busy_shards) * (
        1 + w.subscriptions * _tail_share(p) * s.tail_amplification
    )
    if read_bps > 2 * MiB:
        out.append(
            f"~{read_bps / MiB:.2f} MiB/s read from a busy shard; Kinesis allows 2 MiB/s per shard (shared throughput)"
        )
    return out


def monthly_cost(workload: Workload) -> CostReport:
    """The monthly AWS bill of `workload` on Magnetar, by component and step, for both Kinesis modes."""
    w, p = workload, workload.params()
    month_s = w.hours_per_month * SECONDS_PER_HOUR
    arch = w.lambda_architecture
    idle_hour = _idle_usage_per_consumer_hour(w, p)
    idle_hour_usd = sum(price_usage({"idle": idle_hour}, "on_demand", arch, tiered=False)["idle"].values())
    ws_idle = _cost("apigw.websocket.connection_minute", 60.0, tiered=False)

    modes: dict[str, ModeCost] = {}
    requests: dict[str, dict[str, float]] = {}
    mode_warnings: dict[str, list[str]] = {}
    for mode in MODES:
        shape, steps, req = _magnetar_usage(w, p, mode)
        monthly = {k: u.scaled(month_s) for k, u in steps.items()}
        monthly["idle"] = idle_hour.scaled(w.idle_consumer_hours_per_month)
        priced = price_usage(monthly, mode, arch)
        idle = priced.pop("idle")
        components = _sum_components(priced.values())
        active = sum(components.values())
        idle_usd = sum(idle.values())
        modes[mode] = ModeCost(
            mode=mode,
            kinesis_shards=shape.shards,
            by_step=priced,
            components=components,
            monthly_usd=active,
            idle_usd=idle_usd,
            total_usd=active + idle_usd,
            usd_per_million_messages=active / (w.messages_per_month / 1e6),
        )
        requests[mode] = {k: v / w.produce_rate_msgs_per_s * 1e6 for k, v in req.items()}
        mode_warnings[mode] = _warnings(w, p, shape, req)
    both = [t for t in mode_warnings["on_demand"] if t in mode_warnings["provisioned"]]
    warnings = both + [
        f"{mode.replace('_', '-')} Kinesis only: {t}" for mode in MODES for t in mode_warnings[mode] if t not in both
    ]

    od_shape = _shape(w, p, "on_demand")
    notes = [
        f"an entry is {od_shape.record_bytes:,.0f} bytes encoded ({w.batch_size} x {w.message_bytes} B payload); "
        f"receives deliver {od_shape.entries_per_receive:g} entries each ({od_shape.response_bytes / KiB:,.0f} KB of JSON)",
        f"sealing: {od_shape.seal_invocations_per_s:.2f} journal-consumer invocations/s, "
        f"{od_shape.partitions_per_seal:.2f} partition(s) and {od_shape.entries_per_segment:.1f} entries per segment",
        "DynamoDB storage (segment items for the retention window, cursors, counters) is included and negligible; "
        "point-in-time recovery on the table adds a similar negligible amount",
        "Kinesis keeps the journal 24 h (included in both modes); segments stay in S3 for the retention window",
    ]
    return CostReport(
        workload=w,
        messages_per_month=w.messages_per_month,
        on_demand=modes["on_demand"],
        provisioned=modes["provisioned"],
        requests_per_million_messages=requests,
        idle_usd_per_consumer_hour=idle_hour_usd,
        websocket_idle_usd_per_consumer_hour=ws_idle,
        warnings=warnings,
        notes=notes,
    )


# ----------------------------------------------------------------------------------------------
# Alternatives: SQS, Kinesis directly, Pulsar on EC2
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Alternative:
    name: str
    monthly_usd: float  # active workload (idle consumers excluded)
    usd_per_million_messages: float
    lines: dict[str, float]  # what the bill is made of, USD per month
    assumptions: str
    idle_usd: float = 0.0
    fixed_monthly: bool = False  # the cost does not fall with the rate (capacity bought by the hour)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Comparison:
    workload: Workload
    rows: list[Alternative]
    prices_as_of: str = PRICES_AS_OF

    def row(self, name_prefix: str) -> Alternative:
        for r in self.rows:
            if r.name.startswith(name_prefix):
                return r
        raise KeyError(name_prefix)

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload.model_dump(), "prices_as_of": self.prices_as_of, "rows": [r.to_dict() for r in self.rows]}


def _alt(name: str, w: Workload, lines: dict[str, float], assumptions: str, idle: float = 0.0, fixed: bool = False) -> Alternative:
    total = sum(lines.values())
    return Alternative(name, total, total / (w.messages_per_month / 1e6), lines, assumptions, idle, fixed)


def _sqs(w: Workload, p: Parameters, variant: Literal["unbatched", "batched", "packed"]) -> Alternative:
    month_s = w.hours_per_month * SECONDS_PER_HOUR
    r, m, subs = w.produce_rate_msgs_per_s, w.message_bytes, w.subscriptions
    fanout = subs > 1
    if variant == "unbatched":
        per_sqs_msg, per_send = 1.0, 1.0
        per_receive = 1.0
        how = "SendMessage / ReceiveMessage / DeleteMessage of one message each"
    elif variant == "batched":
        per_sqs_msg = 1.0
        per_send = max(1.0, min(p.sqs_batch, math.floor(p.sqs_max_message_bytes / m)))
        per_receive = min(p.sqs_messages_per_receive, per_send)
        how = f"SendMessageBatch, ReceiveMessage and DeleteMessageBatch of {per_send:g} messages"
    else:
        per_sqs_msg = max(1.0, min(float(w.batch_size), math.floor(p.sqs_max_message_bytes / m)))
        per_send = max(1.0, min(p.sqs_batch, math.floor(p.sqs_max_message_bytes / (per_sqs_msg * m))))
        per_receive = min(p.sqs_messages_per_receive, per_send)
        how = (
            f"the producer packs {per_sqs_msg:g} messages into one SQS message (as Magnetar's batch) and sends "
            f"{per_send:g} of them per SendMessageBatch"
        )
    sqs_msgs = r / per_sqs_msg  # SQS messages per second
    sqs_bytes = per_sqs_msg * m * (p.compression_ratio if variant == "packed" else 1.0)  # packed batches compress
    sends = sqs_msgs / per_send * sqs_chunks(per_send * sqs_bytes)
    receives = sqs_msgs / per_receive * sqs_chunks(per_receive * sqs_bytes)
    deletes = sqs_msgs / per_receive  # DeleteMessage(Batch) of what one receive returned
    lines: dict[str, float] = {}
    if fanout:
        lines["sns_publish"] = _cost("sns.standard.publish", sends * month_s)
        queue_requests = subs * (receives + deletes)
        where = f"an SNS topic fans out to {subs} queues (one per subscription; SNS-to-SQS deliveries are free)"
    else:
        queue_requests = sends + receives + deletes
        where = "one queue"
    lines["sqs_requests"] = _cost("sqs.standard.request", queue_requests * month_s)
    idle = _cost("sqs.standard.request", w.idle_consumer_hours_per_month * SECONDS_PER_HOUR / 20.0)
    title = {"unbatched": "SQS standard, unbatched", "batched": "SQS standard, batched (10)", "packed": "SQS standard, client-side packed"}[variant]
    return _alt(
        title, w, lines,
        f"{how}; {where}; each 64 KB chunk of a request's payload bills as one request; retention up to 14 days is free; "
        "idle consumers: 3 empty 20 s long polls a minute",
        idle,
    )


def _kinesis_direct(w: Workload, p: Parameters, mode: Mode) -> Alternative:
    month_h = w.hours_per_month
    month_s = month_h * SECONDS_PER_HOUR
    b, m, subs = w.batch_size, w.message_bytes, w.subscriptions
    records = w.produce_rate_msgs_per_s / b  # KPL aggregation of the workload's batch into one record
    record = (
        batch_payload_bytes(b, m, p) + p.kinesis_direct_record_overhead_bytes if b > 1 else float(m)
    )  # KPL-aggregated (and compressed) batch, or the bare message
    write_bps = records * record
    lines: dict[str, float] = {}
    if mode == "on_demand":
        lines["kinesis_stream_hours"] = _cost("kinesis.ondemand.stream_hour", month_h)
        lines["kinesis_ingest"] = _cost("kinesis.ondemand.ingest_gb", records * kinesis_ondemand_ingest_bytes(record) * month_s / GiB)
        lines["kinesis_retrieval"] = _cost("kinesis.ondemand.retrieval_gb", subs * write_bps * month_s / GiB)
        shards = max(int(p.ondemand_min_shards), math.ceil(2 * write_bps / MiB), math.ceil(2 * records / 1000))
    else:
        u = p.provisioned_target_utilization or 1.0
        shards = max(
            1,
            math.ceil(write_bps / (MiB * u)),
            math.ceil(records / (1000 * u)),
            math.ceil(subs * write_bps / (2 * MiB * u)),
        )
        lines["kinesis_shard_hours"] = _cost("kinesis.provisioned.shard_hour", shards * month_h)
        lines["kinesis_put_payload_units"] = _cost("kinesis.provisioned.put_payload_unit", records * kinesis_put_payload_units(record) * month_s)
    limit = ""
    if subs * p.kinesis_direct_getrecords_per_shard_per_s > 5:
        limit = f" {subs} consumer applications poll each shard more than 5 times/s: enhanced fan-out (extra cost, not modeled) would be needed."
    mode_name = "on-demand" if mode == "on_demand" else "provisioned"
    return _alt(
        f"Kinesis Data Streams directly, {mode_name}", w, lines,
        f"producers aggregate {b} message(s) per record (KPL) and call PutRecords; each subscription is a KCL application "
        f"reading every record with GetRecords; {shards} shard(s); 24 h retention included; KCL's DynamoDB lease table "
        f"and consumer compute not counted.{limit}",
    )


_I3 = (("i3.xlarge", 950.0), ("i3.2xlarge", 1900.0), ("i3.4xlarge", 3800.0), ("i3.8xlarge", 7600.0), ("i3.16xlarge", 15200.0))


@dataclass(frozen=True)
class PulsarSizing:
    zookeepers: int
    zookeeper_type: str
    brokers: int
    broker_type: str
    bookies: int
    bookie_type: str
    bookie_disk_gb: float
    stored_gb: float
    ebs_gb: float
    cross_az_gb_per_month: float


def pulsar_sizing(w: Workload, p: Parameters | None = None) -> PulsarSizing:
    """3 ZooKeeper + 3 brokers + 3 bookies (Pulsar's bare-metal guide), instance types from Pulsar's AWS
    deployment (deployment/terraform-ansible/aws/terraform.tfvars: zookeeper t3.small, bookie i3.xlarge,
    broker c5.2xlarge); bookies grow within the i3 family, then in number, to hold the retention."""
    p = p or w.params()
    payload_bps = w.entries_per_s * batch_payload_bytes(w.batch_size, w.message_bytes, p)  # Pulsar batches compress too
    stored_gb = payload_bps * w.retention_hours * SECONDS_PER_HOUR * p.pulsar_write_quorum / GiB
    bookies = 3
    while stored_gb / bookies / p.pulsar_disk_fill > _I3[-1][1]:
        bookies += 3  # beyond the largest i3, add bookies three at a time (one per AZ)
    per_bookie = stored_gb / bookies / p.pulsar_disk_fill
    bookie_type, bookie_gb = next((name, gb) for name, gb in _I3 if gb >= per_bookie)
    broker_mb_s = payload_bps * (1 + p.pulsar_write_quorum + w.subscriptions) / 1e6  # in, to bookies, out to consumers
    brokers = max(3, math.ceil(broker_mb_s / p.pulsar_broker_max_mb_per_s))
    crossings = p.pulsar_cross_az_fraction * (1 + p.pulsar_write_quorum + w.subscriptions)
    cross_az = payload_bps * crossings * w.hours_per_month * SECONDS_PER_HOUR / GiB
    instances = 3 + brokers + bookies
    return PulsarSizing(
        3, "t3.small", brokers, "c5.2xlarge", bookies, bookie_type, bookie_gb, stored_gb,
        instances * p.pulsar_root_volume_gb, cross_az,
    )


def _pulsar(w: Workload, p: Parameters) -> Alternative:
    z = pulsar_sizing(w, p)
    h = w.hours_per_month
    lines = {
        "ec2_zookeeper": z.zookeepers * _cost(f"ec2.{z.zookeeper_type}.hour", h),
        "ec2_brokers": z.brokers * _cost(f"ec2.{z.broker_type}.hour", h),
        "ec2_bookies": z.bookies * _cost(f"ec2.{z.bookie_type}.hour", h),
        "ebs_gp3": _cost("ebs.gp3.gb_month", z.ebs_gb * h / HOURS_PER_MONTH),
        "cross_az_transfer": _cost("ec2.transfer.cross_az_gb", z.cross_az_gb_per_month),
    }
    return _alt(
        "Pulsar on EC2 (3 ZK + 3 brokers + 3 bookies)", w, lines,
        f"{z.zookeepers} x {z.zookeeper_type} ZooKeeper, {z.brokers} x {z.broker_type} brokers, {z.bookies} x {z.bookie_type} "
        f"bookies (journal and ledgers on instance NVMe, {z.stored_gb:,.0f} GB stored at write quorum "
        f"{p.pulsar_write_quorum:g}), {z.ebs_gb:,.0f} GB gp3 root volumes, on-demand, one of each role per AZ; "
        f"{z.cross_az_gb_per_month:,.0f} GB/month cross-AZ (clients and replicas spread over 3 AZs). "
        "Fixed monthly cost: the cost per message falls as the rate rises. Operations staff, monitoring, load balancer "
        "and reserved-instance discounts not included.",
        fixed=True,
    )


def compare(workload: Workload, report: CostReport | None = None) -> Comparison:
    """The same workload on Magnetar (both Kinesis modes), SQS, Kinesis directly and Pulsar on EC2."""
    w, p = workload, workload.params()
    report = report or monthly_cost(w)
    rows: list[Alternative] = []
    for mode in MODES:
        mc = report.mode(mode)
        name = "on-demand" if mode == "on_demand" else "provisioned"
        rows.append(
            Alternative(
                f"Magnetar, {name} Kinesis", mc.monthly_usd, mc.usd_per_million_messages, dict(mc.components),
                f"this model; {mc.kinesis_shards} shard(s)" + (" (capacity managed by AWS)" if mode == "on_demand" else ""),
                mc.idle_usd,
            )
        )
    rows += [_sqs(w, p, "unbatched"), _sqs(w, p, "batched"), _sqs(w, p, "packed")]
    rows += [_kinesis_direct(w, p, "on_demand"), _kinesis_direct(w, p, "provisioned")]
    rows.append(_pulsar(w, p))
    return Comparison(w, rows)


# ----------------------------------------------------------------------------------------------
# Measured runs (magnetar perf --json)
# ----------------------------------------------------------------------------------------------

# DynamoDB request units per request when no item sizes are given: documented defaults of the model.
DEFAULT_UNITS_PER_REQUEST: dict[str, tuple[str, float]] = {
    "dynamodb.UpdateItem": ("wru", float(wru(DEFAULT_PARAMETERS.writer_item_bytes))),
    "dynamodb.PutItem": ("wru", float(wru(DEFAULT_PARAMETERS.cursor_item_bytes))),
    "dynamodb.TransactWriteItems": (
        "wru",
        float(wru(DEFAULT_PARAMETERS.segment_item_base_bytes + 8 * 10, True) + wru(DEFAULT_PARAMETERS.seal_item_bytes, True)),
    ),
    "dynamodb.BatchGetItem": (
        "rru",
        rru(DEFAULT_PARAMETERS.cursor_item_bytes) + rru(DEFAULT_PARAMETERS.seal_item_bytes) + rru(DEFAULT_PARAMETERS.writer_item_bytes),
    ),
    "dynamodb.GetItem": ("rru", 1.0),
    "dynamodb.Query": ("rru", 1.0),
    "dynamodb.DeleteItem": ("wru", 1.0),
}


def _ddb_kind(operation: str, kinds: Mapping[str, str]) -> str:
    """"wru", "rru" or "" (not DynamoDB) for a "service.Operation" key."""
    if not operation.startswith("dynamodb."):
        return ""
    if operation in kinds:
        return kinds[operation]
    name = operation.split(".", 1)[1]
    return "rru" if name.startswith(("Get", "BatchGet", "Query", "Scan", "TransactGet")) else "wru"


def cost_of_measured_run(
    aws_requests: Mapping[str, int],
    messages: int,
    message_bytes: int,
    lambda_invocations: Mapping[str, int],
    lambda_ms: Mapping[str, float],
    seconds: float,
    *,
    batch_size: int | None = None,
    subscriptions: int = 1,
    retention_hours: float = 24.0,
    lambda_memory_mb: int = 1024,
    lambda_architecture: Literal["arm64", "x86_64"] = "arm64",
    apigw_requests: int | None = None,
    kinesis_bytes_in: float | None = None,
    kinesis_bytes_out: float | None = None,
    item_bytes: Mapping[str, float] | None = None,
    units_per_request: Mapping[str, float] | None = None,
    maintenance_lambda_ms: float = 500.0,
    compression_ratio: float = 1.0,
) -> dict[str, Any]:
    """Cost per million messages of a measured run, by component, for both Kinesis modes.

    - `aws_requests`: counts by "service.Operation" (the botocore hook's keys), e.g.
      {"dynamodb.UpdateItem": 200, "kinesis.PutRecord": 200, "s3.PutObject": 5, ...};
    - `messages`: messages produced (each consumed once per subscription); `message_bytes`: payload size;
    - `lambda_invocations` / `lambda_ms`: invocations and MEAN billed duration (ms) per function
      (keys such as "magnetar-broker", "magnetar-journal-consumer"); every invocation of a function whose
      name contains "broker" is one API Gateway request unless `apigw_requests` (metered 512 KB units)
      is given;
    - `seconds`: the run's wall time, used to pro-rate hourly charges (stream-hours, shard-hours, the
      maintenance schedule) as if the run's rate were sustained;
    - sizes: `kinesis_bytes_in` / `kinesis_bytes_out` (journal bytes written / retrieved) default to an
      estimate from the record size (and 1 ESM read + `subscriptions` tail reads); `item_bytes` may give
      "writer", "cursor", "seal", "segment" item sizes for DynamoDB units; `units_per_request` overrides
      units per request outright (e.g. {"dynamodb.BatchGetItem": 2.5}). Default units per request are
      `DEFAULT_UNITS_PER_REQUEST`; `compression_ratio` scales the estimated record size.

    Prices are first-tier (volume tiers are a monthly notion). Returns a JSON-ready dict whose only
    top-level numbers are the totals "on_demand_kinesis" and "provisioned_kinesis" (USD per million
    messages); "by_mode" holds the components, the run's cost and its monthly extrapolation.
    """
    if messages <= 0 or seconds <= 0:
        raise ValueError("messages and seconds must be positive")
    p = DEFAULT_PARAMETERS
    sizes = dict(item_bytes or {})
    units = {k: v for k, (_, v) in DEFAULT_UNITS_PER_REQUEST.items()}
    if "writer" in sizes:
        units["dynamodb.UpdateItem"] = wru(sizes["writer"])
    if "cursor" in sizes:
        units["dynamodb.PutItem"] = wru(sizes["cursor"])
    if "cursor" in sizes or "seal" in sizes or "writer" in sizes:
        units["dynamodb.BatchGetItem"] = (
            rru(sizes.get("cursor", p.cursor_item_bytes)) + rru(sizes.get("seal", p.seal_item_bytes))
            + rru(sizes.get("writer", p.writer_item_bytes))
        )
    if "segment" in sizes or "seal" in sizes:
        units["dynamodb.TransactWriteItems"] = wru(sizes.get("segment", p.segment_item_base_bytes + 80), True) + wru(
            sizes.get("seal", p.seal_item_bytes), True
        )
    units.update(units_per_request or {})
    kinds = {k: kind for k, (kind, _) in DEFAULT_UNITS_PER_REQUEST.items()}

    req = dict(aws_requests)
    puts = req.get("kinesis.PutRecord", 0) + req.get("kinesis.PutRecords", 0)
    per_entry = batch_size or (messages / puts if puts else 1)
    p = replace(p, compression_ratio=compression_ratio)
    record = batch_payload_bytes(per_entry, message_bytes, p) + p.per_entry_overhead_bytes
    bytes_in = kinesis_bytes_in if kinesis_bytes_in is not None else puts * record
    od_ingest = (
        kinesis_bytes_in if kinesis_bytes_in is not None else puts * kinesis_ondemand_ingest_bytes(record)
    )
    bytes_out = kinesis_bytes_out if kinesis_bytes_out is not None else bytes_in * (1 + subscriptions)
    mean_record = bytes_in / puts if puts else record

    wru_total = sum(n * units.get(k, 1.0) for k, n in req.items() if _ddb_kind(k, kinds) == "wru")
    rru_total = sum(n * units.get(k, 1.0) for k, n in req.items() if _ddb_kind(k, kinds) == "rru")
    invocations = sum(lambda_invocations.values())
    gb_s = sum(n * lambda_ms.get(fn, 0.0) / 1000 * lambda_memory_mb / 1024 for fn, n in lambda_invocations.items())
    hours = seconds / SECONDS_PER_HOUR
    write_bps = bytes_in / seconds
    records_ps = puts / seconds
    read_bps = bytes_out / seconds
    u = p.provisioned_target_utilization
    shards = max(1, math.ceil(write_bps / (MiB * u)), math.ceil(records_ps / (1000 * u)), math.ceil(read_bps / (2 * MiB * u)))
    maint = seconds / p.maintenance_interval_s
    # every invocation of the broker ("broker", "magnetar-broker", …) answered one API Gateway request
    broker_calls = sum(n for fn, n in lambda_invocations.items() if "broker" in fn.lower())
    if not any("broker" in fn.lower() for fn in lambda_invocations):
        broker_calls = sum(n for fn, n in lambda_invocations.items() if "journal" not in fn.lower())
    usage = Usage(
        apigw_requests=float(apigw_requests if apigw_requests is not None else broker_calls),
        lambda_requests=invocations + maint,
        lambda_gb_s=gb_s + maint * maintenance_lambda_ms / 1000 * lambda_memory_mb / 1024,
        dynamodb_wru=wru_total,
        dynamodb_rru=rru_total,
        kinesis_od_stream_hours=hours,
        kinesis_od_ingest_gb=od_ingest / GiB,
        kinesis_od_retrieval_gb=bytes_out / GiB,
        kinesis_shard_hours=shards * hours,
        kinesis_ppu=puts * kinesis_put_payload_units(mean_record),
        s3_put_requests=float(req.get("s3.PutObject", 0)),
        s3_get_requests=float(req.get("s3.GetObject", 0)),
        s3_gb_month=messages / per_entry * record * retention_hours / HOURS_PER_MONTH / GiB,
        eventbridge_invocations=maint,
        logs_gb=(invocations + maint) * p.log_bytes_per_invocation / GiB,
    )
    # Top-level numbers are only the two headline figures (USD per million messages); details nest.
    out: dict[str, Any] = {}
    by_mode: dict[str, Any] = {}
    scale = 1e6 / messages
    for mode in MODES:
        comp = price_usage({"run": usage}, mode, lambda_architecture, tiered=False)["run"]
        per_million = {k: v * scale for k, v in comp.items()}
        per_million["total"] = sum(per_million.values())
        out[f"{mode}_kinesis"] = per_million["total"]
        by_mode[mode] = {
            "usd_per_million_messages": per_million,
            "usd_run": sum(comp.values()),
            "usd_per_month_at_this_rate": sum(comp.values()) * HOURS_PER_MONTH * SECONDS_PER_HOUR / seconds,
            "kinesis_shards": shards if mode == "provisioned" else None,
        }
    out["by_mode"] = by_mode
    out["run"] = {"messages": messages, "seconds": seconds, "messages_per_s": messages / seconds}
    out["prices_as_of"] = PRICES_AS_OF
    out["assumptions"] = {
        "messages_per_entry": per_entry,
        "record_bytes": mean_record,
        "kinesis_bytes_in": bytes_in,
        "kinesis_bytes_out": bytes_out,
        "dynamodb_units_per_request": units,
        "apigw_requests": usage.apigw_requests,
        "retention_hours": retention_hours,
        "hourly_charges": "pro-rated over the run's seconds (stream-hours, shard-hours, maintenance schedule)",
        "free_tiers": "ignored",
    }
    return out


def headline(workload: Workload) -> dict[str, float]:
    """USD per million messages end to end for Magnetar (both modes) and batched SQS."""
    c = compare(workload)
    return {
        "magnetar_on_demand": c.row("Magnetar, on-demand").usd_per_million_messages,
        "magnetar_provisioned": c.row("Magnetar, provisioned").usd_per_million_messages,
        "sqs_batched": c.row("SQS standard, batched").usd_per_million_messages,
    }


__all__ = [
    "COMPONENTS",
    "DEFAULT_PARAMETERS",
    "PRICES",
    "PRICES_AS_OF",
    "Alternative",
    "Comparison",
    "CostReport",
    "ModeCost",
    "Parameters",
    "Price",
    "Usage",
    "Workload",
    "WorkloadError",
    "compare",
    "cost_of_measured_run",
    "headline",
    "load_workload",
    "monthly_cost",
    "price_table",
    "price_usage",
    "pulsar_sizing",
]
