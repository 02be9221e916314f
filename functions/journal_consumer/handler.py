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
from magnetar.adapters.aws.telemetry import LambdaTelemetry
from magnetar.core.ports import JournalPosition, JournalRecord
from magnetar.core.replication import replication_by_remote

logger = Logger()
# EMF metrics at the end of each invocation: what the batch sealed (SealedEntries, SegmentsWritten,
# Holes, LateAfterHole, ...: core/ledger/sealer.py) and pushed (PushedMessages per namespace)
telemetry = LambdaTelemetry()


@logger.inject_lambda_context(clear_state=True)
@telemetry.instrument
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
    # a busy shard's small batch waits for its seal latency target, and what arrives meanwhile is
    # read ahead and sealed with it; records this container sealed from its last read-ahead are skipped
    gathered = sealer.gather(records)
    records = gathered.records
    if not records:
        logger.info("sealed already", extra={"skipped": gathered.skipped})
        return {"batchItemFailures": []}
    push = build_push()
    plan = push.plan_journal_batch(records)  # the batch's seal states and the entries it settles
    outcome = sealer.seal(records, plan.states)
    pushed = push.dispatch_journal_batch(plan)  # to the connections found now, served from memory
    # Pulsar Functions: a dispatcher for each function consuming a topic of the batch (async)
    triggered = build_triggers().trigger_batch([r.data for r in records], LambdaDispatcherInvoker())
    # geo-replication: the sealed entries of topics with other clusters, to those clusters
    replicated = build_replicator().replicate_batch(records, build_broker().cache)
    # geo-replication per remote cluster (dimension RemoteCluster: the instance's replication alarms)
    for remote, (messages, backlog, delay_ms) in replication_by_remote(replicated).items():
        per_remote = EphemeralMetrics(namespace="Magnetar")
        per_remote.add_dimension("RemoteCluster", remote)
        per_remote.add_metric("ReplicatedMessages", MetricUnit.Count, messages)
        per_remote.add_metric("ReplicationBacklog", MetricUnit.Count, backlog)
        per_remote.add_metric("ReplicationDelay", MetricUnit.Milliseconds, delay_ms)
        per_remote.flush_metrics()
    logger.info("sealed", extra={"outcome": outcome.__dict__, "records": len(records), "held_ms": gathered.held_ms,
                                 "read_ahead": gathered.read_ahead, "skipped": gathered.skipped,
                                 "pushed": pushed.__dict__, "functions": triggered})
    retry_from = sealer.settle(gathered, outcome)
    if retry_from is not None:
        return {"batchItemFailures": [{"itemIdentifier": retry_from}]}
    return {"batchItemFailures": []}
