"""The workload model: `Parameters` (every per-operation count and size the model assumes, each
overridable by name), `Workload` (pydantic, validated at the boundary) and `load_workload` (YAML files
such as bench/workloads/*.yaml)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from magnetar.cost.prices import HOURS_PER_MONTH, SECONDS_PER_HOUR, MiB
from magnetar.cost.units import batch_payload_bytes


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
    # with enhanced fan-out, the journal consumer holds a busy shard's batch until its oldest record
    # waited this long (ledger.pacing): a busy shard is sealed once per target + `seal_lambda_ms`
    seal_latency_ms: float = 200.0  # DEFAULT_SEAL_LATENCY_MS, the stack's `sealLatencyMs`
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

    # --- idle consumers (nothing to deliver) -----------------------------------------------------
    idle_watch: float = 1.0  # 1: the SDK's default delivery waits on its idle watch; 0: long polls (delivery "poll")
    idle_look_interval_s: float = 9.0  # LOOK_S: a look while watching (renews the lease, finds redeliveries)
    idle_look_ms: float = 20.0  # a look's billed broker duration (one view read, nothing to deliver)
    idle_poll_wait_s: float = 20.0  # MAX_WAIT_MS
    idle_poll_interval_s: float = 0.2  # POLL_INTERVAL_S: the broker re-reads the cursor view while it waits
    request_latency_s: float = 0.01  # one DynamoDB round trip inside the poll loop
    lease_renew_interval_s: float = 15.0  # the lease (30 s) is renewed when half spent

    # --- Pulsar Functions: the dispatcher (magnetar.cost.functions) --------------------------------
    function_record_bytes: float = 1500.0  # the function's registry item (FunctionConfig JSON), read per dispatcher start
    function_lease_item_bytes: float = 150.0  # a dispatch slot's lease item (conditional PutItem, DeleteItem)
    function_stats_writes_per_invocation: float = 5.0  # UpdateItem: received, processed, latency sum and count, last invocation
    function_state_item_bytes: float = 200.0  # a state or stats item (one put_state / incr_counter: one UpdateItem)
    function_output_property_bytes: float = 150.0  # __pfn_input_topic__ and __pfn_input_msg_id__ on each output
    function_trigger_ms: float = 10.0  # the journal consumer's asynchronous Invoke of a dispatcher, per seal
    dispatcher_start_ms: float = 40.0  # a dispatcher's start: the record, the input's partitions, subscribe, the slot
    dispatcher_batch_ms: float = 120.0  # per batch besides the function's own time: lease, receive, store, stats, ack
    dispatcher_end_ms: float = 40.0  # a serving dispatcher's end: lease, the empty receive, release, the backlog check

    # --- replicated subscriptions (replication_cost) ----------------------------------------------
    snapshot_interval_s: float = 2.0  # SNAPSHOT_INTERVAL_MS: a subscription's snapshot at most this often while it acknowledges
    snapshot_item_bytes: float = 200.0  # the snapshot item in the configuration store (a global table)

    # --- fixed -------------------------------------------------------------------------------------
    maintenance_interval_s: float = 60.0  # EventBridge schedule of the maintenance function
    log_bytes_per_invocation: float = 0.0  # the stack logs from WARN (no START/END/REPORT lines); ~300 at logLevel INFO
    xray_active: float = 0.0  # 1: the stack's `-c tracing=active` (Lambda samples every function; traces priced)
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
    replicated_subscriptions: int = Field(
        default=0, ge=0,
        description="of the subscriptions, those with replicate_subscription_state (priced by replication_cost)")
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
    journal_consumer_reads: Literal["shared", "enhanced_fan_out"] = Field(
        default="shared",
        description="how the journal consumer's event-source mapping reads the stream: shared-throughput GetRecords "
        "polls, or enhanced fan-out (one registered consumer, records pushed with SubscribeToShard)",
    )
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
    def _replicated_among_subscriptions(self) -> Workload:
        if self.replicated_subscriptions > self.subscriptions:
            raise ValueError(f"replicated_subscriptions ({self.replicated_subscriptions}) is more than the "
                             f"subscriptions ({self.subscriptions})")
        return self

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
