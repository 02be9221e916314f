"""The headline tables: one per question a reader brings (a single topic, partitioned Key_Shared,
many topics, idle cost, push against poll, Spark's direct reads, the binary protocol, verify)."""

from __future__ import annotations

import re
from typing import Any

from message_cost import WORKLOADS

from .base import (
    DEFAULT_ERAS,
    FORMER,
    TAIL_READS,
    TODAY,
    UNPACED,
    Results,
    billed_per_1000,
    bold,
    commands,
    join,
    measured_at,
    n,
    pct,
    ratio,
    raw_limit,
    runs,
    scale_measured_at,
    sources,
    table,
    usd,
    usd_per_million,
)


def cited_command(command: str, name: str, prefix: str = "") -> str:
    """A recorded command line as it reproduces the cited file: its output path is the file's
    current name (and the options the recording lost quotes around are quoted again)."""
    command = re.sub(r"bench/results/[\w.\-]+\.json", f"bench/results/{name}", command)
    command = command.replace("--local-up-args --journal-batching-window 1",
                              '--local-up-args "--journal-batching-window 1"').replace("--broker-tasks  ", '--broker-tasks "" ')
    if prefix and command.startswith("python "):
        command = command[len("python "):]
    return prefix + command


def perf_command(workload: str) -> str:
    return "magnetar perf e2e " + " ".join(WORKLOADS[workload])


# --- a single topic -------------------------------------------------------------------------------
def single_topic(results: Results) -> str:
    rows = []
    picked = (("flat out, 1 producer, 1 consumer", "flat-out"), ("steady 300 msg/s", "steady-300"),
            ("flat out, 2 partitions on 2 shards", "ceiling-2p"))
    for name, workload in picked:
        r: dict[str, Any] = results.load(f"message-cost-{workload}.json")
        rows.append([name, n(r["msgs_per_s"]), n(r["mb_per_s"], 2), n(raw_limit(r)), bold(ratio(r["ratio_to_limit"])),
                     pct(r["publish_latency_ms"], "p50", "p99"), pct(r["e2e_latency_ms"], "p50", "p99"),
                     n(billed_per_1000(r), 1), usd(usd_per_million(r)), measured_at(r, UNPACED)])
    return join(
        commands(*(f"{perf_command(w)}   # {w}" for _, w in picked)),
        table(["run", "msg/s", "MB/s", "raw limit msg/s (same run)", "ratio", "publish p50 / p99 ms",
               "e2e p50 / p99 ms", "AWS requests / 1,000 (without fan-out reads)", "$ / M msgs", "measured at"], rows))


# --- partitioned Key_Shared -----------------------------------------------------------------------
def key_shared(results: Results) -> str:
    ks: dict[str, Any] = results.load("message-cost-key-shared-8p.json")
    flat: dict[str, Any] = results.load("message-cost-flat-out.json")
    base: dict[str, Any] = results.load("key-shared-baseline.json")
    nack: dict[str, Any] = results.load("key-shared-nack10.json")
    # as bench/key_shared_partitioned.py: the nack run's requests beyond the baseline's per message
    extra = (nack["aws_requests_total"] - base["aws_requests_total"] / base["messages"] * nack["messages"]) / max(
        nack["redelivered"], 1)
    here, there = measured_at(ks, UNPACED), measured_at(nack, UNPACED)
    share = ks["msgs_per_s"] / flat["msgs_per_s"]
    rows = [
        ["throughput", f"{n(ks['msgs_per_s'])} msg/s ({ratio(ks['ratio_to_limit'])} of the raw limit, "
         f"{n(raw_limit(ks))} msg/s, same run)", "", here],
        ["against the single-topic flat-out run", f"{n(ks['msgs_per_s'])} / {n(flat['msgs_per_s'])} = {bold(ratio(share))}",
         "≥ 0.5", here],
        ["AWS requests / 1,000 msgs (without fan-out reads)",
         f"{n(ks['aws_requests_per_1000_msgs'], 1)} ({bold(n(billed_per_1000(ks), 1))})", "≤ 40", here],
        ["e2e p50 / p99 ms", pct(ks["e2e_latency_ms"], "p50", "p99"), "", here],
        ["$ / M msgs (provisioned Kinesis)", usd(usd_per_million(ks)), "", here],
        ["extra AWS requests per redelivered message (10% negatively acknowledged, one partition)",
         f"{extra:+.3f} ({n(nack['redelivered'])} redelivered)",
         "", there],
    ]
    return join(
        commands(f"{perf_command('key-shared-8p')}   # key-shared-8p",
                 ".venv/bin/python bench/key_shared_partitioned.py --duration 20 --keys 32   # the redelivery row"),
        table(["8 partitions, 4 producers (32 keys), 4 Key_Shared consumers", "measured", "goal", "measured at"], rows))


# --- many topics ------------------------------------------------------------------------------------
SCALE_ACTIVE = ("scale-active-10x2.json", "scale-active-100x0.2.json", "scale-active-1000x0.02.json")


def many_topics(results: Results) -> str:
    rows, lines = [], []
    for name in SCALE_ACTIVE:
        data: dict[str, Any] = results.load(name)
        lines.append(cited_command(data["command"], name, ".venv/bin/python "))
        r = data["runs"][0]
        limit = r["limit"]["kinesis_put_records"]["per_s"]
        rows.append([f"{n(r['topics'])} × {r['rate_per_topic']:g}", n(r["setup_s"], 1),
                     f"{n(r['sent'])} / {n(r['acked'])} / {n(r['received'])}",
                     f"{n(r['msgs_per_s'], 1)} of {n(r['target_msgs_per_s'])}", f"{n(limit)} ({r['ratio_to_limit']:.2%})",
                     pct(r["publish_latency_ms"], "p50", "p99"), pct(r["e2e_latency_ms"], "p50", "p99"),
                     bold(n(r["aws_requests_per_1000_msgs"])), scale_measured_at(data, f"{UNPACED}, 1 s journal "
                                                                                         "batching window")])
    return join(commands(*lines), table(
        ["topics × msg/s each", "setup s", "sent / acked / delivered", "msg/s", "raw PutRecords limit msg/s (ratio)",
         "publish p50 / p99 ms", "e2e p50 / p99 ms", "AWS requests / 1,000 msgs", "measured at"], rows))


# --- idle cost --------------------------------------------------------------------------------------
def idle(results: Results) -> str:
    data: dict[str, Any] = results.load("scale-idle.json")
    at = scale_measured_at(data, UNPACED)
    small, big = data["runs"][0], data["runs"][1]
    push, poll = small["push_consumers"], small["poll_consumers"]
    bare, connected = small["maintenance_run_no_consumers"]["per_hour"], small["maintenance_run_push_consumers"]["per_hour"]
    scale, per_push, per_poll = 10_000 / small["topics"], 10_000 / push["consumers"], 10_000 / poll["consumers"]

    def row(what: str, requests: float, invocations: float, dollars: float, digits: int = 4) -> list[str]:
        return [what, n(requests), n(invocations), usd(dollars, digits), at]

    rows = [
        row(f"{n(small['topics'])} idle topics, nothing attached, between maintenance runs",
            small["nothing_attached"]["aws_requests_per_hour"], small["nothing_attached"]["lambda_invocations_per_hour"],
            small["nothing_attached"]["usd_per_hour"]),
        row(f"the maintenance run over {n(small['topics'])} idle topics, every minute", bare["aws_requests_per_hour"],
            bare["lambda_invocations_per_hour"], bare["usd_per_hour"]),
        row(f"the maintenance run over {n(big['topics'])} idle topics, every minute",
            big["maintenance_run_no_consumers"]["per_hour"]["aws_requests_per_hour"],
            big["maintenance_run_no_consumers"]["per_hour"]["lambda_invocations_per_hour"],
            big["maintenance_run_no_consumers"]["per_hour"]["usd_per_hour"]),
        row("one idle push consumer (WebSocket)", push["aws_requests_per_hour"] / push["consumers"],
            push["lambda_invocations_per_hour"] / push["consumers"], push["usd_per_hour"] / push["consumers"], 6),
        row("one idle long-poll consumer (SDK `receive()` blocked, `delivery=\"poll\"`)", poll["aws_requests_per_hour"] / poll["consumers"],
            poll["lambda_invocations_per_hour"] / poll["consumers"], poll["usd_per_hour"] / poll["consumers"]),
        row(f"**10,000 idle topics** (the {n(small['topics'])}-topic run × {scale:g})",
            bare["aws_requests_per_hour"] * scale, bare["lambda_invocations_per_hour"], bare["usd_per_hour"] * scale, 3),
        row(f"+ 10,000 idle push consumers (the {n(push['consumers'])} measured × {per_push:g}: connection minutes "
            "and the maintenance run's visits of their topics)",
            (connected["aws_requests_per_hour"] - bare["aws_requests_per_hour"]) * per_push, 0,
            (push["usd_per_hour"] + connected["usd_per_hour"] - bare["usd_per_hour"]) * per_push, 3),
        row(f"+ 10,000 idle long-poll consumers (the {n(poll['consumers'])} measured × {10_000 / poll['consumers']:g}; "
            "10× a default account's Lambda concurrency: not possible)", poll["aws_requests_per_hour"] * per_poll,
            poll["lambda_invocations_per_hour"] * per_poll, poll["usd_per_hour"] * per_poll, 0),
    ]
    fixed = data["fixed_usd_per_hour"]
    fixed_line = (f"Whatever the topics, the journal stream costs {usd(fixed['kinesis_on_demand_stream_hour'], 2)} an hour "
                  f"on demand ({usd(fixed['kinesis_provisioned_shard_hours'], 2)} for 2 provisioned shards and "
                  f"{usd(fixed['kinesis_provisioned_efo_consumer_shard_hours'], 2)} for their fan-out consumer), the "
                  f"maintenance schedule {usd(fixed['eventbridge_schedule'], 5)}.")
    return join(commands(cited_command(data["command"], "scale-idle.json", ".venv/bin/python ")),
                table(["idle", "AWS requests / hour", "Lambda invocations / hour", "$ / hour", "measured at"], rows),
                fixed_line)


# --- push against poll ------------------------------------------------------------------------------
def push_vs_poll(results: Results) -> str:
    data: dict[str, Any] = results.load("push-vs-poll.json")
    idle_run: dict[str, Any] = results.load("scale-idle.json")
    at, at_idle = measured_at(data, TAIL_READS), scale_measured_at(idle_run, UNPACED)
    lat, idle_ = data["latency"], data["idle"]
    poll = idle_run["runs"][0]["poll_consumers"]
    push = idle_run["runs"][0]["push_consumers"]
    kinds = ("long_poll", "idle_watch", "push")

    def idle_row(label: str, key: str, fmt: Any) -> list[str]:
        return [label, *(fmt(idle_[k][key], k) for k in kinds), at]

    rows = [
        [f"send → delivery p50 / p90 / p99 / max ms ({n(lat['sent'])} messages)",
         pct(lat["long_poll_ms"], "p50", "p90", "p99", "max"), "(a busy consumer long-polls)",
         pct(lat["push_ms"], "p50", "p90", "p99", "max"), at],
        idle_row("one idle consumer: AWS requests / hour", "aws_requests_per_hour", lambda v, _k: n(v)),
        idle_row("one idle consumer: Lambda GB-s / hour", "lambda_gb_seconds_per_hour", lambda v, _k: n(v, 1)),
        idle_row("one idle consumer: $ / hour", "usd_per_idle_consumer_hour",
                 lambda v, k: bold(usd(v, 6 if k == "push" else 4 if v >= 0.001 else 6))),
        [f"one idle consumer of {n(poll['consumers'])} (long poll) or {n(push['consumers'])} (push): $ / hour",
         usd(poll["usd_per_hour"] / poll["consumers"], 4), "", usd(push["usd_per_hour"] / push["consumers"], 6),
         at_idle],
    ]
    return join(
        commands(cited_command(data["command"], "push-vs-poll.json", ".venv/bin/python ")),
        table(["", "long poll (SDK `receive`, `delivery=\"poll\"`)",
               "SDK `receive`, the default delivery, idle: its idle watch", "push (WebSocket)", "measured at"], rows),
        f"Raw limit in the same run: the emulator took {n(data['raw_kinesis_put_record_per_s'])} Kinesis PutRecord/s "
        "from one client. " + sources("push-vs-poll.json", "scale-idle.json"))


# --- Spark's direct reads -----------------------------------------------------------------------------
def spark(results: Results) -> str:
    data: dict[str, Any] = results.load("spark-direct-s3.json")
    label = measured_at(data, f"{UNPACED}, AWS limits off (the bench's default)")
    if label in DEFAULT_ERAS and data.get("aws_limits") == "off":
        label = f"{label}, AWS limits off (the bench's default: producing 1 GB is not held to one shard)"
    lines = [cited_command(data["command"], "spark-direct-s3.json")]
    # the path through the broker: from the same run when it read that way too, else from the run that did
    broker_run, broker_label = data, label
    if not any(s["path"] == "broker" for s in data["spark"]):
        broker_run = results.load("spark-direct-s3-broker-path.json")
        broker_label = measured_at(broker_run, f"{UNPACED}, AWS limits off, an earlier build of the connector")
        lines.append(cited_command(broker_run["command"], "spark-direct-s3-broker-path.json"))
    raw = {g["concurrency"]: g["msgs_per_s"] for g in data["raw_s3_get"]}
    rows = [["raw S3 GET of the planned slices (presigned, no decoding)", str(c), n(v), "—", "", label]
            for c, v in sorted(raw.items())]
    for s in data["spark"]:
        if s["path"] == "direct":
            rows.append([bold("Spark, direct"), str(s["tasks"]), bold(n(s["rows_per_s"])), n(raw.get(s["tasks"])),
                         bold(ratio(s["ratio_to_raw_get_same_concurrency"])), label])
    broker_raw = {g["concurrency"]: g["msgs_per_s"] for g in broker_run["raw_s3_get"]}
    for s in broker_run["spark"]:
        if s["path"] == "broker":
            rows.append(["Spark, through the broker", str(s["tasks"]), n(s["rows_per_s"]), n(broker_raw.get(s["tasks"])),
                         ratio(s["ratio_to_raw_get_same_concurrency"]), broker_label])
    best = (f"Best against best: {n(data['best_direct_rows_per_s'])} rows/s direct against "
            f"{n(data['best_raw_get_msgs_per_s'])} raw GETs, {bold(format(data['ratio_best_direct_to_best_raw'], '.3f'))}. "
            f"{n(data['messages'])} messages of {n(data['message_bytes'])} bytes in {n(data['segments'])} segments "
            f"({n(data['segment_bytes'] / 1e6)} MB), Spark {data['pyspark']}, {data['cpus']} cores.")
    return join(commands(*lines),
                table(["read", "tasks / concurrent GETs", "rows/s", "raw GET rows/s, same concurrency",
                       "ratio to the raw GETs", "measured at"], rows), best)


# --- the binary protocol --------------------------------------------------------------------------------
def protocol(results: Results) -> str:
    r: dict[str, Any] = results.load("perf-protocol-pulsar.json")
    sdk = r["sdk_baseline"]
    at = measured_at(r, UNPACED)
    sdk_req = sdk["aws_requests_total"] * 1000 / sdk["messages"]
    rows = [
        ["Magnetar SDK (HTTP)", n(sdk["msgs_per_s"]), pct(sdk["publish_latency_ms"], "p50", "p99"),
         pct(sdk["e2e_latency_ms"], "p50", "p99"), n(sdk_req, 1), "1.00", at],
        ["pulsar-client 3.x through the proxy (`pulsar://`)", n(r["msgs_per_s"]), pct(r["publish_latency_ms"], "p50", "p99"),
         pct(r["e2e_latency_ms"], "p50", "p99"), n(r["aws_requests_per_1000_msgs"], 1),
         bold(ratio(r["requests_ratio_to_sdk"])), at],
    ]
    return join(
        commands("magnetar perf e2e --protocol pulsar --rate 500 --duration 20 "
                 "--json bench/results/perf-protocol-pulsar.json"),
        table(["door", "msg/s", "publish p50 / p99 ms", "e2e p50 / p99 ms", "AWS requests / 1,000 msgs",
               "requests against the SDK's", "measured at"], rows),
        f"Raw limit (same run): {n(raw_limit(r))} msg/s of Kinesis PutRecords; the run at {ratio(r['ratio_to_limit'])} "
        "of it (a fixed rate of 500 msg/s).")


# --- verify ---------------------------------------------------------------------------------------------
# Each verify run, with the command and configuration of runs that did not record them (a run of
# `magnetar verify` records its command line and time: a new one is labelled from those).
VERIFY: list[tuple[str, str, str]] = [
    ("verify-12-seed25.json", "magnetar verify --runs 12 --seed 25 --delay-points all "
     "--json bench/results/verify-12-seed25.json", FORMER),
    ("verify-30-seed24.json", "magnetar verify --runs 30 --seed 24 --delay-points all "
     "--json bench/results/verify-30-seed24.json", UNPACED),
    ("verify-60-seed42.json", "", TODAY),
    ("verify-30-seed7.json", "", TODAY),
    ("verify-30-seed44.json", "", TODAY),
    ("verify-30-seed45.json", "", TODAY),
    ("verify-30-seed46.json", "", TODAY),
    ("verify-200-seed42.json", "magnetar verify --runs 200 --seed 42 --crash-points all --delay-points all "
     "--json bench/results/verify-200-seed42.json", f"{UNPACED}; `all` without the refusal point"),
    ("verify-geo-2-clusters.json", "", FORMER),
    ("verify-geo-3-clusters.json", "", FORMER),
]
VIOLATIONS = ("lost", "duplicated", "order_violations", "cursor_backwards", "missing_objects", "compaction_violations",
              "schema_violations", "replicated_from_violations", "replicated_subscription_skips")


def verify_rows(results: Results) -> list[tuple[str, str, dict[str, Any], str]]:
    out = []
    for name, command, label in VERIFY:
        data: dict[str, Any] = results.load(name)
        if data.get("command"):
            command = cited_command(data["command"], name)
        out.append((name, command, data, measured_at(data, label)))
    return out


def fired(points: dict[str, int] | None) -> str:
    points = points or {}
    return f"{n(sum(points.values()))} ({len(points)} points)" if points else "—"


def verify(results: Results) -> str:
    rows, lines = [], []
    for _name, command, data, label in verify_rows(results):
        lines.append(command)
        checks = [k for k in VIOLATIONS if k in data]
        bad = {k: data[k] for k in checks if data[k]}
        violations = bold("0") if not bad and not data.get("violations") else ", ".join(f"{k} {v}" for k, v in bad.items())
        clusters = f", {data['clusters']} clusters" if data.get("clusters") else ""
        rows.append([f"{runs(data['runs'])}, seed {data['seed']}{clusters}", n(data["acked"]),
                     n(data.get("delivered")), violations, fired(data.get("crash_points_fired")),
                     fired(data.get("delay_points_fired")), n(data.get("seconds")), label])
    return join(commands(*lines), table(
        ["run", "messages acknowledged", "deliveries checked", "violations (lost, duplicated, order, cursor back, "
         "missing objects, compaction, schema, replication)", "crash points fired", "delay points fired", "seconds",
         "measured at"], rows))


BLOCKS = {
    "headline-single-topic": single_topic,
    "headline-key-shared": key_shared,
    "headline-many-topics": many_topics,
    "headline-idle": idle,
    "headline-push-vs-poll": push_vs_poll,
    "headline-spark": spark,
    "headline-protocol": protocol,
    "headline-verify": verify,
}

