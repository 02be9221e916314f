"""Throughput, latency and AWS requests against batch size: one `magnetar perf e2e` per size.

    .venv/bin/python bench/sweep_batch.py --sizes 1 10 50 100 500 --duration 15

Each run starts its own local cluster (so runs do not share emulator state) and writes
bench/results/sweep/batch-<N>.json; `bench/plot.py` draws the charts from them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 50, 100, 500])
    parser.add_argument("--duration", type=float, default=15)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/sweep")
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="more `magnetar perf e2e` options after --")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for size in args.sizes:
        out = args.out / f"batch-{size}.json"
        cmd = [str(ROOT / ".venv/bin/magnetar"), "perf", "e2e", "--duration", str(args.duration),
               "--batch-max-messages", str(size), "--json", str(out), *[a for a in args.extra if a != "--"]]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, stdout=sys.stdout)


if __name__ == "__main__":
    main()
