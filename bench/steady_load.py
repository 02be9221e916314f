"""What the benchmarks that drive a local cluster with the SDK share: a paced producer whose
messages carry their send time, latency percentiles, and the local runtime's stats."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import httpx

import magnetar


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def payload(size: int) -> bytes:
    """`size` bytes that start with the send time (ms) and a `|`: a receiver's delay is its own
    clock less that."""
    head = f"{time.time() * 1000:.3f}|".encode()
    return head + b"x" * max(0, size - len(head))


def sent_at_ms(data: bytes) -> float:
    return float(bytes(data).split(b"|", 1)[0])


def produce(client: magnetar.Client, topic: str, rate: float | None, seconds: float, size: int,
            **producer_options: Any) -> tuple[int, float]:
    """Paced at `rate` (None: as fast as acknowledged); the acknowledged sends and the seconds taken."""
    producer = client.create_producer(topic, **{"producer_name": f"bench-{uuid.uuid4().hex[:6]}",
                                                **producer_options})
    acked = [0]
    lock = threading.Lock()

    def done(result: magnetar.Result, _id: Any) -> None:
        if result == magnetar.Result.Ok:
            with lock:
                acked[0] += 1

    start = time.monotonic()
    i = 0
    while time.monotonic() - start < seconds:
        producer.send_async(payload(size), done)
        i += 1
        if rate:
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
    producer.flush()
    took = time.monotonic() - start
    producer.close()
    return acked[0], took


def local_stats(url: str, reset: bool = False) -> dict[str, Any]:
    """The local runtime's counts (`DELETE`: read, then start again from zero)."""
    response = httpx.request("DELETE" if reset else "GET", f"{url}/_magnetar/local/stats", timeout=30)
    result: dict[str, Any] = response.json()
    return result
