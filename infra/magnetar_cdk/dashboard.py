"""The operations dashboard (CloudWatch): traffic, latency, backlog, errors, throttles, concurrency,
the journal's progress and the estimated cost per hour.

Per-namespace graphs are SEARCH expressions over the functions' EMF metrics (dimension
`namespace`), so a namespace appears as soon as it has traffic; the rest are the services' own
metrics (AWS/Lambda, AWS/DynamoDB, AWS/Kinesis, AWS/ApiGateway). docs/operations.md describes
each widget.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from magnetar.core import metrics as m
from magnetar.cost.prices import PRICES, GiB

from .settings import OPERATIONS_DASHBOARD_ID, pin_logical_id

PERIOD_S = 60  # the per-namespace graphs' period (SEARCH fixes it)
COST_PERIOD = Duration.minutes(5)  # the cost widget sums 5 minutes and scales them to an hour
WIDTH, HEIGHT = 8, 6  # three graphs a row


@dataclass(frozen=True)
class DashboardFunction:
    """A handler function on the dashboard: its `service` (POWERTOOLS_SERVICE_NAME) and memory."""

    service: str
    function: lambda_.Function
    memory_mb: int


@dataclass(frozen=True)
class DashboardSources:
    functions: list[DashboardFunction]
    journal_consumer: lambda_.Function
    table: dynamodb.ITable
    stream: kinesis.IStream
    stream_consumer_name: str | None  # the enhanced fan-out consumer (None: the polling mapping)
    http_apis: list[apigwv2.IHttpApi]
    websocket_api: apigwv2.IWebSocketApi


def search(metric: str, statistic: str, dimensions: tuple[str, ...] = (m.NAMESPACE_DIMENSION, m.SERVICE_DIMENSION),
           period_s: int = PERIOD_S) -> str:
    """A SEARCH over the EMF metric `metric` with exactly `dimensions` (one series per value)."""
    schema = ",".join((m.CLOUDWATCH_NAMESPACE, *dimensions))
    return f"SEARCH('{{{schema}}} MetricName=\"{metric}\"', '{statistic}', {period_s})"


def _per_namespace(metric: str, statistic: str, label: str, per_second: bool = False) -> cloudwatch.MathExpression:
    expression = search(metric, statistic)
    return cloudwatch.MathExpression(expression=f"{expression}/{PERIOD_S}" if per_second else expression,
                                     label=label, period=Duration.seconds(PERIOD_S), using_metrics={})


def _emf(metric: str, service: str, statistic: str = "Sum", label: str | None = None) -> cloudwatch.Metric:
    return cloudwatch.Metric(namespace=m.CLOUDWATCH_NAMESPACE, metric_name=metric,
                             dimensions_map={m.SERVICE_DIMENSION: service}, statistic=statistic,
                             period=Duration.minutes(1), label=label or metric)


def _graph(title: str, left: list[cloudwatch.IMetric], right: list[cloudwatch.IMetric] | None = None,
           left_label: str = "", annotation: float | None = None, width: int = WIDTH) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(
        title=title, left=left, right=right or [], width=width, height=HEIGHT,
        left_y_axis=cloudwatch.YAxisProps(label=left_label, show_units=False, min=0),
        left_annotations=[cloudwatch.HorizontalAnnotation(value=annotation, label="alarm")] if annotation else None,
    )


def _price(key: str) -> float:
    """USD per one unit (the first tier's price, as the cost model's lowest volume)."""
    price = PRICES[key]
    return price.usd / price.per


def cost_per_hour(sources: DashboardSources) -> list[cloudwatch.MathExpression]:
    """The estimated USD per hour by service, and their total: request metrics times the cost
    model's prices (src/magnetar/cost/prices.py), each 5-minute sum scaled to an hour. Storage is
    left out (billed per month, not by the hour's traffic)."""
    scale = 3600 / COST_PERIOD.to_seconds()
    fill = "FILL({0},0)"
    using: dict[str, cloudwatch.IMetric] = {}
    lambda_terms = []
    for i, f in enumerate(sources.functions):
        using[f"inv{i}"] = f.function.metric_invocations(statistic="Sum", period=COST_PERIOD)
        using[f"dur{i}"] = f.function.metric_duration(statistic="Sum", period=COST_PERIOD)
        gb_s_per_ms = f.memory_mb / 1024 / 1000
        lambda_terms.append(f"{fill.format(f'inv{i}')}*{_price('lambda.request'):.10f}"
                            f"+{fill.format(f'dur{i}')}*{gb_s_per_ms * _price('lambda.arm64.gb_second'):.14f}")
    lambda_cost = cloudwatch.MathExpression(
        expression=f"({'+'.join(lambda_terms)})*{scale:g}", label="Lambda", period=COST_PERIOD,
        using_metrics={k: v for k, v in using.items()})
    ddb = {"rru": sources.table.metric_consumed_read_capacity_units(statistic="Sum", period=COST_PERIOD),
           "wru": sources.table.metric_consumed_write_capacity_units(statistic="Sum", period=COST_PERIOD)}
    dynamodb_cost = cloudwatch.MathExpression(
        expression=f"(FILL(rru,0)*{_price('dynamodb.ondemand.rru'):.12f}"
                   f"+FILL(wru,0)*{_price('dynamodb.ondemand.wru'):.12f})*{scale:g}",
        label="DynamoDB", period=COST_PERIOD, using_metrics=ddb)
    stream_name = sources.stream.stream_name
    if sources.stream_consumer_name:
        read = cloudwatch.Metric(namespace="AWS/Kinesis", metric_name="SubscribeToShardEvent.Bytes",
                                 dimensions_map={"StreamName": stream_name,
                                                 "ConsumerName": sources.stream_consumer_name},
                                 statistic="Sum", period=COST_PERIOD)
        read_price = _price("kinesis.ondemand.efo_retrieval_gb")
    else:
        read = sources.stream.metric_get_records_bytes(statistic="Sum", period=COST_PERIOD)
        read_price = _price("kinesis.ondemand.retrieval_gb")
    kinesis_cost = cloudwatch.MathExpression(
        expression=f"(FILL(kin,0)*{_price('kinesis.ondemand.ingest_gb') / GiB:.18f}"
                   f"+FILL(kout,0)*{read_price / GiB:.18f})*{scale:g}+{_price('kinesis.ondemand.stream_hour'):g}",
        label="Kinesis (on-demand)", period=COST_PERIOD,
        using_metrics={"kin": sources.stream.metric_incoming_bytes(statistic="Sum", period=COST_PERIOD),
                       "kout": read})
    api_metrics: dict[str, cloudwatch.IMetric] = {
        f"api{i}": cloudwatch.Metric(namespace="AWS/ApiGateway", metric_name="Count",
                                     dimensions_map={"ApiId": api.api_id}, statistic="Sum", period=COST_PERIOD)
        for i, api in enumerate(sources.http_apis)}
    api_metrics["wsmsg"] = cloudwatch.Metric(namespace="AWS/ApiGateway", metric_name="MessageCount",
                                             dimensions_map={"ApiId": sources.websocket_api.api_id},
                                             statistic="Sum", period=COST_PERIOD)
    http_terms = "+".join(f"FILL(api{i},0)" for i in range(len(sources.http_apis)))
    api_cost = cloudwatch.MathExpression(
        expression=f"(({http_terms})*{_price('apigw.http.request'):.10f}"
                   f"+FILL(wsmsg,0)*{_price('apigw.websocket.message'):.10f})*{scale:g}",
        label="API Gateway", period=COST_PERIOD, using_metrics=api_metrics)
    s3_cost = cloudwatch.MathExpression(
        expression=f"(FILL(SUM({search(m.S3_GET_REQUESTS, 'Sum', (m.SERVICE_DIMENSION,), 300)}),0)"
                   f"*{_price('s3.get_request'):.12f}"
                   f"+FILL(SUM({search(m.S3_PUT_REQUESTS, 'Sum', (m.SERVICE_DIMENSION,), 300)}),0)"
                   f"*{_price('s3.put_request'):.12f})*{scale:g}",
        label="S3 requests", period=COST_PERIOD, using_metrics={})
    parts = {"clambda": lambda_cost, "cddb": dynamodb_cost, "ckin": kinesis_cost, "capi": api_cost, "cs3": s3_cost}
    total = cloudwatch.MathExpression(expression="+".join(parts), label="Total", period=COST_PERIOD,
                                      using_metrics=dict(parts))
    return [total, *parts.values()]


def operations_dashboard(scope: Construct, sources: DashboardSources,
                         backlog_quota_alarm_ratio: float) -> cloudwatch.Dashboard:
    """The stack's dashboard (output OperationsDashboardUrl)."""
    functions = sources.functions
    journal = next(f.service for f in functions if f.function is sources.journal_consumer)
    dashboard = cloudwatch.Dashboard(scope, OPERATIONS_DASHBOARD_ID, default_interval=Duration.hours(3))
    pin_logical_id(dashboard, OPERATIONS_DASHBOARD_ID)
    dashboard.add_widgets(cloudwatch.TextWidget(
        markdown="## Magnetar\nPer-namespace graphs come from the functions' EMF metrics (namespace `Magnetar`); "
                 "docs/operations.md describes each graph and the runbook of each alarm.", width=24, height=2))
    dashboard.add_widgets(
        _graph("Publish rate by namespace (messages/s)",
               [_per_namespace(m.PUBLISHED_MESSAGES, "Sum", "", per_second=True)], left_label="messages/s"),
        _graph("Dispatch rate by namespace (messages/s)",
               [_per_namespace(m.DISPATCHED_MESSAGES, "Sum", "polled", per_second=True),
                _per_namespace(m.PUSHED_MESSAGES, "Sum", "pushed", per_second=True)], left_label="messages/s"),
        _graph("Backlog by namespace (entries)", [_per_namespace(m.BACKLOG_ENTRIES, "Maximum", "")],
               left_label="entries"),
    )
    dashboard.add_widgets(
        _graph("End-to-end latency by namespace (ms)",
               [_per_namespace(m.END_TO_END_LATENCY, "p50", "p50"), _per_namespace(m.END_TO_END_LATENCY, "p99", "p99")],
               left_label="ms"),
        _graph("Backlog quota used by namespace (1 = at the quota)",
               [_per_namespace(m.BACKLOG_QUOTA_RATIO, "Maximum", "")], annotation=backlog_quota_alarm_ratio),
        _graph("Publish errors and refusals by namespace",
               [_per_namespace(m.PUBLISH_ERRORS, "Sum", "errors"), _per_namespace(m.PUBLISH_REFUSED, "Sum", "refused"),
                _per_namespace(m.DEAD_LETTERED_MESSAGES, "Sum", "dead-lettered")]),
    )
    dashboard.add_widgets(
        _graph("Function errors and throttles",
               [f.function.metric_errors(statistic="Sum", period=Duration.minutes(1), label=f"{f.service} errors")
                for f in functions],
               [f.function.metric_throttles(statistic="Sum", period=Duration.minutes(1),
                                            label=f"{f.service} throttles") for f in functions]),
        _graph("Lambda concurrency",
               [f.function.metric("ConcurrentExecutions", statistic="Maximum", period=Duration.minutes(1),
                                  label=f.service) for f in functions]
               + [cloudwatch.Metric(namespace="AWS/Lambda", metric_name="ConcurrentExecutions", statistic="Maximum",
                                    period=Duration.minutes(1), label="account")]),
        _graph("Journal iterator age (ms)",
               [sources.journal_consumer.metric("IteratorAge", statistic="Maximum", period=Duration.minutes(1))],
               left_label="ms"),
    )
    dashboard.add_widgets(
        _graph("DynamoDB and Kinesis throttles",
               [sources.table.metric("ReadThrottleEvents", statistic="Sum", period=Duration.minutes(1)),
                sources.table.metric("WriteThrottleEvents", statistic="Sum", period=Duration.minutes(1)),
                sources.stream.metric_write_provisioned_throughput_exceeded(statistic="Sum", period=Duration.minutes(1)),
                sources.stream.metric_read_provisioned_throughput_exceeded(statistic="Sum", period=Duration.minutes(1))]),
        _graph("AWS calls throttled and retried, by service (all functions)",
               [cloudwatch.MathExpression(expression=search(m.AWS_THROTTLES, "Sum",
                                                            (m.AWS_SERVICE_DIMENSION, m.SERVICE_DIMENSION)),
                                          label="throttled", period=Duration.seconds(PERIOD_S), using_metrics={}),
                cloudwatch.MathExpression(expression=search(m.AWS_RETRIES, "Sum",
                                                            (m.AWS_SERVICE_DIMENSION, m.SERVICE_DIMENSION)),
                                          label="retried", period=Duration.seconds(PERIOD_S), using_metrics={})]),
        _graph("Estimated cost (USD/hour)", list(cost_per_hour(sources)), left_label="USD/hour"),
    )
    dashboard.add_widgets(
        _graph("Sealing", [_emf(m.SEALED_ENTRIES, journal), _emf(m.SEGMENTS_WRITTEN, journal)],
               [_emf(m.HOLES, journal), _emf(m.LATE_AFTER_HOLE, journal), _emf(m.LATE_REAPPENDED, journal)]),
        _graph("Authorizer", [_emf(m.AUTHORIZATIONS, _service(functions, "authorizer")),
                              _emf(m.AUTHORIZER_DENIALS, _service(functions, "authorizer"))]),
        _graph("Cold starts by function",
               [cloudwatch.MathExpression(expression=search(m.COLD_START, "Sum", (m.SERVICE_DIMENSION,)),
                                          label="", period=Duration.seconds(PERIOD_S), using_metrics={})]),
    )
    stack = Stack.of(scope)
    CfnOutput(scope, "OperationsDashboardUrl", description="The CloudWatch dashboard (docs/operations.md)",
              value=f"https://{stack.region}.console.aws.amazon.com/cloudwatch/home?region={stack.region}"
                    f"#dashboards:name={dashboard.dashboard_name}")
    return dashboard


def _service(functions: list[DashboardFunction], suffix: str) -> str:
    return next(f.service for f in functions if f.service.endswith(suffix))
