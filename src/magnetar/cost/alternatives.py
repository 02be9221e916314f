"""The same workload without Magnetar: Amazon SQS (unbatched, batched, client-side packed; SNS fan-out
for several subscriptions), Kinesis Data Streams used directly (both capacity modes) and self-managed
Pulsar on EC2 (sized by `pulsar_sizing`). Each is an `Alternative` row of the comparison."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from magnetar.cost.prices import HOURS_PER_MONTH, SECONDS_PER_HOUR, GiB, MiB, _cost
from magnetar.cost.units import (
    batch_payload_bytes,
    kinesis_ondemand_ingest_bytes,
    kinesis_put_payload_units,
    sqs_chunks,
)
from magnetar.cost.usage import Mode
from magnetar.cost.workload import Parameters, Workload


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


def _msk_serverless(w: Workload, p: Parameters) -> Alternative:
    """Amazon MSK Serverless: a cluster-hour, a partition-hour per topic partition, data in and out
    per GiB (the batch's payload, compressed as Kafka's producer batches), storage for the retention."""
    h = w.hours_per_month
    payload_bps = w.entries_per_s * batch_payload_bytes(w.batch_size, w.message_bytes, p)
    month_gib = payload_bps * h * SECONDS_PER_HOUR / GiB
    lines = {
        "msk_cluster_hours": _cost("msk.serverless.cluster_hour", h),
        "msk_partition_hours": _cost("msk.serverless.partition_hour", w.topic_partitions * h),
        "msk_data_in": _cost("msk.serverless.in_gb", month_gib),
        "msk_data_out": _cost("msk.serverless.out_gb", month_gib * w.subscriptions),
        "msk_storage": _cost("msk.serverless.storage_gb_month",
                             payload_bps * w.retention_hours * SECONDS_PER_HOUR / GiB * h / HOURS_PER_MONTH),
    }
    return _alt(
        "MSK Serverless", w, lines,
        f"one cluster, {w.topic_partitions} partition(s) billed by the hour whether used or not; producers batch "
        f"{w.batch_size} message(s) per request; each subscription a consumer group reading everything once; clients "
        "inside the VPC (IAM authentication), their compute not counted. The cluster-hour is the floor of the bill.",
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
