"""Produce -> consume throughput of the local stack, next to the emulator's own limit.

    .venv/bin/python bench/e2e_throughput.py --messages 20000 --size 1024 --batch 100

Starts `magnetar local up` in its own process (emulator + runtime), then from this process:
1. the raw limit: Kinesis PutRecords of the same bytes (1 KB records, 500 per call) straight to
   the same emulator, for the same number of bytes the end-to-end run moves;
2. end to end: P producers (SDK, batching) and C Shared consumers (SDK, acking) moving N
   messages; throughput = N / (last receipt - first send);
3. the AWS requests the functions made, by service and operation, per 1,000 messages.
Writes a JSON file in bench/results/ and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import boto3
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import magnetar  # noqa: E402
from magnetar.client import exceptions  # noqa: E402
from magnetar.local.cluster import _wait_for_port, free_port  # noqa: E402


def start_stack() -> tuple[subprocess.Popen[bytes], str, str]:
    port, aws_port = free_port(), free_port()
    proc = subprocess.Popen(
        [str(ROOT / ".venv/bin/magnetar"), "local", "up", "--port", str(port), "--aws-port", str(aws_port)],
        stdout=subprocess.DEVNULL,
    )
    _wait_for_port("127.0.0.1", port, 60)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            if httpx.get(f"{url}/admin/v2/brokers/health").text == "ok":
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return proc, url, f"http://127.0.0.1:{aws_port}"


def raw_kinesis_limit(endpoint: str, total_bytes: int, size: int) -> dict[str, float]:
    """PutRecords of `size`-byte records, 500 per call, until `total_bytes` are written."""
    kinesis = boto3.client("kinesis", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="test", aws_secret_access_key="test")
    stream = f"raw-limit-{uuid.uuid4().hex[:6]}"
    kinesis.create_stream(StreamName=stream, ShardCount=2)
    record = os.urandom(size)
    records = [{"Data": record, "PartitionKey": f"k{i}"} for i in range(500)]
    sent, calls = 0, 0
    started = time.perf_counter()
    while sent * size < total_bytes:
        kinesis.put_records(StreamName=stream, Records=records)
        sent += len(records)
        calls += 1
    elapsed = time.perf_counter() - started
    return {"records": sent, "seconds": elapsed, "msgs_per_s": sent / elapsed, "mb_per_s": sent * size / elapsed / 1e6,
            "calls": calls}


def pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def end_to_end(url: str, messages: int, size: int, batch: int, producers: int, consumers: int) -> dict[str, object]:
    topic = f"persistent://public/default/bench-{uuid.uuid4().hex[:8]}"
    client = magnetar.Client(url)
    subs = [
        client.subscribe(topic, "bench", consumer_type=magnetar.ConsumerType.Shared, consumer_name=f"c{i}",
                         initial_position=magnetar.InitialPosition.Earliest, receiver_queue_size=1000)
        for i in range(consumers)
    ]
    httpx.delete(f"{url}/_magnetar/local/aws-requests")
    payload = os.urandom(size)
    publish_latency: list[float] = []
    e2e_latency: list[float] = []
    received = 0
    lock = threading.Lock()
    done = threading.Event()
    first_send = [0.0]

    def produce(index: int) -> None:
        producer = client.create_producer(topic, producer_name=f"p{index}", batching_max_messages=batch,
                                          batching_max_allowed_size_in_bytes=batch * size + 1024,
                                          batching_max_publish_delay_ms=10)
        share = messages // producers
        for _ in range(share):
            sent_at = time.perf_counter()

            def acked(result, message_id, sent_at=sent_at):  # type: ignore[no-untyped-def]
                publish_latency.append((time.perf_counter() - sent_at) * 1000)

            producer.send_async(payload, acked)
        producer.flush()

    def consume(consumer) -> None:  # type: ignore[no-untyped-def]
        nonlocal received
        while not done.is_set():
            try:
                msg = consumer.receive(timeout_millis=1000)
            except exceptions.Timeout:
                continue
            now_ms = time.time() * 1000
            consumer.acknowledge(msg)
            with lock:
                received += 1
                e2e_latency.append(now_ms - msg.publish_timestamp())
                if received >= messages:
                    done.set()

    threads = [threading.Thread(target=consume, args=(c,), daemon=True) for c in subs]
    for t in threads:
        t.start()
    first_send[0] = time.perf_counter()
    ptheads = [threading.Thread(target=produce, args=(i,)) for i in range(producers)]
    for t in ptheads:
        t.start()
    for t in ptheads:
        t.join()
    produced_at = time.perf_counter()
    done.wait(timeout=600)
    elapsed = time.perf_counter() - first_send[0]
    for t in threads:
        t.join(timeout=5)
    client.close()  # flushes the grouped acks
    time.sleep(1.5)  # let the journal consumer seal the tail
    requests = httpx.get(f"{url}/_magnetar/local/aws-requests").json()
    total = sum(requests.values())
    produce_path = requests.get("dynamodb.UpdateItem", 0) + requests.get("kinesis.PutRecord", 0)
    return {
        "topic": topic,
        "messages": messages,
        "received": received,
        "seconds": elapsed,
        "produce_seconds": produced_at - first_send[0],
        "msgs_per_s": received / elapsed,
        "mb_per_s": received * size / elapsed / 1e6,
        "publish_latency_ms": {p: pct(publish_latency, p) for p in (50, 95, 99)},
        "e2e_latency_ms": {p: pct(e2e_latency, p) for p in (50, 95, 99)},
        "e2e_latency_mean_ms": statistics.fmean(e2e_latency) if e2e_latency else 0.0,
        "aws_requests": requests,
        "aws_requests_total": total,
        "aws_requests_per_1000_msgs": total / messages * 1000,
        "produce_path_requests_per_100_msgs": produce_path / messages * 100,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    proc, url, endpoint = start_stack()
    try:
        e2e = end_to_end(url, args.messages, args.size, args.batch, args.producers, args.consumers)
        raw = raw_kinesis_limit(endpoint, args.messages * args.size, args.size)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    result = {
        "command": " ".join(["bench/e2e_throughput.py", *sys.argv[1:]]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "params": vars(args) | {"json": str(args.json) if args.json else None},
        "end_to_end": e2e,
        "limit_kinesis_put_records": raw,
        "ratio_to_limit": e2e["msgs_per_s"] / raw["msgs_per_s"],  # type: ignore[operator]
    }
    out = args.json or ROOT / "bench/results" / f"e2e-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"end to end : {e2e['msgs_per_s']:.0f} msg/s ({e2e['mb_per_s']:.2f} MB/s), {e2e['received']}/{e2e['messages']} received")
    print(f"raw limit  : {raw['msgs_per_s']:.0f} msg/s ({raw['mb_per_s']:.2f} MB/s) Kinesis PutRecords, same emulator")
    print(f"ratio      : {result['ratio_to_limit']:.2f}")
    print(f"latency    : publish p50/p99 {e2e['publish_latency_ms'][50]:.0f}/{e2e['publish_latency_ms'][99]:.0f} ms, "
          f"end-to-end p50/p99 {e2e['e2e_latency_ms'][50]:.0f}/{e2e['e2e_latency_ms'][99]:.0f} ms")
    print(f"AWS calls  : {e2e['aws_requests_per_1000_msgs']:.1f} per 1,000 messages; produce path "
          f"{e2e['produce_path_requests_per_100_msgs']:.2f} per 100 messages")
    for op, n in sorted(e2e["aws_requests"].items(), key=lambda kv: -kv[1]):  # type: ignore[attr-defined]
        print(f"  {op:36s} {n:7d}  {n / args.messages * 1000:8.2f} per 1k msgs")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
