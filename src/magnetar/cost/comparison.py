"""The comparison: Magnetar in both Kinesis modes next to SQS, Kinesis directly and Pulsar on EC2
(`compare`), and the headline figures in USD per million messages (`headline`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from magnetar.cost.alternatives import Alternative, _kinesis_direct, _msk_serverless, _pulsar, _sqs
from magnetar.cost.magnetar import CostReport, monthly_cost
from magnetar.cost.prices import PRICES_AS_OF
from magnetar.cost.usage import MODES
from magnetar.cost.workload import Workload


@dataclass(frozen=True)
class Comparison:
    workload: Workload
    rows: list[Alternative]
    prices_as_of: str = PRICES_AS_OF

    def row(self, name_prefix: str) -> Alternative:
        for r in self.rows:
            if r.name.startswith(name_prefix):
                return r
        raise KeyError(name_prefix)

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload.model_dump(), "prices_as_of": self.prices_as_of, "rows": [r.to_dict() for r in self.rows]}


def compare(workload: Workload, report: CostReport | None = None) -> Comparison:
    """The same workload on Magnetar (both Kinesis modes), SQS, Kinesis directly, MSK Serverless and Pulsar on EC2."""
    w, p = workload, workload.params()
    report = report or monthly_cost(w)
    rows: list[Alternative] = []
    for mode in MODES:
        mc = report.mode(mode)
        name = "on-demand" if mode == "on_demand" else "provisioned"
        rows.append(
            Alternative(
                f"Magnetar, {name} Kinesis", mc.monthly_usd, mc.usd_per_million_messages, dict(mc.components),
                f"this model; {mc.kinesis_shards} shard(s)" + (" (capacity managed by AWS)" if mode == "on_demand" else ""),
                mc.idle_usd,
            )
        )
    rows += [_sqs(w, p, "unbatched"), _sqs(w, p, "batched"), _sqs(w, p, "packed")]
    rows += [_kinesis_direct(w, p, "on_demand"), _kinesis_direct(w, p, "provisioned")]
    rows.append(_msk_serverless(w, p))
    rows.append(_pulsar(w, p))
    return Comparison(w, rows)



def headline(workload: Workload) -> dict[str, float]:
    """USD per million messages end to end for Magnetar (both modes) and batched SQS."""
    c = compare(workload)
    return {
        "magnetar_on_demand": c.row("Magnetar, on-demand").usd_per_million_messages,
        "magnetar_provisioned": c.row("Magnetar, provisioned").usd_per_million_messages,
        "sqs_batched": c.row("SQS standard, batched").usd_per_million_messages,
    }
