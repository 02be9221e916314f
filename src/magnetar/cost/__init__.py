"""Magnetar's AWS bill: a cost model per workload, and the same prices applied to measured runs.

Three entry points share one price table (`PRICES`) and one pricing function (`price_usage`):

- `monthly_cost(workload)`: the monthly bill of a workload by component (API Gateway, Lambda
  requests and compute, Kinesis, DynamoDB, S3 requests and storage, EventBridge, CloudWatch Logs),
  for both Kinesis capacity modes, and the end-to-end cost per million messages;
- `compare(workload)`: the same workload on Amazon SQS (unbatched, batched, client-side packed),
  on Kinesis Data Streams used directly, and on self-managed Pulsar on EC2;
- `cost_of_measured_run(...)`: request counts measured by `magnetar perf` turned into cost per
  million messages with the same unit conversions.

Every per-operation request count and item size is a named field of `Parameters` (documented
there), so a measured count can replace a modeled one through a workload file's `parameters:`.

Layout, by responsibility:

- `prices`: the dated us-east-1 price table (`Price`, `PRICES`, `PRICES_AS_OF`, sources) and constants;
- `units`: unit conversions (request units, metering increments, entry sizes);
- `workload`: `Parameters`, `Workload` and `load_workload` (YAML);
- `usage`: `Usage`, `COMPONENTS`, the Kinesis modes and `price_usage`;
- `magnetar`: Magnetar's components by step, `CostReport` and `monthly_cost`;
- `alternatives`: SQS, Kinesis directly and Pulsar on EC2 (`pulsar_sizing`);
- `comparison`: `compare` and `headline`;
- `measured`: `cost_of_measured_run`;
- `replication`: `replication_cost`, geo-replication to N remote clusters of an instance (and the
  replicated subscriptions' snapshots);
- `functions`: `function_cost`, a Pulsar Function on a workload's messages (its dispatcher, its
  invocations, its outputs), and `output_workload`, its output topic's own workload.

Conventions: a "GB" of data is 2**30 bytes (AWS bills GB-months and GB transferred in binary
gigabytes); free tiers are ignored (a production account has used them up); prices are
us-east-1 list prices, on-demand, as of `PRICES_AS_OF`.
"""

from __future__ import annotations

from magnetar.cost.alternatives import Alternative, PulsarSizing, pulsar_sizing
from magnetar.cost.comparison import Comparison, compare, headline
from magnetar.cost.functions import FunctionCost, FunctionModeCost, function_cost, output_workload
from magnetar.cost.magnetar import CostReport, ModeCost, Shape, monthly_cost
from magnetar.cost.measured import DEFAULT_UNITS_PER_REQUEST, cost_of_measured_run
from magnetar.cost.prices import (
    HOURS_PER_MONTH,
    INF,
    PRICES,
    PRICES_AS_OF,
    SECONDS_PER_HOUR,
    GiB,
    KiB,
    MiB,
    Price,
    price_table,
)
from magnetar.cost.replication import ReplicationCost, replication_cost
from magnetar.cost.units import (
    apigw_units,
    base64_bytes,
    batch_payload_bytes,
    kinesis_ondemand_ingest_bytes,
    kinesis_put_payload_units,
    rru,
    sqs_chunks,
    wru,
)
from magnetar.cost.usage import COMPONENTS, MODES, Mode, Usage, price_usage
from magnetar.cost.workload import (
    DEFAULT_PARAMETERS,
    KINESIS_MAX_RECORD_BYTES,
    PARAMETER_NAMES,
    Parameters,
    Workload,
    WorkloadError,
    load_workload,
)

__all__ = [
    "COMPONENTS",
    "DEFAULT_PARAMETERS",
    "DEFAULT_UNITS_PER_REQUEST",
    "HOURS_PER_MONTH",
    "INF",
    "KINESIS_MAX_RECORD_BYTES",
    "MODES",
    "PARAMETER_NAMES",
    "PRICES",
    "PRICES_AS_OF",
    "SECONDS_PER_HOUR",
    "Alternative",
    "Comparison",
    "CostReport",
    "FunctionCost",
    "FunctionModeCost",
    "GiB",
    "KiB",
    "MiB",
    "Mode",
    "ModeCost",
    "Parameters",
    "Price",
    "PulsarSizing",
    "ReplicationCost",
    "Shape",
    "Usage",
    "Workload",
    "WorkloadError",
    "apigw_units",
    "base64_bytes",
    "batch_payload_bytes",
    "compare",
    "cost_of_measured_run",
    "function_cost",
    "headline",
    "kinesis_ondemand_ingest_bytes",
    "kinesis_put_payload_units",
    "load_workload",
    "monthly_cost",
    "output_workload",
    "price_table",
    "price_usage",
    "pulsar_sizing",
    "replication_cost",
    "rru",
    "sqs_chunks",
    "wru",
]
