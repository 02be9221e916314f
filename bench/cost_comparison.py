"""Magnetar at the defaults against SQS, Kinesis used directly, MSK Serverless and Pulsar on EC2,
for three workloads (docs/cost-model.md, "Three workloads"):

    .venv/bin/python bench/cost_comparison.py

- steady: 300 msg/s of 1 KB, one subscription, 24 h retention, all month;
- spiky: 100 msg/s with bursts of 1,000 msg/s (10x) a tenth of the time (mean 190 msg/s);
- idle topics: 10,000 topics, each one message an hour (2.8 msg/s in all), each with one consumer.

Magnetar's figures are **measured** (`magnetar perf` at the defaults, bench/results/message-cost-*.json
from bench/message_cost.py: steady from `steady-300`, spiky from `steady-100` and `flat-out` weighted
by time), except the idle topics', priced request by request (`lone_message_usd`: a lone message is
published, sealed alone and pushed; an idle topic makes no request); every other row comes from the
cost model (`magnetar.cost.compare`, the same price table). Pay-per-use rows of the spiky workload
are weighted by time too; rows that buy capacity by the hour (Kinesis provisioned,
Pulsar's instances) pay for the bursts all month; MSK Serverless pays its cluster and partition
hours all month either way. Writes
bench/results/cost-comparison.json and prints the table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from magnetar.cost import compare
from magnetar.cost.prices import HOURS_PER_MONTH, SECONDS_PER_HOUR, _cost
from magnetar.cost.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench/results"
MONTH_S = HOURS_PER_MONTH * SECONDS_PER_HOUR
ROWS = ("SQS standard, batched", "SQS standard, unbatched", "Kinesis Data Streams directly, provisioned",
        "Kinesis Data Streams directly, on-demand", "MSK Serverless", "Pulsar on EC2")
CAPACITY = {"Kinesis Data Streams directly, provisioned", "Pulsar on EC2"}  # sized for the peak


def measured(name: str) -> dict[str, Any]:
    run: dict[str, Any] = json.loads((RESULTS / f"message-cost-{name}.json").read_text())
    return run


def usd_per_million(run: dict[str, Any]) -> float:
    return float(run["cost_usd_per_million_msgs"]["provisioned_kinesis"])


def model(rate: float, batch: int, partitions: int = 1) -> dict[str, float]:
    """The alternatives' USD per month at a steady `rate`."""
    w = Workload(name="w", message_bytes=1024, batch_size=batch, produce_rate_msgs_per_s=rate,
                 topic_partitions=partitions)
    c = compare(w)
    return {name: c.row(name).monthly_usd for name in ROWS}


def lone_message_usd() -> float:
    """What one message on a quiet topic costs, request by request (docs/architecture.md, "Cost per
    operation"): its publish, its seal alone, its push to one WebSocket consumer and the ack frame."""
    gb_s = "lambda.arm64.gb_second"
    publish = (_cost("apigw.http.request", 1, False) + _cost("lambda.request", 1, False)
               + _cost(gb_s, 0.030 * 1.0, False) + _cost("dynamodb.ondemand.wru", 1, False)
               + _cost("kinesis.provisioned.put_payload_unit", 1, False))
    seal = (_cost("lambda.request", 1, False) + _cost(gb_s, 0.100 * 0.5, False)
            + _cost("dynamodb.ondemand.rru", 1, False)  # seal state
            + _cost("s3.put_request", 1, False) + _cost("dynamodb.ondemand.wru", 4, False)  # segment, commit
            + _cost("dynamodb.ondemand.rru", 3, False))  # connections index, connections, the view
    push = (_cost("apigw.websocket.message", 1, False) + _cost("dynamodb.ondemand.wru", 2, False))  # frame, cursor
    ack = (_cost("apigw.websocket.message", 1, False) + _cost("lambda.request", 1, False)
           + _cost(gb_s, 0.030 * 1.0, False) + _cost("dynamodb.ondemand.rru", 3, False)
           + _cost("dynamodb.ondemand.wru", 2, False))
    return publish + seal + push + ack


def main() -> None:
    out: dict[str, Any] = {}
    # steady: 300 msg/s all month
    steady = measured("steady-300")
    msgs = 300 * MONTH_S
    batch = max(1, round(steady["cost_usd_per_million_msgs"]["assumptions"]["messages_per_entry"]))
    rows = {"Magnetar (measured, provisioned Kinesis)": usd_per_million(steady) * msgs / 1e6} | model(300, batch)
    out["steady 300 msg/s"] = {"messages_per_month": msgs, "monthly_usd": rows}

    # spiky: 100 msg/s, bursts of 1,000 msg/s a tenth of the time
    base, burst = measured("steady-100"), measured("flat-out")
    base_msgs, burst_msgs = 100 * 0.9 * MONTH_S, 1000 * 0.1 * MONTH_S
    magnetar = usd_per_million(base) * base_msgs / 1e6 + usd_per_million(burst) * burst_msgs / 1e6
    low, high = model(100, batch), model(1000, 100)
    rows = {"Magnetar (measured, provisioned Kinesis)": magnetar}
    for name in ROWS:
        rows[name] = high[name] if name in CAPACITY else 0.9 * low[name] + 0.1 * high[name]
    out["spiky 100 msg/s, 10x bursts 10% of the time"] = {"messages_per_month": base_msgs + burst_msgs,
                                                           "monthly_usd": rows}

    # idle topics: 10,000 topics, one message an hour each, one push (WebSocket) consumer each: an
    # idle topic makes no request at all; a lone message is published, sealed alone (a quiet shard is
    # sealed at once) and pushed, and its acknowledgement comes back as a frame (lone_message_usd)
    topics, rate = 10_000, 10_000 / 3600
    idle_msgs = rate * MONTH_S
    fixed = (_cost("apigw.websocket.connection_minute", topics * 60 * HOURS_PER_MONTH)
             + _cost("kinesis.provisioned.shard_hour", 2 * HOURS_PER_MONTH)  # the stack's 2 shards
             + _cost("kinesis.provisioned.efo_consumer_shard_hour", 2 * HOURS_PER_MONTH))
    rows = {"Magnetar (per request, provisioned Kinesis)": fixed + lone_message_usd() * idle_msgs}
    alt = model(rate, 1, partitions=topics)
    for name in ROWS:
        rows[name] = alt[name]
    # SQS: a queue per topic, its consumer long-polling 20 s: 180 empty receives an hour per queue
    polls = topics * 180 * HOURS_PER_MONTH
    rows["SQS standard, batched"] += _cost("sqs.standard.request", polls)
    rows["SQS standard, unbatched"] += _cost("sqs.standard.request", polls)
    # Kinesis directly: a stream per topic (each consumer reads its own topic only, as with Magnetar)
    rows["Kinesis Data Streams directly, provisioned"] = _cost("kinesis.provisioned.shard_hour", topics * HOURS_PER_MONTH)
    rows["Kinesis Data Streams directly, on-demand"] = _cost("kinesis.ondemand.stream_hour", topics * HOURS_PER_MONTH)
    out["idle topics: 10,000, one message an hour each"] = {"messages_per_month": idle_msgs, "monthly_usd": rows}

    (RESULTS / "cost-comparison.json").write_text(json.dumps(out, indent=2))
    for workload, data in out.items():
        print(f"\n{workload} ({data['messages_per_month'] / 1e6:,.0f} M messages a month)")
        print("| on | USD / month | USD / M messages |\n|---|---:|---:|")
        for name, usd in sorted(data["monthly_usd"].items(), key=lambda kv: kv[1]):
            print(f"| {name} | {usd:,.2f} | {usd / (data['messages_per_month'] / 1e6):,.4f} |")


if __name__ == "__main__":
    main()
