"""Noisy neighbours: does tenant A's flood hurt tenant B, and does A's publishRate policy help?

    .venv/bin/python bench/noisy_neighbour.py --phase-seconds 25

Starts its own `magnetar local up` (a process of its own, maintenance off), creates tenants
`noisy` and `quiet` with a namespace each, then runs three phases of `--phase-seconds`:

1. **alone**: B (tenant `quiet`) publishes `--b-rate` messages per second (one at a time, each
   send timed) and consumes them on a subscription (send -> receive latency);
2. **flood**: the same, while A (tenant `noisy`, a process of its own) runs `--a-producers`
   producers sending as fast as they can, unbatched, to one topic;
3. **flood, throttled**: the same flood, with a `publishRate` of `--a-limit` messages per second
   on A's namespace (set through Pulsar's admin path; refused publishes get 429, the SDK backs
   off and retries).

For each phase: B's publish latency (p50/p99), its achieved publish and consume rates and its
end-to-end latency; A's acknowledged messages per second; the AWS requests and broker
invocations per second the local runtime counted. Before the phases, the emulator's own raw
limits (DynamoDB PutItem, Kinesis PutRecords), so the figures can be read as ratios.

Writes bench/results/noisy-neighbour.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import struct
import threading
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

import magnetar
from magnetar.client import exceptions
from magnetar.client.admin import AdminClient
from magnetar.local.cluster import LocalUpProcess
from magnetar.perf import limits
from magnetar.perf.runner import Latency

OUT = Path(__file__).parent / "results" / "noisy-neighbour.json"


def local_stats(url: str, method: str = "GET") -> dict[str, Any]:
    response = httpx.request(method, f"{url}/_magnetar/local/stats", timeout=10)
    return dict(response.json())


# --- tenant A: the flood (a process of its own, so its threads do not share B's interpreter) ---------
def flood(url: str, topic: str, producers: int, seconds: float, results: Any) -> None:
    client = magnetar.Client(url)
    counts = [0] * producers
    failures = [0] * producers
    stop = time.monotonic() + seconds

    def run(index: int) -> None:
        producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=10_000)
        payload = b"A" * 256
        while time.monotonic() < stop:
            try:
                producer.send(payload)
                counts[index] += 1
            except exceptions.PulsarException:
                failures[index] += 1
        producer.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(producers)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.close()
    results.put({"acked": sum(counts), "failed": sum(failures), "seconds": time.monotonic() - started})


# --- tenant B: steady producer and a consumer ----------------------------------------------------------
def steady(url: str, topic: str, rate: float, seconds: float) -> dict[str, Any]:
    client = magnetar.Client(url)
    consumer = client.subscribe(topic, f"b-{uuid.uuid4().hex[:6]}", consumer_type=magnetar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    publish, e2e = Latency(), Latency()
    received = [0]
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            try:
                message = consumer.receive(timeout_millis=500)
            except exceptions.Timeout:
                continue
            (sent,) = struct.unpack(">d", message.data()[:8])
            e2e.record_ms((time.time() - sent) * 1000)
            received[0] += 1
            consumer.acknowledge(message)

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < seconds:
        due = started + sent / rate
        if due > time.monotonic():
            time.sleep(due - time.monotonic())
        t0 = time.perf_counter()
        producer.send(struct.pack(">d", time.time()) + b"B" * 248)
        publish.record_ms((time.perf_counter() - t0) * 1000)
        sent += 1
    elapsed = time.monotonic() - started
    deadline = time.monotonic() + 10
    while received[0] < sent and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    reader.join(timeout=5)
    producer.close()
    consumer.close()
    client.close()
    return {
        "target_msgs_per_s": rate,
        "sent": sent,
        "seconds": round(elapsed, 2),
        "publish_msgs_per_s": round(sent / elapsed, 2),
        "consumed": received[0],
        "publish_latency_ms": {k: round(v, 1) for k, v in publish.percentiles().items()},
        "e2e_latency_ms": {k: round(v, 1) for k, v in e2e.percentiles().items()},
    }


def phase(url: str, name: str, args: argparse.Namespace, a_topic: str | None) -> dict[str, Any]:
    print(f"phase {name} ...", flush=True)
    results: Any = multiprocessing.get_context("spawn").Queue()
    noisy = None
    if a_topic is not None:
        noisy = multiprocessing.get_context("spawn").Process(
            target=flood, args=(url, a_topic, args.a_producers, args.phase_seconds + 4, results))
        noisy.start()
        time.sleep(3)  # the flood is on before B is measured
    local_stats(url, "DELETE")
    b = steady(url, f"persistent://quiet/ns/steady-{name}", args.b_rate, args.phase_seconds)
    stats = local_stats(url)
    out: dict[str, Any] = {"b": b}
    if noisy is not None:
        a = results.get(timeout=120)
        noisy.join(timeout=30)
        out["a"] = {**a, "acked_msgs_per_s": round(a["acked"] / a["seconds"], 1)}
    requests = stats["aws_requests"]
    broker = stats["lambda"].get("magnetar-broker", {})
    seconds = b["seconds"]
    out["aws_requests_per_s"] = round(sum(requests.values()) / seconds, 1)
    out["aws_requests_by_operation_per_s"] = {k: round(v / seconds, 1) for k, v in requests.items() if v}
    out["broker_invocations_per_s"] = round(broker.get("invocations", 0) / seconds, 1)
    print(json.dumps(out, indent=2), flush=True)
    return out


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase-seconds", type=float, default=25, help="seconds B is measured in each phase")
    parser.add_argument("--b-rate", type=float, default=10, help="B's steady publish rate (messages/s)")
    parser.add_argument("--a-producers", type=int, default=4, help="A's flooding producers")
    parser.add_argument("--a-limit", type=int, default=5, help="A's namespace publishRate in phase 3 (messages/s)")
    parser.add_argument("--json", type=Path, default=OUT)
    args = parser.parse_args()
    command = (f"bench/noisy_neighbour.py --phase-seconds {args.phase_seconds:g} --b-rate {args.b_rate:g} "
               f"--a-producers {args.a_producers} --a-limit {args.a_limit}")
    started = time.monotonic()
    with LocalUpProcess(maintenance_interval_s=0) as cluster:
        admin = AdminClient(cluster.url)
        for tenant in ("noisy", "quiet"):
            admin.create_tenant(tenant)
            admin.create_namespace(f"{tenant}/ns")
        print("raw limits ...", flush=True)
        raw = {
            "dynamodb_put_item": asdict(limits.dynamodb_put_item(cluster.aws_endpoint, 1024, max_seconds=3)),
            "kinesis_put_records_1kb": asdict(limits.kinesis_put_records(cluster.aws_endpoint, 1024, 50 * 1024**2,
                                                                         max_seconds=3)),
        }
        alone = phase(cluster.url, "alone", args, None)
        flooded = phase(cluster.url, "flood", args, "persistent://noisy/ns/flood")
        limit = {"publishThrottlingRateInMsg": args.a_limit, "publishThrottlingRateInByte": -1}
        admin.set_policy("noisy/ns", "publishRate", limit)
        throttled = phase(cluster.url, "flood-throttled", args, "persistent://noisy/ns/flood")
        admin.close()

    def p99(p: dict[str, Any]) -> float:
        return float(p["b"]["publish_latency_ms"]["p99"])

    def rate(p: dict[str, Any]) -> float:
        return float(p["b"]["publish_msgs_per_s"])

    ddb_raw = raw["dynamodb_put_item"]["per_s"]
    result = {
        "command": command,
        "seconds": round(time.monotonic() - started, 1),
        "raw_limits": raw,
        "a_publish_rate_policy": limit,
        "phases": {"alone": alone, "flood": flooded, "flood_throttled": throttled},
        "ratios": {
            "b_publish_p99_flood_vs_alone": ratio(p99(flooded), p99(alone)),
            "b_publish_p99_throttled_vs_alone": ratio(p99(throttled), p99(alone)),
            "b_publish_rate_flood_vs_alone": ratio(rate(flooded), rate(alone)),
            "b_publish_rate_throttled_vs_alone": ratio(rate(throttled), rate(alone)),
            "a_acked_throttled_vs_limit": ratio(throttled["a"]["acked_msgs_per_s"], args.a_limit),
            "aws_requests_per_s_vs_raw_dynamodb_put_item": {
                name: ratio(p["aws_requests_per_s"], ddb_raw)
                for name, p in (("alone", alone), ("flood", flooded), ("flood_throttled", throttled))
            },
        },
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["ratios"], indent=2))


if __name__ == "__main__":
    main()
