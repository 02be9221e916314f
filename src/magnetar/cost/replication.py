"""Geo-replication's bill: what a cluster of an instance pays to copy its topics' messages to N
remote clusters (`magnetar cost --replicated-to N`).

The journal consumer replicates as it seals: each journal batch of a topic (the entries of one
partition in one event-source invocation, the unit `monthly_cost` calls a segment) is sent to each
remote cluster as one produce request (Pulsar's REST producer on the remote's IAM-authorized HTTP
API, SigV4-signed), then the replicator's cursor for that remote moves past it. Per batch and per
remote cluster:

- inter-region data transfer: the request body (the batch's messages, base64 in JSON) leaves the
  region (`transfer.inter_region_gb`, billed by the sending region);
- the remote append: one API Gateway request (512 KB metering), one broker invocation, the remote
  writer's reservation (one DynamoDB UpdateItem for the batch's consecutive entries) and one
  Kinesis PutRecord of the batch on the remote journal (more when the batch is over Kinesis' 1 MiB
  record limit);
- the replicator's cursor write (one DynamoDB PutItem in this cluster);
- the journal consumer's wait for the remote call (Lambda duration, `replication_call_ms`).

Replicated subscriptions (`Workload.replicated_subscriptions`, Pulsar's replicate_subscription_state):
the acknowledgement path writes a subscription's snapshot to the configuration store at most every
`snapshot_interval_s` while its position moves (core/replicated_subscriptions.py): one PutItem of
`snapshot_item_bytes`, and the configuration store is a DynamoDB global table with a replica in
each cluster's region, so each write is billed as one replicated write unit in every replica
(`dynamodb.ondemand.replicated_wru`) and its bytes cross to each other region.

What the remote cluster then does with the entries (sealing, storing them for its retention,
delivering them to its subscriptions) is that cluster's own workload: price it with
`magnetar cost` at the replicated rate. Configuration changes (tenants, namespaces, topic creation,
schemas) are written once per replica of the configuration store's global table, per change and
not per message: negligible here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from magnetar.cost.magnetar import _gb_s, _shape
from magnetar.cost.prices import SECONDS_PER_HOUR, GiB, _cost
from magnetar.cost.units import (
    apigw_units,
    base64_bytes,
    kinesis_ondemand_ingest_bytes,
    kinesis_put_payload_units,
    wru,
)
from magnetar.cost.usage import MODES, Mode, Usage, _sum_components, price_usage
from magnetar.cost.workload import KINESIS_MAX_RECORD_BYTES, Workload

# The journal consumer's wait for one remote produce: a cross-region round trip plus the remote
# broker's append (the remote's own duration is priced apart, at the workload's produce_lambda_ms).
DEFAULT_REPLICATION_CALL_MS = 100.0
DATA_TRANSFER = "data_transfer"  # the component the inter-region bytes are billed under


@dataclass(frozen=True)
class ReplicationModeCost:
    mode: Mode
    components: dict[str, float]  # component (COMPONENTS + data_transfer) -> USD per month, all remotes
    monthly_usd: float
    usd_per_million_messages: float  # monthly_usd / millions of messages produced in this cluster


@dataclass(frozen=True)
class ReplicationCost:
    remote_clusters: int
    batches_per_s: float  # journal batches replicated to each remote cluster
    entries_per_batch: float
    snapshot_writes_per_s: float  # replicated subscriptions' snapshots, all of them (each in every replica)
    request_bytes: float  # one replication request's body (what crosses the region boundary)
    transfer_gb_per_month: float  # all remotes together
    on_demand: ReplicationModeCost
    provisioned: ReplicationModeCost
    requests_per_million_messages: dict[str, float]  # "service.Operation" -> count, all remotes
    notes: list[str]

    def mode(self, mode: Mode) -> ReplicationModeCost:
        return self.on_demand if mode == "on_demand" else self.provisioned

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def replication_cost(
    workload: Workload, remote_clusters: int, *, replication_call_ms: float = DEFAULT_REPLICATION_CALL_MS,
    replicated_subscriptions: int | None = None,
) -> ReplicationCost:
    """The monthly cost of replicating `workload`'s messages to `remote_clusters` other clusters, and
    of its replicated subscriptions' snapshots (`replicated_subscriptions`: default the workload's)."""
    if remote_clusters < 0:
        raise ValueError(f"remote clusters: {remote_clusters} (0 or more)")
    replicated = workload.replicated_subscriptions if replicated_subscriptions is None else replicated_subscriptions
    if not 0 <= replicated <= workload.subscriptions:
        raise ValueError(f"replicated subscriptions: {replicated} (0 to the workload's {workload.subscriptions})")
    w, p = workload, workload.params()
    month_s = w.hours_per_month * SECONDS_PER_HOUR
    s = _shape(w, p, "on_demand")
    batches = s.seal_invocations_per_s * s.partitions_per_seal * remote_clusters  # per second, all remotes
    entries = s.entries_per_segment
    per_entry_body = w.batch_size * (base64_bytes(w.message_bytes * p.compression_ratio)
                                     + p.produce_json_bytes_per_message)
    body = entries * per_entry_body + p.http_envelope_bytes
    # the batch appended as one record on the remote journal, or as few as Kinesis' record limit allows
    records = max(1, math.ceil(entries * s.record_bytes / KINESIS_MAX_RECORD_BYTES))
    journal_record = entries * s.record_bytes / records
    usage = Usage(
        apigw_requests=batches * apigw_units(body),
        lambda_requests=batches,
        lambda_gb_s=batches * (_gb_s(w, w.produce_lambda_ms) + _gb_s(w, replication_call_ms)),
        dynamodb_wru=batches * (p.writer_updates_per_entry * wru(p.writer_item_bytes) + wru(p.cursor_item_bytes)),
        kinesis_od_ingest_gb=batches * records * kinesis_ondemand_ingest_bytes(journal_record) / GiB,
        kinesis_ppu=batches * records * kinesis_put_payload_units(journal_record),
        logs_gb=batches * p.log_bytes_per_invocation / GiB,
    ).scaled(month_s)
    snapshots = _snapshot_writes_per_s(w, s.receives_per_s, replicated) if remote_clusters else 0.0
    snapshot_usage = Usage(
        dynamodb_replicated_wru=snapshots * (1 + remote_clusters) * wru(p.snapshot_item_bytes),
    ).scaled(month_s)
    transfer_gb = (batches * body + snapshots * remote_clusters * p.snapshot_item_bytes) / GiB * month_s
    transfer_usd = _cost("transfer.inter_region_gb", transfer_gb)
    millions = w.messages_per_month / 1e6
    modes: dict[str, ReplicationModeCost] = {}
    for mode in MODES:
        steps = price_usage({"replication": usage, "snapshots": snapshot_usage}, mode, w.lambda_architecture)
        components = _sum_components(steps.values())
        components[DATA_TRANSFER] = transfer_usd
        total = sum(components.values())
        modes[mode] = ReplicationModeCost(mode, components, total, total / millions if millions else 0.0)
    per_million = 1e6 / w.produce_rate_msgs_per_s if w.produce_rate_msgs_per_s else 0.0
    requests = {
        "apigateway.HttpRequest": batches * per_million,
        "lambda.Invoke.broker": batches * per_million,
        "dynamodb.UpdateItem": batches * p.writer_updates_per_entry * per_million,
        "dynamodb.PutItem": batches * per_million,
        "kinesis.PutRecord": batches * records * per_million,
        "dynamodb.PutItem.snapshot": snapshots * per_million,  # at the home replica, replicated to the others
    }
    notes = [
        f"each of {remote_clusters} remote cluster(s) receives {batches / max(remote_clusters, 1):.2f} replication "
        f"requests/s of {entries:.1f} entries ({body / 1024:,.1f} KB) each: one per journal batch of a topic partition",
        "the remote cluster's sealing, storage and deliveries are its own workload: price it with magnetar cost "
        "at the replicated rate",
        "configuration changes are written once per replica of the configuration store's global table: per change, "
        "not per message (negligible)",
        "inter-region transfer is priced at $0.02/GB (us-east-1 to another region but us-east-2, which is $0.01); "
        "the remote's small responses are left out",
    ]
    if snapshots:
        notes.append(f"{replicated} replicated subscription(s): {snapshots:.2f} snapshot writes/s to the configuration "
                     f"store, each a replicated write in all {1 + remote_clusters} replica regions")
    return ReplicationCost(
        remote_clusters=remote_clusters,
        batches_per_s=batches / remote_clusters if remote_clusters else 0.0,
        entries_per_batch=entries,
        snapshot_writes_per_s=snapshots,
        request_bytes=body,
        transfer_gb_per_month=transfer_gb,
        on_demand=modes["on_demand"],
        provisioned=modes["provisioned"],
        requests_per_million_messages=requests,
        notes=notes,
    )


def _snapshot_writes_per_s(w: Workload, receives_per_s: float, replicated: int) -> float:
    """Snapshot writes a second of `replicated` subscriptions: each moves its position with every
    cursor write of a receive (and of a separate acknowledgement), and shares it at most once per
    `snapshot_interval_s`."""
    p = w.params()
    if not replicated or not w.subscriptions:
        return 0.0
    cursor_writes = receives_per_s / w.subscriptions * (p.cursor_puts_per_receive + p.ack_flushes_per_receive)
    ceiling = 1 / p.snapshot_interval_s if p.snapshot_interval_s else cursor_writes
    return replicated * min(cursor_writes, ceiling)
