"""docs/cost-model.md's Pulsar Functions tables, from `magnetar.cost.function_cost`: the requests of
each event of a dispatcher's life (`dispatch_requests`, what the dispatcher itself makes), what a
function costs on the baseline and a few variants, the model against the measured run
(bench/results/functions-defaults.json) at that run's shape; and the replicated subscriptions'
snapshots (`replication_cost`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from magnetar.cost import COMPONENTS, Workload, function_cost, monthly_cost, output_workload, replication_cost
from magnetar.cost.functions import (
    OUTPUT_TOPIC_STEPS,
    STEPS,
    FunctionCost,
    dispatch_requests,
    max_batch_messages,
)

from .base import Results, bold, join, n, seal_target_of, table
from .cost_model import BASELINE, per_million, varied, workload

RESULT = "functions-defaults.json"
EVENTS = (  # the document's rows: each event of dispatch_requests, and how often it happens
    ("start", "every dispatcher start: one per seal of the input (the journal consumer's asynchronous Invoke)"),
    ("standby", "a start that finds every dispatch slot held (a busy function)"),
    ("serve", "a start that serves, until it gives its slot up"),
    ("batch", "each batch: one invocation of the function, at most 100 messages"),
    ("sweep", "each maintenance run (once a minute), running or idle"),
)
STEP_NAMES = {"start": "dispatcher starts and ends", "batch": "batches (receive, invoke, stats, ack)",
              "output": "storing the outputs", "state": "state and counters", "sweep": "the backlog sweep"}


def _requests(items: dict[str, float]) -> str:
    shown = [f"{count:g} `{item}`" for item, count in items.items() if count]
    return ", ".join(shown) or "—"


def function_requests(results: Results) -> str:
    """The requests of each event for one input partition (a batch from it, its outputs in one group)."""
    least = dispatch_requests(partitions=1, delivering=1, groups=1, once=False, slots=1, stats_writes=5)
    once = dispatch_requests(partitions=1, delivering=1, groups=1, once=True, slots=1, stats_writes=5)
    rows = [[f"`{event}`", when, _requests(least[event])] for event, when in EVENTS]
    extra = {event: {item: once[event].get(item, 0.0) - least[event].get(item, 0.0) for item in once[event]}
             for event in once}
    rows.append(["EFFECTIVELY_ONCE adds", "per serving (its one slot: `standby` is one refused claim)",
                 _requests(extra["serve"])])
    return table(["event", "how often", "requests (one input partition; item after the operation)"], rows)


# --- what a function costs --------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    label: str
    cost: FunctionCost


def cases() -> list[Case]:
    w = workload(BASELINE)
    slow = varied(w, {"produce_rate_msgs_per_s": 200, "batch_size": 1, "entries_per_receive": 5,
                      "journal_consumer_reads": "enhanced_fan_out"})
    return [
        Case("defaults (ATLEAST_ONCE, 50 ms at 1,024 MB)", function_cost(w)),
        Case("EFFECTIVELY_ONCE", function_cost(w, guarantee="EFFECTIVELY_ONCE")),
        Case("500 ms at 2,048 MB a batch", function_cost(w, function_ms=500, function_memory_mb=2048)),
        Case("one `incr_counter` a message", function_cost(w, state_writes_per_message=1)),
        Case("no output (returns None)", function_cost(w, output=False)),
        Case("200 msg/s unbatched, journal consumer on enhanced fan-out", function_cost(slow)),
    ]


def functions(results: Results) -> str:
    base = workload(BASELINE)
    all_cases = cases()
    default = all_cases[0].cost
    millions = base.messages_per_month / 1e6
    rows = [[c.label, f"{c.cost.dispatcher_starts_per_s:.2f}", f"{c.cost.invocations_per_s:.2f}",
             n(c.cost.batch_messages, 0), per_million(c.cost.on_demand.usd_per_million_messages),
             per_million(c.cost.provisioned.usd_per_million_messages),
             per_million(c.cost.output_topic["provisioned"])] for c in all_cases]
    steps = [[STEP_NAMES[step]] + [per_million(sum(default.mode(mode).by_step[step].values()) / millions)
                                   for mode in ("on_demand", "provisioned")] for step in STEPS]
    steps.append([bold("the function"), bold(per_million(default.on_demand.usd_per_million_messages)),
                  bold(per_million(default.provisioned.usd_per_million_messages))])
    components = ", ".join(f"{name} {per_million(usd / millions)}" for name, usd in
                           default.provisioned.components.items() if usd >= 0.00005 * millions)
    intro = (f"On `{BASELINE}` ({n(base.produce_rate_msgs_per_s)} msg/s of {base.message_bytes // 1024} KB in batches "
             f"of {base.batch_size}; the function reads every message beside the workload's subscription), USD per "
             "million input messages; the output topic's own workload (its seals, segments and one subscription "
             "reading it) is shown apart, not in the function's figure:")
    by_step = (f"The defaults by step, USD per million input messages (provisioned, by component: {components}); "
               f"an idle function: **${default.idle_usd_per_month:.2f} a month**, the sweep's reads:")
    return join(intro, table(["function", "dispatcher starts / s", "invocations / s", "messages / invocation",
                              "on-demand Kinesis", "provisioned Kinesis", "output topic (provisioned)"], rows),
                by_step, table(["step", "on-demand Kinesis", "provisioned Kinesis"], steps))


# --- the model against the measured run -------------------------------------------------------------
@dataclass(frozen=True)
class RunShape:
    """A window of bench/functions.py as the model sees it: the run's own request shape."""

    batch: str
    measured: dict[str, float]  # USD per million input messages by component and "total", the function's path
    raw: float
    produce_batch: int  # messages per journal record the producer wrote (group publishes)
    per_receive: float  # messages per receive of the output's consumer
    per_invocation: float
    model: dict[str, float]  # the model at the run's shape, its own durations: by component and "total"
    model_run_ms: float  # the same with the run's Lambda durations, total
    dispatcher_batch_ms: float  # the run's dispatcher time per batch, the function's invocation included
    journal_ms: float  # the run's journal consumer, mean ms per invocation
    workload: Workload  # the run's shape, as the model prices it
    requests: dict[str, tuple[float, float]]  # per 1,000 input messages: the function's own, (model, measured)


def _end_to_end(w: Workload, per_invocation: float, function_ms: float) -> tuple[dict[str, float], FunctionCost]:
    """Input produced and sealed, the function, its output sealed and read once: provisioned Kinesis,
    USD per million input messages by component and in all; and the function's own cost."""
    f = function_cost(w, batch_messages=min(max_batch_messages(w), per_invocation), function_ms=function_ms)
    millions = w.messages_per_month / 1e6
    out = monthly_cost(output_workload(w)).provisioned.by_step
    parts = {c: (monthly_cost(w).provisioned.components[c] + f.provisioned.components[c]
                 + sum(out[step][c] for step in OUTPUT_TOPIC_STEPS)) / millions for c in COMPONENTS}
    return {**parts, "total": sum(parts.values())}, f


def run_shapes(results: Results) -> list[RunShape]:
    data: dict[str, Any] = results.load(RESULT)
    out = []
    for batch, pair in data["steady"].items():
        fn, raw = pair["function"], pair["raw"]
        ops, invoked, ms = fn["aws_requests_per_1000_msgs_by_operation"], fn["lambda_invocations_per_1000_msgs"], \
            fn["lambda_mean_ms"]
        own = next(name for name in invoked if name.startswith("magnetar-fn-"))
        records = ops["kinesis.PutRecord"] - invoked[own]  # the producer's (each batch's outputs: one more)
        produce_batch = max(1, round(1000 / records))
        per_receive = 1000 / (invoked["magnetar-broker"] - records)  # the broker's other invocations: receives
        per_invocation = 1000 / invoked[own]
        # the run's cluster: enhanced fan-out, sealed reads; the function its input's only reader
        w = Workload.model_validate({
            "name": f"functions-batch-{batch}", "message_bytes": data["size"], "batch_size": produce_batch,
            "produce_rate_msgs_per_s": data["rate"], "subscriptions": 0, "journal_consumer_reads": "enhanced_fan_out",
            "entries_per_receive": min(100.0, per_receive / produce_batch),
            "parameters": {"tail_read_fraction": 0.0, "seal_latency_ms": seal_target_of(data)}})
        model, f = _end_to_end(w, per_invocation, ms[own])
        # with the run's durations: the broker's, the journal consumer's, the dispatcher's time per batch
        per_1000 = 1000 / data["rate"]
        p = w.params()
        dispatcher_ms = invoked["magnetar-function-dispatcher"] * ms["magnetar-function-dispatcher"]  # per 1,000
        per_batch = (dispatcher_ms - f.dispatcher_starts_per_s * per_1000 * p.dispatcher_start_ms
                     - f.serving_dispatchers_per_s * per_1000 * p.dispatcher_end_ms) / invoked[own] - ms[own]
        timed = varied(w, {"produce_lambda_ms": ms["magnetar-broker"], "receive_lambda_ms": ms["magnetar-broker"],
                           "seal_lambda_ms": ms["magnetar-journal-consumer"], "seal_lambda_ms_per_partition": 0},
                       {"dispatcher_batch_ms": max(0.0, per_batch)})
        # the function's own requests measured: the function's path less the raw path's (reads of the
        # dispatcher's record and partitions), less the producer's reservations (one per record it wrote)
        modeled = {k: v / 1000 for k, v in f.requests_per_million_messages.items()}
        raw_ops = raw["aws_requests_per_1000_msgs_by_operation"]
        requests = {
            "dispatcher invocations": (modeled["lambda.Invoke.function_dispatcher"], ops["lambda.Invoke"]),
            "`dynamodb.GetItem`": (modeled["dynamodb.GetItem"], ops["dynamodb.GetItem"] - raw_ops.get("dynamodb.GetItem", 0)),
            "`dynamodb.UpdateItem` (stats, output reservations)": (modeled["dynamodb.UpdateItem"],
                                                                   ops["dynamodb.UpdateItem"] - records),
        }
        out.append(RunShape(
            batch=batch, measured=fn["usd_per_million_by_component"], raw=raw["usd_per_million_msgs"],
            produce_batch=produce_batch, per_receive=per_receive, per_invocation=per_invocation, model=model,
            model_run_ms=_end_to_end(timed, per_invocation, ms[own])[0]["total"],
            dispatcher_batch_ms=per_batch + ms[own], journal_ms=ms["magnetar-journal-consumer"], workload=w,
            requests=requests))
    return out


def _gap(model: float, measured: float) -> str:
    gap = (model - measured) / measured if measured else 0.0
    return "±0%" if abs(gap) < 0.005 else f"{gap:+.0%}"


def functions_measured(results: Results) -> str:
    shapes = run_shapes(results)
    rows = [[f"producer batch {s.batch}", f"{s.produce_batch} / {s.per_receive:.0f} / {s.per_invocation:.0f}",
             f"${s.measured['total']:.3f}", f"${s.model['total']:.3f} ({_gap(s.model['total'], s.measured['total'])})",
             f"${s.model_run_ms:.3f} ({_gap(s.model_run_ms, s.measured['total'])})", f"${s.raw:.3f}"]
            for s in shapes]
    components = [[name] + [f"{s.model[name]:.3f} / {s.measured.get(name, 0.0):.3f}" for s in shapes]
                  for name in COMPONENTS if any(s.model[name] >= 0.0005 or s.measured.get(name, 0.0) >= 0.0005
                                                for s in shapes)]
    requests = [[name] + [f"{s.requests[name][0]:.1f} / {s.requests[name][1]:.1f}" for s in shapes]
                for name in shapes[0].requests]
    gaps = [abs(s.model["total"] - s.measured["total"]) / s.measured["total"] for s in shapes]
    timed_gaps = [abs(s.model_run_ms - s.measured["total"]) / s.measured["total"] for s in shapes]
    windows = [f"producer batch {s.batch}" for s in shapes]
    w = shapes[0].workload
    p = w.params()
    durations = (
        f"In the run the dispatcher spent {_span([s.dispatcher_batch_ms for s in shapes])} ms per batch, the function's "
        f"invocation included (the model: {p.dispatcher_batch_ms:g} ms plus the function's), and the journal consumer "
        f"{_span([s.journal_ms for s in shapes])} ms per invocation (the model: {w.seal_lambda_ms:g} ms plus "
        f"{w.seal_lambda_ms_per_partition:g} per partition sealed), so the run's paced seals came less often than the "
        f"model's one per {p.seal_latency_ms + w.seal_lambda_ms:g} ms. With the run's durations the model lands within "
        f"{max(timed_gaps):.0%}.")
    return join(
        table(["bench/functions.py, 200 msg/s of 1 KB", "the run's shape: messages per record / per receive / "
               "per invocation", "measured", "model", "model, the run's Lambda durations", "raw path, measured"],
              rows),
        f"The model lands within {max(gaps):.0%} of the measured cost of each window. By component, USD per "
        "million input messages, model / measured:",
        table(["component", *windows], components),
        "The function's own requests per 1,000 input messages, model / measured (the function's path less the raw "
        "path's reads, and less the producer's reservations: one per record it wrote, the records that are not "
        "a batch's outputs):",
        table(["requests", *windows], requests),
        durations)


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:,.0f}" if round(low) == round(high) else f"{low:,.0f}–{high:,.0f}"


# --- replicated subscriptions ------------------------------------------------------------------------
def replicated_subscriptions(results: Results) -> str:
    w = varied(workload(BASELINE), {"replicated_subscriptions": 1})
    r, plain = replication_cost(w, 1), replication_cost(w, 1, replicated_subscriptions=0)
    millions = w.messages_per_month / 1e6
    extra = (r.on_demand.monthly_usd - plain.on_demand.monthly_usd)
    return (f"For `{BASELINE}` with its subscription replicated and one remote cluster, the snapshot is written "
            f"{r.snapshot_writes_per_s:g} times a second (the 2 s ceiling: the subscription writes its cursor more "
            f"often): ${extra:,.2f} a month, {per_million(extra / millions)} per million messages, two replicated "
            "write units per snapshot (this region's replica and the remote one) and the item's bytes between them.")


BLOCKS = {
    "cost-functions-requests": function_requests,
    "cost-functions": functions,
    "cost-functions-measured": functions_measured,
    "cost-replicated-subscriptions": replicated_subscriptions,
}
