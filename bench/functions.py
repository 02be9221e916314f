"""Pulsar Functions at the defaults: Pulsar's exclamation function on a fresh `magnetar local up`
(AWS limits on, enhanced fan-out, sealed reads), registered through the admin API as `magnetar
functions create` registers it.

    .venv/bin/python bench/functions.py                          # every window below
    .venv/bin/python bench/functions.py --rate 200 --duration 30 --batches 1,10,100

Windows, each on topics of its own, each starting with the cluster's local stats reset
(`DELETE /_magnetar/local/stats`) and ending, once every message arrived, with them read:

- **steady, through the function**, one per producer batch size (`--batches`): an SDK producer
  sends `--rate` messages a second of `--size` bytes to the function's input for `--duration`
  seconds (batch 1: batching off); a consumer reads the function's output. Input → output latency
  per message (the send time travels in the payload, which the function returns with a "!").
- **steady, raw**: the same producer and a consumer on one topic, no function: the same run's
  produce/consume path, for the ratio.
- **flat out**, through the function and raw: the producer as fast as it is acknowledged (batches
  of 100) for `--flat-out-duration` seconds; the rate at which messages arrive at the consumer.
- **idle**: the function registered, nothing produced, for `--idle-seconds`: the AWS requests and
  Lambda invocations the function costs while idle (the maintenance schedule runs meanwhile).

Per window: AWS requests per 1,000 messages by operation, Lambda invocations per 1,000 by function
(the broker, the journal consumer, the dispatcher, the function's own), the e2e latency p50/p99,
and the cost per million messages (`cost_of_measured_run`, every function's invocations and
durations). Writes bench/results/functions-<name>.json with the command line.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import magnetar
from magnetar.client.admin import AdminClient
from magnetar.config import FUNCTION_MEMORY_MB, LAMBDA_MEMORY_MB
from magnetar.cost import cost_of_measured_run
from magnetar.local.cluster import LocalUpProcess
from steady_load import local_stats, percentile, produce, sent_at_ms

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench/results"
EXCLAMATION = (
    "from magnetar import Function\n\n\n"
    "class ExclamationFunction(Function):\n"
    "    def process(self, input, context):\n"
    "        return input + '!'\n"
)


class Receiver(threading.Thread):
    """A consumer recording each message's delay (receive time less the send time in its payload)."""

    def __init__(self, client: magnetar.Client, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = client.subscribe(topic, "bench", initial_position=magnetar.InitialPosition.Earliest)
        self.delays: list[float] = []
        self.first_at = self.last_at = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                messages = self.consumer.batch_receive()
            except magnetar.Timeout:
                continue
            now = time.time() * 1000
            for message in messages:
                self.delays.append(now - sent_at_ms(message.data()))
            if messages:
                self.last_at = time.monotonic()
                self.first_at = self.first_at or self.last_at
                for message in messages:
                    self.consumer.acknowledge(message)

    def finish(self, expected: int, timeout_s: float = 120) -> bool:
        deadline = time.monotonic() + timeout_s
        while len(self.delays) < expected and time.monotonic() < deadline:
            time.sleep(0.2)
        self.stop.set()
        self.join(timeout=10)
        self.consumer.close()
        return len(self.delays) >= expected


def summarize(stats: dict[str, Any], messages: int, seconds: float, size: int) -> dict[str, Any]:
    """Requests and invocations per 1,000 messages, and the cost of the window per million."""
    per = 1000 / max(1, messages)
    requests = {k: v for k, v in stats["aws_requests"].items() if v}
    invocations = {name: s["invocations"] for name, s in stats["lambda"].items() if s["invocations"]}
    mean_ms = {name: s["duration_ms_total"] / s["invocations"] for name, s in stats["lambda"].items()
               if s["invocations"]}
    memory = {**FUNCTION_MEMORY_MB, **{name: LAMBDA_MEMORY_MB for name in invocations if name not in FUNCTION_MEMORY_MB}}
    cost = cost_of_measured_run(requests, max(1, messages), size, invocations, mean_ms, seconds,
                                function_memory_mb=memory)
    billed = sum(v for k, v in requests.items() if not k.endswith("(fan-out)"))
    return {
        "aws_requests_per_1000_msgs": round(billed * per, 1),
        "aws_requests_per_1000_msgs_by_operation": {k: round(v * per, 1) for k, v in sorted(requests.items())},
        "lambda_invocations_per_1000_msgs": {k: round(v * per, 1) for k, v in sorted(invocations.items())},
        "lambda_mean_ms": {k: round(v, 1) for k, v in sorted(mean_ms.items())},
        "usd_per_million_msgs": round(cost["provisioned_kinesis"], 4),
        "usd_per_million_by_component": {k: round(v, 4) for k, v in
                                         cost["by_mode"]["provisioned"]["usd_per_million_messages"].items()},
    }


def window(url: str, client: magnetar.Client, source: str, sink: str, rate: float | None, seconds: float,
           size: int, batch: int) -> dict[str, Any]:
    receiver = Receiver(client, sink)
    local_stats(url, reset=True)
    receiver.start()
    started = time.monotonic()
    options: dict[str, Any] = {"batching_enabled": False} if batch <= 1 else {"batching_max_messages": batch}
    acked, took = produce(client, source, rate, seconds, size, **options)
    complete = receiver.finish(acked)
    elapsed = time.monotonic() - started
    result: dict[str, Any] = {
        "rate": rate, "batch": batch, "seconds": round(took, 1), "acked": acked,
        "received": len(receiver.delays), "complete": complete,
        "sent_msgs_per_s": round(acked / took, 1),
        "arrived_msgs_per_s": round(len(receiver.delays) / max(0.001, receiver.last_at - started), 1),
        "e2e_ms": {"p50": percentile(receiver.delays, 0.5), "p99": percentile(receiver.delays, 0.99)},
    }
    result.update(summarize(local_stats(url), acked, elapsed, size))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=200.0, help="steady rate, msg/s")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per steady window")
    parser.add_argument("--batches", default="1,10,100", help="producer batch sizes of the steady windows")
    parser.add_argument("--size", type=int, default=1024, help="message bytes")
    parser.add_argument("--flat-out-duration", type=float, default=20.0)
    parser.add_argument("--idle-seconds", type=float, default=130.0)
    parser.add_argument("--name", default="defaults", help="results file: bench/results/functions-<name>.json")
    args = parser.parse_args()
    result: dict[str, Any] = {"command": " ".join(["python", "bench/functions.py", *sys.argv[1:]]),
                              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rate": args.rate, "size": args.size, "steady": {}, "flat_out": {}}
    with LocalUpProcess() as cluster:
        client = magnetar.Client(cluster.url)
        admin = AdminClient(cluster.url)
        suffix = uuid.uuid4().hex[:6]

        def function(tag: str) -> tuple[str, str]:
            name, source, sink = f"ex-{tag}-{suffix}", f"in-{tag}-{suffix}", f"out-{tag}-{suffix}"
            admin.create_function({"tenant": "public", "namespace": "default", "name": name,
                                   "className": "exclamation.ExclamationFunction", "inputs": [source],
                                   "output": sink, "py": "exclamation.py"}, EXCLAMATION.encode(), "exclamation.py")
            return source, sink

        for batch in (int(b) for b in args.batches.split(",") if b):
            print(f"steady {args.rate:g} msg/s, batch {batch}, through the function ...", flush=True)
            source, sink = function(f"b{batch}")
            through = window(cluster.url, client, source, sink, args.rate, args.duration, args.size, batch)
            print(f"steady {args.rate:g} msg/s, batch {batch}, raw ...", flush=True)
            raw_topic = f"raw-b{batch}-{suffix}"
            raw = window(cluster.url, client, raw_topic, raw_topic, args.rate, args.duration, args.size, batch)
            result["steady"][str(batch)] = {"function": through, "raw": raw}
            print(json.dumps(result["steady"][str(batch)], indent=1), flush=True)
        if args.flat_out_duration > 0:
            print("flat out, through the function ...", flush=True)
            source, sink = function("flat")
            through = window(cluster.url, client, source, sink, None, args.flat_out_duration, args.size, 100)
            print("flat out, raw ...", flush=True)
            raw_topic = f"raw-flat-{suffix}"
            raw = window(cluster.url, client, raw_topic, raw_topic, None, args.flat_out_duration, args.size, 100)
            result["flat_out"] = {"function": through, "raw": raw,
                                  "ratio": round(through["arrived_msgs_per_s"] / max(0.001, raw["arrived_msgs_per_s"]), 2)}
            print(json.dumps(result["flat_out"], indent=1), flush=True)
        if args.idle_seconds > 0:
            print(f"idle for {args.idle_seconds:g} s ...", flush=True)
            function("idle")
            local_stats(cluster.url, reset=True)
            time.sleep(args.idle_seconds)
            stats = local_stats(cluster.url)
            result["idle"] = {
                "seconds": args.idle_seconds,
                "aws_requests": {k: v for k, v in stats["aws_requests"].items() if v},
                "lambda_invocations": {name: s["invocations"] for name, s in stats["lambda"].items()
                                       if s["invocations"]},
                "functions_registered": len(admin.functions("public", "default")),
            }
            print(json.dumps(result["idle"], indent=1), flush=True)
        client.close()
        admin.close()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"functions-{args.name}.json").write_text(json.dumps(result, indent=2))
    print(f"wrote bench/results/functions-{args.name}.json")


if __name__ == "__main__":
    main()
