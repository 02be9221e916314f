"""Spark batch reads at S3 speed: direct reads of sealed segments against the emulator's raw S3 GETs.

    .venv/bin/python bench/spark_direct_s3.py --messages 1000000 [--json bench/results/spark-direct-s3.json]

On its own local cluster (`magnetar local up`, maintenance off so nothing is trimmed, AWS limits
off so producing 1 GB is not held to one Kinesis shard's 1 MiB/s; `--aws-limits on` keeps them):

1. produces `--messages` messages of `--size` bytes (distinct, incompressible) in entries of
   `--per-entry` messages (one entry per request, just under the journal's 1 MiB record), from
   `--producers` threads, and waits until every entry is sealed (the read plan says so);
2. the raw limit: GETs every planned segment slice with its presigned URL (httpx, no decoding) with
   1, 2 and 4 concurrent requests: bytes/s and the messages/s those bytes hold;
3. Spark (`local[4]`): `spark.read.format("magnetar")...write.format("noop")` of the whole topic with
   `partitions` = 1, 2, 4 (the direct read's tasks), then the old broker path (`directReads=false`)
   with 4; a `count()` of the direct read checks every message is there, one untimed direct read
   warms the JVM's write path up, and each direct figure is the best of `--repeat` runs;
4. ratios: each direct figure over the raw GET rate at the same concurrency, and the best over the
   best (the goal: >= 0.5).

Records the load average (before and after), pyspark's version and the time. Run it on a quiet
machine (`uptime`).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "spark"))

from magnetar.core.entry import Message, encode_messages  # noqa: E402
from magnetar.local.cluster import LocalUpProcess  # noqa: E402

TOPIC = "persistent://public/default/spark-direct-bench"
PATH = "persistent/public/default/spark-direct-bench"


def produce(url: str, messages: int, size: int, per_entry: int, producers: int) -> dict[str, Any]:
    filler = os.urandom(size)
    entries = (messages + per_entry - 1) // per_entry
    counter = iter(range(entries))
    lock = threading.Lock()
    started = time.monotonic()

    def worker() -> int:
        sent = 0
        with httpx.Client(base_url=url, timeout=120) as http:
            while True:
                with lock:
                    n = next(counter, None)
                if n is None:
                    return sent
                first = n * per_entry
                count = min(per_entry, messages - first)
                raw = encode_messages([Message((first + i).to_bytes(8, "big") + filler[8:]) for i in range(count)])
                body = {"producerName": "spark-bench", "batch": {
                    "payload": base64.b64encode(raw).decode(), "numMessages": count, "compression": "NONE",
                    "uncompressedSize": len(raw), "batched": True}}
                for attempt in range(10):
                    response = http.post(f"/topics/{PATH}", json=body)
                    if response.status_code == 200:
                        break
                    time.sleep(0.5 * (attempt + 1))
                else:
                    raise RuntimeError(f"publish failed: {response.status_code} {response.text[:300]}")
                sent += count
                if n % 100 == 0:
                    print(f"  entry {n}/{entries} ({time.monotonic() - started:.0f} s)", flush=True)

    with ThreadPoolExecutor(producers) as pool:
        sent = sum(pool.map(lambda _: worker(), range(producers)))
    return {"messages": sent, "entries": entries, "seconds": round(time.monotonic() - started, 1)}


def plan(url: str) -> dict[str, Any]:
    with httpx.Client(base_url=url, timeout=60) as http:
        segments: list[dict[str, Any]] = []
        position = 0
        while True:
            body = http.post(f"/magnetar/v1/reader/{PATH}/plan", json={"startEntryId": position}).json()
            segments += body["segments"]
            if not body["segments"] or body["nextEntryId"] >= body["sealedEntryId"]:
                return {"sealed": body["sealedEntryId"], "segments": segments}
            position = body["nextEntryId"]


def wait_sealed(url: str, entries: int, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        p = plan(url)
        covered = sum(s["lastEntryId"] - s["firstEntryId"] + 1 for s in p["segments"])
        if covered >= entries:
            return p
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {covered} of {entries} entries sealed after {timeout_s} s")
        time.sleep(2)


def raw_gets(segments: list[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    """Every slice once with its presigned URL (what S3 serves at most, as this client sees it)."""
    with httpx.Client(timeout=120, limits=httpx.Limits(max_connections=concurrency)) as http:
        def get(seg: dict[str, Any]) -> int:
            a, b = seg["range"]
            response = http.get(seg["url"], headers={"Range": f"bytes={a}-{b - 1}"})
            assert response.status_code in (200, 206), response.status_code
            return len(response.content)

        started = time.monotonic()
        with ThreadPoolExecutor(concurrency) as pool:
            total = sum(pool.map(get, segments))
        seconds = time.monotonic() - started
    return {"concurrency": concurrency, "bytes": total, "seconds": round(seconds, 3),
            "mb_per_s": round(total / seconds / 1e6, 1)}


def spark_runs(url: str, messages: int, tasks: list[int], broker_tasks: list[int],
               repeat: int = 2) -> list[dict[str, Any]]:
    import pyspark
    from pyspark.sql import SparkSession

    from magnetar_spark import register  # (sets the worker Python: this interpreter)

    spark = (SparkSession.builder.master(f"local[{max(tasks + broker_tasks)}]").appName("magnetar-direct-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g")
             .config("spark.sql.session.timeZone", "UTC").config("spark.python.worker.reuse", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)  # (a script run from a checkout: spark/ may not be installed)
    out: list[dict[str, Any]] = []
    try:
        def read(direct: bool, n: int) -> Any:
            return (spark.read.format("magnetar").option("service.url", url).option("topic", TOPIC)
                    .option("partitions", str(n)).option("directReads", str(direct).lower()).load())

        count = read(True, max(tasks)).count()
        assert count == messages, f"direct read counted {count} of {messages}"
        # The JVM compiles the write path on its first use (a first run measured ~3x slower than the
        # next ones): one untimed direct read first, then each figure the best of `repeat` runs.
        read(True, max(tasks)).write.format("noop").mode("overwrite").save()
        for direct, sizes in ((True, tasks), (False, broker_tasks)):
            for n in sizes:
                times = []
                for _ in range(repeat if direct else 1):
                    started = time.monotonic()
                    read(direct, n).write.format("noop").mode("overwrite").save()
                    times.append(time.monotonic() - started)
                seconds = min(times)
                row = {"path": "direct" if direct else "broker", "tasks": n, "seconds": round(seconds, 2),
                       "rows_per_s": round(messages / seconds), "runs_s": [round(t, 2) for t in times]}
                print(f"  {row}", flush=True)
                out.append(row)
    finally:
        spark.stop()
    print(f"  pyspark {pyspark.__version__}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--per-entry", type=int, default=900, help="messages per entry (~0.93 MB: < the 1 MiB record)")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--aws-limits", choices=("on", "off"), default="off")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs of each direct read (the best is kept)")
    parser.add_argument("--broker-tasks", default="4", help="comma-separated task counts of the broker path")
    parser.add_argument("--json", default=str(ROOT / "bench/results/spark-direct-s3.json"))
    args = parser.parse_args()
    import pyspark

    load_before = os.getloadavg()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    tasks = [1, 2, 4]
    broker_tasks = [int(t) for t in args.broker_tasks.split(",") if t]
    with LocalUpProcess(maintenance_interval_s=0, extra_args=["--aws-limits", args.aws_limits]) as cluster:
        print(f"cluster {cluster.url}; producing {args.messages} x {args.size} B", flush=True)
        produced = produce(cluster.url, args.messages, args.size, args.per_entry, args.producers)
        print(f"produced {produced}", flush=True)
        sealed_started = time.monotonic()
        planned = wait_sealed(cluster.url, produced["entries"], 1800)
        seal_wait = round(time.monotonic() - sealed_started, 1)
        segments = planned["segments"]
        total_bytes = sum(s["range"][1] - s["range"][0] for s in segments)
        print(f"sealed: {len(segments)} segments, {total_bytes / 1e6:.0f} MB (waited {seal_wait} s)", flush=True)
        raw = [raw_gets(segments, c) for c in tasks]
        for r in raw:
            r["msgs_per_s"] = round(args.messages * r["bytes"] / total_bytes / r["seconds"])
            print(f"  raw GET {r}", flush=True)
        runs = spark_runs(cluster.url, args.messages, tasks, broker_tasks, args.repeat)
        raw_again = raw_gets(segments, max(tasks))  # the limit after Spark too: a drift shows
        raw_again["msgs_per_s"] = round(args.messages / raw_again["seconds"])
    raw_by = {r["concurrency"]: r for r in raw}
    for run in runs:
        limit = raw_by.get(run["tasks"])
        if limit is not None:
            run["ratio_to_raw_get_same_concurrency"] = round(run["rows_per_s"] / limit["msgs_per_s"], 3)
    best_direct = max(r["rows_per_s"] for r in runs if r["path"] == "direct")
    best_raw = max(r["msgs_per_s"] for r in raw)
    broker = [r for r in runs if r["path"] == "broker"]
    result = {
        "benchmark": "spark-direct-s3", "started_at": started_at,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([".venv/bin/python", "bench/spark_direct_s3.py", *sys.argv[1:]]),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
        "pyspark": pyspark.__version__, "aws_limits": args.aws_limits,
        "messages": args.messages, "message_bytes": args.size, "messages_per_entry": args.per_entry,
        "produce": produced, "seal_wait_s": seal_wait, "segments": len(segments), "segment_bytes": total_bytes,
        "raw_s3_get": raw, "raw_s3_get_after_spark": raw_again, "spark": runs,
        "best_direct_rows_per_s": best_direct, "best_raw_get_msgs_per_s": best_raw,
        "ratio_best_direct_to_best_raw": round(best_direct / best_raw, 3),
        "direct_over_broker": round(best_direct / max(r["rows_per_s"] for r in broker), 2) if broker else None,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("best_direct_rows_per_s", "best_raw_get_msgs_per_s",
                                             "ratio_best_direct_to_best_raw", "direct_over_broker")}))


if __name__ == "__main__":
    main()
