"""Charts from `magnetar perf --json` results, for docs/benchmarks.md.

    .venv/bin/python bench/plot.py   # reads bench/results/sweep/*.json, writes docs/img/*.png

- throughput-vs-batch.png: end-to-end msg/s and the emulator's raw Kinesis limit, by batch size
- latency-percentiles.png: publish and end-to-end p50/p95/p99/p99.9 by batch size
- requests-per-1000.png: AWS requests per 1,000 messages by operation, by batch size
- cost-per-million.png: modeled USD per million messages by component (batch 100 run)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parents[1]


def load(folder: Path) -> list[tuple[int, dict[str, Any]]]:
    runs = []
    for path in folder.glob("batch-*.json"):
        result = json.loads(path.read_text())
        runs.append((int(result["config"]["batch_max_messages"]), result))
    return sorted(runs, key=lambda r: r[0])


def throughput(runs: list[tuple[int, dict[str, Any]]], out: Path) -> None:
    sizes = [str(b) for b, _ in runs]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(sizes, [r["msgs_per_s"] for _, r in runs], label="Magnetar end to end")
    limits = [r.get("limit", {}).get("kinesis_put_records", {}).get("per_s") for _, r in runs]
    if all(limits):
        ax.plot(sizes, limits, "r--o", label="raw limit: Kinesis PutRecords (same emulator, same run)")
    for i, (_, r) in enumerate(runs):
        if "ratio_to_limit" in r:
            ax.annotate(f"{r['ratio_to_limit']:.2f}x", (i, r["msgs_per_s"]), ha="center", va="bottom")
    ax.set_xlabel("batch size (messages per entry)")
    ax.set_ylabel("messages / s (1 KB)")
    ax.set_title("Throughput against batch size (local stack)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "throughput-vs-batch.png", dpi=110)


def latency(runs: list[tuple[int, dict[str, Any]]], out: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, key, title in ((axes[0], "publish_latency_ms", "publish"), (axes[1], "e2e_latency_ms", "end to end")):
        for q in ("p50", "p95", "p99", "p999"):
            ax.plot([str(b) for b, _ in runs], [r[key][q] for _, r in runs], marker="o", label=q)
        ax.set_title(f"{title} latency")
        ax.set_xlabel("batch size")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("ms")
    fig.tight_layout()
    fig.savefig(out / "latency-percentiles.png", dpi=110)


def requests(runs: list[tuple[int, dict[str, Any]]], out: Path) -> None:
    ops = sorted({op for _, r in runs for op in r["aws_requests"]})
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bottom = [0.0] * len(runs)
    for op in ops:
        values = [r["aws_requests"].get(op, 0) / max(r["messages"], 1) * 1000 for _, r in runs]
        ax.bar([str(b) for b, _ in runs], values, bottom=bottom, label=op)
        bottom = [a + b for a, b in zip(bottom, values, strict=True)]
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("AWS requests per 1,000 messages")
    ax.set_title("AWS requests per 1,000 messages, by operation")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out / "requests-per-1000.png", dpi=110)


def cost(runs: list[tuple[int, dict[str, Any]]], out: Path) -> None:
    chosen = next((r for b, r in runs if b == 100), runs[-1][1] if runs else None)
    by_mode = ((chosen or {}).get("cost_usd_per_million_msgs") or {}).get("by_mode") or {}
    if not by_mode:
        return
    modes = {f"{mode} Kinesis": data["usd_per_million_messages"] for mode, data in by_mode.items()}
    names = sorted({c for parts in modes.values() for c in parts if c != "total"})
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bottom = [0.0] * len(modes)
    for name in names:
        values = [parts.get(name, 0.0) for parts in modes.values()]
        ax.bar(list(modes), values, bottom=bottom, label=name)
        bottom = [a + b for a, b in zip(bottom, values, strict=True)]
    for i, parts in enumerate(modes.values()):
        ax.annotate(f"${parts['total']:.3f}", (i, parts["total"]), ha="center", va="bottom")
    ax.set_ylabel("USD per million messages")
    ax.set_title("Cost per million 1 KB messages by component (measured requests, batch 100)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "cost-per-million.png", dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=ROOT / "bench/results/sweep")
    parser.add_argument("--out", type=Path, default=ROOT / "docs/img")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = load(args.results)
    if not runs:
        raise SystemExit(f"no results in {args.results}: run bench/sweep_batch.py first")
    throughput(runs, args.out)
    latency(runs, args.out)
    requests(runs, args.out)
    cost(runs, args.out)
    print(f"wrote charts to {args.out}")


if __name__ == "__main__":
    main()
