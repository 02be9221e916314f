"""What authentication costs: authorizer invocations and AWS requests per 1,000 messages, with
and without `--auth` (issue #8).

    .venv/bin/python bench/auth_overhead.py --messages 1000

Two `magnetar local up` processes (one open, one with --auth and a token), the same workload on
each: a producer sending `--messages` messages in batches of 100 and a consumer receiving and
acknowledging them. Counts come from the local runtime's own counters (GET /_magnetar/local/stats).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

import magnetar
from magnetar.local.cluster import LocalUpProcess
from magnetar.security.tokens import create_token, new_secret_key


def run(messages: int, auth: bool) -> dict[str, Any]:
    key = new_secret_key()
    with tempfile.TemporaryDirectory() as tmp:
        key_file = Path(tmp) / "key"
        key_file.write_bytes(key)
        extra = ["--auth", "--token-secret-key", str(key_file)] if auth else []
        with LocalUpProcess(maintenance_interval_s=0, extra_args=extra) as proc:
            httpx.delete(f"{proc.url}/_magnetar/local/stats")  # counts include the client's setup calls
            token = create_token("admin", secret_key=key)
            authentication = magnetar.AuthenticationToken(token) if auth else None
            client = magnetar.Client(proc.url, authentication=authentication)
            topic = f"persistent://public/default/auth-{uuid.uuid4().hex[:8]}"
            consumer = client.subscribe(topic, "s")
            producer = client.create_producer(topic, batching_max_messages=100, batching_max_publish_delay_ms=50)
            started = time.monotonic()
            for i in range(messages):
                producer.send_async(f"m{i}".encode(), None)
            producer.flush()
            received = 0
            while received < messages:
                msg = consumer.receive(timeout_millis=10_000)
                consumer.acknowledge(msg)
                received += 1
            elapsed = time.monotonic() - started
            stats = httpx.get(f"{proc.url}/_magnetar/local/stats").json()
            client.close()
    requests = sum(stats["aws_requests"].values())
    invocations = {name: f["invocations"] for name, f in stats["lambda"].items()}
    return {"auth": auth, "messages": messages, "seconds": round(elapsed, 2),
            "aws_requests_per_1000": round(requests * 1000 / messages, 1),
            "invocations": invocations,
            "authorizer_invocations": invocations.get("magnetar-authorizer", 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--json", type=Path, default=Path("bench/results/auth-overhead.json"))
    args = parser.parse_args()
    results = [run(args.messages, auth=False), run(args.messages, auth=True)]
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
