"""Pulsar Functions through the local runtime: input → output against the raw path of the same run."""

from __future__ import annotations

from typing import Any

from .base import FORMER, Results, bold, commands, join, measured_at, n, pct, ratio, table
from .headlines import cited_command

RESULT = "functions-defaults.json"
DISPATCHER = "magnetar-function-dispatcher"


def _function_invocations(window: dict[str, Any]) -> tuple[float, float]:
    """Invocations per 1,000 messages of the dispatcher and of the function's own Lambda function."""
    per = window["lambda_invocations_per_1000_msgs"]
    own = sum(v for k, v in per.items() if k.startswith("magnetar-fn-"))
    return float(per.get(DISPATCHER, 0.0)), float(own)


def functions(results: Results) -> str:
    data: dict[str, Any] = results.load(RESULT)
    steady = []
    for batch, pair in data["steady"].items():
        fn, raw = pair["function"], pair["raw"]
        dispatcher, own = _function_invocations(fn)
        steady.append([
            f"{n(data['rate'])} msg/s, batch {batch}",
            pct(fn["e2e_ms"], "p50", "p99"), pct(raw["e2e_ms"], "p50", "p99"),
            f"{n(fn['aws_requests_per_1000_msgs'], 1)} against {n(raw['aws_requests_per_1000_msgs'], 1)}",
            f"{n(dispatcher, 1)} + {n(own, 1)}",
            f"${fn['usd_per_million_msgs']:.3f} against ${raw['usd_per_million_msgs']:.3f}",
            "yes" if fn["complete"] and fn["received"] == fn["acked"] else bold("no"),
        ])
    parts = [
        commands(cited_command(data["command"], RESULT, ".venv/bin/python ") + f"   # bench/results/{RESULT}"),
        table(["workload (1 KB messages)", "input → output p50 / p99 ms", "raw produce → consume p50 / p99 ms",
               "AWS requests / 1,000 msgs (function, raw; without fan-out)",
               "invocations / 1,000 msgs (dispatcher + function)", "$ / M msgs (function, raw)",
               "every input's output arrived"], steady),
    ]
    flat = data.get("flat_out")
    if flat:
        fn, raw = flat["function"], flat["raw"]
        parts.append(table(["flat out, batch 100", "through the function", "raw, same run", "ratio"], [
            ["messages arriving at the consumer / s", n(fn["arrived_msgs_per_s"]), n(raw["arrived_msgs_per_s"]),
             bold(ratio(flat["ratio"]))],
            ["e2e p50 / p99 ms", pct(fn["e2e_ms"], "p50", "p99"), pct(raw["e2e_ms"], "p50", "p99"), ""],
        ]))
    idle = data.get("idle")
    if idle:
        invoked = {k: v for k, v in idle["lambda_invocations"].items()
                   if k == DISPATCHER or k.startswith("magnetar-fn-")}
        billed = {k: v for k, v in idle["aws_requests"].items() if not k.endswith("(fan-out)")}
        parts.append(
            f"Idle: with {n(idle['functions_registered'])} functions registered and nothing produced for "
            f"{n(idle['seconds'])} s, the dispatcher and the functions were invoked {bold(n(sum(invoked.values())))} "
            f"times; the AWS requests of the whole cluster meanwhile: "
            + (", ".join(f"`{k}` {n(v)}" for k, v in sorted(billed.items())) or "none")
            + " (the maintenance schedule's, which runs whether or not functions exist).")
    parts.append(f"Measured at: {measured_at(data, FORMER)}.")
    return join(*parts)


BLOCKS = {"detail-functions": functions}
