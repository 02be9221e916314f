"""The journal consumer Lambda: Kinesis event-source mapping -> sealed S3 segments.

Not Powertools' BatchProcessor: that processes records one by one, while sealing needs the
whole batch at once (entries of a topic are grouped into one segment per invocation). The
partial-failure contract is the same: `batchItemFailures` names the first record to retry,
and the event-source mapping resumes from it.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from aws_lambda_powertools.utilities.data_classes import KinesisStreamEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from magnetar.adapters.aws import build_broker, build_replicator
from magnetar.adapters.aws.connections import build_push
from magnetar.adapters.aws.functions import LambdaDispatcherInvoker, build_triggers
from magnetar.core.metrics.container import counted
from magnetar.core.ports import JournalPosition, JournalRecord
from magnetar.core.replication import replication_by_remote

logger = Logger()


@logger.inject_lambda_context(clear_state=True)
@counted
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = [
        JournalRecord(
            JournalPosition(r.event_id.split(":", 1)[0], r.kinesis.sequence_number),
            r.kinesis.partition_key,
            r.kinesis.data_as_bytes(),
            int(r.kinesis.approximate_arrival_timestamp * 1000),
        )
        for r in KinesisStreamEvent(event).records
    ]
    sealer = build_broker().sealer
    held_ms = sealer.hold(records)  # a busy shard's small batch waits for its seal latency target
    push = build_push()
    plan = push.plan_journal_batch(records)  # the batch's seal states and the entries it settles
    outcome = sealer.seal(records, plan.states)
    pushed = push.dispatch_journal_batch(plan)  # to the connections found now, served from memory
    # Pulsar Functions: a dispatcher for each function consuming a topic of the batch (async)
    triggered = build_triggers().trigger_batch([r.data for r in records], LambdaDispatcherInvoker())
    # geo-replication: the sealed entries of topics with other clusters, to those clusters
    replicated = build_replicator().replicate_batch(records, build_broker().cache)
    # One metrics object per invocation: Powertools' shared Metrics keeps accumulating while
    # metrics are disabled (locally) and then prints anyway at 100 values.
    metrics = EphemeralMetrics(namespace="Magnetar")
    metrics.add_metric("SealedEntries", MetricUnit.Count, outcome.sealed_entries)
    metrics.add_metric("SegmentsWritten", MetricUnit.Count, outcome.segments_written)
    if outcome.holes:
        metrics.add_metric("Holes", MetricUnit.Count, outcome.holes)
    if outcome.late_after_hole:
        metrics.add_metric("LateAfterHole", MetricUnit.Count, outcome.late_after_hole)
    if outcome.late_reappended:
        metrics.add_metric("LateReappended", MetricUnit.Count, outcome.late_reappended)
    if outcome.late_dead_lettered:
        metrics.add_metric("LateDeadLettered", MetricUnit.Count, outcome.late_dead_lettered)
    if plan.connections:
        metrics.add_metric("PushedMessages", MetricUnit.Count, pushed.pushed)
    metrics.flush_metrics()
    for remote, (messages, backlog, delay_ms) in replication_by_remote(replicated).items():
        per_remote = EphemeralMetrics(namespace="Magnetar")
        per_remote.add_dimension("RemoteCluster", remote)
        per_remote.add_metric("ReplicatedMessages", MetricUnit.Count, messages)
        per_remote.add_metric("ReplicationBacklog", MetricUnit.Count, backlog)
        per_remote.add_metric("ReplicationDelay", MetricUnit.Milliseconds, delay_ms)
        per_remote.flush_metrics()
    logger.info("sealed", extra={"outcome": outcome.__dict__, "records": len(records), "held_ms": held_ms,
                                 "pushed": pushed.__dict__, "functions": triggered})
    if outcome.retry_from is not None:
        return {"batchItemFailures": [{"itemIdentifier": outcome.retry_from}]}
    return {"batchItemFailures": []}
