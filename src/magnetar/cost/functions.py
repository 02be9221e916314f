"""Pulsar Functions' bill: what a registered function adds to its input topic's workload
(`magnetar cost --function`), per million input messages.

A function runs when its input is sealed (core/functions/dispatch.py). The journal consumer starts
a dispatcher (an asynchronous Lambda invocation) for every sealed batch holding the input's entries,
so one **start** per seal of the input. A start reads the function's record (configuration store)
and the input's partitions, subscribes on each input partition (the cursor read and written, the
dispatcher consumer's lease renewed), and claims a dispatch slot: a lease item, one conditional
PutItem. A dispatcher that finds every slot held ends there (`parallelism` refused claims; one slot
under EFFECTIVELY_ONCE): that is every start while a busy function's batches span seals, one
dispatcher serving without a break.

A serving dispatcher runs **batches** of at most `BATCH_MESSAGES` input messages, each:

- the slot's lease renewed (PutItem);
- the receive: each input partition's cursor view read (BatchGetItem), the entries read as any
  receive reads them (the journal's tail or a sealed segment), the claim written (PutItem) on
  each partition that delivered;
- the invocation of the function's own Lambda function (its duration at its memory), which the
  dispatcher waits for (the dispatcher's duration includes it);
- the outputs stored on the output topic: its partitions read (GetItem), then a group append per
  run of consecutive outputs to one partition (at most `GROUP_ENTRIES` outputs or `GROUP_BYTES`):
  the writer's reservation (UpdateItem) and one Kinesis PutRecord;
- the instance stats added up (`function_stats_writes_per_invocation` UpdateItems);
- the acknowledgement: each delivering partition's cursor read and written (BatchGetItem, PutItem).

Its serving **ends** with the lease renewed once more, a receive that finds nothing (a cursor
view per partition), the slot given up (DeleteItem) and a look for what was sealed meanwhile
(one BatchGetItem). EFFECTIVELY_ONCE adds, per serving, the input partitions' unsettled messages
handed back first (a cursor read and write each); its outputs' deduplication rides on the writer's
reservation (no request of its own), and its single slot is one dispatcher at a time.

State and counters (`put_state`, `incr_counter`: one UpdateItem each; `get_state`: one GetItem)
are priced when the caller says how many a message makes. The outputs, once stored, are the output
topic's own workload (sealed, kept and read like any topic): `output_workload` is that workload,
and `FunctionCost.output_topic` what it costs, outside the function's total, as replication leaves
the remote cluster's work to the remote cluster.

Idle, a function runs nothing: no dispatcher, no invocation. The maintenance run's backlog sweep
reads its record, its input's partitions and its cursors once a minute (`sweep`): the only cost
of an idle function, `idle_usd_per_month`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from magnetar.core.functions.dispatch import BATCH_MESSAGES, GROUP_BYTES, GROUP_ENTRIES, GROUP_ENTRY_OVERHEAD
from magnetar.cost.magnetar import Shape, _gb_s, _shape, _tail_share, monthly_cost
from magnetar.cost.prices import SECONDS_PER_HOUR, GiB
from magnetar.cost.units import (
    kinesis_ondemand_ingest_bytes,
    kinesis_put_payload_units,
    rru,
    wru,
    xray_traces_per_s,
)
from magnetar.cost.usage import MODES, Mode, Usage, _sum_components, price_usage
from magnetar.cost.workload import Parameters, Workload
from magnetar.functions.config import ProcessingGuarantees

DEFAULT_FUNCTION_MS = 50.0  # one invocation of the function's Lambda function (a batch), mean billed ms
DEFAULT_FUNCTION_MEMORY_MB = 1024  # Pulsar's default RAM, 1 GB (docs/functions.md, On AWS)
MAX_BATCH_MESSAGES = BATCH_MESSAGES
STEPS = ("start", "batch", "output", "state", "sweep")
# the steps whose cost is the output topic's own workload (its produce is the dispatcher's store,
# priced here; its stream and schedule are the cluster's, priced with the input's workload)
OUTPUT_TOPIC_STEPS = ("seal", "consume", "storage")


@dataclass(frozen=True)
class FunctionModeCost:
    mode: Mode
    by_step: dict[str, dict[str, float]]  # step (STEPS) -> component -> USD per month
    components: dict[str, float]  # component -> USD per month
    monthly_usd: float
    usd_per_million_messages: float  # monthly_usd / millions of input messages


@dataclass(frozen=True)
class FunctionCost:
    guarantee: str
    batch_messages: float  # input messages per invocation of the function
    busy: bool  # batches gather more than a seal brings: one dispatcher serves on, the others find the slot held
    dispatcher_starts_per_s: float  # one per seal of the input
    serving_dispatchers_per_s: float  # starts that serve (and end by giving the slot up)
    invocations_per_s: float  # of the function's Lambda function
    output_groups_per_invocation: float  # group appends (reservation + PutRecord) storing one batch's outputs
    idle_usd_per_month: float  # the backlog sweep's reads: what the function costs with nothing to run
    on_demand: FunctionModeCost
    provisioned: FunctionModeCost
    output_topic: dict[str, float]  # mode -> USD per million input messages: the output topic's own workload
    requests_per_million_messages: dict[str, float]  # "service.Operation" -> count per million input messages
    notes: list[str]

    def mode(self, mode: Mode) -> FunctionModeCost:
        return self.on_demand if mode == "on_demand" else self.provisioned

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def max_batch_messages(workload: Workload) -> float:
    """The most input messages one invocation gets: `BATCH_MESSAGES`, in whole entries (at least one)."""
    b = workload.batch_size
    return float(max(b, MAX_BATCH_MESSAGES // b * b))


def output_workload(workload: Workload, *, output_bytes: int | None = None, output_partitions: int = 1,
                    output_subscriptions: int = 1) -> Workload:
    """The output topic's own workload: one output per input message, each its own entry (stored
    unbatched), carrying the input's properties plus Pulsar's two; read by `output_subscriptions`
    subscriptions getting as many messages per receive as the input's subscriptions would."""
    p = workload.params()
    raw = workload.model_dump()
    raw.update(
        name=f"{workload.name}-output", description=f"the output topic of a function on {workload.name}",
        message_bytes=output_bytes or workload.message_bytes, batch_size=1, subscriptions=output_subscriptions,
        replicated_subscriptions=0, topic_partitions=output_partitions, idle_consumer_hours_per_month=0.0,
        entries_per_receive=min(100.0, workload.entries_per_receive * workload.batch_size),
    )
    raw["parameters"] = {**workload.parameters, "compression_ratio": 1.0,
                         "per_message_overhead_bytes": p.per_message_overhead_bytes + p.function_output_property_bytes}
    return Workload.model_validate(raw)


def _present(partitions: int, entries: float) -> float:
    """Input partitions holding some of a batch's `entries` (spread evenly at random), at least one."""
    spread = partitions * (1 - math.exp(-entries / partitions))
    return max(1.0, min(spread, entries, float(partitions)))


def _groups(outputs: float, output_bytes: float, partitions: int) -> float:
    """Group appends storing `outputs` consecutive outputs (`_store`): runs to one partition, cut at
    `GROUP_ENTRIES` outputs or `GROUP_BYTES`. To a partitioned topic consecutive outputs go to
    different partitions (round robin, or their keys' hashes): each is its own group."""
    if outputs <= 0:
        return 0.0
    if partitions > 1:
        return outputs
    per_output = output_bytes + GROUP_ENTRY_OVERHEAD
    return float(max(math.ceil(outputs / GROUP_ENTRIES), math.ceil(outputs * per_output / GROUP_BYTES)))


def function_cost(
    workload: Workload,
    *,
    batch_messages: float | None = None,
    function_ms: float = DEFAULT_FUNCTION_MS,
    function_memory_mb: int = DEFAULT_FUNCTION_MEMORY_MB,
    guarantee: str = ProcessingGuarantees.ATLEAST_ONCE.value,
    output: bool = True,
    parallelism: int = 1,
    state_writes_per_message: float = 0.0,
    state_reads_per_message: float = 0.0,
    output_bytes: int | None = None,
    output_partitions: int = 1,
    output_subscriptions: int = 1,
) -> FunctionCost:
    """What a function consuming every message of `workload` costs a month.

    `batch_messages`: input messages per invocation (default: what one seal of the input brings,
    at most `BATCH_MESSAGES`; more than a seal brings describes a busy function, whose batches
    gather a backlog); `function_ms`: the mean billed duration of one invocation of the function's
    Lambda function at `function_memory_mb`; `guarantee`: its processingGuarantees; `output`: each
    input has one output on the output topic (False: the function returns None); `parallelism`: its
    dispatch slots; `state_*_per_message`: its put_state/incr_counter and get_state calls per input
    message; `output_bytes`, `output_partitions`, `output_subscriptions`: the output topic's (for
    the output groups and for `output_topic`)."""
    w, p = workload, workload.params()
    try:
        once = ProcessingGuarantees(guarantee) is ProcessingGuarantees.EFFECTIVELY_ONCE
    except ValueError:
        raise ValueError(f"processing guarantees: {guarantee!r} (one of "
                         f"{', '.join(g.value for g in ProcessingGuarantees)})") from None
    cap = max_batch_messages(w)
    _check(batch_messages, cap, function_ms, function_memory_mb, parallelism, state_writes_per_message,
           state_reads_per_message, output_partitions, output_subscriptions)
    s = _shape(w, p, "on_demand")
    rate = w.produce_rate_msgs_per_s
    starts = s.seal_invocations_per_s  # one dispatcher per journal-consumer invocation holding the input
    per_start = rate / starts if starts else rate
    batch = float(batch_messages) if batch_messages is not None else max(1.0, min(cap, per_start))
    busy = batch > per_start * (1 + 1e-9)
    batches = rate / batch
    serving = 0.0 if busy else starts
    slots = 1 if once else parallelism
    partitions = w.topic_partitions
    delivering = _present(partitions, batch / w.batch_size)
    out_bytes = float(output_bytes or w.message_bytes)
    groups = _groups(batch, out_bytes, output_partitions) if output else 0.0
    usage, requests = _usage(w, p, s, starts=starts, serving=serving, standby=starts - serving, slots=slots,
                             batches=batches, delivering=delivering, groups=groups, out_bytes=out_bytes,
                             outputs_per_batch=batch if output else 0.0, once=once, function_ms=function_ms,
                             function_memory_mb=function_memory_mb, state_writes=state_writes_per_message * rate,
                             state_reads=state_reads_per_message * rate)
    month_s = w.hours_per_month * SECONDS_PER_HOUR
    monthly = {step: u.scaled(month_s) for step, u in usage.items()}
    millions = w.messages_per_month / 1e6
    modes: dict[str, FunctionModeCost] = {}
    for mode in MODES:
        by_step = price_usage(monthly, mode, w.lambda_architecture)
        components = _sum_components(by_step.values())
        total = sum(components.values())
        modes[mode] = FunctionModeCost(mode, by_step, components, total, total / millions if millions else 0.0)
    # the sweep alone, priced as its own month (what an idle function costs)
    idle = sum(price_usage({"sweep": monthly["sweep"]}, "on_demand", w.lambda_architecture)["sweep"].values())
    output_topic: dict[str, float] = dict.fromkeys(MODES, 0.0)
    if output:
        report = monthly_cost(output_workload(w, output_bytes=output_bytes, output_partitions=output_partitions,
                                              output_subscriptions=output_subscriptions))
        for mode in MODES:
            steps = report.mode(mode).by_step
            output_topic[mode] = sum(sum(steps[step].values()) for step in OUTPUT_TOPIC_STEPS) / millions
    per_million = 1e6 / rate
    notes = _notes(w, batch, busy, starts, batches, groups, once, slots, idle, output)
    return FunctionCost(
        guarantee=ProcessingGuarantees(guarantee).value, batch_messages=batch, busy=busy,
        dispatcher_starts_per_s=starts, serving_dispatchers_per_s=serving, invocations_per_s=batches,
        output_groups_per_invocation=groups, idle_usd_per_month=idle,
        on_demand=modes["on_demand"], provisioned=modes["provisioned"], output_topic=output_topic,
        requests_per_million_messages={k: v * per_million for k, v in requests.items() if v},
        notes=notes,
    )


def _check(batch_messages: float | None, cap: float, function_ms: float, function_memory_mb: int, parallelism: int,
           state_writes: float, state_reads: float, output_partitions: int, output_subscriptions: int) -> None:
    if batch_messages is not None and not 1 <= batch_messages <= cap:
        raise ValueError(f"batch messages: {batch_messages:g} (1 to {cap:g}: a dispatcher takes at most "
                         f"{MAX_BATCH_MESSAGES} messages, in whole entries)")
    if function_ms <= 0:
        raise ValueError(f"function ms: {function_ms:g} (more than 0)")
    if not 128 <= function_memory_mb <= 10_240:
        raise ValueError(f"function memory: {function_memory_mb} MB (128 to 10,240)")
    if not 1 <= parallelism <= 1000:
        raise ValueError(f"parallelism: {parallelism} (1 to 1,000)")
    if state_writes < 0 or state_reads < 0:
        raise ValueError("state calls per message must not be negative")
    if output_partitions < 1 or output_subscriptions < 0:
        raise ValueError("output partitions: 1 or more; output subscriptions: 0 or more")


# What each event of a dispatcher's life requests, by "service.Operation.item" (the item names the
# request units: `_units`). Read from core/functions/dispatch.py and core/dispatch.py; tests/unit/
# test_cost_functions.py counts the same calls on the dispatcher itself.
def dispatch_requests(*, partitions: int, delivering: float, groups: float, once: bool, slots: int,
                      stats_writes: float) -> dict[str, dict[str, float]]:
    """Requests per event: `start` (every dispatcher start), `standby` (a start that finds every slot
    held), `serve` (a start that serves, until it gives its slot up), `batch` (one invocation's
    batch: `delivering` input partitions gave messages, `groups` group appends store its outputs),
    `sweep` (one maintenance run's look at the function)."""
    views = float(partitions)
    return {
        "start": {"dynamodb.GetItem.record": 1.0, "dynamodb.GetItem.partitions": 1.0,  # the input's partitions
                  "dynamodb.BatchGetItem.view": views, "dynamodb.PutItem.cursor": views},  # subscribe
        "standby": {"dynamodb.PutItem.lease": float(slots)},  # every slot refused
        "serve": {
            "dynamodb.PutItem.lease": 2.0,  # the slot taken, renewed once more before the empty receive
            "dynamodb.BatchGetItem.view": views + (views if once else 0.0),  # the empty receive; the hand-back
            "dynamodb.BatchGetItem.views": 1.0,  # the backlog check: every partition's view at once
            "dynamodb.DeleteItem.lease": 1.0,  # the slot given up
            "dynamodb.PutItem.cursor": views if once else 0.0,  # EFFECTIVELY_ONCE: unsettled messages first
        },
        "batch": {
            "dynamodb.PutItem.lease": 1.0,  # renewed before the batch
            "dynamodb.BatchGetItem.view": views + delivering,  # the receive's views; the ack's
            "dynamodb.PutItem.cursor": 2 * delivering,  # the claim; the acknowledgement
            "lambda.Invoke.function": 1.0,
            "dynamodb.GetItem.partitions": 1.0 if groups else 0.0,  # the output topic's
            "dynamodb.UpdateItem.reservation": groups,
            "kinesis.PutRecord.output": groups,
            "dynamodb.UpdateItem.stats": stats_writes,
        },
        "sweep": {"dynamodb.GetItem.record": 1.0, "dynamodb.GetItem.partitions": 1.0,
                  "dynamodb.BatchGetItem.views": 1.0},
    }


def _units(p: Parameters, partitions: int) -> dict[str, tuple[str, float]]:
    """Request units per request of each item: ("rru" | "wru", units)."""
    view = rru(p.cursor_item_bytes) + rru(p.seal_item_bytes) + rru(p.writer_item_bytes)
    return {
        "dynamodb.GetItem.record": ("rru", rru(p.function_record_bytes)),
        "dynamodb.GetItem.partitions": ("rru", 1.0),
        "dynamodb.BatchGetItem.view": ("rru", view),
        "dynamodb.BatchGetItem.views": ("rru", partitions * view),
        "dynamodb.PutItem.cursor": ("wru", wru(p.cursor_item_bytes)),
        "dynamodb.PutItem.lease": ("wru", wru(p.function_lease_item_bytes)),
        "dynamodb.DeleteItem.lease": ("wru", wru(p.function_lease_item_bytes)),
        "dynamodb.UpdateItem.reservation": ("wru", wru(p.writer_item_bytes)),
        "dynamodb.UpdateItem.stats": ("wru", wru(p.function_state_item_bytes)),
    }


def _operation(item: str) -> str:
    """"dynamodb.PutItem.cursor" -> "dynamodb.PutItem"; "lambda.Invoke.function" stays (the function invoked)."""
    return item if item.startswith("lambda.") else item.rsplit(".", 1)[0]


def _usage(w: Workload, p: Parameters, s: Shape, *, starts: float, serving: float, standby: float, slots: int,
           batches: float, delivering: float, groups: float, out_bytes: float, outputs_per_batch: float, once: bool,
           function_ms: float, function_memory_mb: int, state_writes: float,
           state_reads: float) -> tuple[dict[str, Usage], dict[str, float]]:
    """Per-second usage by step, and requests per second by "service.Operation"."""
    parts = w.topic_partitions
    events = dispatch_requests(partitions=parts, delivering=delivering, groups=groups, once=once, slots=slots,
                               stats_writes=p.function_stats_writes_per_invocation)
    units = _units(p, parts)
    runs = 1 / p.maintenance_interval_s if p.maintenance_interval_s else 0.0
    rates = {"start": starts, "standby": standby, "serve": serving, "batch": batches, "sweep": runs}
    # each step's requests per second, by item: the dispatcher's starts and ends; its batches (less the
    # outputs' store); the outputs' store; the sweep
    output_items = ("dynamodb.GetItem.partitions", "dynamodb.UpdateItem.reservation", "kinesis.PutRecord.output")
    per_step: dict[str, dict[str, float]] = {"start": {}, "batch": {}, "output": {}, "sweep": {}}
    for event, rate in rates.items():
        for item, count in events[event].items():
            step = ("start" if event in ("start", "standby", "serve") else
                    "output" if event == "batch" and item in output_items else event)
            per_step[step][item] = per_step[step].get(item, 0.0) + count * rate

    def ddb(items: dict[str, float]) -> Usage:
        out = Usage()
        for item, n in items.items():
            kind, per = units.get(item, ("", 0.0))
            if kind == "rru":
                out.dynamodb_rru += n * per
            elif kind == "wru":
                out.dynamodb_wru += n * per
        return out

    # start: the journal consumer's Invoke, the dispatcher's invocation and its own time (a serving one's end too)
    start = ddb(per_step["start"])
    start.lambda_requests = starts
    start.lambda_gb_s = (starts * (_gb_s(w, p.function_trigger_ms) + _gb_s(w, p.dispatcher_start_ms))
                         + serving * _gb_s(w, p.dispatcher_end_ms))
    start.logs_gb = starts * p.log_bytes_per_invocation / GiB
    start.xray_traces = xray_traces_per_s(starts) if p.xray_active else 0.0

    # batch: the function's invocation, the dispatcher waiting for it, and the receive's reads (as any receive)
    reads = batches * delivering * (1 - min(p.entry_cache_hit_fraction, 1.0))
    tail, backlog = reads * p.tail_read_fraction, reads * (1 - p.tail_read_fraction)
    segment_item = p.segment_item_base_bytes + p.segment_offset_bytes_per_entry * s.entries_per_segment
    batch = ddb(per_step["batch"])
    batch.lambda_requests = batches
    batch.lambda_gb_s = batches * (_gb_s(w, p.dispatcher_batch_ms + function_ms)
                                   + function_ms / 1000 * function_memory_mb / 1024)
    batch.dynamodb_rru += backlog * p.backlog_queries_per_receive * rru(segment_item)
    batch.s3_get_requests = backlog * p.backlog_gets_per_receive
    batch.kinesis_od_retrieval_gb = s.entries_per_s * _tail_share(p) * s.record_bytes * s.tail_amplification / GiB
    batch.logs_gb = batches * p.log_bytes_per_invocation / GiB

    # output: one journal record per group append, each of its outputs an entry
    entry = p.per_entry_overhead_bytes + out_bytes + p.per_message_overhead_bytes + p.function_output_property_bytes
    record = outputs_per_batch / groups * entry if groups else 0.0
    output = ddb(per_step["output"])
    if groups:
        output.kinesis_od_ingest_gb = batches * groups * kinesis_ondemand_ingest_bytes(record) / GiB
        output.kinesis_ppu = batches * groups * kinesis_put_payload_units(record)
    state = Usage(dynamodb_wru=state_writes * wru(p.function_state_item_bytes),
                  dynamodb_rru=state_reads * rru(p.function_state_item_bytes))
    sweep = ddb(per_step["sweep"])

    requests: dict[str, float] = {"lambda.Invoke.function_dispatcher": starts}
    for items in per_step.values():
        for item, n in items.items():
            requests[_operation(item)] = requests.get(_operation(item), 0.0) + n
    for operation, n in (("dynamodb.UpdateItem", state_writes), ("dynamodb.GetItem", state_reads),
                         ("dynamodb.Query", backlog * p.backlog_queries_per_receive),
                         ("kinesis.GetRecords", tail * p.getrecords_per_tail_read),
                         ("kinesis.GetShardIterator", tail * p.getshard_iterators_per_tail_read),
                         ("s3.GetObject", backlog * p.backlog_gets_per_receive)):
        requests[operation] = requests.get(operation, 0.0) + n
    return {"start": start, "batch": batch, "output": output, "state": state, "sweep": sweep}, requests


def _notes(w: Workload, batch: float, busy: bool, starts: float, batches: float, groups: float, once: bool,
           slots: int, idle: float, output: bool) -> list[str]:
    notes = [
        f"{starts:.2f} dispatcher starts/s (one per seal of the input) and {batches:.2f} invocations/s of "
        f"{batch:.1f} messages each"
        + (": the batches gather more than a seal brings, so one dispatcher serves on and every start finds "
           f"its {'slot' if slots == 1 else f'{slots} slots'} held" if busy else
           ": each start serves what its seal brought, then gives its slot up"),
        f"an idle function runs nothing (no dispatcher, no invocation): only the maintenance run's backlog sweep "
        f"reads its record and cursors, ${idle:.4f} a month",
        "the function's subscription is priced here: the workload's own subscriptions are the input's other readers",
    ]
    if output:
        notes.append(f"each batch's outputs are stored in {groups:g} group append(s); the output topic's sealing, "
                     "storage and reads are its own workload (output_topic, not in the total)")
    if once:
        notes.append("EFFECTIVELY_ONCE: one dispatch slot; each serving first hands back the input partitions' "
                     "unsettled messages (a cursor read and write each); deduplication rides on the reservation")
    return notes
