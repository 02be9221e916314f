"""Details of scale: many consumers on one subscription, many topics request by request, the
maintenance run over idle topics, a noisy neighbour, and what authentication costs."""

from __future__ import annotations

from typing import Any

from .base import (
    FAN_OUT,
    TAIL_READS,
    UNPACED,
    Results,
    bold,
    commands,
    join,
    measured_at,
    n,
    per_1000,
    ratio,
    scale_measured_at,
    sources,
    table,
)
from .headlines import SCALE_ACTIVE

CONSUMERS = (("scale-consumers-1.json", "1 (long poll)"), ("scale-consumers-10.json", "10 (long poll)"),
             ("scale-consumers-100-push.json", "100 (push)"))


def consumers(results: Results) -> str:
    rows = []
    for file, name in CONSUMERS:
        data: dict[str, Any] = results.load(file)
        s, perf = data["summary"], data["perf"]
        ops = perf["aws_requests"]
        billed = per_1000(sum(v for k, v in ops.items() if k not in FAN_OUT), perf)
        once = "yes" if not s["lost"] and not s["duplicates"] else f"**no**: {s['lost']} lost, {s['duplicates']} duplicated"
        rows.append([name, n(s["acked_per_s"]), n(s["msgs_per_s"]),
                     f"{n(s['publish_p50_ms'])} / {n(s['publish_p99_ms'])}", f"{n(s['e2e_p50_ms'])} / {n(s['e2e_p99_ms'])}",
                     n(billed), n(per_1000(ops.get("dynamodb.PutItem", 0), perf), 1),
                     f"{n(s['per_consumer_min'])} / {n(s['per_consumer_median'])} / {n(s['per_consumer_max'])} "
                     f"({ratio(s['max_over_mean'])})", f"{once} ({n(s['acked'])} acknowledged)",
                     f"{n(s['lambda_concurrency_mean'], 1)} / {n(s['lambda_concurrency_peak'])}",
                     measured_at(data, UNPACED)])
    failed: dict[str, Any] = results.load("scale-consumers-100.json")
    stats = failed["local_stats"]
    broker = stats["lambda"]["magnetar-broker"]
    rows.append(["100 (long poll)", "**did not finish**", "—", "—", "—",
                 f"{n(stats['aws_requests'].get('dynamodb.BatchGetItem', 0))} looks and "
                 f"{n(stats['aws_requests'].get('dynamodb.PutItem', 0))} cursor writes before the step's end",
                 "", f"{n(broker['invocations'])} broker invocations, {n(broker['environments'])} environments", "",
                 f"— / {n(stats['concurrency']['peak'])}", measured_at(failed, UNPACED)])
    return join(commands(
        ".venv/bin/python bench/scale_consumers.py consumers --consumers 1 10 --rate 500 --duration 30",
        ".venv/bin/python bench/scale_consumers.py consumers --consumers 100 --rate 500 --duration 30 --delivery push",
        ".venv/bin/python bench/scale_consumers.py consumers --consumers 100 --rate 500 --duration 20 --step-timeout 420"),
        table(["consumers (delivery)", "acked msg/s", "delivered msg/s", "publish p50 / p99 ms", "e2e p50 / p99 ms",
               "AWS requests / 1,000 msgs (without fan-out reads)", "cursor writes (PutItem) / 1,000",
               "messages per consumer min / median / max (max ÷ mean)", "exactly once", "Lambda concurrency mean / peak",
               "measured at"], rows))


def many_topics_operations(results: Results) -> str:
    runs = [results.load(name)["runs"][0] for name in SCALE_ACTIVE]
    ops: list[str] = []
    for r in runs:
        ops += [op for op in r["aws_requests_per_1000_msgs_by_operation"] if op not in ops]
    rows = [[f"`{op}`", *(n(r["aws_requests_per_1000_msgs_by_operation"].get(op, 0)) for r in runs)] for op in ops]
    rows.append([bold("total"), *(bold(n(r["aws_requests_per_1000_msgs"])) for r in runs)])
    rows.append(["journal consumer: invocations (mean s each)",
                 *(f"{n(r['lambda']['magnetar-journal-consumer']['invocations'])} "
                   f"({n(r['lambda']['magnetar-journal-consumer']['duration_ms_total'] / 1000 / max(r['lambda']['magnetar-journal-consumer']['invocations'], 1), 1)})"
                   for r in runs)])
    rows.append(["cores used by the cluster and clients", *(n(r["cpu_cores_used"], 2) for r in runs)])
    header = ["AWS requests / 1,000 msgs", *(f"{n(r['topics'])} × {r['rate_per_topic']:g} msg/s" for r in runs)]
    return join(table(header, rows), sources(*SCALE_ACTIVE))


def idle_maintenance(results: Results) -> str:
    data: dict[str, Any] = results.load("scale-idle.json")
    at = scale_measured_at(data, UNPACED)
    rows = []
    for r in data["runs"]:
        for key, what in (("maintenance_run_no_consumers", "no consumers"),
                          ("maintenance_run_push_consumers", "push consumers on some topics")):
            m = r[key]
            connected = m.get("connected_topics", 0)
            by_op = ", ".join(f"{op.split('.', 1)[1]} {n(v)}" for op, v in m["aws_requests"].items())
            rows.append([f"{n(r['topics'])} topics, {what}" + (f" ({n(connected)} connected)" if connected else ""),
                         n(m["aws_requests_total"]), by_op, n(m["aws_requests_total"] / r["topics"], 3),
                         n(m["billed_ms"] / r["topics"], 1), at])
    return table(["one maintenance run over idle topics", "AWS requests", "by operation", "per topic",
                  "billed Lambda ms per topic (local)", "measured at"], rows)


def noisy_neighbour(results: Results) -> str:
    data: dict[str, Any] = results.load("noisy-neighbour.json")
    at = measured_at(data, TAIL_READS)
    alone = data["phases"]["alone"]["b"]
    rows = []
    for key, name in (("alone", "B alone"), ("flood", "A floods"),
                      ("flood_throttled", f"A floods, A's publishRate {data['a_publish_rate_policy']['publishThrottlingRateInMsg']} msg/s")):
        phase = data["phases"][key]
        b, a, ops = phase["b"], phase.get("a"), phase["aws_requests_by_operation_per_s"]
        rate = b["publish_msgs_per_s"] / alone["publish_msgs_per_s"]
        p99 = b["publish_latency_ms"]["p99"] / alone["publish_latency_ms"]["p99"]
        rows.append([name, f"{bold(n(b['publish_msgs_per_s'], 1))} ({ratio(rate)}×)",
                     f"{n(b['publish_latency_ms']['p50'])} / {bold(n(b['publish_latency_ms']['p99']))} ({n(p99, 1)}×)",
                     f"{n(b['e2e_latency_ms']['p50'])} / {n(b['e2e_latency_ms']['p99'])}",
                     n(a["acked_msgs_per_s"], 1) if a else "—", n(phase["aws_requests_per_s"]),
                     f"{n(ops.get('dynamodb.UpdateItem', 0), 1)} / {n(ops.get('kinesis.PutRecord', 0), 1)}",
                     n(phase["broker_invocations_per_s"]), at])
    limits = data["raw_limits"]
    return join(commands(".venv/bin/python " + data["command"]),
                table(["phase", "B publish msg/s (target 10)", "B publish p50 / p99 ms", "B send → receive p50 / p99 ms",
                       "A acknowledged / s", "AWS requests / s", "reservations (UpdateItem) / journal writes (PutRecord) per s",
                       "broker invocations / s", "measured at"], rows),
                f"Raw limits in the same run: {n(limits['dynamodb_put_item']['per_s'])} DynamoDB PutItem/s from one "
                f"client, {n(limits['kinesis_put_records_1kb']['per_s'])} 1 KB records/s through Kinesis PutRecords.")


def auth(results: Results) -> str:
    runs: list[dict[str, Any]] = results.load("auth-overhead.json")
    rows = [["`--auth`, token" if r["auth"] else "open", n(r["invocations"]["magnetar-broker"]),
             bold(n(r["authorizer_invocations"])) if r["auth"] else "—", n(r["aws_requests_per_1000"])] for r in runs]
    return join(commands(".venv/bin/python bench/auth_overhead.py --messages 1000   # bench/results/auth-overhead.json"),
                table(["", "broker invocations", "authorizer invocations", "AWS requests per 1,000 messages"], rows),
                f"Measured at: {TAIL_READS}.")


BLOCKS = {
    "detail-consumers": consumers,
    "detail-many-topics": many_topics_operations,
    "detail-idle-maintenance": idle_maintenance,
    "detail-noisy-neighbour": noisy_neighbour,
    "detail-auth": auth,
}
