"""The operational alarms, each to the stack's alarm topic (observability.alarm_topic): backlog near
its quota, dead-letter topics growing, publish errors, throttling (DynamoDB, Kinesis, Lambda),
authorizer denials spiking. The ledger's own two (journal iterator age, LateAfterHole) are in
observability.py. docs/operations.md has the runbook of each.

CloudWatch alarms cannot watch SEARCH expressions, so these read the functions' totals (the EMF
lines carry each per-namespace metric under dimension `service` alone as well).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from magnetar.core import metrics as m

from .settings import (
    AUTHORIZER_DENIALS_ALARM_ID,
    BACKLOG_QUOTA_ALARM_ID,
    DEAD_LETTER_ALARM_ID,
    DYNAMODB_THROTTLE_ALARM_ID,
    KINESIS_THROTTLE_ALARM_ID,
    LAMBDA_THROTTLE_ALARM_ID,
    PUBLISH_ERRORS_ALARM_ID,
    pin_logical_id,
)

FIVE_MINUTES = Duration.minutes(5)


@dataclass(frozen=True)
class AlarmThresholds:
    backlog_quota_ratio: float  # context backlogQuotaAlarmRatio
    authorizer_denials: int  # per 5 minutes (context authorizerDenialsAlarm)
    publish_errors: int = 10  # per 5 minutes, 2 periods of 3
    throttles: int = 10  # DynamoDB or Kinesis throttled requests per 5 minutes, 2 periods in a row
    lambda_throttles: int = 5  # throttled invocations of the serving functions per 5 minutes


@dataclass(frozen=True)
class AlarmSources:
    broker_service: str
    websocket_service: str
    maintenance_service: str
    authorizer_service: str
    table: dynamodb.ITable
    stream: kinesis.IStream
    serving_functions: list[lambda_.Function]  # Lambda throttles count here (not the maintenance's one-at-a-time)


def _emf(metric: str, service: str, statistic: str, period: Duration = FIVE_MINUTES) -> cloudwatch.Metric:
    return cloudwatch.Metric(namespace=m.CLOUDWATCH_NAMESPACE, metric_name=metric,
                             dimensions_map={m.SERVICE_DIMENSION: service}, statistic=statistic, period=period)


def _sum(label: str, metrics: dict[str, cloudwatch.IMetric]) -> cloudwatch.MathExpression:
    """The metrics added up, a missing value counting as 0."""
    return cloudwatch.MathExpression(expression="+".join(f"FILL({k},0)" for k in metrics), label=label,
                                     period=FIVE_MINUTES, using_metrics=metrics)


def _alarm(scope: Construct, logical_id: str, description: str, metric: cloudwatch.IMetric, threshold: float,
           periods: int = 1, datapoints: int | None = None) -> cloudwatch.Alarm:
    alarm = cloudwatch.Alarm(
        scope, logical_id, alarm_description=description, metric=metric, threshold=threshold,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluation_periods=periods, datapoints_to_alarm=datapoints or periods,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,  # no traffic, nothing wrong
    )
    pin_logical_id(alarm, logical_id)
    return alarm


def operational_alarms(scope: Construct, sources: AlarmSources, thresholds: AlarmThresholds) -> list[cloudwatch.Alarm]:
    serving = {sources.broker_service: "b", sources.websocket_service: "w"}
    alarms = [
        _alarm(scope, BACKLOG_QUOTA_ALARM_ID,
               f"A namespace's backlog is at {thresholds.backlog_quota_ratio:.0%} of its backlog quota or more for "
               "3 maintenance runs (BacklogQuotaRatio): its producers will soon be held, refused, or its oldest "
               "messages evicted, as the quota's policy says. See docs/operations.md.",
               _emf(m.BACKLOG_QUOTA_RATIO, sources.maintenance_service, "Maximum", Duration.minutes(1)),
               thresholds.backlog_quota_ratio, periods=3),
        _alarm(scope, DEAD_LETTER_ALARM_ID,
               "Messages arrived in dead-letter topics (…-DLQ) in the last 5 minutes: consumers gave up on them "
               "after their redeliveries. See docs/operations.md.",
               _sum("DeadLetteredMessages", {k: _emf(m.DEAD_LETTERED_MESSAGES, s, "Sum") for s, k in serving.items()}),
               1),
        _alarm(scope, PUBLISH_ERRORS_ALARM_ID,
               f"Publishes failed on the broker's side (PublishErrors: the journal refused, deadlines passed, AWS "
               f"errors) {thresholds.publish_errors} times or more in 2 of 3 five-minute periods. Producers retry; "
               "see docs/operations.md.",
               _sum("PublishErrors", {k: _emf(m.PUBLISH_ERRORS, s, "Sum") for s, k in serving.items()}),
               thresholds.publish_errors, periods=3, datapoints=2),
        _alarm(scope, DYNAMODB_THROTTLE_ALARM_ID,
               f"The metadata table throttled {thresholds.throttles} requests or more in two five-minute periods in "
               "a row (a hot partition key: one topic's writer counter or cursor). See docs/operations.md.",
               _sum("DynamoDB throttle events", {
                   "r": sources.table.metric("ReadThrottleEvents", statistic="Sum", period=FIVE_MINUTES),
                   "w": sources.table.metric("WriteThrottleEvents", statistic="Sum", period=FIVE_MINUTES)}),
               thresholds.throttles, periods=2),
        _alarm(scope, KINESIS_THROTTLE_ALARM_ID,
               f"The journal refused {thresholds.throttles} writes or more in two five-minute periods in a row "
               "(WriteProvisionedThroughputExceeded: a shard's 1 MiB/s or 1,000 records/s). See docs/operations.md.",
               sources.stream.metric_write_provisioned_throughput_exceeded(statistic="Sum", period=FIVE_MINUTES),
               thresholds.throttles, periods=2),
        _alarm(scope, LAMBDA_THROTTLE_ALARM_ID,
               f"Lambda throttled {thresholds.lambda_throttles} invocations or more of the serving functions in 5 "
               "minutes: the account's concurrency is used up. See docs/operations.md.",
               _sum("Throttles", {f"t{i}": f.metric_throttles(statistic="Sum", period=FIVE_MINUTES)
                                  for i, f in enumerate(sources.serving_functions)}),
               thresholds.lambda_throttles),
        _alarm(scope, AUTHORIZER_DENIALS_ALARM_ID,
               f"The authorizer refused {thresholds.authorizer_denials} requests or more in 5 minutes (bad or "
               "expired credentials): a client with a stale token, or someone guessing. See docs/operations.md.",
               _emf(m.AUTHORIZER_DENIALS, sources.authorizer_service, "Sum"), thresholds.authorizer_denials),
    ]
    return alarms
