"""The messaging-model benchmark: 8 partitions, 4 producers with key-hash routing, a Key_Shared
subscription with 4 consumers; then the cost of redelivery.

    .venv/bin/python bench/key_shared_partitioned.py --duration 20 --keys 32 [--tag after]

Runs `magnetar perf e2e` three times, each on its own local cluster:
1. partitioned Key_Shared: throughput, ratio to the raw journal limit, AWS requests / 1,000 msgs
   (and by operation), latencies; its throughput over the single-topic baseline of the same run;
2. the same workload on one partition, one producer, Shared (the single-topic baseline, and the
   baseline of the redelivery cost);
3. the baseline again with consumers negatively acknowledging 10% of first deliveries:
   extra AWS requests per redelivered message = (requests(3) - requests(2)) / redelivered(3),
   both normalised to the same number of messages.
Writes bench/results/key-shared[-<tag>]-*.json and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench/results"
TAG = ""  # --tag: "<tag>-" in the results' names


def perf(name: str, duration: float, *args: str) -> dict:  # type: ignore[type-arg]
    out = OUT / f"key-shared-{TAG}{name}.json"
    cmd = [str(ROOT / ".venv/bin/magnetar"), "perf", "e2e", "--duration", str(duration), "--json", str(out), *args]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    result: dict = json.loads(out.read_text())  # type: ignore[type-arg]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--keys", type=int, default=32, help="distinct keys (key-based batching makes one entry per key)")
    parser.add_argument("--tag", default="", help="results go to key-shared-<tag>-*.json")
    args = parser.parse_args()
    global TAG
    TAG = f"{args.tag}-" if args.tag else ""
    OUT.mkdir(parents=True, exist_ok=True)
    ks = perf("partitioned", args.duration, "-p", "8", "--producers", "4", "--consumers", "4",
              "--subscription-type", "Key_Shared", "--keys", str(args.keys))
    base = perf("baseline", args.duration, "--producers", "1", "--consumers", "1")
    nack = perf("nack10", args.duration, "--producers", "1", "--consumers", "1", "--nack-fraction", "0.1")
    per_msg_base = base["aws_requests_total"] / max(base["messages"], 1)
    extra = nack["aws_requests_total"] - per_msg_base * nack["messages"]
    summary = {
        "key_shared_8_partitions": {
            "msgs_per_s": ks["msgs_per_s"], "ratio_to_limit": ks.get("ratio_to_limit"),
            "ratio_to_single_topic_baseline": ks["msgs_per_s"] / max(base["msgs_per_s"], 1e-9),
            "aws_requests_per_1000_msgs": ks["aws_requests_per_1000_msgs"],
            "aws_requests_per_1000_msgs_by_operation": {
                op: round(n * 1000 / max(ks["messages"], 1), 1) for op, n in sorted(ks["aws_requests"].items())},
            "e2e_latency_ms": ks["e2e_latency_ms"], "publish_latency_ms": ks["publish_latency_ms"],
            # the races the consumers' cursor writes lost (each one a request and a re-step)
            "declined_conditions_per_1000_msgs": {
                k: round(n * 1000 / max(ks["messages"], 1), 1) for k, n in ks.get("declined_conditions", {}).items()},
        },
        "single_topic_baseline": {
            "msgs_per_s": base["msgs_per_s"], "ratio_to_limit": base.get("ratio_to_limit"),
            "aws_requests_per_1000_msgs": base["aws_requests_per_1000_msgs"],
        },
        "redelivery": {
            "baseline_requests_per_1000_msgs": base["aws_requests_per_1000_msgs"],
            "nack_run_requests_per_1000_msgs": nack["aws_requests_per_1000_msgs"],
            "redelivered": nack["redelivered"],
            "extra_requests_per_redelivered_message": extra / max(nack["redelivered"], 1),
        },
    }
    (OUT / f"key-shared-{TAG}summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
