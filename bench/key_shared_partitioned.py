"""The messaging-model benchmark: 8 partitions, 4 producers with key-hash routing, a Key_Shared
subscription with 4 consumers; then the cost of redelivery.

    .venv/bin/python bench/key_shared_partitioned.py --duration 20

Runs `magnetar perf e2e` three times, each on its own local cluster:
1. partitioned Key_Shared: throughput, ratio to the raw journal limit, AWS requests / 1,000 msgs;
2. the same workload on one partition, one producer, Shared (the baseline of the redelivery cost);
3. the baseline again with consumers negatively acknowledging 10% of first deliveries:
   extra AWS requests per redelivered message = (requests(3) - requests(2)) / redelivered(3),
   both normalised to the same number of messages.
Writes bench/results/key-shared-*.json and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench/results"


def perf(name: str, duration: float, *args: str) -> dict:  # type: ignore[type-arg]
    out = OUT / f"key-shared-{name}.json"
    cmd = [str(ROOT / ".venv/bin/magnetar"), "perf", "e2e", "--duration", str(duration), "--json", str(out), *args]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    result: dict = json.loads(out.read_text())  # type: ignore[type-arg]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--keys", type=int, default=32, help="distinct keys (key-based batching makes one entry per key)")
    args = parser.parse_args()
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
            "aws_requests_per_1000_msgs": ks["aws_requests_per_1000_msgs"],
            "e2e_latency_ms": ks["e2e_latency_ms"],
        },
        "redelivery": {
            "baseline_requests_per_1000_msgs": base["aws_requests_per_1000_msgs"],
            "nack_run_requests_per_1000_msgs": nack["aws_requests_per_1000_msgs"],
            "redelivered": nack["redelivered"],
            "extra_requests_per_redelivered_message": extra / max(nack["redelivered"], 1),
        },
    }
    (OUT / "key-shared-summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
