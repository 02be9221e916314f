"""What the cost goals leave for seals: a measured run's dollars split by step (publish, seal and
consume, the hours and gigabytes), and how many seals a goal's price could pay for.

A step's dollars are the run's priced cost less the cost of the same run without that step's
requests and invocations (`magnetar.cost.cost_of_measured_run` both times, with the run's own journal
bytes so that shards and fan-out are priced alike): the model is linear in what it counts, so the
steps add up to the run's total. The broker's invocations (and API Gateway requests) are shared
between publishing and consuming by the HTTP answers each side got; the journal consumer's are the
seal's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from magnetar.cost import cost_of_measured_run

from .base import Results, bold, n, table, usd

BROKER = "magnetar-broker"
JOURNAL_CONSUMER = "magnetar-journal-consumer"
PUBLISH = ("dynamodb.UpdateItem", "kinesis.PutRecord", "kinesis.PutRecords")
SEAL = ("s3.PutObject", "dynamodb.TransactWriteItems", "kinesis.GetRecords", "kinesis.GetShardIterator")
CONSUME = ("dynamodb.BatchGetItem", "dynamodb.PutItem", "s3.GetObject")
# the goals' prices and latency bounds, by workload (the goals table of docs/benchmarks.md)
GOALS = {"steady-300": (0.12, 1000), "flat-out": (0.05, 700)}
NAMES = {"steady-300": "steady 300 msg/s, producer lingering 100 ms", "flat-out": "flat out, batch 100"}


@dataclass(frozen=True)
class Split:
    """A run's provisioned-Kinesis dollars per million messages, by step."""

    publish: float
    seal_and_consume: float
    rest: float  # hours (the shard, fan-out consumer-shard hours), gigabytes, storage, maintenance
    publishes: int
    seals: int
    messages: int
    seconds: float

    @property
    def total(self) -> float:
        return self.publish + self.seal_and_consume + self.rest

    def per_publish(self) -> float:
        return self.publish * self.messages / 1e6 / max(self.publishes, 1)

    def per_seal(self) -> float:
        return self.seal_and_consume * self.messages / 1e6 / max(self.seals, 1)


def _answered(r: dict[str, Any], side: str) -> int:
    return sum(int(v) for k, v in (r.get("http_statuses", {}).get(side) or {}).items() if k.startswith("2"))


def _priced(r: dict[str, Any], requests: Mapping[str, int], invocations: Mapping[str, int]) -> float:
    lambdas = r["lambda"]
    assumptions = r["cost_usd_per_million_msgs"]["assumptions"]
    out = cost_of_measured_run(
        aws_requests=requests, messages=r["messages"], message_bytes=r["config"]["size"],
        lambda_invocations=invocations,
        lambda_ms={k: v["duration_ms_total"] / v["invocations"] if v["invocations"] else 0.0 for k, v in lambdas.items()},
        seconds=r["seconds"], item_bytes=r.get("item_bytes") or None,
        kinesis_bytes_in=assumptions["kinesis_bytes_in"], kinesis_bytes_out=assumptions["kinesis_bytes_out"])
    return float(out["provisioned_kinesis"])


def split(r: dict[str, Any]) -> Split:
    requests: dict[str, int] = dict(r["aws_requests"])
    invocations = {k: int(v["invocations"]) for k, v in r["lambda"].items()}
    publishes, polls = _answered(r, "producers"), _answered(r, "consumers")
    broker = invocations.get(BROKER, 0)
    publish_calls = round(broker * publishes / max(publishes + polls, 1))
    total = _priced(r, requests, invocations)

    def without(ops: tuple[str, ...], less: Mapping[str, int]) -> float:
        kept = {k: v for k, v in requests.items() if k not in ops}
        fewer = {k: max(0, v - less.get(k, 0)) for k, v in invocations.items()}
        return total - _priced(r, kept, fewer)

    publish = without(PUBLISH, {BROKER: publish_calls})
    seal = without(SEAL, {JOURNAL_CONSUMER: invocations.get(JOURNAL_CONSUMER, 0)})
    consume = without(CONSUME, {BROKER: broker - publish_calls})
    return Split(publish=publish, seal_and_consume=seal + consume, rest=total - publish - seal - consume,
                 publishes=publishes, seals=requests.get("s3.PutObject", 0), messages=r["messages"],
                 seconds=r["seconds"])


def by_step(results: Results) -> str:
    """The dollars of steady 300 msg/s and flat out by step, and per publish and per seal."""
    rows = []
    for w in GOALS:
        s = split(results.load(f"message-cost-{w}.json"))
        rows.append([NAMES[w], f"{usd(s.publish)} ({usd(s.per_publish() * 1e6, 2)} per million publishes)",
                     f"{usd(s.seal_and_consume)} ({usd(s.per_seal() * 1e6, 2)} per million seals)", usd(s.rest),
                     bold(usd(s.total))])
    return table(["workload", "publish: $ / M msgs", "seal and consume: $ / M msgs", "hours and gigabytes: $ / M msgs",
                  "total"], rows)


def budget(results: Results) -> str:
    """What each cost goal leaves for seals once the run's publishes and hourly charges are paid."""
    rows = []
    for w, (goal, p99_ms) in GOALS.items():
        s = split(results.load(f"message-cost-{w}.json"))
        left = goal - s.publish - s.rest
        rate = s.messages / s.seconds
        affordable = max(left, 0.0) / 1e6 / s.per_seal() * rate  # seals per second the goal pays for
        interval = f"{n(1 / affordable, 1)} s" if affordable > 0 else "none: no seal at all"
        rows.append([NAMES[w], f"${goal:.2f}, p99 ≤ {n(p99_ms)} ms", usd(s.publish + s.rest), usd(left),
                     n(affordable, 2), n(s.seals / s.seconds, 2), interval])
    return table(["workload", "goal", "publishes and hours alone", "left for seals and polls", "seals / s that pays for",
                  "seals / s measured", "a seal at most every"], rows)


BLOCKS = {"message-cost-by-step": by_step, "message-cost-budget": budget}
