"""Measured runs (`magnetar perf --json`): request counts, Lambda durations and Kinesis bytes of a run
turned into USD per million messages by component, with the model's unit conversions and prices."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from magnetar.config import FUNCTION_MEMORY_MB, LAMBDA_MEMORY_MB
from magnetar.cost.prices import HOURS_PER_MONTH, PRICES_AS_OF, SECONDS_PER_HOUR, GiB, MiB
from magnetar.cost.units import (
    batch_payload_bytes,
    kinesis_ondemand_ingest_bytes,
    kinesis_put_payload_units,
    rru,
    wru,
    xray_traces_per_s,
)
from magnetar.cost.usage import MODES, Usage, price_usage
from magnetar.cost.workload import DEFAULT_PARAMETERS

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
    lambda_memory_mb: int = LAMBDA_MEMORY_MB,
    function_memory_mb: Mapping[str, int] = FUNCTION_MEMORY_MB,
    lambda_architecture: Literal["arm64", "x86_64"] = "arm64",
    apigw_requests: int | None = None,
    kinesis_bytes_in: float | None = None,
    kinesis_bytes_out: float | None = None,
    item_bytes: Mapping[str, float] | None = None,
    units_per_request: Mapping[str, float] | None = None,
    maintenance_lambda_ms: float = 500.0,
    compression_ratio: float = 1.0,
    tracing: Literal["passthrough", "active"] = "passthrough",
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
      `DEFAULT_UNITS_PER_REQUEST`; `compression_ratio` scales the estimated record size;
    - `tracing`: the stack's X-Ray mode; "active" prices the traces Lambda's sampling records of each
      function at the run's invocation rates (the default, "passthrough", records none unasked).

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
    # who read the journal: the journal consumer's mapping reads every record once, through enhanced
    # fan-out when its reads were counted as such (billed per consumer-shard hour and GB, apart from
    # the shard's shared reads); consumers read the tail only when their GetRecords were counted
    fan_out = any(k.endswith("(fan-out)") for k in req)
    tail_bytes = bytes_in * subscriptions if req.get("kinesis.GetRecords", 0) else 0.0
    bytes_out = kinesis_bytes_out if kinesis_bytes_out is not None else bytes_in + tail_bytes
    shared_out = bytes_out - bytes_in if fan_out else bytes_out  # read through the shards' shared 2 MiB/s
    mean_record = bytes_in / puts if puts else record

    wru_total = sum(n * units.get(k, 1.0) for k, n in req.items() if _ddb_kind(k, kinds) == "wru")
    rru_total = sum(n * units.get(k, 1.0) for k, n in req.items() if _ddb_kind(k, kinds) == "rru")
    invocations = sum(lambda_invocations.values())
    gb_s = sum(n * lambda_ms.get(fn, 0.0) / 1000 * function_memory_mb.get(fn, lambda_memory_mb) / 1024
               for fn, n in lambda_invocations.items())
    hours = seconds / SECONDS_PER_HOUR
    write_bps = bytes_in / seconds
    records_ps = puts / seconds
    read_bps = shared_out / seconds
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
        kinesis_od_retrieval_gb=shared_out / GiB,
        kinesis_od_efo_retrieval_gb=(bytes_out - shared_out) / GiB,
        kinesis_shard_hours=shards * hours,
        kinesis_efo_consumer_shard_hours=shards * hours if fan_out else 0.0,
        kinesis_efo_retrieval_gb=(bytes_out - shared_out) / GiB,
        kinesis_ppu=puts * kinesis_put_payload_units(mean_record),
        s3_put_requests=float(req.get("s3.PutObject", 0)),
        s3_get_requests=float(req.get("s3.GetObject", 0)),
        s3_gb_month=messages / per_entry * record * retention_hours / HOURS_PER_MONTH / GiB,
        eventbridge_invocations=maint,
        logs_gb=(invocations + maint) * p.log_bytes_per_invocation / GiB,
        xray_traces=sum(xray_traces_per_s(n / seconds) * seconds for n in [*lambda_invocations.values(), maint])
        if tracing == "active" else 0.0,
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


# S3's request classes (PUT, COPY, POST, LIST are billed as PUT requests)
_S3_PUT_CLASS = ("PutObject", "CopyObject", "DeleteObjects", "ListObjects", "ListObjectsV2", "CreateMultipartUpload",
                 "UploadPart", "CompleteMultipartUpload")


def cost_of_counted_requests(
    aws_requests: Mapping[str, int],
    gb_seconds: float,
    invocations: int,
    apigw_requests: int,
    *,
    lambda_architecture: Literal["arm64", "x86_64"] = "arm64",
) -> dict[str, float]:
    """USD by component of requests counted as they were made (`/metrics`' per-container counters):
    `aws_requests` by "service.Operation" (the botocore hook's keys), Lambda invocations and
    GB-seconds, API Gateway requests (the broker's invocations). Request-driven charges only, at
    first-tier on-demand prices: DynamoDB units per request are `DEFAULT_UNITS_PER_REQUEST`
    (eventually consistent reads counted as strongly consistent), a Kinesis put ingests 1 KB (what a
    record of up to 1 KB is billed; the counters hold no sizes); hourly charges (the stream's, shard-hours) and storage are not
    requests and are left out (`magnetar cost` models the whole bill)."""
    units = {k: v for k, (_, v) in DEFAULT_UNITS_PER_REQUEST.items()}
    kinds = {k: kind for k, (kind, _) in DEFAULT_UNITS_PER_REQUEST.items()}
    req = {k: n for k, n in aws_requests.items() if not k.endswith("(fan-out)")}  # the local emulation's reads
    puts = req.get("kinesis.PutRecord", 0) + req.get("kinesis.PutRecords", 0)
    s3 = {k.split(".", 1)[1]: n for k, n in req.items() if k.startswith("s3.")}
    usage = Usage(
        apigw_requests=float(apigw_requests),
        lambda_requests=float(invocations),
        lambda_gb_s=gb_seconds,
        dynamodb_wru=sum(n * units.get(k, 1.0) for k, n in req.items() if _ddb_kind(k, kinds) == "wru"),
        dynamodb_rru=sum(n * units.get(k, 1.0) for k, n in req.items() if _ddb_kind(k, kinds) == "rru"),
        kinesis_od_ingest_gb=puts * kinesis_ondemand_ingest_bytes(0) / GiB,
        s3_put_requests=float(sum(n for op, n in s3.items() if op in _S3_PUT_CLASS)),
        s3_get_requests=float(sum(n for op, n in s3.items() if op not in _S3_PUT_CLASS)),
    )
    priced = price_usage({"counted": usage}, "on_demand", lambda_architecture, tiered=False)["counted"]
    return {component: usd for component, usd in priced.items() if usd > 0}
