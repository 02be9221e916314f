"""Details of the doors and the checks: the binary protocol request by request, verify's crash and
delay points, geo-replication, and the HTTP API's fuzzing."""

from __future__ import annotations

from typing import Any

from .base import (
    FORMER,
    TAIL_READS,
    UNPACED,
    Results,
    bold,
    commands,
    join,
    measured_at,
    n,
    pct,
    ratio,
    runs,
    table,
)
from .headlines import cited_command, verify_rows


def protocol_operations(results: Results) -> str:
    r: dict[str, Any] = results.load("perf-protocol-pulsar.json")
    sdk = r["sdk_baseline"]
    ops = sorted(set(r["aws_requests"]) | set(sdk["aws_requests"]))
    rows = [[f"`{op}`", n(sdk["aws_requests"].get(op, 0) * 1000 / sdk["messages"], 1),
             n(r["aws_requests"].get(op, 0) * 1000 / r["messages"], 1)] for op in ops]
    rows.append([bold("total"), bold(n(sdk["aws_requests_total"] * 1000 / sdk["messages"], 1)),
                 bold(n(r["aws_requests_per_1000_msgs"], 1))])
    return join(table(["per 1,000 messages", "SDK", "proxy"], rows), f"Measured at: {measured_at(r, UNPACED)}.")


def protocol_idle(results: Results) -> str:
    r: dict[str, Any] = results.load("perf-protocol-pulsar-idle.json")
    sdk = r["sdk_baseline"]
    rows = [[f"{n(r['messages'])} messages at {r['config']['rate']:g} msg/s", pct(sdk["e2e_latency_ms"], "p50", "p99"),
             pct(r["e2e_latency_ms"], "p50", "p99"),
             f"{n(sdk['aws_requests'].get('dynamodb.BatchGetItem', 0))} / {n(r['aws_requests'].get('dynamodb.BatchGetItem', 0))}",
             measured_at(r, UNPACED)]]
    return join(commands("magnetar perf e2e --protocol pulsar --rate 0.5 --duration 30 --no-limits "
                         "--json bench/results/perf-protocol-pulsar-idle.json"),
                table(["run", "SDK e2e p50 / p99 ms", "proxy e2e p50 / p99 ms", "cursor reads (BatchGetItem) SDK / proxy",
                       "measured at"], rows))


def protocol_burst(results: Results) -> str:
    runs: list[dict[str, Any]] = results.load("pulsar-protocol-requests.json")
    by_door = {r["door"]: r for r in runs}
    sdk, proxy = by_door["sdk"], by_door["pulsar"]
    ops = sorted(set(sdk["aws_requests"]) | set(proxy["aws_requests"]))
    rows = [[f"`{op}`", n(sdk["aws_requests"].get(op, 0)), n(proxy["aws_requests"].get(op, 0))] for op in ops]
    rows.append([bold("per 1,000 messages"), bold(n(sdk["aws_requests_per_1000_msgs"], 1)),
                 bold(n(proxy["aws_requests_per_1000_msgs"], 1))])
    rows.append(["seconds", n(sdk["seconds"], 2), n(proxy["seconds"], 2)])
    return join(commands(".venv/bin/python bench/pulsar_protocol_requests.py --messages 5000 "
                         "--json bench/results/pulsar-protocol-requests.json"),
                table([f"a burst of {n(sdk['messages'])} messages: requests", "SDK", "proxy"], rows),
                f"Proxy against SDK: {ratio(proxy['aws_requests_per_1000_msgs'] / sdk['aws_requests_per_1000_msgs'])}. "
                f"Measured at: {UNPACED}.")


def verify_points(results: Results) -> str:
    rows = []
    for _name, _command, data, _label in verify_rows(results):
        if "delay_points_fired" not in data:
            continue
        crash = ", ".join(f"`{k}` {v}" for k, v in sorted(data["crash_points_fired"].items()))
        delay = ", ".join(f"`{k}` {v}" for k, v in sorted(data["delay_points_fired"].items()))
        rows.append([f"{runs(data['runs'])}, seed {data['seed']}", crash, delay, n(data.get("trimmed_segments")),
                     n(data.get("stored_twice_after_retry"))])
    return table(["run", "crash points fired", "delay points fired", "segments trimmed under the readers",
                  "stored twice after a retried send without deduplication (allowed)"], rows)


def verify_geo(results: Results) -> str:
    rows = []
    for _name, _command, data, _label in verify_rows(results):
        if "clusters" not in data:
            continue
        points = ", ".join(f"`{k}` {v}" for k, v in sorted(data["crash_points_fired"].items()))
        rows.append([f"{data['clusters']} clusters, {runs(data['runs'])}", f"{n(data['ok_runs'])} of {n(data['runs'])}",
                     n(data["acked"]), f"{data['lost']} / {data['duplicated']} / {data['order_violations']} / "
                     f"{data['replicated_from_violations']} / {data['replicated_subscription_skips']}", points,
                     n(data["seconds"])])
    return table(["instance", "clean runs", "sends acknowledged (each checked in every cluster)",
                  "lost / duplicated / order / wrong `replicated_from` / replicated-subscription skips",
                  "crash points fired", "seconds"], rows)


def replication(results: Results) -> str:
    data: dict[str, Any] = results.load("replication-defaults.json")
    latency: dict[str, Any] = results.load("replication-aws-latency.json")
    rows = []
    for rate, pair in data["steady"].items():
        rep, one = pair["replicated"], pair["single_cluster"]
        delay, e2e = rep["replication_delay_west_ms"], one["e2e_east_ms"]
        rows.append([f"{rate} msg/s, {n(rep['seconds'])} s: replication delay p50 / p99 ms (west)",
                     pct(delay, "p50", "p99"), f"e2e in east {pct(e2e, 'p50', 'p99')}",
                     f"{ratio(delay['p50'] / e2e['p50'])} / {ratio(delay['p99'] / e2e['p99'])}"])
        rows.append([f"{rate} msg/s: e2e p50 / p99 ms in east", pct(rep["e2e_east_ms"], "p50", "p99"), pct(e2e, "p50", "p99"),
                     ""])
        both, alone = rep["aws_requests_per_1000_msgs"], one["aws_requests_per_1000_msgs"]
        rows.append([f"{rate} msg/s: AWS requests / 1,000 msgs, both clusters",
                     f"{n(both['east'] + both['west'])} (east {n(both['east'])}, west {n(both['west'])})",
                     f"{n(alone['east'] + alone['west'])} (east {n(alone['east'])}, west {n(alone['west'])} idle)",
                     ratio((both["east"] + both["west"]) / (alone["east"] + alone["west"]))])
        inter = rep["inter_region"]
        rows.append([f"{rate} msg/s: inter-region bytes (requests) / 1,000 msgs",
                     f"{n(inter['bytes_per_1000_msgs'] / 1000)} KB ({n(inter['requests_per_1000_msgs'], 1)})", "0", ""])
    flat = data.get("flat_out")
    if flat:
        rep, one = flat["replicated"], flat["single_cluster"]
        rows.append(["flat out: east's producer msg/s", n(rep["msgs_per_s"]), n(one["msgs_per_s"]),
                     ratio(flat["producer_ratio"])])
        rows.append(["flat out: copies arriving in west msg/s", n(rep["replicated_msgs_per_s"]),
                     f"{n(one['msgs_per_s'])} (east's producer)", ratio(flat["replicated_arrival_ratio"])])
        both, alone = rep["aws_requests_per_1000_msgs"], one["aws_requests_per_1000_msgs"]
        rows.append(["flat out: AWS requests / 1,000 msgs, both clusters", n(both["east"] + both["west"], 1),
                     n(alone["east"] + alone["west"], 1), ratio((both["east"] + both["west"]) / (alone["east"] + alone["west"]))])
    lat_rows = []
    for rate, pair in latency["steady"].items():
        rep, one = pair["replicated"], pair["single_cluster"]
        delay, e2e = rep["replication_delay_west_ms"], one["e2e_east_ms"]
        both, alone = rep["aws_requests_per_1000_msgs"], one["aws_requests_per_1000_msgs"]
        lat_rows.append([f"{rate} msg/s, modeled AWS latency, {latency['inter_region_rtt_ms']:g} ms between the regions",
                         pct(delay, "p50", "p99"), pct(e2e, "p50", "p99"),
                         f"{ratio(delay['p50'] / e2e['p50'])} / {ratio(delay['p99'] / e2e['p99'])}",
                         pct(rep["e2e_east_ms"], "p50", "p99"),
                         f"{n(both['east'] + both['west'])} against {n(alone['east'] + alone['west'])}",
                         f"{n(rep['inter_region']['bytes_per_1000_msgs'] / 1000)} KB "
                         f"({n(rep['inter_region']['requests_per_1000_msgs'], 1)})"])
    return join(
        commands(cited_command(data["command"], "replication-defaults.json", ".venv/bin/python ")
                 + "   # bench/results/replication-defaults.json",
                 cited_command(latency["command"], "replication-aws-latency.json", ".venv/bin/python ")
                 + "   # bench/results/replication-aws-latency.json"),
        table(["figure", "replicated (east → west)", "single cluster, same run", "ratio"], rows),
        table(["run", "replication delay p50 / p99 ms", "single-cluster e2e p50 / p99 ms", "ratio",
               "replicated topic's e2e in east p50 / p99 ms", "AWS requests / 1,000 msgs, both clusters",
               "inter-region bytes (requests) / 1,000 msgs"], lat_rows),
        f"Measured at: {_replication_measured_at(data, latency)}.")


def _replication_measured_at(*runs: dict[str, Any]) -> str:
    """The replication runs' label: each run's own, once when they agree."""
    labels = list(dict.fromkeys(measured_at(run, FORMER) for run in runs))
    return "; ".join(labels)


def fuzz(results: Results) -> str:
    data: dict[str, Any] = results.load("fuzz-api.json")
    rows = [[n(data["operations"]), n(data["test_cases"]), n(data["requests"]), bold(n(data["failures"])),
             bold(n(data["errors"])), f"{n(data['duration_s'])} s", TAIL_READS]]
    return join(commands(f".venv/bin/python bench/fuzz_api.py --max-examples {data['max_examples']} --seed {data['seed']}"
                         "     # starts its own `magnetar local up`"),
                table(["operations", "test cases", "requests", "failures", "errors", "duration", "measured at"], rows))


def client_suite(results: Results) -> str:
    r: dict[str, Any] = results.load("pulsar-client-suite.json")
    names = {"sdk": "Magnetar SDK as `pulsar` (HTTP)", "proxy": "pulsar-client through the proxy (`pulsar://`)"}
    by_door = {run["door"]: run for run in r["runs"]}
    summary = [[names[run["door"]], bold(f"{run['passed']} / {run['tests']}"), n(run["failed"]), n(run["error"]),
                n(run["not run"]), n(run["seconds"])] for run in r["runs"]]
    tests = sorted({t for run in r["runs"] for t, o in run["outcomes"].items() if o["outcome"] != "passed"})

    def cell(door: str, test: str) -> str:
        o = by_door[door]["outcomes"].get(test, {"outcome": "—", "detail": ""}) if door in by_door else None
        if o is None or o["outcome"] == "passed":
            return "passed" if o else "—"
        detail = o["detail"].replace("|", "\\|").replace("\n", " ")
        return f"{o['outcome']}: {detail[:110]}{'…' if len(detail) > 110 else ''}" if detail else o["outcome"]

    rows = [[f"`{t}`", cell("sdk", t), cell("proxy", t)] for t in tests]
    return join(commands(".venv/bin/python bench/pulsar_client_suite.py --suite <pulsar-client-python>/tests "
                         "--json bench/results/pulsar-client-suite.json"),
                table(["door", "passed", "failed", "errors", "not run", "seconds"], summary),
                f"pulsar-client {r['pulsar_client']}; suite files (sha-256 prefix): "
                + ", ".join(f"`{f}` {h}" for f, h in r["suite"].items()) + ".",
                table(["test not passed in a door", "SDK", "proxy"], rows))


BLOCKS = {
    "detail-protocol-operations": protocol_operations,
    "detail-protocol-idle": protocol_idle,
    "detail-protocol-burst": protocol_burst,
    "detail-verify-points": verify_points,
    "detail-verify-geo": verify_geo,
    "detail-replication": replication,
    "detail-fuzz": fuzz,
    "detail-client-suite": client_suite,
}
