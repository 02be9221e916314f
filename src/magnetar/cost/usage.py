"""Billable quantities and their pricing: `Usage` (quantities of one step over one period, not dollars),
the components of Magnetar's bill, the two Kinesis capacity modes, and `price_usage`, which turns
quantities into USD by step and component with the price table's volume tiers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Literal

from magnetar.cost.prices import _cost

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
    "xray",
)
Mode = Literal["on_demand", "provisioned"]
MODES: tuple[Mode, Mode] = ("on_demand", "provisioned")


@dataclass
class Usage:
    """Billable quantities (not dollars) of one step over one period."""

    apigw_requests: float = 0.0  # metered 512 KB units
    apigw_ws_connection_minutes: float = 0.0  # WebSocket API connections (an idle consumer's watch)
    lambda_requests: float = 0.0
    lambda_gb_s: float = 0.0
    dynamodb_wru: float = 0.0
    dynamodb_rru: float = 0.0
    dynamodb_replicated_wru: float = 0.0  # global tables (the configuration store): one per replica region per write
    dynamodb_gb_month: float = 0.0
    kinesis_od_stream_hours: float = 0.0
    kinesis_od_ingest_gb: float = 0.0
    kinesis_od_retrieval_gb: float = 0.0
    kinesis_od_efo_retrieval_gb: float = 0.0  # enhanced fan-out (the journal consumer, when registered)
    kinesis_shard_hours: float = 0.0
    kinesis_ppu: float = 0.0
    kinesis_efo_consumer_shard_hours: float = 0.0
    kinesis_efo_retrieval_gb: float = 0.0
    s3_put_requests: float = 0.0
    s3_get_requests: float = 0.0
    s3_gb_month: float = 0.0
    eventbridge_invocations: float = 0.0
    logs_gb: float = 0.0
    xray_traces: float = 0.0  # traces recorded (the stack's `-c tracing=active`)

    def scaled(self, factor: float) -> Usage:
        return Usage(**{k: v * factor for k, v in asdict(self).items()})

    def __add__(self, other: Usage) -> Usage:
        a, b = asdict(self), asdict(other)
        return Usage(**{k: a[k] + b[k] for k in a})


# Which price key each quantity is billed at, and under which component.
def _lines(usage: Usage, mode: Mode, architecture: str) -> list[tuple[str, str, float]]:
    out = [
        ("api_gateway", "apigw.http.request", usage.apigw_requests),
        ("api_gateway", "apigw.websocket.connection_minute", usage.apigw_ws_connection_minutes),
        ("lambda_requests", "lambda.request", usage.lambda_requests),
        ("lambda_compute", f"lambda.{architecture}.gb_second", usage.lambda_gb_s),
        ("dynamodb", "dynamodb.ondemand.wru", usage.dynamodb_wru),
        ("dynamodb", "dynamodb.ondemand.rru", usage.dynamodb_rru),
        ("dynamodb", "dynamodb.ondemand.replicated_wru", usage.dynamodb_replicated_wru),
        ("dynamodb", "dynamodb.storage_gb_month", usage.dynamodb_gb_month),
        ("s3_requests", "s3.put_request", usage.s3_put_requests),
        ("s3_requests", "s3.get_request", usage.s3_get_requests),
        ("s3_storage", "s3.standard.gb_month", usage.s3_gb_month),
        ("eventbridge", "eventbridge.scheduler.invocation", usage.eventbridge_invocations),
        ("cloudwatch_logs", "cloudwatch.logs.ingest_gb", usage.logs_gb),
        ("xray", "xray.trace_recorded", usage.xray_traces),
    ]
    if mode == "on_demand":
        out += [
            ("kinesis", "kinesis.ondemand.stream_hour", usage.kinesis_od_stream_hours),
            ("kinesis", "kinesis.ondemand.ingest_gb", usage.kinesis_od_ingest_gb),
            ("kinesis", "kinesis.ondemand.retrieval_gb", usage.kinesis_od_retrieval_gb),
            ("kinesis", "kinesis.ondemand.efo_retrieval_gb", usage.kinesis_od_efo_retrieval_gb),
        ]
    else:
        out += [
            ("kinesis", "kinesis.provisioned.shard_hour", usage.kinesis_shard_hours),
            ("kinesis", "kinesis.provisioned.put_payload_unit", usage.kinesis_ppu),
            ("kinesis", "kinesis.provisioned.efo_consumer_shard_hour", usage.kinesis_efo_consumer_shard_hours),
            ("kinesis", "kinesis.provisioned.efo_retrieval_gb", usage.kinesis_efo_retrieval_gb),
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


