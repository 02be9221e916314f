"""Many topics under AWS limits (issue #9): 1,000 low-rate topics, and 10,000 idle ones.

    .venv/bin/python bench/scale_topics.py active --topics 10 100 1000 --rate 1 --duration 60 --procs 4
    .venv/bin/python bench/scale_topics.py idle --topics 1000 2000 --seconds 60
    .venv/bin/python bench/scale_topics.py active --topics 3 --duration 3 --procs 1 --out /tmp/x.json  # smoke

Each topic count runs on a cluster of its own, started with `magnetar local up`'s defaults (AWS
limits on at the emulator's endpoint, the journal consumer on enhanced fan-out, consumers reading
sealed entries only, the maintenance schedule every 60 s).

- **active**: every topic has one producer and one consumer (push over WebSocket by default,
  `--delivery poll` for long polls) and receives `--rate` messages per second, spread over
  `--procs` client processes (one Python process cannot drive thousands of producers and consumers
  on two cores). Reports throughput, publish and end-to-end latency (HDR histograms merged across
  the processes), AWS requests per 1,000 messages by operation (the maintenance runs inside the
  window included), the emulator's refusals, and the CPU seconds of the clients and of the cluster.
- **idle**: the topics are created through the admin API, then measured over `--seconds` each:
  nothing attached; one idle push (WebSocket) consumer per topic (on `--push-topics` of them when
  given); idle long-poll consumers on `--poll-topics` topics (a long poll holds a Lambda invocation: 1,000 of them are the account's
  whole concurrency). Beside the window, one maintenance run (`POST /_magnetar/local/schedules/
  maintenance`) is measured on its own: its requests per 1,000 topics. Everything is turned into
  dollars per hour with `magnetar.cost.PRICES`, fixed costs (Kinesis, EventBridge) apart from what
  grows with the topics.

Writes bench/results/scale-active.json or scale-idle.json (`--out` to change).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from hdrh.histogram import HdrHistogram

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench/results"
NAMESPACE = "public/default"
LAMBDA_MEMORY_GB = 1.0  # the stack's functions (infra/magnetar_cdk/functions.py)
# The event-source mapping's reads of the journal are AWS's poller: they run whether or not anyone
# consumes, Kinesis bills them as shard or consumer hours, not per request.
ESM_OPERATIONS = ("kinesis.GetRecords", "kinesis.GetShardIterator", "kinesis.ListShards",
                  "kinesis.DescribeStreamSummary", "kinesis.SubscribeToShard", "kinesis.DescribeStreamConsumer",
                  "kinesis.ListStreamConsumers", "kinesis.RegisterStreamConsumer")


def is_mapping_read(operation: str) -> bool:
    """The event-source mapping's own reads (polls, or the fan-out consumer's pushed reads)."""
    return operation in ESM_OPERATIONS or operation.endswith("(fan-out)")


def topic_name(run: str, i: int) -> str:
    return f"persistent://{NAMESPACE}/{run}-{i:05d}"


def histogram() -> HdrHistogram:
    return HdrHistogram(1, 3_600_000_000, 3)  # microseconds, up to an hour (as magnetar.perf.runner)


def percentiles(h: HdrHistogram) -> dict[str, float]:
    if h.get_total_count() == 0:
        return {"count": 0}
    q = {k: h.get_value_at_percentile(p) / 1000 for k, p in (("p50", 50), ("p95", 95), ("p99", 99), ("p999", 99.9))}
    return q | {"max": h.get_max_value() / 1000, "count": h.get_total_count()}


# --- the cluster and its counters -------------------------------------------------------------------
def stats(url: str, reset: bool = False) -> dict[str, Any]:
    response = httpx.request("DELETE" if reset else "GET", f"{url}/_magnetar/local/stats", timeout=60)
    return dict(response.json())


def refusals(aws_endpoint: str) -> dict[str, int]:
    with contextlib.suppress(httpx.HTTPError, ValueError):
        return dict(httpx.get(f"{aws_endpoint}/_magnetar/aws-limits", timeout=30).json().get("refusals", {}))
    return {}


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children still running (Linux /proc)."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    with contextlib.suppress(OSError):
        pids += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    for p in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def run_maintenance(url: str) -> dict[str, Any]:
    """One maintenance run on its own: its report, AWS requests and billed duration."""
    stats(url, reset=True)
    started = time.monotonic()
    report = httpx.post(f"{url}/_magnetar/local/schedules/maintenance", timeout=900).json()
    seconds = time.monotonic() - started
    s = stats(url)
    requests = {k: n for k, n in s["aws_requests"].items() if not is_mapping_read(k)}
    fn = next(f for name, f in s["lambda"].items() if "maintenance" in name)
    return {"report": report, "wall_s": round(seconds, 2), "aws_requests": requests,
            "aws_requests_total": sum(requests.values()), "billed_ms": fn["duration_ms_total"]}


# --- dollars ---------------------------------------------------------------------------------------
def dollars_per_hour(requests: dict[str, int], lambdas: dict[str, Any], seconds: float,
                     connection_minutes: float = 0.0) -> dict[str, Any]:
    """What a window's usage costs per hour (us-east-1 list prices, magnetar.cost.PRICES); DynamoDB
    at one request unit per request (the items read and written here are under 1 KB)."""
    from magnetar.cost import PRICES

    scale = 3600 / seconds
    per_request = {k: n for k, n in requests.items() if not is_mapping_read(k)}
    fns = {name: f for name, f in lambdas.items() if "journal-consumer" not in name}
    invocations = sum(f["invocations"] for f in fns.values())
    gb_s = sum(f["duration_ms_total"] for f in fns.values()) / 1000 * LAMBDA_MEMORY_GB
    reads = sum(n for k, n in per_request.items() if k.startswith("dynamodb.")
                and k.split(".")[1].startswith(("Get", "BatchGet", "Query", "Scan", "TransactGet")))
    writes = sum(n for k, n in per_request.items() if k.startswith("dynamodb.")) - reads
    s3 = sum(n for k, n in per_request.items() if k.startswith("s3."))
    ws_messages = per_request.get("apigatewaymanagementapi.PostToConnection", 0) + sum(
        f["invocations"] for name, f in fns.items() if "websocket" in name)
    http = sum(f["invocations"] for name, f in fns.items() if "broker" in name)

    def usd(key: str, quantity: float) -> float:
        return float(PRICES[key].cost(quantity * scale, tiered=False))

    cost = {
        "api_gateway_http": usd("apigw.http.request", http),
        "api_gateway_ws_messages": usd("apigw.websocket.message", ws_messages),
        "api_gateway_ws_connection_minutes": usd("apigw.websocket.connection_minute", connection_minutes),
        "lambda_requests": usd("lambda.request", invocations),
        "lambda_duration": usd("lambda.arm64.gb_second", gb_s),
        "dynamodb_reads": usd("dynamodb.ondemand.rru", reads),
        "dynamodb_writes": usd("dynamodb.ondemand.wru", writes),
        "s3_requests": s3 * scale * 0.005 / 1000,  # PUT/LIST class upper bound ($0.005 per 1,000)
    }
    return {"aws_requests_per_hour": round(sum(per_request.values()) * scale),
            "lambda_invocations_per_hour": round(invocations * scale),
            "lambda_gb_seconds_per_hour": round(gb_s * scale, 2),
            "usd_per_hour": round(sum(cost.values()), 6),
            "usd_by_component": {k: round(v, 6) for k, v in cost.items() if v}}


def fixed_usd_per_hour(shards: int) -> dict[str, float]:
    """What the stack costs per hour whatever the topics: the journal stream and its fan-out
    consumer, the EventBridge schedule (on-demand stream; provisioned shown beside)."""
    from magnetar.cost import PRICES

    efo = PRICES["kinesis.provisioned.efo_consumer_shard_hour"].cost(shards, tiered=False)
    return {"kinesis_on_demand_stream_hour": round(float(PRICES["kinesis.ondemand.stream_hour"].cost(1, tiered=False)), 4),
            "kinesis_provisioned_shard_hours": round(float(PRICES["kinesis.provisioned.shard_hour"].cost(shards, tiered=False)), 4),
            "kinesis_provisioned_efo_consumer_shard_hours": round(float(efo), 4),
            "eventbridge_schedule": round(60 * 1.00 / 1e6, 6)}


# --- client processes ----------------------------------------------------------------------------------
def worker(args: argparse.Namespace) -> None:
    """One client process: producers and consumers of topics [first, first + count). Prints
    "ready" once attached, waits for a line on stdin, runs, prints its result as JSON."""
    import magnetar
    from magnetar.client import exceptions

    url, topics = args.url, [topic_name(args.run, i) for i in range(args.first, args.first + args.count)]
    client = magnetar.Client(url, delivery=args.delivery)
    publish, e2e = histogram(), histogram()
    lock = threading.Lock()
    counts = {"sent": 0, "acked": 0, "failed": 0, "received": 0}
    done = threading.Event()

    def attach(what: Any, topic: str) -> Any:
        """A loaded machine: a $connect may outlast the handshake timeout, a lookup may get a 503
        after the SDK's own retries; attaching is idempotent, so try again with a growing pause."""
        for attempt in range(8):
            try:
                return what(topic)
            except (exceptions.ConnectError, exceptions.ServiceUnitNotReady, exceptions.Timeout) as exc:
                if attempt == 7 or isinstance(exc, exceptions.AuthenticationError):  # refused credentials stay so
                    raise
                time.sleep(2 * (attempt + 1))
        raise AssertionError("unreachable")

    def subscribe(topic: str) -> Any:
        return client.subscribe(topic, "scale", consumer_type=magnetar.ConsumerType.Shared,
                                initial_position=magnetar.InitialPosition.Earliest)

    def create_producer(topic: str) -> Any:
        return client.create_producer(topic, batching_max_publish_delay_ms=10)

    # Producers first: they hold nothing open between sends, while every attached push consumer
    # keeps a WebSocket (and its keepalives) busy for the rest of the setup.
    producers = [attach(create_producer, t) for t in topics] if args.rate else []
    consumers = [attach(subscribe, t) for t in topics]

    def consume(consumer: Any) -> None:
        while not done.is_set():
            try:
                msg = consumer.receive(timeout_millis=5000)  # (an idle thread wakes seldom)
            except exceptions.Timeout:
                continue
            except exceptions.PulsarException:
                return
            latency_us = int((time.time() - float(msg.data()[:20])) * 1e6)
            with lock:
                e2e.record_value(max(1, latency_us))
                counts["received"] += 1
            consumer.acknowledge(msg)

    if not args.idle:
        for c in consumers:
            threading.Thread(target=consume, args=(c,), daemon=True).start()
    else:  # an application blocked in receive(): the SDK long-polls 20 s at a time, or waits for a push
        for c in consumers:
            threading.Thread(target=_block, args=(c, done), daemon=True).start()
    print("ready", flush=True)
    sys.stdin.readline()
    cpu0 = time.process_time()
    started = time.monotonic()
    if producers:
        interval = 1 / (args.rate * len(producers))
        n = 0
        while time.monotonic() - started < args.duration:
            producer = producers[n % len(producers)]
            sent_at = time.monotonic()

            def sent(result: Any, _id: Any, sent_at: float = sent_at) -> None:
                with lock:
                    if result == magnetar.Result.Ok:
                        counts["acked"] += 1
                        publish.record_value(max(1, int((time.monotonic() - sent_at) * 1e6)))
                    else:
                        counts["failed"] += 1

            producer.send_async(f"{time.time():<20.6f}".encode() + b"x" * (args.size - 20), sent)
            n += 1
            counts["sent"] = n
            time.sleep(max(0.0, started + n * interval - time.monotonic()))
        for p in producers:
            p.flush()
        deadline = time.monotonic() + args.drain
        while counts["received"] < counts["acked"] and time.monotonic() < deadline:
            time.sleep(0.2)
    else:
        sys.stdin.readline()  # idle: until told to stop
    elapsed = time.monotonic() - started
    done.set()
    result = counts | {"seconds": elapsed, "cpu_s": time.process_time() - cpu0,
                       "publish": publish.encode().decode(),
                       "e2e": e2e.encode().decode()}
    print(json.dumps(result), flush=True)
    with contextlib.suppress(Exception):
        client.close()


def _block(consumer: Any, done: threading.Event) -> None:
    while not done.is_set():
        with contextlib.suppress(Exception):
            consumer.receive()


class Workers:
    """`procs` client processes sharing `topics` topics, started together."""

    def __init__(self, url: str, run: str, topics: int, procs: int, **options: Any) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        share = -(-topics // procs)
        for first in range(0, topics, share):
            argv = [sys.executable, __file__, "worker", "--url", url, "--run", run, "--first", str(first),
                    "--count", str(min(share, topics - first))]
            for k, v in options.items():
                if v is True:
                    argv.append(f"--{k}")
                elif v is not False:
                    argv += [f"--{k}", str(v)]
            self.procs.append(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        for p in self.procs:  # attached
            line = p.stdout.readline() if p.stdout else ""
            if line.strip() != "ready":
                self.kill()
                raise RuntimeError(f"a client process failed to attach: {line!r}")

    def go(self) -> None:
        for p in self.procs:
            if p.stdin:
                p.stdin.write("\n")
                p.stdin.flush()

    def results(self) -> list[dict[str, Any]]:
        out = []
        for p in self.procs:
            line = p.stdout.readline() if p.stdout else ""
            out.append(json.loads(line))
        return out

    def finish(self) -> None:
        """Each process closes its clients after its result (hundreds of closes: not in the figures)."""
        for p in self.procs:
            try:
                p.wait(timeout=180)
            except subprocess.TimeoutExpired:
                p.kill()

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()


# --- workloads ---------------------------------------------------------------------------------------
def active(url: str, aws_endpoint: str, server_pid: int, args: argparse.Namespace, topics: int) -> dict[str, Any]:
    run = f"a{topics}"
    procs = max(1, min(args.procs, topics))
    setup = time.monotonic()
    workers = Workers(url, run, topics, procs, rate=args.rate, duration=args.duration, size=args.size,
                      delivery=args.delivery, drain=args.drain)
    setup_s = time.monotonic() - setup
    try:
        refused_before = refusals(aws_endpoint)
        stats(url, reset=True)
        server_cpu0 = cpu_seconds(server_pid)
        workers.go()
        results = workers.results()
        time.sleep(1.5)  # the journal consumer seals the tail: its requests belong to the run
        s = stats(url)
        server_cpu = cpu_seconds(server_pid) - server_cpu0
        workers.finish()
    finally:
        workers.kill()
    publish, e2e = histogram(), histogram()
    for r in results:
        publish.add(HdrHistogram.decode(r["publish"]))
        e2e.add(HdrHistogram.decode(r["e2e"]))
    total = {k: sum(r[k] for r in results) for k in ("sent", "acked", "failed", "received")}
    seconds = max(r["seconds"] for r in results)
    requests = dict(sorted(s["aws_requests"].items(), key=lambda kv: -kv[1]))
    counted = {k: n for k, n in requests.items() if not is_mapping_read(k)}
    messages = total["received"]
    refused_after = refusals(aws_endpoint)
    from magnetar.perf.limits import measure_all

    # the emulator's own raw limits in the same run, no Magnetar in the path
    limit = measure_all(aws_endpoint, args.size, max(messages, 1000) * args.size, 1_000_000)
    return {
        "limit": limit,
        "ratio_to_limit": round(messages / seconds / limit["kinesis_put_records"]["per_s"], 4),
        "topics": topics, "client_processes": procs, "rate_per_topic": args.rate, "delivery": args.delivery,
        "setup_s": round(setup_s, 1), **total, "seconds": round(seconds, 1),
        "msgs_per_s": round(messages / seconds, 1), "target_msgs_per_s": topics * args.rate,
        "publish_latency_ms": percentiles(publish), "e2e_latency_ms": percentiles(e2e),
        "aws_requests_per_1000_msgs": round(sum(counted.values()) / messages * 1000, 1) if messages else None,
        "aws_requests_per_1000_msgs_with_mapping_reads": round(sum(requests.values()) / messages * 1000, 1)
        if messages else None,
        "aws_requests_per_1000_msgs_by_operation": {k: round(n / messages * 1000, 2) for k, n in counted.items()}
        if messages else {},
        "event_source_mapping_requests_not_counted": {k: n for k, n in requests.items() if is_mapping_read(k)},
        # with MAGNETAR_REQUEST_SITES=1 in the environment: by the core function that made them
        **({"aws_requests_per_1000_msgs_by_site": {k: round(n / messages * 1000, 2)
                                                    for k, n in s["aws_requests_by_site"].items()}}
           if messages and s.get("aws_requests_by_site") else {}),
        "lambda": s["lambda"],
        "client_cpu_s": round(sum(r["cpu_s"] for r in results), 1),
        "cluster_cpu_s": round(server_cpu, 1),
        "cpu_cores_used": round((sum(r["cpu_s"] for r in results) + server_cpu) / seconds, 2),
        "emulator_refusals": {k: refused_after.get(k, 0) - refused_before.get(k, 0) for k in refused_after
                              if refused_after.get(k, 0) != refused_before.get(k, 0)},
    }


def idle(url: str, aws_endpoint: str, args: argparse.Namespace, topics: int) -> dict[str, Any]:
    from magnetar.client.admin import AdminClient
    from magnetar.client.exceptions import PulsarException, ServiceUnitNotReady

    run = f"i{topics}"
    admin = AdminClient(url)
    started = time.monotonic()
    retries = 0
    for i in range(topics):
        for attempt in range(20):
            try:
                admin.create_topic(topic_name(run, i))
                break
            except PulsarException as exc:
                if "already exists" in str(exc):  # a retry after a lost response finds it created
                    break
                if not isinstance(exc, ServiceUnitNotReady) or attempt == 19:
                    raise
                retries += 1  # 503 after the SDK's own retries (a throttle or a timeout under load)
                time.sleep(min(2.0, 0.05 * 2**attempt))
    admin.close()
    out: dict[str, Any] = {"topics": topics, "create_s": round(time.monotonic() - started, 1),
                           "create_retries_after_503": retries}
    time.sleep(2)

    def window(label: str, connection_minutes_per_s: float) -> None:
        stats(url, reset=True)
        time.sleep(args.seconds)
        s = stats(url)
        out[label] = {"seconds": args.seconds, "aws_requests": s["aws_requests"],
                      "lambda_invocations": {k: f["invocations"] for k, f in s["lambda"].items()}}
        out[label] |= dollars_per_hour(s["aws_requests"], s["lambda"], args.seconds,
                                       connection_minutes_per_s * args.seconds / 60)

    window("nothing_attached", 0)
    out["maintenance_run_no_consumers"] = run_maintenance(url)
    print(json.dumps(out), flush=True)
    try:
        consumers_phases(url, args, topics, run, out, window)
    except Exception as exc:  # what limited the run is a result too; the phases measured so far stay
        out["failed_phase"] = f"{type(exc).__name__}: {exc}"
    runs_per_hour = 3600 / 60  # the schedule: every minute
    for key in ("maintenance_run_no_consumers", "maintenance_run_push_consumers"):
        if key not in out:
            continue
        m = out[key]
        lambdas = {"maintenance": {"invocations": 1, "duration_ms_total": m["billed_ms"]}}
        m["per_1000_topics_per_run"] = round(m["aws_requests_total"] / topics * 1000, 1)
        m["per_hour"] = dollars_per_hour(m["aws_requests"], lambdas, 3600 / runs_per_hour)
    out["emulator_refusals"] = refusals(aws_endpoint)
    return out


def consumers_phases(url: str, args: argparse.Namespace, topics: int, run: str, out: dict[str, Any],
                     window: Any) -> None:
    """Idle push consumers, then idle long-poll consumers, each measured over a window."""
    push_topics = min(args.push_topics or topics, topics)
    workers = Workers(url, run, push_topics, max(1, min(args.procs, push_topics)), delivery="push", idle=True, rate=0)
    try:
        workers.go()
        time.sleep(3)
        window("push_consumers", push_topics)
        out["push_consumers"]["consumers"] = push_topics
        out["maintenance_run_push_consumers"] = run_maintenance(url)
        out["maintenance_run_push_consumers"]["connected_topics"] = push_topics
        print(json.dumps(out), flush=True)
    finally:
        workers.go()
        with contextlib.suppress(Exception):
            workers.results()
        workers.kill()
    poll_topics = min(args.poll_topics, topics)
    workers = Workers(url, run, poll_topics, max(1, min(args.procs, poll_topics)), delivery="poll", idle=True, rate=0)
    try:
        workers.go()
        time.sleep(3)
        window("poll_consumers", 0)
        out["poll_consumers"]["consumers"] = poll_topics
    finally:
        workers.go()
        with contextlib.suppress(Exception):
            workers.results()
        workers.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("active", help="every topic with a producer and a consumer at a low rate")
    a.add_argument("--topics", type=int, nargs="+", default=[10, 100, 1000])
    a.add_argument("--rate", type=float, default=1.0, help="messages per second per topic")
    a.add_argument("--duration", type=float, default=60.0, help="seconds of producing")
    a.add_argument("--size", type=int, default=256, help="message bytes")
    a.add_argument("--procs", type=int, default=4, help="client processes")
    a.add_argument("--delivery", choices=("push", "poll"), default="push")
    a.add_argument("--drain", type=float, default=60.0, help="seconds to wait for the last deliveries")
    i = sub.add_parser("idle", help="idle topics with idle consumers: AWS requests and dollars per hour")
    i.add_argument("--topics", type=int, nargs="+", default=[1000, 2000])
    i.add_argument("--seconds", type=float, default=60.0, help="seconds each window is measured")
    i.add_argument("--poll-topics", type=int, default=100, help="topics given an idle long-poll consumer")
    i.add_argument("--push-topics", type=int, default=0, help="topics given an idle push consumer (0: all)")
    i.add_argument("--procs", type=int, default=4)
    for p in (a, i):
        p.add_argument("--out", type=Path, default=None)
        p.add_argument("--local-up-args", default="", help="more `magnetar local up` options")
    w = sub.add_parser("worker")  # one client process (internal)
    for name in ("url", "run"):
        w.add_argument(f"--{name}", required=True)
    for name in ("first", "count", "size"):
        w.add_argument(f"--{name}", type=int, default=256 if name == "size" else 0)
    for name in ("rate", "duration", "drain"):
        w.add_argument(f"--{name}", type=float, default=0.0)
    w.add_argument("--delivery", default="push")
    w.add_argument("--idle", action="store_true")
    args = parser.parse_args()
    if args.command == "worker":
        worker(args)
        return

    from magnetar.config import LOCAL_SHARD_COUNT
    from magnetar.local.cluster import LocalUpProcess

    result: dict[str, Any] = {"command": " ".join(["bench/scale_topics.py", *sys.argv[1:]]),
                              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "local_up": f"magnetar local up (defaults) {args.local_up_args}".strip(),
                              "fixed_usd_per_hour": fixed_usd_per_hour(LOCAL_SHARD_COUNT), "runs": []}
    out = args.out or RESULTS / f"scale-{args.command}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    for topics in args.topics:
        extra = args.local_up_args.split()
        # idle: the schedule off, each maintenance run triggered and measured on its own
        with LocalUpProcess(maintenance_interval_s=0 if args.command == "idle" else None, extra_args=extra) as c:
            assert c.proc is not None
            try:
                if args.command == "active":
                    r = active(c.url, c.aws_endpoint, c.proc.pid, args, topics)
                else:
                    r = idle(c.url, c.aws_endpoint, args, topics)
            except Exception as exc:  # what limited the run is a result too (e.g. clients unable to attach)
                r = {"topics": topics, "failed_run": f"{type(exc).__name__}: {exc}"}
        r["machine_load_avg_1_5_15"] = [round(x, 1) for x in os.getloadavg()]  # a shared 2-core machine
        result["runs"].append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "lambda"}, indent=1), flush=True)
        out.write_text(json.dumps(result, indent=2))  # after every topic count: a later failure keeps it
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
