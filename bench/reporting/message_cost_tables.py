"""The first section: what a message costs at the defaults (bench/message_cost.py's workloads,
bench/results/message-cost-*.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from magnetar.client.producer import DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS
from magnetar.core.ledger.pacing import DEFAULT_SEAL_LATENCY_MS
from message_cost import (  # bench/message_cost.py: the workloads, their commands, its summary
    WORKLOADS,
    summarize,
)

from .base import (
    FAN_OUT,
    MIB,
    PREVIOUS_SEAL_LATENCY_MS,
    UNPACED,
    ReportError,
    Results,
    billed_per_1000,
    bold,
    commands,
    join,
    measured_at,
    messages,
    n,
    pair,
    pct,
    per_1000,
    ratio,
    raw_limit,
    table,
    usd,
    usd_per_million,
    yes_no,
)

STEADY_100_P99_MS = 500  # the 100 msg/s latency goal
FLAT_OUT_P99_MS = 700  # the flat-out latency goal

NAMES = {
    "steady-300": "steady 300 msg/s",
    "steady-300-linger-50": "steady 300 msg/s, producer lingering 50 ms",
    "steady-300-linger-10": "steady 300 msg/s, producer lingering 10 ms",
    "steady-100": "steady 100 msg/s",
    "steady-300-2x2": "steady 300 msg/s, 2 producers, 2 consumers (Shared)",
    "flat-out": "flat out, batch 100",
    "key-shared-8p": "partitioned Key_Shared",
}
MAIN = ("steady-300", "steady-100", "steady-300-2x2", "flat-out", "key-shared-8p")


def run(results: Results, workload: str) -> dict[str, Any]:
    data: dict[str, Any] = results.load(f"message-cost-{workload}.json")
    return data


def command(workload: str) -> str:
    return "magnetar perf e2e " + " ".join(WORKLOADS[workload])


def short(workload: str) -> str:
    """The workload's own options, as the table's command column shows them."""
    return f"`{' '.join(WORKLOADS[workload])}`"


def label(r: dict[str, Any]) -> str:
    return measured_at(r, UNPACED)


def summary_of(results: Results, workload: str) -> dict[str, Any]:
    """The workload's row of message-cost-summary.json, checked against its run's own file."""
    summary = results.load("message-cost-summary.json")
    if workload not in summary or summary[workload] != summarize(workload, run(results, workload)):
        raise ReportError(f"message-cost-summary.json does not hold message-cost-{workload}.json's figures: "
                          f"bench/message_cost.py {workload} (or --reprice {workload}) writes both")
    row: dict[str, Any] = summary[workload]
    return row


def workloads(results: Results) -> str:
    rows = []
    for w in MAIN:
        r, s = run(results, w), summary_of(results, w)
        rows.append([NAMES[w], short(w), n(s["msgs_per_s"]), n(raw_limit(r)), ratio(s["ratio_to_limit"]),
                     f"{n(s['requests_per_1000'], 1)} ({bold(n(s['requests_per_1000_without_fan_out'], 1))})",
                     pair(s["e2e_p50_ms"], s["e2e_p99_ms"]), usd(s["usd_per_million_provisioned"]), label(r)])
    return table(["workload", "command (`magnetar perf e2e …`)", "msg/s", "raw limit msg/s (same run)",
                  "ratio to raw limit", "AWS requests / 1,000 msgs (without fan-out reads)", "e2e p50 / p99 ms",
                  "$ / M msgs (provisioned Kinesis)", "measured at"], rows)


@dataclass
class Check:
    name: str
    value: str
    ok: bool


def _met(checks: list[Check]) -> str:
    if len(checks) == 1 or len({c.ok for c in checks}) == 1:
        return yes_no(all(c.ok for c in checks))
    return ", ".join(f"{c.name} {yes_no(c.ok)}" for c in checks)


def goals(results: Results) -> str:
    s300, s100, two = (run(results, w) for w in ("steady-300", "steady-100", "steady-300-2x2"))
    flat, ks = run(results, "flat-out"), run(results, "key-shared-8p")

    def req(r: dict[str, Any], limit: float) -> Check:
        return Check("requests", n(billed_per_1000(r), 1), billed_per_1000(r) <= limit)

    def cost(r: dict[str, Any], limit: float) -> Check:
        value = usd_per_million(r)
        return Check("cost", usd(value), value is not None and value <= limit)

    def p99(r: dict[str, Any], limit: float) -> Check:
        value = r["e2e_latency_ms"]["p99"]
        return Check("latency", f"{n(value)} ms", value <= limit)

    share = ks["msgs_per_s"] / max(flat["msgs_per_s"], 1e-9)
    rows: list[tuple[str, list[Check]]] = [
        ("steady 300 msg/s: ≤ 250 requests per 1,000 (fan-out reads apart)", [req(s300, 250)]),
        ("steady 300 msg/s: ≤ $0.30 per million", [cost(s300, 0.30)]),
        ("steady 300 msg/s: e2e p99 ≤ 700 ms", [p99(s300, 700)]),
        ("producer lingering 100 ms: ≤ $0.12 per million (batched SQS), e2e p99 ≤ 1 s",
         [cost(s300, 0.12), p99(s300, 1000)]),  # the default delay is the 100 ms this goal names
        ("flat out: ≤ 30 requests per 1,000, ≤ $0.05 per million, e2e p99 ≤ 700 ms",
         [req(flat, 30), cost(flat, 0.05), p99(flat, FLAT_OUT_P99_MS)]),
        ("partitioned Key_Shared: ≤ 40 requests per 1,000; throughput ≥ 0.5 of the single-topic flat-out run",
         [req(ks, 40), Check("throughput", f"{n(ks['msgs_per_s'])} / {n(flat['msgs_per_s'])} = {ratio(share)}",
                             share >= 0.5)]),
        (f"100 msg/s: e2e p99 ≤ {STEADY_100_P99_MS} ms", [p99(s100, STEADY_100_P99_MS)]),
        ("2 producers and 2 consumers cost no more per message than 1 and 1",
         [Check("requests", f"{n(billed_per_1000(two), 1)} against {n(billed_per_1000(s300), 1)} requests per 1,000",
                billed_per_1000(two) <= billed_per_1000(s300))]),
    ]
    return table(["goal", "measured", "met"],
                 [[goal, "; ".join(c.value for c in checks), _met(checks)] for goal, checks in rows])


# Where a message's requests go: each step's operations, and what they are.
STEPS: list[tuple[str, tuple[str, ...], str]] = [
    ("publish", ("dynamodb.UpdateItem", "kinesis.PutRecord"),
     "one reservation and one journal record per publish request (its batches as one envelope)"),
    ("seal", ("s3.PutObject", "dynamodb.TransactWriteItems", "kinesis.GetRecords", "kinesis.GetShardIterator"),
     "one segment object and one commit per seal; a held seal's read-ahead of what reached the shard meanwhile"),
    ("consume", ("dynamodb.BatchGetItem", "dynamodb.PutItem", "s3.GetObject"),
     "one look per poll (cursor, seal state with its newest segments, writer counter), one claim per poll that "
     "gets entries (its acknowledgements with it), one ranged GET per new segment"),
    ("maintenance and look-ups", ("dynamodb.GetItem", "dynamodb.Query", "s3.DeleteObjects", "dynamodb.DeleteItem"),
     "the maintenance function every minute (retention, compaction checks), policy and segment look-ups"),
    ("fan-out reads (not billed per request)", FAN_OUT,
     "the journal consumer's enhanced fan-out: on AWS one SubscribeToShard per shard every 5 minutes, billed "
     "per consumer-shard hour and GB"),
]


def _ops(r: dict[str, Any], ops: tuple[str, ...]) -> str:
    present = [op for op in ops if r["aws_requests"].get(op)]
    return " + ".join(f"`{op.split('.', 1)[1]}` {n(per_1000(r['aws_requests'][op], r), 1)}" for op in present)


def requests_by_step(results: Results) -> str:
    r = run(results, "steady-300")
    rows: list[list[str]] = []
    seen: set[str] = set()
    for step, ops, what in STEPS:
        seen.update(ops)
        if any(r["aws_requests"].get(op) for op in ops):
            rows.append([step, _ops(r, ops), what])
    other = tuple(sorted(op for op in r["aws_requests"] if op not in seen))
    if other:
        rows.append(["other", _ops(r, other), ""])
    steps = table(["step", "requests / 1,000 msgs", "what"], rows)
    return join(steps, cadence(r))


def _http_2xx(r: dict[str, Any], side: str) -> int:
    statuses = r.get("http_statuses", {}).get(side, {})
    return int(statuses.get("200", 0))


def cadence(r: dict[str, Any]) -> str:
    seconds, msgs = r["seconds"], messages(r)
    publishes, polls = _http_2xx(r, "producers"), _http_2xx(r, "consumers")
    seals = r["aws_requests"].get("s3.PutObject", 0)
    rows = [[name, n(count / seconds, 1), n(msgs / count, 1) if count else "—"]
            for name, count in (("publish requests", publishes), ("seals (segment objects)", seals),
                                ("polls that answered", polls))]
    return table(["at steady 300 msg/s", "per second", "messages each"], rows)


COMPONENTS: list[tuple[str, str, str]] = [
    ("api_gateway", "API Gateway", "a request per publish and per poll"),
    ("lambda_requests", "Lambda requests", "publishes, polls, the journal consumer's invocations"),
    ("lambda_compute", "Lambda duration", "the same, and the journal consumer's holds"),
    ("dynamodb", "DynamoDB", "reservations, seal commits, cursor looks and claims, priced by the items' sizes"),
    ("s3_requests", "S3 requests", "the segment PUTs and the consumers' GETs"),
    ("s3_storage", "S3 storage", "segments kept for the retention"),
    ("kinesis", "Kinesis", "a provisioned shard, and the journal consumer's enhanced fan-out (consumer-shard "
     "hours and GB)"),
    ("eventbridge", "EventBridge", "the maintenance schedule"),
    ("cloudwatch_logs", "CloudWatch Logs", "the functions' logs: no line per invocation at the stack's logLevel "
     "(WARN)"),
    ("xray", "X-Ray", "traces: none recorded unasked (the stack's tracing is pass-through)"),
]


def dollars(results: Results) -> str:
    r = run(results, "steady-300")
    parts = r["cost_usd_per_million_msgs"]["by_mode"]["provisioned"]["usd_per_million_messages"]
    rows = [[name, usd(parts.get(key)), what] for key, name, what in COMPONENTS if key in parts]
    rows.append([bold("total"), bold(usd(parts["total"])), ""])
    return table(["steady 300 msg/s: component", "$ / M msgs", "for"], rows)


def linger(results: Results) -> str:
    rows = []
    for w in ("steady-300-linger-10", "steady-300-linger-50", "steady-300"):
        r = run(results, w)
        delay = r["config"]["batch_max_delay_ms"]
        name = (f"{delay} (pulsar-client's)" if delay == 10
                else f"{delay} (the default)" if delay == DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS else str(delay))
        rows.append([name, n(_http_2xx(r, "producers") / r["seconds"], 1), n(billed_per_1000(r), 1),
                     pct(r["e2e_latency_ms"], "p50", "p99"), usd(usd_per_million(r))])
    return table(["`batching_max_publish_delay_ms`", "publish requests / s", "AWS requests / 1,000 (without fan-out)",
                  "e2e p50 / p99 ms", "$ / M"], rows)


# the workloads of the seal-target table: each at the default and at the targets of its `<name>-seal-<ms>`
SEAL_TARGET_BASES = {"steady-300": "300 msg/s", "steady-100": "100 msg/s", "flat-out": "flat out"}


def seal_target(results: Results) -> str:
    rows = []
    for base, rate in SEAL_TARGET_BASES.items():
        others = {int(w.rsplit("-", 1)[1]): w for w in WORKLOADS if w.startswith(f"{base}-seal-")}
        for ms, w in sorted({DEFAULT_SEAL_LATENCY_MS: base, **others}.items()):
            target = f"{ms} ms (the default)" if ms == DEFAULT_SEAL_LATENCY_MS else f"{ms} ms"
            if not results.exists(f"message-cost-{w}.json"):
                rows.append([rate, target, f"not measured yet: `bench/message_cost.py {w}`", "", "", ""])
                continue
            r = run(results, w)
            seals = r["aws_requests"].get("s3.PutObject", 0) / r["seconds"]
            rows.append([rate, target, n(seals, 1), n(billed_per_1000(r), 1),
                         pct(r["e2e_latency_ms"], "p50", "p99"), usd(usd_per_million(r))])
    return table(["rate", "seal latency target", "seals / s", "AWS requests / 1,000 (without fan-out)",
                  "e2e p50 / p99 ms", "$ / M"], rows)


def ceiling(results: Results) -> str:
    rows = []
    for p in (1, 2, 4, 8):
        r = run(results, f"ceiling-{p}p")
        refused = sum(v for k, v in (r.get("refusals") or {}).items() if k.startswith("kinesis.PutRecord"))
        of_shards = r["mb_per_s"] * 1e6 / MIB / p
        received = f"{n(r['received'])} / {n(r['sent'])}" + (" (drain timed out)" if r.get("drain_timed_out") else "")
        rows.append([str(p), n(r["msgs_per_s"]), n(r["mb_per_s"], 2), bold(ratio(of_shards)), received,
                     pct(r["e2e_latency_ms"], "p50", "p99"), n(refused), label(r)])
    return table(["partitions = shards", "msg/s", "MB/s in", "of the shards' 1 MiB/s each", "received / sent",
                  "e2e p50 / p99 ms", "journal writes refused (retried)", "measured at"], rows)


def message_cost_commands(results: Results) -> str:
    return commands(*(f"{command(w)}   # {w}" for w in WORKLOADS))


# the same 100 msg/s command three times in a row, at the default seal latency target and at the former one
STEADY_100_RUNS = {
    DEFAULT_SEAL_LATENCY_MS: ("message-cost-steady-100.json", "message-cost-steady-100-again-2.json",
                              "message-cost-steady-100-again-3.json"),
    PREVIOUS_SEAL_LATENCY_MS: ("message-cost-steady-100-seal-250.json", "message-cost-steady-100-seal-250-again-2.json",
          "message-cost-steady-100-seal-250-again-3.json"),
}
# the table's run and the same command five times after it
KEY_SHARED_RUNS = ("message-cost-key-shared-8p.json",
                   *(f"message-cost-key-shared-8p-again-{i}.json" for i in range(2, 7)))


def steady_100_runs(results: Results) -> str:
    """Three runs of each 100 msg/s command, one after the other: the latency's spread."""
    rows = []
    for target, names in STEADY_100_RUNS.items():
        label = f"{target} ms" + (" (the default)" if target == DEFAULT_SEAL_LATENCY_MS else "")
        for i, name in enumerate(names, 1):
            run = results.load(name)
            rows.append([label, str(i), f"`{name}`", n(raw_limit(run)), pct(run["e2e_latency_ms"], "p50", "p95", "p99"),
                         yes_no(run["e2e_latency_ms"]["p99"] <= STEADY_100_P99_MS), usd(usd_per_million(run))])
    return table(["seal latency target", "run", "result", "raw limit msg/s (same run)", "e2e p50 / p95 / p99 ms",
                  f"p99 ≤ {STEADY_100_P99_MS} ms", "$ / M"], rows)


# the flat-out command (20 s) five times, the first being the table's run, and the same workload for 60 s twice
FLAT_OUT_RUNS = (("message-cost-flat-out.json", *(f"message-cost-flat-out-again-{i}.json" for i in range(2, 6))),
                 ("message-cost-flat-out-60s.json", "message-cost-flat-out-60s-again-2.json"))


def flat_out_runs(results: Results) -> str:
    """The flat-out workload run after run: how far its e2e p99 moves, beside the raw limits of the
    same run (the journal's writes, and DynamoDB's, which show how fast the machine was)."""
    rows = []
    for names in FLAT_OUT_RUNS:
        for i, name in enumerate(names, 1):
            run = results.load(name)
            ddb = ((run.get("limit") or {}).get("dynamodb_put_item") or {}).get("per_s")
            rows.append([n(run["config"]["duration_s"]) + " s", str(i), f"`{name}`", n(raw_limit(run)), n(ddb),
                         n(run["msgs_per_s"]), n(billed_per_1000(run), 1),
                         pct(run["e2e_latency_ms"], "p50", "p95", "p99"),
                         yes_no(run["e2e_latency_ms"]["p99"] <= FLAT_OUT_P99_MS), usd(usd_per_million(run)),
                         label(run)])
    return table(["duration", "run", "result", "raw limit: journal writes / s", "raw limit: DynamoDB PutItem / s",
                  "msg/s", "AWS requests / 1,000 (without fan-out reads)", "e2e p50 / p95 / p99 ms",
                  f"p99 ≤ {FLAT_OUT_P99_MS} ms", "$ / M", "measured at"], rows)


PERF_KEY = "key-{}"  # the keys `magnetar perf --keys N` sends (magnetar/perf/runner.py)


def keys_on_busier_shard(run: dict[str, Any]) -> int:
    """Of a partitioned Key_Shared run's keys, how many land on the busier of the journal's shards:
    a key goes to a partition by its hash (the SDK's routing), a partition to a shard by its name
    (the journal's placement), the local stream's shards split the hash space evenly."""
    from magnetar.adapters.aws.kinesis import HASH_SPACE, hash_key
    from magnetar.client.partitioned import key_partition
    from magnetar.config import LOCAL_SHARD_COUNT
    from magnetar.core.naming import TopicName

    topic, partitions = TopicName.parse(run["topic"]), run["config"]["partitions"]
    shards = run.get("journal_shards") or LOCAL_SHARD_COUNT
    load = [0] * shards
    for k in range(run["config"]["keys"]):
        partition = topic.partition(key_partition(PERF_KEY.format(k), partitions))
        load[hash_key(str(partition)) * shards // HASH_SPACE] += 1
    return max(load)


def key_shared_runs(results: Results) -> str:
    """The partitioned Key_Shared command, run after run: how long its producers took to send, and
    its throughput against the bound the busier journal shard sets (one shard's flat-out rate,
    the single-partition ceiling run's, times the keys over those it carries)."""
    shard_rate = results.load("message-cost-ceiling-1p.json")["msgs_per_s"]
    rows = []
    for i, name in enumerate(KEY_SHARED_RUNS, 1):
        run = results.load(name)
        busy = keys_on_busier_shard(run)
        bound = shard_rate * run["config"]["keys"] / busy
        rows.append([str(i), f"`{name}`", n(raw_limit(run)), n(run["msgs_per_s"]), n(run["produce_seconds"], 1),
                     f"{busy} of {run['config']['keys']}", f"{n(bound)} ({ratio(run['msgs_per_s'] / bound)})",
                     n(billed_per_1000(run), 1), pct(run["e2e_latency_ms"], "p50", "p99")])
    return table(["run", "result", "raw limit msg/s (same run)", "msg/s", "seconds the producers took (20 s asked)",
                  "keys on the busier shard", "its bound msg/s (share reached)",
                  "AWS requests / 1,000 (without fan-out reads)", "e2e p50 / p99 ms"], rows)


BLOCKS = {
    "message-cost": workloads,
    "message-cost-key-shared-runs": key_shared_runs,
    "message-cost-steady-100-runs": steady_100_runs,
    "message-cost-flat-out-runs": flat_out_runs,
    "message-cost-commands": message_cost_commands,
    "message-cost-goals": goals,
    "message-cost-requests": requests_by_step,
    "message-cost-dollars": dollars,
    "message-cost-linger": linger,
    "message-cost-seal-target": seal_target,
    "message-cost-ceiling": ceiling,
}
