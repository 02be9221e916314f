"""Push (Pulsar's WebSocket API) against long-poll consumers on the local stack.

    .venv/bin/python bench/push_vs_poll.py --rate 20 --duration 30 --idle 60

Starts its own `magnetar local up` (moto, the HTTP + WebSocket API, the journal consumer polled
every second as the event-source mapping does on AWS), then:

1. **latency**: one producer sends `--rate` messages per second for `--duration` seconds, each
   carrying its send time; a long-poll consumer (the SDK) and a push consumer (a plain WebSocket
   client, Pulsar's consumer path) on two subscriptions of the same topic record the delivery
   time. Reports p50/p90/p99/max of send -> delivery for both.
2. **idle cost**: with nothing published, one idle consumer of each kind stays attached for
   `--idle` seconds, one after the other (an SDK consumer long-polling with delivery "poll"; one
   with the default delivery, once it waits on its idle watch; a WebSocket push consumer); the local runtime's counters (AWS requests by
   operation, Lambda invocations and billed duration, WebSocket messages) give what each costs
   per idle consumer-hour, priced with `magnetar.cost.PRICES` (us-east-1 list prices).
3. **the raw limit**, in the same run: the emulator's own Kinesis PutRecord rate, to compare
   machines (absolute times on shared machines drift; ratios do not).

Writes bench/results/push-vs-poll.json.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import statistics
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

import magnetar
from magnetar.client import exceptions
from magnetar.client.idle_watch import CONNECT_POLL_MS, IDLE_S
from magnetar.core.dispatch import MAX_WAIT_MS
from magnetar.cost import PRICES
from magnetar.local.cluster import LocalUpProcess
from scale_topics import is_mapping_read  # the mapping's reads of the journal: one rule for the benches

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench/results/push-vs-poll.json"
LAMBDA_MEMORY_GB = 1.0  # the stack's broker and WebSocket functions (infra/magnetar_stack.py)


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"n": len(values), "p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "max": round(ordered[-1], 1),
            "mean": round(statistics.fmean(values), 1)}


def local_stats(url: str) -> dict[str, Any]:
    result: dict[str, Any] = httpx.get(f"{url}/_magnetar/local/stats", timeout=30).json()
    return result


def reset_stats(url: str) -> None:
    httpx.delete(f"{url}/_magnetar/local/stats", timeout=30)


def ws_path(topic: str) -> str:
    return topic.replace("://", "/", 1)


# --- 1. latency --------------------------------------------------------------------------------------
def latency(url: str, rate: float, duration: float) -> dict[str, Any]:
    topic = f"persistent://public/default/latency-{uuid.uuid4().hex[:8]}"
    client = magnetar.Client(url)
    poll = client.subscribe(topic, "poll", consumer_type=magnetar.ConsumerType.Shared)
    poll_ms: list[float] = []
    push_ms: list[float] = []
    done = threading.Event()

    def poll_loop() -> None:
        while not done.is_set():
            try:
                msg = poll.receive(timeout_millis=1000)
            except exceptions.Timeout:
                continue
            poll_ms.append(time.time() * 1000 - float(msg.data().decode()))
            poll.acknowledge(msg)

    ws_url = url.replace("http://", "ws://") + f"/ws/v2/consumer/{ws_path(topic)}/push?subscriptionType=Shared"
    stack = contextlib.ExitStack()
    ws = stack.enter_context(connect(ws_url, open_timeout=10))

    def push_loop() -> None:
        while not done.is_set():
            try:
                frame = json.loads(ws.recv(timeout=1))
            except TimeoutError:
                continue
            except Exception:
                return
            sent = float(base64.b64decode(frame["payload"]).decode())
            push_ms.append(time.time() * 1000 - sent)
            ws.send(json.dumps({"messageId": frame["messageId"]}))

    threads = [threading.Thread(target=poll_loop, daemon=True), threading.Thread(target=push_loop, daemon=True)]
    for t in threads:
        t.start()
    time.sleep(2)  # both attached
    producer = client.create_producer(topic, batching_enabled=False)
    interval = 1 / rate
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < duration:
        producer.send(str(time.time() * 1000).encode())
        sent += 1
        time.sleep(max(0.0, started + sent * interval - time.monotonic()))
    deadline = time.monotonic() + 15
    while (len(poll_ms) < sent or len(push_ms) < sent) and time.monotonic() < deadline:
        time.sleep(0.2)
    done.set()
    for t in threads:
        t.join(timeout=5)
    stack.close()
    client.close()
    return {"sent": sent, "long_poll_ms": percentiles(poll_ms), "push_ms": percentiles(push_ms)}


# --- 2. idle cost -------------------------------------------------------------------------------------
def priced(stats: dict[str, Any], seconds: float, connection_minutes: float) -> dict[str, Any]:
    """AWS requests and modeled cost of one idle consumer over `seconds`, scaled to an hour."""
    scale = 3600 / seconds
    requests: dict[str, int] = dict(stats["aws_requests"])  # "service.Operation": count
    # The event-source mapping's own polling of the journal (GetRecords once a second per shard) is
    # AWS's poller: it runs whether or not anyone consumes, and Kinesis does not bill it per request.
    # When nothing is published, no consumer reads the journal, so every GetRecords here is the ESM's.
    esm = {k: requests.pop(k) for k in list(requests) if is_mapping_read(k)}
    lambdas = {name: f for name, f in stats["lambda"].items() if "journal-consumer" not in name}
    invocations = sum(f["invocations"] for f in lambdas.values())
    gb_seconds = sum(f["duration_ms_total"] for f in lambdas.values()) / 1000 * LAMBDA_MEMORY_GB
    ddb_reads = sum(n for k, n in requests.items() if k.startswith("dynamodb.") and k.split(".")[1] in
                    ("GetItem", "BatchGetItem", "Query"))
    ddb_writes = sum(n for k, n in requests.items() if k.startswith("dynamodb.")) - ddb_reads
    # API Gateway meters WebSocket messages both ways: pushes (PostToConnection) and client frames
    # (each one a $default invocation of the WebSocket function)
    ws_messages = requests.get("apigatewaymanagementapi.PostToConnection", 0) + sum(
        f["invocations"] for name, f in lambdas.items() if "websocket" in name)
    http_requests = sum(f["invocations"] for name, f in lambdas.items() if "broker" in name)
    cost = {
        "api_gateway_http": PRICES["apigw.http.request"].cost(http_requests * scale, tiered=False),
        "api_gateway_ws_messages": PRICES["apigw.websocket.message"].cost(ws_messages * scale, tiered=False),
        "api_gateway_ws_connection": PRICES["apigw.websocket.connection_minute"].cost(connection_minutes * scale,
                                                                                    tiered=False),
        "lambda_requests": PRICES["lambda.request"].cost(invocations * scale, tiered=False),
        "lambda_duration": PRICES["lambda.arm64.gb_second"].cost(gb_seconds * scale, tiered=False),
        "dynamodb_reads": PRICES["dynamodb.ondemand.rru"].cost(ddb_reads * scale, tiered=False),
        "dynamodb_writes": PRICES["dynamodb.ondemand.wru"].cost(ddb_writes * scale, tiered=False),
    }
    return {
        "aws_requests_per_hour": round(sum(requests.values()) * scale),
        "event_source_mapping_polls_per_hour_not_counted": round(sum(esm.values()) * scale),
        "by_operation_per_hour": {k: round(n * scale) for k, n in sorted(requests.items())},
        "lambda_invocations_per_hour": round(invocations * scale),
        "lambda_gb_seconds_per_hour": round(gb_seconds * scale, 1),
        "usd_per_idle_consumer_hour": round(sum(cost.values()), 6),
        "usd_by_component": {k: round(v, 6) for k, v in cost.items()},
    }


def idle_cost(url: str, seconds: float) -> dict[str, Any]:
    topic = f"persistent://public/default/idle-{uuid.uuid4().hex[:8]}"
    client = magnetar.Client(url)
    client.create_producer(topic).close()  # the topic exists
    out: dict[str, Any] = {}

    def blocked_in_receive(delivery: str, settle_s: float) -> dict[str, Any]:
        """An application blocked in receive() with no timeout: with delivery "poll" the SDK
        long-polls with the longest wait the broker allows (20 s), the cheapest way to wait by
        polling; with "auto" (the default) it does that until it has been idle for IDLE_S, then
        waits on its idle watch (a WebSocket) and looks every LOOK_S. Measured once settled."""
        consumer = client.subscribe(topic, f"idle-{delivery}", consumer_type=magnetar.ConsumerType.Shared,
                                    delivery=delivery)

        def wait_for_work() -> None:
            with contextlib.suppress(exceptions.PulsarException):
                consumer.receive()

        threading.Thread(target=wait_for_work, daemon=True).start()
        time.sleep(settle_s)
        reset_stats(url)
        time.sleep(seconds)
        watch = getattr(consumer, "_watch", None)
        watched = watch is not None and bool(watch.connected)
        priced_run = priced(local_stats(url), seconds, seconds / 60 if watched else 0)
        consumer.close()
        return {**priced_run, "idle_watch_connected": watched, "settled_s": settle_s}

    out["long_poll"] = blocked_in_receive("poll", 3)
    out["idle_watch"] = blocked_in_receive("auto", IDLE_S + CONNECT_POLL_MS / 1000 + MAX_WAIT_MS / 1000 + 3)

    # push: a WebSocket consumer, connected and waiting
    ws_url = url.replace("http://", "ws://") + f"/ws/v2/consumer/{ws_path(topic)}/idle-push?subscriptionType=Shared"
    with connect(ws_url, open_timeout=10):
        time.sleep(3)
        reset_stats(url)
        time.sleep(seconds)
        out["push"] = priced(local_stats(url), seconds, seconds / 60)
    client.close()
    return out


# --- 3. the raw limit ------------------------------------------------------------------------------------
def raw_kinesis_rate(aws_endpoint: str, seconds: float = 5) -> float:
    import boto3

    kinesis = boto3.client("kinesis", endpoint_url=aws_endpoint, region_name="us-east-1",
                           aws_access_key_id="test", aws_secret_access_key="test")
    stream = kinesis.list_streams()["StreamNames"][0]
    started, n = time.monotonic(), 0
    while time.monotonic() - started < seconds:
        kinesis.put_record(StreamName=stream, Data=b"x" * 100, PartitionKey=f"raw-{n % 16}")
        n += 1
    return n / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=20, help="messages per second in the latency run")
    parser.add_argument("--duration", type=float, default=30, help="seconds of the latency run")
    parser.add_argument("--idle", type=float, default=60, help="seconds each idle consumer is measured")
    args = parser.parse_args()
    with LocalUpProcess(maintenance_interval_s=0) as cluster:  # the schedule's cost is per cluster, not per consumer
        result = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": f"bench/push_vs_poll.py --rate {args.rate} --duration {args.duration} --idle {args.idle}",
            "latency": latency(cluster.url, args.rate, args.duration),
            "idle": idle_cost(cluster.url, args.idle),
            "raw_kinesis_put_record_per_s": round(raw_kinesis_rate(cluster.aws_endpoint), 1),
        }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
