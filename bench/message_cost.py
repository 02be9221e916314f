"""What a message costs at the defaults: the workloads of docs/benchmarks.md's first table.

    .venv/bin/python bench/message_cost.py                 # every workload
    .venv/bin/python bench/message_cost.py steady-300 flat-out   # some of them

Each workload is one `magnetar perf e2e` run on its own local cluster (AWS limits on, the
journal consumer on enhanced fan-out, consumers reading sealed entries only: the defaults), with
the raw Kinesis limit measured in the same run. Writes bench/results/message-cost-<name>.json
and bench/results/message-cost-summary.json, and prints the table; `make bench-report` then
regenerates the document's tables from them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench/results"
FAN_OUT = "kinesis.GetRecords(fan-out)"

WORKLOADS: dict[str, list[str]] = {
    "steady-300": ["--rate", "300", "--duration", "180"],
    "steady-300-linger-50": ["--rate", "300", "--duration", "60", "--batch-max-delay-ms", "50"],
    "steady-300-linger-10": ["--rate", "300", "--duration", "60", "--batch-max-delay-ms", "10"],  # pulsar-client's
    "steady-100": ["--rate", "100", "--duration", "60"],
    # as long as steady-300, the run it is compared with: the setup of its clients weighs the same per message
    "steady-300-2x2": ["--rate", "300", "--duration", "180", "--producers", "2", "--consumers", "2"],
    # the seal latency target above its default (200 ms)
    **{f"steady-{rate}-seal-{ms}": ["--rate", str(rate), "--duration", "60", "--seal-latency-ms", str(ms)]
       for rate in (300, 100) for ms in (250, 300)},
    "flat-out": ["--duration", "20"],
    "flat-out-seal-250": ["--duration", "20", "--seal-latency-ms", "250"],
    "key-shared-8p": ["-p", "8", "--producers", "4", "--consumers", "4", "--subscription-type", "Key_Shared",
                      "--keys", "32", "--duration", "20"],
    # the single-topic ceiling: N partitions on N journal shards, flat out
    **{f"ceiling-{n}p": ["-p", str(n), "--journal-shards", str(n), "--producers", str(n), "--consumers", str(n),
                         "--duration", "20"] for n in (1, 2, 4, 8)},
}


def run(name: str) -> dict[str, Any]:
    out = OUT / f"message-cost-{name}.json"
    cmd = [str(ROOT / ".venv/bin/magnetar"), "perf", "e2e", *WORKLOADS[name], "--json", str(out)]
    print("$", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return summarize(name, json.loads(out.read_text()))


def reprice(name: str) -> dict[str, Any]:
    """Price a recorded run again with today's cost model (its counts are what was measured)."""
    from types import SimpleNamespace

    from magnetar.cli.perf import _cost

    out = OUT / f"message-cost-{name}.json"
    run: dict[str, Any] = json.loads(out.read_text())
    run["cost_usd_per_million_msgs"] = _cost(run, SimpleNamespace(size=run["config"]["size"]))
    out.write_text(json.dumps(run, indent=2, default=str))
    return summarize(name, run)


def summarize(name: str, r: dict[str, Any]) -> dict[str, Any]:
    messages = r["received"] or r["acked"]
    fan_out = r["aws_requests"].get(FAN_OUT, 0)
    return {
        "workload": name,
        "command": "magnetar perf e2e " + " ".join(WORKLOADS[name]),
        "msgs_per_s": round(r["msgs_per_s"]),
        "ratio_to_limit": r.get("ratio_to_limit"),
        "requests_per_1000": round(r["aws_requests_per_1000_msgs"], 1),
        "requests_per_1000_without_fan_out": round((r["aws_requests_total"] - fan_out) * 1000 / messages, 1),
        "e2e_p50_ms": round(r["e2e_latency_ms"]["p50"]),
        "e2e_p99_ms": round(r["e2e_latency_ms"]["p99"]),
        "usd_per_million_provisioned": round(r["cost_usd_per_million_msgs"]["provisioned_kinesis"], 3),
        "by_operation_per_1000": {k: round(v * 1000 / messages, 1) for k, v in sorted(
            r["aws_requests"].items(), key=lambda kv: -kv[1])},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workloads", nargs="*", help=f"some of: {', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--reprice", action="store_true",
                        help="do not run: price the recorded runs again with the current cost model")
    args = parser.parse_args()
    names = args.workloads or list(WORKLOADS)
    unknown = set(names) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    summary_file = OUT / "message-cost-summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    for name in names:
        summary[name] = reprice(name) if args.reprice else run(name)
        summary_file.write_text(json.dumps(summary, indent=2))
    print("| workload | msg/s | ratio to limit | req / 1,000 (without fan-out) | e2e p50 / p99 ms | $ / M |")
    for s in summary.values():
        print(f"| {s['workload']} | {s['msgs_per_s']} | {s['ratio_to_limit']} | {s['requests_per_1000']} "
              f"({s['requests_per_1000_without_fan_out']}) | {s['e2e_p50_ms']} / {s['e2e_p99_ms']} | "
              f"{s['usd_per_million_provisioned']} |")


if __name__ == "__main__":
    main()
