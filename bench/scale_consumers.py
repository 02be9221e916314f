"""Scale benchmarks under AWS limits (issue #9, item 4): one Shared subscription with 100
consumers, and the most one topic partition takes before its Kinesis shard or its DynamoDB
counter item throttles.

Every step is a `magnetar perf e2e` run (printed before it runs) against a fresh local cluster
started with the stack's defaults (`magnetar local up`: AWS limits on, the journal consumer on
emulated enhanced fan-out, tail reads off), so a step does not inherit the stream the previous one
filled (moto's Kinesis slows down as a shard stores records). After each step the script measures,
on the same emulator, the raw limits the step is compared with: PutRecords on a one-shard stream
with records of the step's entry size (what one partition's shard accepts), and UpdateItem on one
key (what one partition's counter item accepts), both with no retries.

    # one Shared subscription: 1 and 10 long-polling consumers, 100 push and 100 long-polling, 500 msg/s
    .venv/bin/python bench/scale_consumers.py consumers --consumers 1 10 --rate 500 --duration 30
    .venv/bin/python bench/scale_consumers.py consumers --consumers 100 --rate 500 --duration 30 --delivery push
    .venv/bin/python bench/scale_consumers.py consumers --consumers 100 --rate 500 --duration 20 --step-timeout 420

    # the per-partition ceiling: 1 KB messages in batches of 100, then unbatched
    .venv/bin/python bench/scale_consumers.py ceiling --partitions 1 --rates 600 1000 1400 2000
    .venv/bin/python bench/scale_consumers.py ceiling --partitions 1 --rates 2000 --tag drain150
    .venv/bin/python bench/scale_consumers.py ceiling --partitions 1 --unbatched --unbatched-per-producer 5 --rates 50 100

    # the remedy: partitions (the local stream has 2 shards)
    .venv/bin/python bench/scale_consumers.py ceiling --partitions 2 4 --rates 2000
    .venv/bin/python bench/scale_consumers.py ceiling --produce-only --spread --partitions 1 2 --rates 2400 --tag produce

Results: bench/results/scale-consumers-<n>[-push].json (one per consumer count) and
bench/results/partition-ceiling-<batched|unbatched>-<p>p[-<tag>].json (one per ramp: every step's
perf result, the raw limits, the shards and counter items, the refusals and the summary), each
with the commands that made it. Figures and findings: docs/bench-sections/scale-consumers.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import httpx
from botocore.config import Config

from magnetar.core.ledger.common import journal_key
from magnetar.core.naming import TopicName
from magnetar.local.aws_limits.dynamodb import item_size
from magnetar.local.cluster import LocalUpProcess

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
MAGNETAR = [sys.executable, "-m", "magnetar.cli.main"]
ENTRY_OVERHEAD = 200  # bytes of an entry beyond its messages' payloads (header, ids, properties), roughly


def _aws(service: str, endpoint: str) -> Any:
    """A raw client with no retries at all: a refusal is counted, never hidden by a retry."""
    return boto3.client(  # type: ignore[call-overload]
        service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
        aws_secret_access_key="test", config=Config(retries={"total_max_attempts": 1}))


def raw_shard_limit(endpoint: str, record_bytes: int, seconds: float = 5.0) -> dict[str, Any]:
    """What one Kinesis shard accepts through the emulator's limits: PutRecords of `record_bytes`
    records on a one-shard stream, after a second that spends the bucket's burst."""
    kinesis = _aws("kinesis", endpoint)
    stream = f"raw-shard-{uuid.uuid4().hex[:6]}"
    kinesis.create_stream(StreamName=stream, ShardCount=1)
    while kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
        time.sleep(0.1)
    data = os.urandom(record_bytes)
    per_call = max(1, min(500, (1024 * 1024) // (4 * record_bytes)))  # a quarter of a second's bytes per call
    records = [{"Data": data, "PartitionKey": "p"} for _ in range(per_call)]
    accepted = refused = 0
    warmup_until = time.perf_counter() + 1.0
    while time.perf_counter() < warmup_until:
        kinesis.put_records(StreamName=stream, Records=records)
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        failed = kinesis.put_records(StreamName=stream, Records=records)["FailedRecordCount"]
        accepted += per_call - failed
        refused += failed
        time.sleep(0.01)
    elapsed = time.perf_counter() - started
    kinesis.delete_stream(StreamName=stream, EnforceConsumerDeletion=True)
    return {"record_bytes": record_bytes, "records_per_s": accepted / elapsed,
            "mib_per_s": accepted * record_bytes / elapsed / 2**20, "refused_records": refused, "seconds": elapsed}


def raw_counter_limit(endpoint: str, item_bytes: int, seconds: float = 3.0, clients: int = 4) -> dict[str, Any]:
    """What one DynamoDB key accepts through the emulator's limits: UpdateItem (ADD) on one item of
    about `item_bytes` from `clients` threads, after a second that spends the burst. Below the key's
    budget (~1,000 WCU/s) the figure is the emulator's own speed, not a limit."""
    ddb = _aws("dynamodb", endpoint)
    table = f"raw-key-{uuid.uuid4().hex[:6]}"
    ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    ddb.put_item(TableName=table, Item={"pk": {"S": "hot"}, "pad": {"S": "x" * item_bytes}, "n": {"N": "0"}})
    counts = {"ok": 0, "refused": 0}
    lock = threading.Lock()

    def hammer(until: float, counted: bool) -> None:
        client = _aws("dynamodb", endpoint)
        while time.perf_counter() < until:
            try:
                client.update_item(TableName=table, Key={"pk": {"S": "hot"}}, UpdateExpression="ADD n :one",
                                   ExpressionAttributeValues={":one": {"N": "1"}})
                outcome = "ok"
            except client.exceptions.ProvisionedThroughputExceededException:
                outcome = "refused"
            if counted:
                with lock:
                    counts[outcome] += 1

    hammer(time.perf_counter() + 1.0, counted=False)
    started = time.perf_counter()
    threads = [threading.Thread(target=hammer, args=(started + seconds, True)) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    return {"item_bytes": item_bytes, "clients": clients, "updates_per_s": counts["ok"] / elapsed,
            "refused": counts["refused"], "seconds": elapsed}


def shard_of(endpoint: str, topic: str, partitions: int) -> dict[str, str]:
    """The journal shard each topic partition's records go to (MD5 of its partition key against
    the stream's hash-key ranges), as Kinesis routes them."""
    shards = _aws("kinesis", endpoint).list_shards(StreamName=_stream(endpoint))["Shards"]
    name = TopicName.parse(topic)
    names = [str(name.partition(i)) for i in range(partitions)] if partitions > 1 else [str(name)]
    out = {}
    for n in names:
        h = int(hashlib.md5(journal_key(n).encode()).hexdigest(), 16)
        out[n] = next(s["ShardId"] for s in shards if int(s["HashKeyRange"]["StartingHashKey"]) <= h
                      <= int(s["HashKeyRange"]["EndingHashKey"]))
    return out


def pick_topic(endpoint: str, partitions: int, spread: bool) -> str:
    """A new topic name; with `spread`, one whose partitions cover as many of the stream's shards as
    they can (Kinesis places a partition by the MD5 of its name: a random name may stack them)."""
    shards = len(_aws("kinesis", endpoint).list_shards(StreamName=_stream(endpoint))["Shards"])
    while True:
        topic = f"persistent://public/default/ceiling-{uuid.uuid4().hex[:8]}"
        if not spread or len(set(shard_of(endpoint, topic, partitions).values())) == min(partitions, shards):
            return topic


def _stream(endpoint: str) -> str:
    return str(_aws("kinesis", endpoint).list_streams()["StreamNames"][0])


def counter_items(endpoint: str, topic: str, partitions: int) -> dict[str, dict[str, int]]:
    """Each partition's id counter (the `WRITER` item every publish updates): its size and the write
    units one reservation costs on it (the emulator charges the stored item plus the request's values,
    rounded up to 1 KB: ~1,000 such units/s per key)."""
    ddb = _aws("dynamodb", endpoint)
    table = next(t for t in ddb.list_tables()["TableNames"] if not t.startswith("raw-key-"))
    name = TopicName.parse(topic)
    names = [str(name.partition(i)) for i in range(partitions)] if partitions > 1 else [str(name)]
    out = {}
    for n in names:
        item = ddb.get_item(TableName=table, Key={"pk": {"S": f"TP#{n}"}, "sk": {"S": "WRITER"}}).get("Item", {})
        size = item_size(item) if item else 0
        out[n] = {"bytes": size, "wcu_per_reservation": math.ceil((size + 100) / 1024)}  # + the update's values
    return out


def perf_step(args: list[str], cluster: LocalUpProcess, timeout_s: float = 900,
              mode: str = "e2e") -> tuple[dict[str, Any], str]:
    """One `magnetar perf e2e` (or `produce`) run against `cluster`; its result and its command line."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "perf.json"
        check = ["--check-delivery"] if mode == "e2e" else []
        command = [*MAGNETAR, "perf", mode, "--service-url", cluster.url, "--aws-endpoint", cluster.aws_endpoint,
                   "--no-limits", *check, *args, "--json", str(out)]
        printable = f"magnetar perf {mode} " + shlex.join([*args, *check])
        print(f"$ {printable}", flush=True)
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stdout + proc.stderr)[-3000:]
            raise RuntimeError(f"perf failed ({proc.returncode}): {tail}")
        result: dict[str, Any] = json.loads(out.read_text())
    return result, printable


def summary(r: dict[str, Any]) -> dict[str, Any]:
    """The figures a table quotes, from one perf result."""
    d = r["delivery"]
    statuses = r["http_statuses"]
    # acknowledged to producers per second, from the first send to the last acknowledgement; results
    # from before perf reported that span are divided by the producing time alone, an upper bound
    # (acknowledgements go on after it while producers' queues drain)
    exact = r.get("acked_per_s") or (r["msgs_per_s"] if r["mode"] == "produce" else None)  # produce: the same span
    produced = exact or r["acked"] / r["config"]["duration_s"]
    return {
        "acked_per_s": round(produced, 1),
        "acked_mib_per_s": round(produced * r["config"]["size"] / 2**20, 3),
        "acked_per_s_is_upper_bound": exact is None,
        "msgs_per_s": round(r["msgs_per_s"], 1),
        "mib_per_s": round(r["msgs_per_s"] * r["config"]["size"] / 2**20, 3),
        # journal writes per second of producing, retried attempts included (the broker's botocore retries)
        "put_record_attempts_per_s": round(r["aws_requests"].get("kinesis.PutRecord", 0) / r["config"]["duration_s"], 1),
        "publish_p50_ms": round(r["publish_latency_ms"]["p50"], 1),
        "publish_p99_ms": round(r["publish_latency_ms"]["p99"], 1),
        "e2e_p50_ms": round(r["e2e_latency_ms"]["p50"], 1),
        "e2e_p99_ms": round(r["e2e_latency_ms"]["p99"], 1),
        "aws_requests_per_1000_msgs": round(r["aws_requests_per_1000_msgs"] or 0, 1),
        "refusals": r.get("refusals", {}),
        "sdk_http_errors": {role: {c: n for c, n in codes.items() if c[0] in "45"} for role, codes in statuses.items()},
        "sent": r["sent"], "acked": r["acked"], "failed": r["failed"],
        "lost": d.get("lost"), "duplicates": d.get("duplicates"), "received_not_acked": d.get("received_not_acked"),
        "redelivered": r["redelivered"], "consumer_errors": r["consumer_errors"],
        "drain_timed_out": r.get("drain_timed_out"),
        "lambda_concurrency_mean": round(r["lambda_concurrency"]["mean_total"], 1),
        "lambda_concurrency_peak": r["lambda_concurrency"].get("peak"),
        "lambda_throttles": r["lambda_concurrency"].get("throttles"),
    }


def _get(url: str) -> Any:
    try:
        return httpx.get(url, timeout=30).json()
    except (httpx.HTTPError, ValueError) as exc:
        return {"error": repr(exc)}


def _git() -> dict[str, Any]:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "src"], cwd=ROOT, capture_output=True, text=True).stdout
    return {"commit": head, "uncommitted_src_files": len(dirty.splitlines())}


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str))
    print(f"wrote {path}", flush=True)


def consumers(opts: argparse.Namespace) -> None:
    for n in opts.consumers:
        args = ["--consumers", str(n), "--producers", str(opts.producers), "--rate", str(opts.rate),
                "--duration", str(opts.duration), "--receive-wait-ms", str(opts.receive_wait_ms),
                "--receive-batch", str(opts.receive_batch), "--batch-max-delay-ms", str(opts.batch_delay_ms),
                "--drain-timeout", "120", "--delivery", opts.delivery]
        suffix = ("" if opts.delivery == "auto" else f"-{opts.delivery}") + (f"-{opts.tag}" if opts.tag else "")
        with LocalUpProcess() as cluster:
            try:
                result, command = perf_step(args, cluster, opts.step_timeout)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:  # what the cluster saw is the result
                _write(RESULTS / f"scale-consumers-{n}{suffix}.json", {
                    "what": f"one Shared subscription with {n} consumers ({opts.delivery} delivery): the run failed",
                    "command": "magnetar perf e2e " + shlex.join(args) + " --check-delivery",
                    "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "git": _git(),
                    "error": str(exc)[-2000:], "local_stats": _get(f"{cluster.url}/_magnetar/local/stats"),
                    "refusals": _get(f"{cluster.aws_endpoint}/_magnetar/aws-limits")})
                continue
            raw = raw_shard_limit(cluster.aws_endpoint, 100 * 1024 + ENTRY_OVERHEAD)
        d = result["delivery"]
        _write(RESULTS / f"scale-consumers-{n}{suffix}.json", {
            "what": f"one Shared subscription with {n} consumers ({opts.delivery} delivery), local defaults "
                    "(limits on, fan-out, tail reads off)",
            "command": command, "script": "bench/scale_consumers.py consumers " + " ".join(sys.argv[2:]),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "git": _git(),
            "summary": summary(result) | {
                "consumers_receiving": d.get("consumers_receiving"), "per_consumer_min": d.get("min"),
                "per_consumer_median": d.get("median"), "per_consumer_max": d.get("max"),
                "max_over_mean": d.get("max_over_mean"),
                "ratio_to_raw_shard": round(result["msgs_per_s"] / (raw["records_per_s"] * 100), 3)},
            "raw_shard_limit": raw, "perf": result,
        })


def ceiling(opts: argparse.Namespace) -> None:
    batch = 1 if opts.unbatched else 100
    kind = "unbatched" if opts.unbatched else "batched"
    for partitions in opts.partitions:
        steps: list[dict[str, Any]] = []
        for rate in opts.rates:
            per_producer = opts.unbatched_per_producer if opts.unbatched else opts.batched_per_producer
            producers = min(opts.max_producers, max(1, math.ceil(rate / per_producer)))
            args = ["--topic", "TOPIC", "--partitions", str(partitions), "--producers", str(producers),
                    "--rate", str(rate), "--duration", str(opts.duration), "--batch-max-messages", str(batch),
                    "--batch-max-delay-ms", str(opts.batch_delay_ms)]
            if not opts.produce_only:  # produce only: the machine's cycles all go to publishing
                args += ["--consumers", str(opts.consumers), "--receive-wait-ms", "1000", "--receive-batch", "1000",
                         "--drain-timeout", str(opts.drain_timeout)]
            with LocalUpProcess() as cluster:
                topic = pick_topic(cluster.aws_endpoint, partitions, opts.spread)
                args[1] = topic
                result, command = perf_step(args, cluster, mode="produce" if opts.produce_only else "e2e")
                shards = shard_of(cluster.aws_endpoint, topic, partitions)
                counters = counter_items(cluster.aws_endpoint, topic, partitions)
                entry_bytes = batch * 1024 + ENTRY_OVERHEAD
                raw: dict[str, dict[str, Any]] = {
                    "shard": raw_shard_limit(cluster.aws_endpoint, entry_bytes),
                    "counter_key": raw_counter_limit(cluster.aws_endpoint, 1024)}
            s: dict[str, Any] = summary(result) | {
                "rate": rate, "producers": producers, "shards_used": len(set(shards.values())),
                "counter_wcu_per_reservation": max(c["wcu_per_reservation"] for c in counters.values())}
            raw_msgs_per_s = raw["shard"]["records_per_s"] * batch * s["shards_used"]
            s["ratio_to_raw_shard"] = round(s["acked_per_s"] / raw_msgs_per_s, 3)  # the shards' ceiling in msg/s
            print(json.dumps(s), flush=True)
            steps.append({"command": command, "summary": s, "shards": shards, "counter_items": counters,
                          "raw_limits": raw, "perf": result})
            name = f"partition-ceiling-{kind}-{partitions}p" + (f"-{opts.tag}" if opts.tag else "")
            _write(RESULTS / f"{name}.json", {  # after every step: a broken step loses only itself
                "what": f"ramp of the publish rate on a topic of {partitions} partition(s), 1 KB messages, "
                        f"batches of {batch}, local defaults (limits on, fan-out, tail reads off)",
                "script": "bench/scale_consumers.py ceiling " + " ".join(sys.argv[2:]),
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "git": _git(),
                "summary": [st["summary"] for st in steps], "steps": steps,
            })
            if opts.stop_at_refusal and s["refusals"] and len(steps) >= 2 and steps[-2]["summary"]["refusals"]:
                break  # two refused steps in a row: the ceiling is behind us


def resummarize(opts: argparse.Namespace) -> None:
    """Recompute the summaries of result files from the perf results they keep (after a change
    to `summary`): no run is repeated."""
    for path in opts.files:
        data = json.loads(Path(path).read_text())
        if "steps" in data:
            for step in data["steps"]:
                kept = {k: v for k, v in step["summary"].items() if k in (
                    "rate", "producers", "shards_used", "counter_wcu_per_reservation")}
                step["summary"] = summary(step["perf"]) | kept
                raw_msgs_per_s = (step["raw_limits"]["shard"]["records_per_s"] * kept["shards_used"]
                                  * step["perf"]["config"]["batch_max_messages"])
                step["summary"]["ratio_to_raw_shard"] = round(step["summary"]["acked_per_s"] / raw_msgs_per_s, 3)
            data["summary"] = [st["summary"] for st in data["steps"]]
        else:
            kept = {k: v for k, v in data["summary"].items() if k.startswith("per_consumer") or k in (
                "consumers_receiving", "max_over_mean", "ratio_to_raw_shard")}
            data["summary"] = summary(data["perf"]) | kept
        _write(Path(path).resolve(), data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("consumers", help="one Shared subscription with many consumers")
    c.add_argument("--consumers", type=int, nargs="+", default=[100])
    c.add_argument("--producers", type=int, default=1)
    c.add_argument("--rate", type=float, default=1000)
    c.add_argument("--duration", type=float, default=30)
    c.add_argument("--receive-wait-ms", type=int, default=1000)
    c.add_argument("--receive-batch", type=int, default=1000)
    c.add_argument("--batch-delay-ms", type=int, default=100)
    c.add_argument("--tag", default="", help="added to the result file's name (a second run)")
    c.add_argument("--step-timeout", type=float, default=600, help="seconds before a run counts as failed")
    c.add_argument("--delivery", choices=("auto", "poll", "push"), default="auto",
                   help="auto: long polls (persistent topics); push: the WebSocket API")
    c.set_defaults(run=consumers)
    p = sub.add_parser("ceiling", help="ramp the publish rate on one (or N) partitions until the limits refuse")
    p.add_argument("--partitions", type=int, nargs="+", default=[1])
    p.add_argument("--rates", type=float, nargs="+", default=[500, 1000, 1500, 2000, 3000])
    p.add_argument("--unbatched", action="store_true", help="one message per entry (batch of 1)")
    p.add_argument("--unbatched-per-producer", type=float, default=10,
                   help="unbatched: msg/s per producer (one request in flight each)")
    p.add_argument("--batched-per-producer", type=float, default=250,
                   help="batched: msg/s per producer (one batch in flight each: ~100 messages per publish round trip)")
    p.add_argument("--max-producers", type=int, default=100)
    p.add_argument("--consumers", type=int, default=1, help="consumers checking exactly-once delivery")
    p.add_argument("--duration", type=float, default=15)
    p.add_argument("--batch-delay-ms", type=int, default=100)
    p.add_argument("--drain-timeout", type=float, default=150,
                   help="a journal write refused past its retries leaves a hole the sealer waits 60 s for")
    p.add_argument("--spread", action="store_true", help="name the topic so its partitions land on distinct shards")
    p.add_argument("--produce-only", action="store_true",
                   help="magnetar perf produce: no consumers (and no exactly-once check), more publishing")
    p.add_argument("--tag", default="", help="added to the result file's name (a second run of the same ramp)")
    p.add_argument("--stop-at-refusal", action="store_true", help="stop a ramp after two refused steps")
    p.set_defaults(run=ceiling)
    r = sub.add_parser("resummarize", help="recompute the summaries of result files")
    r.add_argument("files", nargs="+")
    r.set_defaults(run=resummarize)
    opts = parser.parse_args()
    opts.run(opts)


if __name__ == "__main__":
    main()
