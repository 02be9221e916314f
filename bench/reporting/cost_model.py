"""docs/cost-model.md's tables of the model's own figures, computed from `magnetar.cost` when the
report is generated: the workloads of bench/workloads/ by component, the baseline against the rate
(Pulsar's fixed cost), the journal consumer on enhanced fan-out, replication, and the sensitivity of
the baseline to one assumption at a time (`VARIANTS`: each row defined once, here)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from magnetar.cli.cost_report import STEPS, headline_text
from magnetar.cost import (
    COMPONENTS,
    PRICES_AS_OF,
    SECONDS_PER_HOUR,
    Comparison,
    CostReport,
    GiB,
    ModeCost,
    Workload,
    batch_payload_bytes,
    compare,
    load_workload,
    monthly_cost,
    pulsar_sizing,
    replication_cost,
)
from magnetar.cost.magnetar import _shape
from magnetar.cost.prices import _cost

from .base import ReportError, Results, bold, join, n, table

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "bench" / "workloads"
BASELINE = "baseline-1kb-batch100"
# The workloads of "Results", in the document's order (every file of bench/workloads/ appears)
RESULT_WORKLOADS = (BASELINE, "small-unbatched", "fanout-4-subs", "high-rate")
SQS_BATCHED = "SQS standard, batched"


def workload(name: str) -> Workload:
    path = WORKLOADS / f"{name}.yaml"
    if not path.is_file():
        raise ReportError(f"bench/workloads/{name}.yaml is missing")
    return load_workload(path)


def varied(w: Workload, fields: Mapping[str, Any] | None = None, parameters: Mapping[str, float] | None = None) -> Workload:
    """`w` with some of its fields and parameters changed (validated like a workload file)."""
    raw = {**w.model_dump(), **(fields or {})}
    raw["parameters"] = {**w.parameters, **(parameters or {})}
    return Workload.model_validate(raw)


def money(x: float) -> str:
    """USD per month: 1,234.56."""
    return n(x, 2)


def per_million(x: float) -> str:
    """USD per million messages: 0.0493."""
    return f"{x:,.4f}"


def percent(x: float) -> str:
    return f"{x:.0%}"


@dataclass(frozen=True)
class Priced:
    """A workload's bill and its comparison, computed once."""

    workload: Workload
    report: CostReport
    comparison: Comparison

    @classmethod
    def of(cls, w: Workload) -> Priced:
        report = monthly_cost(w)
        return cls(w, report, compare(w, report))

    @property
    def sqs(self) -> float:
        return self.comparison.row(SQS_BATCHED).usd_per_million_messages

    def mode(self, mode: str) -> ModeCost:
        return self.report.on_demand if mode == "on_demand" else self.report.provisioned


def priced(name: str) -> Priced:
    return Priced.of(workload(name))


# --- Results: each workload file by component ------------------------------------------------------
def _steps(mc: ModeCost) -> str:
    return " / ".join(n(sum(mc.by_step[step].values())) for step in STEPS)


def workload_section(name: str) -> str:
    p = priced(name)
    od, prov = p.report.on_demand, p.report.provisioned
    rows = [[c, money(od.components[c]), money(prov.components[c])] for c in COMPONENTS]
    rows += [[bold("total"), bold(money(od.monthly_usd)), bold(money(prov.monthly_usd))],
             [bold("USD per million messages"), bold(per_million(od.usd_per_million_messages)),
              bold(per_million(prov.usd_per_million_messages))],
             ["Kinesis shards", str(od.kinesis_shards), str(prov.kinesis_shards)],
             ["by step: " + " / ".join(STEPS), _steps(od), _steps(prov)]]
    components = table(["component (USD/month)", "on-demand Kinesis", "provisioned Kinesis"], rows).replace(
        "|---|---|---|", "|---|---:|---:|", 1)
    others = table(["same workload on", "USD/month", "USD per million messages"],
                   [[r.name, money(r.monthly_usd), per_million(r.usd_per_million_messages)] for r in p.comparison.rows]
                   ).replace("|---|---|---|", "|---|---:|---:|", 1)
    notes = "\n".join([f"- {note}" for note in p.report.notes] + [f"- **warning:** {w}" for w in p.report.warnings])
    return join(f"### `{name}`", p.workload.description, components, others, notes,
                f"Headline printed: *{headline_text(p.report, p.comparison)}*")


def results_sections(results: Results) -> str:
    files = sorted(path.stem for path in WORKLOADS.glob("*.yaml"))
    if sorted(RESULT_WORKLOADS) != files:
        raise ReportError(f"bench/workloads/ holds {', '.join(files)}; the report lists {', '.join(RESULT_WORKLOADS)}")
    intro = (f"Computed by `make bench-report` with `magnetar.cost` (what `magnetar cost --workload "
             f"bench/workloads/<name>.yaml` prints; prices of {PRICES_AS_OF}). \"By step\" splits the month into "
             "produce / seal / consume / storage / fixed (stream-hours or shard-hours, EventBridge and the maintenance "
             "function).")
    return join(intro, *(workload_section(name) for name in RESULT_WORKLOADS))


# --- Pulsar's fixed cost against the rate ---------------------------------------------------------
PULSAR_RATES = ((1_000, 1), (5_000, 8), (10_000, 16), (20_000, 32), (50_000, 64), (100_000, 128))  # msg/s, partitions


@dataclass(frozen=True)
class RatePoint:
    rate: int
    partitions: int
    magnetar: float
    pulsar: float
    pulsar_monthly: float
    pulsar_one_az: float
    instances: str
    sqs: float


def rate_points() -> list[RatePoint]:
    base, points = workload(BASELINE), []
    for rate, partitions in PULSAR_RATES:
        w = varied(base, {"produce_rate_msgs_per_s": rate, "topic_partitions": partitions})
        p = Priced.of(w)
        pulsar = p.comparison.row("Pulsar on EC2")
        one_az = compare(varied(w, parameters={"pulsar_cross_az_fraction": 0.0}), p.report).row("Pulsar on EC2")
        z = pulsar_sizing(w)
        points.append(RatePoint(rate, partitions, p.report.provisioned.usd_per_million_messages,
                                pulsar.usd_per_million_messages, pulsar.monthly_usd, one_az.usd_per_million_messages,
                                f"{z.zookeepers}+{z.brokers}+{z.bookies} ({z.bookie_type})", p.sqs))
    return points


def pulsar_rates(results: Results) -> str:
    rows = [[n(pt.rate), str(pt.partitions), per_million(pt.magnetar),
             f"{per_million(pt.pulsar)} (${n(pt.pulsar_monthly)}/month)", per_million(pt.pulsar_one_az), pt.instances,
             per_million(pt.sqs)] for pt in rate_points()]
    return table(["msg/s (1 KB, batch 100, 1 subscription, 24 h)", "partitions", "Magnetar, provisioned",
                  "Pulsar on EC2, clients and replicas over 3 AZs", "Pulsar on EC2, no cross-AZ traffic",
                  "Pulsar instances (bookie type)", "batched SQS"], rows).replace(
        "|---|---|---|---|---|---|---|", "|---:|---:|---:|---:|---:|---|---:|", 1)


def pulsar_rates_verdict(results: Results) -> str:
    points = rate_points()
    above = all(pt.pulsar > pt.magnetar for pt in points)
    even = next((pt for pt in points if pt.pulsar_one_az <= pt.magnetar), None)
    top = points[-1]
    first = ("With its cross-AZ traffic, self-managed Pulsar stays above Magnetar-provisioned at every rate"
             if above else "With its cross-AZ traffic, self-managed Pulsar drops below Magnetar-provisioned at "
             + ", ".join(f"{n(pt.rate)} msg/s" for pt in points if pt.pulsar <= pt.magnetar))
    one_az = ("kept in one AZ (giving up AZ-level durability) it "
              + (f"breaks even near {n(even.rate)} msg/s" if even else "stays above it too")
              + (f" and costs {percent(1 - top.pulsar_one_az / top.magnetar)} less at {n(top.rate)} msg/s"
                 if top.pulsar_one_az < top.magnetar else ""))
    return (f"{first}; {one_az}. Operations staff, monitoring, a proxy or load balancer, and reserved-instance or "
            "Savings Plans discounts (which would cut the EC2 lines by roughly a third to a half) are not included.")


# --- the journal consumer on enhanced fan-out -------------------------------------------------------
def polling_cadence_ms(w: Workload) -> float:
    """The seal latency target at which enhanced fan-out seals a busy shard once a second, as the
    polling mapping does (a held seal lasts the target plus its invocation's own time)."""
    return 1000.0 - w.seal_lambda_ms


@dataclass(frozen=True)
class FanOut:
    name: str
    shared: Priced
    efo: Priced


def fan_out(name: str) -> FanOut:
    w = workload(name)
    base = varied(w, parameters={"seal_latency_ms": polling_cadence_ms(w)})
    return FanOut(name, Priced.of(base), Priced.of(varied(base, {"journal_consumer_reads": "enhanced_fan_out"})))


def _efo_cell(f: FanOut, mode: str, per_m: bool) -> str:
    a, b = f.shared.mode(mode), f.efo.mode(mode)
    extra = []
    if mode == "provisioned":
        shards = (f"{a.kinesis_shards} → {b.kinesis_shards} shards" if a.kinesis_shards != b.kinesis_shards
                  else f"{a.kinesis_shards} shard" + ("" if a.kinesis_shards == 1 else "s"))
        extra.append(shards)
    if per_m:
        extra.append(f"{per_million(a.usd_per_million_messages)} → {per_million(b.usd_per_million_messages)} $/M msgs")
    return f"${money(a.monthly_usd)} → ${money(b.monthly_usd)} (+${money(b.monthly_usd - a.monthly_usd)}" + "".join(
        f"; {e}" for e in extra) + ")"


def enhanced_fan_out(results: Results) -> str:
    rows = [[f"`{name}`", _efo_cell(f, "on_demand", name == BASELINE), _efo_cell(f, "provisioned", name == BASELINE)]
            for name in sorted(RESULT_WORKLOADS) for f in [fan_out(name)]]
    targets = sorted({polling_cadence_ms(workload(name)) for name in RESULT_WORKLOADS})
    intro = (f"Per month, for the workload files, at the polling mapping's seal cadence (`seal_latency_ms: "
             f"{' / '.join(f'{t:g}' for t in targets)}`: one seal a second on a busy shard, so that only the reads "
             f"differ; prices of {PRICES_AS_OF}):")
    return join(intro, table(["workload", "on-demand: shared → EFO", "provisioned: shared → EFO (shards)"], rows))


def enhanced_fan_out_baseline(results: Results) -> str:
    f = fan_out(BASELINE)
    od_a, od_b = f.shared.report.on_demand, f.efo.report.on_demand
    pr_a, pr_b = f.shared.report.provisioned, f.efo.report.provisioned
    w = f.efo.workload
    hours = w.hours_per_month * pr_b.kinesis_shards
    consumer_hours = _cost("kinesis.provisioned.efo_consumer_shard_hour", hours)
    retrieval = pr_b.by_step["seal"]["kinesis"] - pr_a.by_step["seal"]["kinesis"]
    record = batch_payload_bytes(w.batch_size, w.message_bytes, w.params()) + w.params().per_entry_overhead_bytes
    gb = record * w.entries_per_s * w.hours_per_month * SECONDS_PER_HOUR / GiB
    on_efo = varied(workload(BASELINE), {"journal_consumer_reads": "enhanced_fan_out"})
    default = on_efo.params()
    paced = _shape(on_efo, default, "provisioned")
    stays = "stays below" if pr_b.usd_per_million_messages < f.efo.sqs else "goes above"
    return (f"At the baseline (about {n(gb)} GB a month through the mapping) enhanced fan-out costs "
            f"${n(od_b.monthly_usd - od_a.monthly_usd)}/month on-demand (+{percent(od_b.monthly_usd / od_a.monthly_usd - 1)}) "
            f"and ${n(pr_b.monthly_usd - pr_a.monthly_usd)}/month provisioned "
            f"(+{percent(pr_b.monthly_usd / pr_a.monthly_usd - 1)}: {n(hours)} consumer-shard hours, "
            f"${money(consumer_hours)}, plus ${money(retrieval)} of retrieval), and the provisioned row {stays} "
            f"batched SQS. At the default seal latency target (`seal_latency_ms` {default.seal_latency_ms:g}, the "
            f"stack's `sealLatencyMs`) the journal consumer on enhanced fan-out seals a busy shard of the baseline "
            f"about {paced.seal_invocations_per_s:.1f} times a second instead of once (1000 / ({default.seal_latency_ms:g} "
            f"+ {w.seal_lambda_ms:g} ms)): more S3 PUTs and transactions in the seal step, a message readable sooner; "
            "docs/benchmarks.md measures that trade.")


# --- replication ----------------------------------------------------------------------------------
REPLICATION_ROWS = (  # the document's rows: components of magnetar.cost.replication_cost, grouped
    ("data transfer", ("data_transfer",)),
    ("Kinesis (the remote append)", ("kinesis",)),
    ("API Gateway", ("api_gateway",)),
    ("DynamoDB (reservation and cursor)", ("dynamodb",)),
    ("Lambda (requests and duration)", ("lambda_requests", "lambda_compute")),
    ("CloudWatch Logs", ("cloudwatch_logs",)),
    ("X-Ray", ("xray",)),
)


def replication(results: Results) -> str:
    base = priced(BASELINE)
    r = replication_cost(base.workload, 1)
    known = {c for _, cs in REPLICATION_ROWS for c in cs}
    unknown = sorted(c for c, usd in r.on_demand.components.items() if usd and c not in known)
    if unknown:
        raise ReportError(f"replication components the document does not show: {', '.join(unknown)}")
    millions = base.report.messages_per_month / 1e6
    rows = []
    for label, cs in REPLICATION_ROWS:
        od, pr = (sum(r.mode(m).components.get(c, 0.0) for c in cs) / millions for m in ("on_demand", "provisioned"))
        if od or pr or label == "data transfer":
            rows.append([label, per_million(od), per_million(pr)])
    rows.append([bold("replication"), bold(per_million(r.on_demand.usd_per_million_messages)),
                 bold(per_million(r.provisioned.usd_per_million_messages))])
    rows.append(["the cluster alone (above)", per_million(base.report.on_demand.usd_per_million_messages),
                 per_million(base.report.provisioned.usd_per_million_messages)])
    w = base.workload
    intro = (f"For `{BASELINE}` ({n(w.produce_rate_msgs_per_s)} msg/s of {w.message_bytes // 1024} KB in batches of "
             f"{w.batch_size}, {'one partition' if w.topic_partitions == 1 else f'{w.topic_partitions} partitions'}), "
             f"each remote cluster receives {r.batches_per_s:g} request{'' if r.batches_per_s == 1 else 's'} a second "
             f"carrying {r.entries_per_batch:g} entries ({r.request_bytes / 1e6:.1f} MB of JSON):")
    return join(intro, table(["per remote cluster, USD per million messages", "on-demand Kinesis", "provisioned Kinesis"],
                             rows))


# --- sensitivity -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    """One row of the sensitivity table: a workload file with some fields or parameters changed."""

    label: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    parameters: Mapping[str, float] = field(default_factory=dict)
    base: str = BASELINE

    def workload(self) -> Workload:
        return varied(workload(self.base), self.fields, self.parameters)


VARIANTS = (
    Variant("baseline (as in the file)"),
    Variant("2 topic partitions", {"topic_partitions": 2}),
    Variant("entries_per_receive 1 (every receive returns one entry)", {"entries_per_receive": 1}),
    Variant("entries_per_receive 10 (the most at batch 100: 1,000 messages)", {"entries_per_receive": 10}),
    Variant("consumers read sealed segments from S3 (tail_read_fraction 0)", parameters={"tail_read_fraction": 0.0}),
    Variant("batches compressed to 40% (compression_ratio 0.4)", parameters={"compression_ratio": 0.4}),
    Variant("cursor item 5 KB (5 WRU per cursor write)", parameters={"cursor_item_bytes": 5000}),
    Variant("broker 100 ms per produce, 300 ms per receive", {"produce_lambda_ms": 100, "receive_lambda_ms": 300}),
    Variant("Lambda platform logs (logLevel INFO, 300 B per invocation)", parameters={"log_bytes_per_invocation": 300}),
    Variant("X-Ray active tracing (xray_active 1)", parameters={"xray_active": 1}),
    Variant("x86_64 Lambdas", {"lambda_architecture": "x86_64"}),
    Variant("retention 7 days", {"retention_hours": 168}),
    Variant("100 msg/s", {"produce_rate_msgs_per_s": 100}),
    Variant("10,000 msg/s over 16 partitions", {"produce_rate_msgs_per_s": 10_000, "topic_partitions": 16}),
    Variant("4 KB messages, batch 100, 250 msg/s", {"message_bytes": 4096, "produce_rate_msgs_per_s": 250}),
    Variant("+1 idle consumer all month (not per message; monthly total)", {"idle_consumer_hours_per_month": 730}),
    Variant("fanout-4-subs as in the file", base="fanout-4-subs"),
    Variant("fanout-4-subs, 75% of receives answered from a warm container's entry cache",
            parameters={"entry_cache_hit_fraction": 0.75}, base="fanout-4-subs"),
    Variant("fanout-4-subs on 1 partition", {"topic_partitions": 1}, base="fanout-4-subs"),
)


def variant(prefix: str) -> Variant:
    """The one variant whose label starts with `prefix`."""
    hits = [v for v in VARIANTS if v.label.startswith(prefix)]
    if len(hits) != 1:
        raise ReportError(f"{len(hits)} sensitivity variants start with {prefix!r}")
    return hits[0]


def limits_broken(p: Priced) -> list[str]:
    """The warnings of a limit the workload would break (throttled), not of a thin headroom."""
    return [w for w in p.report.warnings if "headroom" not in w]


def sensitivity_rows() -> dict[str, Priced]:
    return {v.label: Priced.of(v.workload()) for v in VARIANTS}


def sensitivity(results: Results) -> str:
    rows = []
    for label, p in sensitivity_rows().items():
        infeasible = " (infeasible: warnings)" if limits_broken(p) else ""
        rows.append([label + infeasible, per_million(p.report.on_demand.usd_per_million_messages),
                     per_million(p.report.provisioned.usd_per_million_messages), per_million(p.sqs),
                     money(p.report.provisioned.total_usd)])
    return table(["variant (of the baseline unless named)", "on-demand Kinesis", "provisioned Kinesis", "batched SQS",
                  "monthly, provisioned"], rows).replace("|---|---|---|---|---|", "|---|---:|---:|---:|---:|", 1)


BLOCKS = {
    "cost-results": results_sections,
    "cost-pulsar-rates": pulsar_rates,
    "cost-pulsar-rates-verdict": pulsar_rates_verdict,
    "cost-enhanced-fan-out": enhanced_fan_out,
    "cost-enhanced-fan-out-baseline": enhanced_fan_out_baseline,
    "cost-replication": replication,
    "cost-sensitivity": sensitivity,
}
