"""Magnetar's own bill: the shape of a workload on the journal stream (shards, event-source batches,
segments, receives), its usage by step (produce, seal, consume, storage, fixed) and by component,
idle consumers, capacity warnings, and `monthly_cost` for both Kinesis capacity modes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from magnetar.cost.prices import HOURS_PER_MONTH, PRICES_AS_OF, SECONDS_PER_HOUR, GiB, KiB, MiB, _cost
from magnetar.cost.units import (
    apigw_units,
    base64_bytes,
    batch_payload_bytes,
    kinesis_ondemand_ingest_bytes,
    kinesis_put_payload_units,
    rru,
    wru,
    xray_traces_per_s,
)
from magnetar.cost.usage import MODES, Mode, Usage, _sum_components, price_usage
from magnetar.cost.workload import Parameters, Workload


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
        read_bps = write_bps * (_esm_shared_reads(w) + w.subscriptions * _tail_share(p) * amp)
        needed = max(1, math.ceil(write_bps / (MiB * u)), math.ceil(e / (1000 * u)), math.ceil(read_bps / (2 * MiB * u)))
        # a topic partition's records all go to one shard: shards beyond the partition count stay idle
        needed = min(needed, w.topic_partitions)
        if needed == shards:
            break
        shards = needed
    return shards, _amplification(w, p, shards)


def _esm_shared_reads(w: Workload) -> float:
    """1 when the journal consumer polls with GetRecords (it uses the shards' shared read throughput and
    their 5 GetRecords/s), 0 with enhanced fan-out (its own 2 MiB/s per shard, records pushed)."""
    return 0.0 if w.journal_consumer_reads == "enhanced_fan_out" else 1.0


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
    if w.journal_consumer_reads == "enhanced_fan_out":
        # records pushed as they come; the pacing holds a busy shard's batch for the target and reads
        # ahead what came meanwhile: one seal per target (and its invocation's own time)
        cadence = 1000 / (p.seal_latency_ms + w.seal_lambda_ms) if p.seal_latency_ms else r_s
    else:  # the polling mapping's batching window
        cadence = 1 / p.esm_window_s
    inv = min(r_s, max(cadence, r_s / p.esm_batch_size, r_s * record / p.esm_max_payload_bytes))
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
    efo = w.journal_consumer_reads == "enhanced_fan_out"
    esm_gb = e * s.record_bytes / GiB
    # a held seal reads ahead (GetRecords) what reached the shard during its hold: most records, read twice
    read_ahead = efo and bool(p.seal_latency_ms) and inv < e
    seal = Usage(
        lambda_requests=inv,
        lambda_gb_s=inv * _gb_s(w, w.seal_lambda_ms + w.seal_lambda_ms_per_partition * s.partitions_per_seal),
        dynamodb_rru=inv * p.seal_batchgets_per_invocation * s.partitions_per_seal * rru(p.seal_item_bytes),
        dynamodb_wru=sealed * (wru(segment_item, transactional=True) + wru(p.seal_item_bytes, transactional=True)),
        s3_put_requests=sealed * p.segment_puts_per_partition,
        # the event-source mapping reads every record once: shared throughput, or enhanced fan-out
        kinesis_od_retrieval_gb=esm_gb if read_ahead or not efo else 0.0,
        kinesis_od_efo_retrieval_gb=esm_gb if efo else 0.0,
        kinesis_efo_retrieval_gb=esm_gb if efo else 0.0,
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
        # enhanced fan-out (provisioned mode): one registered consumer, billed per shard of the stream per hour
        kinesis_efo_consumer_shard_hours=s.shards / SECONDS_PER_HOUR if efo else 0.0,
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
        # the journal consumer's read-ahead: one GetRecords per held seal (enhanced fan-out, pacing on)
        "kinesis.GetRecords": s.shards * p.esm_getrecords_per_shard_per_s * _esm_shared_reads(w) + tail * p.getrecords_per_tail_read
        + (inv if read_ahead else 0.0),
        "kinesis.GetShardIterator": tail * p.getshard_iterators_per_tail_read,
        "s3.PutObject": sealed * p.segment_puts_per_partition,
        "s3.GetObject": backlog * p.backlog_gets_per_receive,
    }
    if efo:  # the mapping holds one SubscribeToShard per shard, renewed every 5 minutes
        requests["kinesis.SubscribeToShard"] = s.shards / 300.0
    if p.xray_active:  # Lambda samples each function: the broker's share goes to produce and consume by requests
        broker = e + r + flushes
        traced = xray_traces_per_s(broker)
        produce.xray_traces = traced * e / broker if broker else 0.0
        consume.xray_traces = traced - produce.xray_traces
        seal.xray_traces = xray_traces_per_s(inv)
        fixed.xray_traces = xray_traces_per_s(maint)
    return s, {"produce": produce, "seal": seal, "consume": consume, "storage": storage, "fixed": fixed}, requests


def _idle_usage_per_consumer_hour(w: Workload, p: Parameters) -> Usage:
    """An idle consumer of the SDK's default delivery waits on its idle watch (client/idle_watch.py):
    a WebSocket connection (its minutes) and a look every `idle_look_interval_s` (a request, a short
    invocation, one read of the cursor view), its lease renewed when half spent. Without the watch
    (`idle_watch` 0: delivery "poll") it long-polls: each poll one request held for the full wait,
    re-reading the cursor view every poll interval. (The long polls of its first idle seconds, before
    it watches, are not counted: idle consumer-hours are long idle stretches.)"""
    receive_rru = rru(p.cursor_item_bytes) + rru(p.seal_item_bytes) + rru(p.writer_item_bytes)
    lease_wru = SECONDS_PER_HOUR / p.lease_renew_interval_s * wru(p.cursor_item_bytes)
    if p.idle_watch:
        looks = SECONDS_PER_HOUR / p.idle_look_interval_s
        return Usage(
            apigw_requests=looks,
            apigw_ws_connection_minutes=SECONDS_PER_HOUR / 60,
            lambda_requests=looks,
            lambda_gb_s=looks * _gb_s(w, p.idle_look_ms),
            dynamodb_rru=looks * receive_rru,
            dynamodb_wru=lease_wru,
            logs_gb=looks * p.log_bytes_per_invocation / GiB,
        )
    polls = SECONDS_PER_HOUR / (p.idle_poll_wait_s + p.request_latency_s)
    reads_per_poll = p.idle_poll_wait_s / (p.idle_poll_interval_s + p.request_latency_s) + 1
    return Usage(
        apigw_requests=polls,
        lambda_requests=polls,
        lambda_gb_s=polls * _gb_s(w, p.idle_poll_wait_s * 1000),
        dynamodb_rru=polls * reads_per_poll * receive_rru,
        dynamodb_wru=lease_wru,
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
    getrecords_per_shard = p.esm_getrecords_per_shard_per_s * _esm_shared_reads(w) + tail_reads_per_shard
    if getrecords_per_shard > 5:
        esm = "event-source mapping + " if _esm_shared_reads(w) else ""
        out.append(
            f"~{getrecords_per_shard:.1f} GetRecords/s on a busy shard ({esm}tail reads of "
            f"{w.subscriptions} subscription(s)); Kinesis allows 5/s per shard: tail readers will be throttled "
            "(add topic partitions, read sealed segments from S3, or use enhanced fan-out)"
        )
    read_bps = (s.record_bytes * s.entries_per_s / s.busy_shards) * (
        _esm_shared_reads(w) + w.subscriptions * _tail_share(p) * s.tail_amplification
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
    if w.journal_consumer_reads == "enhanced_fan_out":
        notes.append(
            "the journal consumer reads with enhanced fan-out (one registered consumer): on-demand bills its bytes at "
            "the enhanced fan-out retrieval price; provisioned adds consumer-shard hours and enhanced fan-out retrieval; "
            "it no longer uses the shards' shared read throughput or GetRecords calls"
        )
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

