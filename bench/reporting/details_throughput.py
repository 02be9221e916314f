"""Details of a single topic's throughput, latency and requests: past a shard's limit, batch size,
the journal batching window, ten minutes at a fixed rate, modeled AWS latency, other emulators,
and partitioned Key_Shared's requests."""

from __future__ import annotations

import re
from typing import Any

from .base import (
    TAIL_READS,
    UNPACED,
    Results,
    billed_per_1000,
    bold,
    commands,
    join,
    measured_at,
    n,
    pct,
    per_1000,
    ratio,
    raw_limit,
    sources,
    table,
    usd,
    usd_per_million,
)


def past_the_ceiling(results: Results) -> str:
    data: dict[str, Any] = results.load("partition-ceiling-batched-1p.json")
    at = measured_at(data, UNPACED)
    rows = []
    for s, step in zip(data["summary"], data["steps"], strict=True):
        shard = step["raw_limits"]["shard"]["mib_per_s"]
        refused = sum(v for k, v in s["refusals"].items() if k.startswith("kinesis.PutRecord"))
        errors = {**s["sdk_http_errors"]["producers"], **s["sdk_http_errors"]["consumers"]}
        rows.append([n(s["rate"]), str(s["producers"]), f"{bold(n(s['acked_per_s']))} ({n(s['acked_mib_per_s'], 2)} MiB/s)",
                     f"{bold(ratio(s['ratio_to_raw_shard']))} (of {n(shard, 2)} MiB/s)",
                     pct({"p50": s["publish_p50_ms"], "p99": s["publish_p99_ms"]}, "p50", "p99"),
                     pct({"p50": s["e2e_p50_ms"], "p99": s["e2e_p99_ms"]}, "p50", "p99"), n(refused),
                     "all 2xx" if not errors else ", ".join(f"{k}: {v}" for k, v in errors.items()),
                     f"{n(s['lost'])} / {n(s['duplicates'])} of {n(s['sent'])}", n(s["aws_requests_per_1000_msgs"]), at])
    return join(commands(".venv/bin/python " + re.sub(r" --tag \S+", "", data["script"])),
                table(["offered msg/s", "producers", "acked msg/s", "ratio to the raw shard (same run)",
                       "publish p50 / p99 ms", "e2e p50 / p99 ms", "journal writes refused (retried)", "SDK saw",
                       "lost / duplicated", "AWS requests / 1,000 msgs", "measured at"], rows))


SWEEP = (1, 10, 50, 100, 500)


def batch_size(results: Results) -> str:
    rows = []
    for size in SWEEP:
        r: dict[str, Any] = results.load(f"sweep/batch-{size}.json")
        rows.append([str(size), n(r["msgs_per_s"]), ratio(r.get("ratio_to_limit")), n(r["aws_requests_per_1000_msgs"], 1),
                     pct(r["e2e_latency_ms"], "p50", "p99"),
                     f"{usd(usd_per_million(r, 'on_demand_kinesis'))} / {usd(usd_per_million(r))}",
                     measured_at(r, TAIL_READS)])
    return join(commands(".venv/bin/python bench/sweep_batch.py --sizes 1 10 50 100 500 --duration 15",
                         ".venv/bin/python bench/plot.py"),
                table(["batch", "msg/s", "ratio to raw limit", "AWS requests / 1,000 msgs", "e2e p50 / p99 ms",
                       "$ / M msgs (on-demand / provisioned Kinesis)", "measured at"], rows))


WINDOW = (("limits off, window 0", "perf-e2e-window0-nolimits.json",
           "magnetar perf e2e --duration 20 --aws-limits off --journal-batching-window 0"),
          ("limits off, window 1 s", "perf-e2e-window1-nolimits.json",
           "magnetar perf e2e --duration 20 --aws-limits off --journal-batching-window 1"),
          ("limits on, window 0 (the default)", "perf-e2e-window0.json",
           "magnetar perf e2e --duration 20 --journal-batching-window 0"),
          ("limits on, window 1 s", "perf-e2e-window1.json",
           "magnetar perf e2e --duration 20 --journal-batching-window 1"))


def batching_window(results: Results) -> str:
    rows, lines = [], []
    for name, file, command in WINDOW:
        r: dict[str, Any] = results.load(file)
        lines.append(f"{command} --json bench/results/{file}")
        fan_out = per_1000(r["aws_requests"].get("kinesis.GetRecords(fan-out)", 0), r)
        rows.append([name, n(r["msgs_per_s"]), ratio(r.get("ratio_to_limit")), n(r["aws_requests_per_1000_msgs"], 1),
                     n(fan_out, 1), bold(n(billed_per_1000(r), 1)), pct(r["e2e_latency_ms"], "p50", "p99"),
                     measured_at(r, UNPACED)])
    return join(commands(*lines), table(
        ["run", "msg/s", "ratio to raw limit (same run)", "AWS requests / 1,000 msgs", "of which fan-out reads",
         "billed / 1,000", "e2e p50 / p99 ms", "measured at"], rows))


def _window_mean(timeline: list[dict[str, Any]], key: str, first: bool, span: float) -> float:
    end = timeline[-1]["t"]
    picked = [float(w[key]) for w in timeline if (w["t"] <= span if first else w["t"] > end - span)]
    return sum(picked) / len(picked)


def _rss_mb(timeline: list[dict[str, Any]], pid: str, first: bool, span: float) -> float:
    end = timeline[-1]["t"]
    picked = [float(w["rss_kb"][pid]) for w in timeline
              if pid in w["rss_kb"] and (w["t"] <= span if first else w["t"] > end - span)]
    return max(picked) / 1024


def stability(results: Results) -> str:
    r: dict[str, Any] = results.load("perf-load-600s.json")
    timeline = r["timeline"]
    runtime = str(r["config"]["watch_pids"][0])
    emulator = next(pid for pid in timeline[-1]["rss_kb"] if pid != runtime)

    def change(a: float, b: float) -> str:
        return f"{(b - a) / a:+.1%}"

    rate = [_window_mean(timeline, "msgs_per_s", first, 60) for first in (True, False)]
    p99 = [_window_mean(timeline, "e2e_p99_ms", first, 60) for first in (True, False)]
    run_mb = [_rss_mb(timeline, runtime, first, 60) for first in (True, False)]
    emu_mb = [_rss_mb(timeline, emulator, first, 60) for first in (True, False)]
    rows = [["throughput (mean of the windows)", f"{n(rate[0])} msg/s", f"{n(rate[1])} msg/s", change(*rate)],
            ["e2e p99 (mean of the windows)", f"{n(p99[0])} ms", f"{n(p99[1])} ms", change(*p99)],
            ["`magnetar local up` process RSS (most in the minute)", f"{n(run_mb[0])} MB", f"{n(run_mb[1])} MB",
             change(*run_mb)],
            ["its emulator's RSS (moto: every record and segment kept in memory)", f"{n(emu_mb[0])} MB",
             f"{n(emu_mb[1])} MB", change(*emu_mb)]]
    e2e = r["e2e_latency_ms"]
    overall = (f"{n(r['acked'])} messages acknowledged, {n(r['received'])} received; e2e p50 / p99 / p99.9 / max "
               f"{pct(e2e, 'p50', 'p99', 'p999', 'max')} ms; {n(r['aws_requests_per_1000_msgs'], 1)} AWS requests per "
               f"1,000 messages. Measured at: {measured_at(r, TAIL_READS)}.")
    return join(commands("magnetar perf e2e --duration 600 --rate 1500 --json bench/results/perf-load-600s.json"),
                table(["", "first minute", "last minute", "change"], rows), overall)


def aws_latency(results: Results) -> str:
    rows, lines = [], []
    for label, file, flags in (("flat out", "perf-e2e-aws-latency.json", ""),
                               ("200 msg/s", "perf-e2e-aws-latency-rate200.json", " --rate 200")):
        r: dict[str, Any] = results.load(file)
        lines.append(f"magnetar perf e2e --duration 15{flags} --aws-latency --json bench/results/{file}")
        modeled = r["modeled_aws"]
        at = measured_at(r, TAIL_READS)
        rows.append([f"{label}, emulator", n(r["msgs_per_s"]), pct(r["publish_latency_ms"], "p50", "p99", "p999"),
                     pct(r["e2e_latency_ms"], "p50", "p99", "p999"), at])
        rows.append([f"{label}, {bold('modeled AWS')}", n(modeled["msgs_per_s"]),
                     pct(modeled["publish_latency_ms"], "p50", "p99", "p999"),
                     pct(modeled["e2e_latency_ms"], "p50", "p99", "p999"), at])
    rows.append(["anchor: WarpStream, S3 Standard, default configuration "
                 "([docs](https://docs.warpstream.com/warpstream/configuration/low-latency-clusters))", "—",
                 "p99 400–600", "p99 < 1.5 s", ""])
    return join(commands(*lines), table(["run", "msg/s", "publish p50 / p99 / p99.9 ms", "e2e p50 / p99 / p99.9 ms",
                                         "measured at"], rows))


EMULATORS = (("moto", "perf-e2e-moto-20s"), ("LocalStack + DynamoDB Local", "perf-e2e-localstack-20s"))


def localstack(results: Results) -> str:
    rows = []
    for emulator, stem in EMULATORS:
        for i, suffix in enumerate(("", "-run2", "-run3"), start=1):
            r: dict[str, Any] = results.load(f"{stem}{suffix}.json")
            limit = r["limit"]
            rows.append([emulator, str(i), n(r["msgs_per_s"]), n(raw_limit(r)), bold(ratio(r.get("ratio_to_limit"))),
                         n(r["aws_requests_per_1000_msgs"], 1), pct(r["publish_latency_ms"], "p50", "p99"),
                         pct(r["e2e_latency_ms"], "p50", "p99"),
                         f"{n(limit['s3_put_object']['per_s'])} / {n(limit['dynamodb_put_item']['per_s'])}",
                         measured_at(r, TAIL_READS)])
    return join(commands(
        "magnetar perf e2e --duration 20 --json bench/results/perf-e2e-moto-20s.json   # moto (its own local up)",
        "scripts/emulators.sh scripts/perf-external.sh --duration 20 --json bench/results/perf-e2e-localstack-20s.json"),
        table(["emulator", "run", "msg/s", "raw limit msg/s (Kinesis PutRecords, 500 × 1 KB)", "ratio",
               "AWS requests / 1,000 msgs", "publish p50 / p99 ms", "e2e p50 / p99 ms",
               "raw S3 PutObject (1 MB) / DynamoDB PutItem per s", "measured at"], rows))


def key_shared_requests(results: Results) -> str:
    r: dict[str, Any] = results.load("message-cost-key-shared-8p.json")
    summary: dict[str, Any] = results.load("key-shared-summary.json")
    ops = sorted(r["aws_requests"].items(), key=lambda kv: -kv[1])
    rows = [[f"`{op}`", n(per_1000(count, r), 1)] for op, count in ops]
    rows.append([bold("total"), bold(n(r["aws_requests_per_1000_msgs"], 1))])
    refused = sum(v for k, v in (r.get("refusals") or {}).items() if k.startswith("kinesis.PutRecord"))
    declined = summary["key_shared_8_partitions"].get("declined_conditions_per_1000_msgs", {})
    notes = (f"Journal writes the shards refused (and the journal retried): {n(refused)}, "
             f"{n(per_1000(refused, r), 1)} per 1,000 messages. Measured at: {measured_at(r, UNPACED)}. "
             "Conditional writes declined (races lost) per 1,000 messages in the script's run ("
             + ", ".join(f"`{k.split(':')[0]}` {v}" for k, v in declined.items())
             + f"; measured at: {measured_at(results.load('key-shared-partitioned.json'), UNPACED)}). "
             + sources("message-cost-key-shared-8p.json", "key-shared-partitioned.json", "key-shared-summary.json"))
    return join(table(["operation", "requests / 1,000 msgs"], rows), notes)


BLOCKS = {
    "detail-past-the-ceiling": past_the_ceiling,
    "detail-batch-size": batch_size,
    "detail-batching-window": batching_window,
    "detail-stability": stability,
    "detail-aws-latency": aws_latency,
    "detail-localstack": localstack,
    "detail-key-shared": key_shared_requests,
}
