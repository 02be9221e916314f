"""Geo-replication at the defaults: a local instance of two clusters (east, west; AWS limits on).

    .venv/bin/python bench/replication.py                       # steady 100 and 300 msg/s, flat out
    .venv/bin/python bench/replication.py --aws-latency --rates 100 --no-flat-out

Per steady rate, one SDK producer in east publishes for `--duration` seconds to a topic of a
namespace replicated to west, with a consumer in east (the single-cluster end-to-end latency,
measured in the same run) and one in west (the replication delay: published in east, received
in west); then the same workload on a topic of a namespace that is not replicated (the
single-cluster baseline of the AWS requests). Each window starts with the clusters' local stats
reset (`DELETE /_magnetar/local/stats`) and ends with them read: the AWS requests each cluster's
functions made, and the bytes of the replicator's requests west received (`replication_in`:
their bodies, counted by west's API Gateway emulation). Flat out: east's producer as fast as it
is acknowledged, with and without replication, and how fast the copies arrive in west.

With `--aws-latency` the clusters run with modeled AWS latency, and each replicator request
waits the inter-region round trip (`local up --inter-region-rtt-ms`, 75 ms by default then).
Writes bench/results/replication-<name>.json with the command line.
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
from magnetar.local.cluster import free_port, free_run
from magnetar.local.fidelity import AwsFidelity
from magnetar.local.instance import LocalInstance
from steady_load import local_stats as stats
from steady_load import percentile, produce, sent_at_ms

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench/results"
PAYLOAD_BYTES = 256


def namespace(admin: AdminClient, name: str, clusters: list[str]) -> str:
    admin.create_namespace(name)
    admin.set_namespace_replication_clusters(name, clusters)
    return name


class Receiver(threading.Thread):
    """A consumer recording each message's delay (receive time less the send time in its payload)."""

    def __init__(self, client: magnetar.Client, topic: str, subscription: str) -> None:
        super().__init__(daemon=True)
        self.consumer = client.subscribe(topic, subscription, initial_position=magnetar.InitialPosition.Earliest,
                                         receiver_queue_size=1000)
        self.delays: list[float] = []
        self.last_at = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                message = self.consumer.receive(timeout_millis=500)
            except magnetar.Timeout:
                continue
            now = time.time() * 1000
            self.delays.append(now - sent_at_ms(message.data()))
            self.last_at = time.monotonic()
            self.consumer.acknowledge(message)

    def finish(self, expected: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.delays) < expected and time.monotonic() < deadline:
            time.sleep(0.2)
        self.stop.set()
        self.join(timeout=5)
        self.consumer.close()


def window(urls: dict[str, str], clients: dict[str, magnetar.Client], topic: str, rate: float | None,
           seconds: float, replicated: bool) -> dict[str, Any]:
    receivers = {"east": Receiver(clients["east"], topic, "bench")}
    if replicated:
        receivers["west"] = Receiver(clients["west"], topic, "bench")
    for url in urls.values():
        stats(url, reset=True)
    for r in receivers.values():
        r.start()
    started = time.monotonic()
    acked, took = produce(clients["east"], topic, rate, seconds, PAYLOAD_BYTES)
    for r in receivers.values():
        r.finish(acked)
    after = {name: stats(url) for name, url in urls.items()}
    requests = {name: sum(s["aws_requests"].values()) for name, s in after.items()}
    inbound = after["west"].get("replication_in", {}).get("east", {"requests": 0, "body_bytes": 0})
    result: dict[str, Any] = {
        "rate": rate, "seconds": round(took, 1), "acked": acked, "msgs_per_s": round(acked / took, 1),
        "e2e_east_ms": {"p50": percentile(receivers["east"].delays, 0.5),
                        "p99": percentile(receivers["east"].delays, 0.99), "received": len(receivers["east"].delays)},
        "aws_requests": requests,
        "aws_requests_per_1000_msgs": {name: round(n * 1000 / max(1, acked), 1) for name, n in requests.items()},
    }
    if replicated:
        west = receivers["west"]
        result["replication_delay_west_ms"] = {"p50": percentile(west.delays, 0.5), "p99": percentile(west.delays, 0.99),
                                               "received": len(west.delays)}
        result["replicated_msgs_per_s"] = round(len(west.delays) / max(0.001, west.last_at - started), 1)
        result["inter_region"] = {"requests": inbound["requests"], "body_bytes": inbound["body_bytes"],
                                  "bytes_per_1000_msgs": round(inbound["body_bytes"] * 1000 / max(1, len(west.delays))),
                                  "requests_per_1000_msgs": round(inbound["requests"] * 1000 / max(1, len(west.delays)), 1)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="100,300", help="steady rates, msg/s (comma list)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per steady window")
    parser.add_argument("--flat-out-duration", type=float, default=20.0)
    parser.add_argument("--no-flat-out", action="store_true")
    parser.add_argument("--aws-latency", action="store_true", help="modeled AWS latency and the inter-region RTT")
    parser.add_argument("--name", default=None, help="results file: bench/results/replication-<name>.json")
    args = parser.parse_args()
    fidelity = AwsFidelity(limits=True, latency=args.aws_latency)
    instance = LocalInstance(["east", "west"], port=free_run(2), pulsar_port=0, aws_port=free_port(),
                             fidelity=fidelity, cluster_args=["--aws-limits", "on",
                                                              *(["--aws-latency"] if args.aws_latency else [])])
    result: dict[str, Any] = {"command": " ".join(["python", "bench/replication.py", *sys.argv[1:]]),
                              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "aws_latency": args.aws_latency, "inter_region_rtt_ms": 75.0 if args.aws_latency else 0.0,
                              "payload_bytes": PAYLOAD_BYTES, "steady": {}, "flat_out": None}
    with instance:
        urls = {p.name: p.url for p in instance.processes}
        clients = {name: magnetar.Client(url) for name, url in urls.items()}
        admin = AdminClient(urls["east"])
        suffix = uuid.uuid4().hex[:6]
        replicated = namespace(admin, f"public/repl-{suffix}", ["east", "west"])
        local = namespace(admin, f"public/local-{suffix}", ["east"])
        time.sleep(2)  # west sees the namespace's policies
        for rate in (float(r) for r in args.rates.split(",") if r):
            print(f"steady {rate:g} msg/s, replicated ...", flush=True)
            with_repl = window(urls, clients, f"persistent://{replicated}/steady-{rate:g}", rate, args.duration, True)
            print(f"steady {rate:g} msg/s, single cluster ...", flush=True)
            single = window(urls, clients, f"persistent://{local}/steady-{rate:g}", rate, args.duration, False)
            result["steady"][f"{rate:g}"] = {"replicated": with_repl, "single_cluster": single}
            print(json.dumps(result["steady"][f"{rate:g}"], indent=1), flush=True)
        if not args.no_flat_out:
            print("flat out ...", flush=True)
            with_repl = window(urls, clients, f"persistent://{replicated}/flat", None, args.flat_out_duration, True)
            single = window(urls, clients, f"persistent://{local}/flat", None, args.flat_out_duration, False)
            result["flat_out"] = {"replicated": with_repl, "single_cluster": single,
                                  "producer_ratio": round(with_repl["msgs_per_s"] / single["msgs_per_s"], 2),
                                  "replicated_arrival_ratio": round(with_repl["replicated_msgs_per_s"]
                                                                    / single["msgs_per_s"], 2)}
            print(json.dumps(result["flat_out"], indent=1), flush=True)
        for client in clients.values():
            client.close()
        admin.close()
    name = args.name or ("aws-latency" if args.aws_latency else "defaults")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"replication-{name}.json").write_text(json.dumps(result, indent=2))
    print(f"wrote bench/results/replication-{name}.json")


if __name__ == "__main__":
    main()
