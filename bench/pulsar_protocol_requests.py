"""AWS requests per 1,000 messages: the official client through the binary protocol proxy vs the
Magnetar SDK, same load, on one `magnetar local up` (its own emulator, its proxy on a free port).

    .venv/bin/python bench/pulsar_protocol_requests.py [--messages 5000] [--json bench/results/...]

Each door in turn: one producer (batches of up to 100 messages), one Shared consumer receiving and
acknowledging everything; the local runtime's AWS request counter is reset before producing and
read after the last acknowledgement (plus the sealer's tail). A first figure until `magnetar perf
--protocol pulsar` measures it under the perf harness.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from typing import Any

import httpx


def run_door(door: str, up: Any, count: int) -> dict[str, Any]:
    topic = f"persistent://public/default/bench-{door}-{uuid.uuid4().hex[:6]}"
    if door == "pulsar":
        import logging

        import pulsar

        logger = logging.getLogger("pulsar-bench")
        logger.setLevel(logging.WARNING)
        client: Any = pulsar.Client(up.pulsar_url, operation_timeout_seconds=30, logger=logger)
        shared, earliest, timeout = pulsar.ConsumerType.Shared, pulsar.InitialPosition.Earliest, pulsar.Timeout
    else:
        import magnetar

        client = magnetar.Client(up.url)
        shared, earliest, timeout = magnetar.ConsumerType.Shared, magnetar.InitialPosition.Earliest, magnetar.Timeout
    consumer = client.subscribe(topic, "bench", consumer_type=shared, initial_position=earliest)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=100,
                                      batching_max_publish_delay_ms=10, block_if_queue_full=True)
    time.sleep(1.0)
    httpx.delete(f"{up.url}/_magnetar/local/stats")
    started = time.perf_counter()
    for i in range(count):
        producer.send_async(f"{i:08d}".encode() * 16, None)
    producer.flush()
    got = 0
    while got < count:
        try:
            msg = consumer.receive(timeout_millis=20_000)
        except timeout:
            break
        consumer.acknowledge(msg)
        got += 1
    elapsed = time.perf_counter() - started
    time.sleep(1.5)  # the client's grouped acks and the sealer's tail belong to the run
    requests: dict[str, int] = httpx.get(f"{up.url}/_magnetar/local/stats").json()["aws_requests"]
    client.close()
    total = sum(requests.values())
    return {"door": door, "messages": count, "received": got, "seconds": round(elapsed, 2),
            "aws_requests_total": total, "aws_requests_per_1000_msgs": round(total / count * 1000, 1),
            "aws_requests": requests}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    from magnetar.local.cluster import LocalUpProcess

    with LocalUpProcess(maintenance_interval_s=0) as up:
        results = [run_door(door, up, args.messages) for door in ("sdk", "pulsar")]
    for r in results:
        print(f"{r['door']:>6}: {r['received']}/{r['messages']} in {r['seconds']} s, "
              f"{r['aws_requests_per_1000_msgs']} AWS requests per 1,000 messages")
        print("        " + ", ".join(f"{k} {v}" for k, v in sorted(r["aws_requests"].items())))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
