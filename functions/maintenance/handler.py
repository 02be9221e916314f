"""The maintenance Lambda: EventBridge runs it every minute (the ledger lifecycle).

Message TTL, backlog quotas and retention for every persistent topic partition; see
`magnetar.core.lifecycle`. The schedule may fire while a run is still going: the stack gives the
function a reserved concurrency of 1, and every step is a conditional write, so even two
overlapping runs would only repeat harmless work.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from magnetar.adapters.aws import build_broker, build_replicator
from magnetar.adapters.aws.compaction import build_compactor
from magnetar.adapters.aws.connections import build_push
from magnetar.adapters.aws.telemetry import EmfMetrics, LambdaTelemetry
from magnetar.core.lifecycle import MaintenanceScope
from magnetar.core.metrics import REDISPATCHED

logger = Logger()
telemetry = LambdaTelemetry()  # the run's metrics (backlogs per namespace: core/lifecycle.py) as EMF


def serve_backlogged_functions(only: list[str] | None) -> list[str]:
    from magnetar.adapters.aws.functions import LambdaDispatcherInvoker
    from magnetar.core.functions.inputs import backlogged_functions

    try:
        started = backlogged_functions(build_broker(), only)
    except Exception as exc:  # the ledger's maintenance still reports
        logger.warning("functions: the backlog sweep failed", extra={"error": repr(exc)})
        return []
    for fqfn in started:
        try:
            LambdaDispatcherInvoker().serve_async(fqfn)
        except Exception as exc:
            logger.warning("functions: could not start a dispatcher", extra={"fqfn": fqfn, "error": repr(exc)})
    return started


@logger.inject_lambda_context(clear_state=True)
@telemetry.instrument
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    scope = MaintenanceScope.of(event)  # the schedule's event: everything; a rule's input: what it names
    build_replicator()  # geo-replication: replicators left behind by an unreachable cluster catch up
    build_compactor()  # topic compaction: the run starts (compactionThreshold) and continues compactions
    report = build_broker().maintenance.run(scope.topics)
    # Push consumers: due redeliveries (negative-ack delays, ack timeouts), acknowledgements still in
    # connection inboxes, connections whose $disconnect never came.
    pushed = build_push().redispatch()
    # Pulsar Functions: a dispatcher for each RUNNING function (of the scope) with a backlog
    served = serve_backlogged_functions(scope.functions)
    EmfMetrics().add(REDISPATCHED, pushed.pushed)
    result = {
        "topics": report.topics,
        "expiredEntries": report.expired_entries,
        "evictedEntries": report.evicted_entries,
        "trimmedSegments": report.trimmed_segments,
        "deletedObjects": report.deleted_objects,
        "blockedTopics": report.blocked_topics,
        "redispatched": pushed.pushed,
        "functionsServed": served,
    }
    logger.info("maintenance run", extra={"report": result})
    return result
