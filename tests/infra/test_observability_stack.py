"""Synthesis tests of operating the stack: tracing and log levels, the operations dashboard, the operational
alarms (to the alarm topic) and their metrics being the ones the functions emit."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import pytest

from infra_helpers import synthesis_inputs

pytest.importorskip("aws_cdk")

from aws_cdk import App
from aws_cdk.assertions import Template

pytestmark = pytest.mark.cdk

TOPIC_ARN = "arn:aws:sns:us-east-1:111122223333:magnetar-alarms"
HANDLERS = ("BROKER_FUNCTION_ID", "JOURNAL_CONSUMER_FUNCTION_ID", "WEBSOCKET_FUNCTION_ID", "MAINTENANCE_FUNCTION_ID",
            "AUTHORIZER_FUNCTION_ID")
NEW_ALARMS = ("BacklogQuotaAlarm", "DeadLetterAlarm", "PublishErrorsAlarm", "DynamoDbThrottleAlarm",
              "KinesisThrottleAlarm", "LambdaThrottleAlarm", "AuthorizerDenialsAlarm")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A stack with an alarm topic and two thresholds from the context."""
    layer_dir, stack_module, context = synthesis_inputs(tmp_path_factory, "layer-obs")
    app = App(context={**context, "alarmTopicArn": TOPIC_ARN, "backlogQuotaAlarmRatio": "0.9",
                       "authorizerDenialsAlarm": "250"},
              outdir=str(tmp_path_factory.mktemp("cdk.out-obs")))
    return Template.from_stack(stack_module.MagnetarStack(app, "Operated", layer_dir=layer_dir)).to_json()


def _resources(template: Mapping[str, Any], type_: str) -> dict[str, Any]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def _service(template: Mapping[str, Any], config: ModuleType, function_id_name: str) -> str:
    function = template["Resources"][getattr(config, function_id_name)]
    return str(function["Properties"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"])


def _dashboard(template: Mapping[str, Any]) -> dict[str, Any]:
    """The dashboard's body, its CloudFormation references replaced by "REF" (it must still be JSON)."""
    [dashboard] = _resources(template, "AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    body: dict[str, Any] = json.loads("".join(p if isinstance(p, str) else "REF" for p in parts))
    return body


def _widget(body: Mapping[str, Any], title: str) -> dict[str, Any]:
    found = [w for w in body["widgets"] if w["properties"].get("title", "").startswith(title)]
    assert found, f"no widget {title!r}"
    return dict(found[0]["properties"])


def _expressions(widget: Mapping[str, Any]) -> list[str]:
    return [m[-1]["expression"] for m in widget["metrics"] if isinstance(m[-1], dict) and "expression" in m[-1]]


def test_handlers_trace_on_request_and_log_warnings_by_default(template: dict[str, Any], config: ModuleType) -> None:
    """By default X-Ray records only the invocations whose caller asks (PassThrough) and Lambda writes
    JSON lines from WARN up: no START/END/REPORT line per invocation (both are billed per message)."""
    for name in HANDLERS:
        function = template["Resources"][getattr(config, name)]["Properties"]
        assert function["TracingConfig"] == {"Mode": "PassThrough"}, name
        logging = {k: v for k, v in function["LoggingConfig"].items() if k != "LogGroup"}
        assert logging == {"LogFormat": "JSON", "ApplicationLogLevel": "WARN", "SystemLogLevel": "WARN"}, name


def test_tracing_and_log_level_come_from_the_context(tmp_path_factory: pytest.TempPathFactory,
                                                     config: ModuleType) -> None:
    layer_dir, stack_module, context = synthesis_inputs(tmp_path_factory, "layer-obs-traced")
    app = App(context={**context, "tracing": "active", "logLevel": "info"},
              outdir=str(tmp_path_factory.mktemp("cdk.out-obs-traced")))
    template = Template.from_stack(stack_module.MagnetarStack(app, "Traced", layer_dir=layer_dir)).to_json()
    for name in HANDLERS:
        function = template["Resources"][getattr(config, name)]["Properties"]
        assert function["TracingConfig"] == {"Mode": "Active"}, name
        assert function["LoggingConfig"]["SystemLogLevel"] == "INFO", name


@pytest.mark.parametrize("key, value", [("tracing", "sometimes"), ("logLevel", "LOUD")])
def test_an_unknown_tracing_mode_or_log_level_is_refused(tmp_path_factory: pytest.TempPathFactory,
                                                         key: str, value: str) -> None:
    layer_dir, stack_module, context = synthesis_inputs(tmp_path_factory, "layer-obs-bad")
    app = App(context={**context, key: value}, outdir=str(tmp_path_factory.mktemp("cdk.out-obs-bad")))
    with pytest.raises(ValueError, match=key):
        stack_module.MagnetarStack(app, "Bad", layer_dir=layer_dir)


def test_the_dashboard_shows_each_namespace_by_search(template: dict[str, Any]) -> None:
    body = _dashboard(template)
    publish = _expressions(_widget(body, "Publish rate by namespace"))
    assert publish == ["SEARCH('{Magnetar,namespace,service} MetricName=\"PublishedMessages\"', 'Sum', 60)/60"]
    dispatch = " ".join(_expressions(_widget(body, "Dispatch rate by namespace")))
    assert '"DispatchedMessages"' in dispatch and '"PushedMessages"' in dispatch
    latency = _expressions(_widget(body, "End-to-end latency by namespace"))
    assert [e.rsplit(",", 2)[1].strip() for e in latency] == ["'p50'", "'p99'"]
    assert '"BacklogEntries"' in _expressions(_widget(body, "Backlog by namespace"))[0]
    quota = _widget(body, "Backlog quota used")
    assert quota["annotations"]["horizontal"][0]["value"] == 0.9  # the alarm's threshold
    throttled = " ".join(_expressions(_widget(body, "AWS calls throttled")))
    assert "{Magnetar,AwsService,service}" in throttled


def test_the_dashboard_shows_the_services_own_metrics(template: dict[str, Any]) -> None:
    body = _dashboard(template)
    names = {(m[0], m[1]) for w in body["widgets"] for m in w["properties"].get("metrics", [])
             if isinstance(m[0], str)}
    for metric in (("AWS/Lambda", "Errors"), ("AWS/Lambda", "Throttles"), ("AWS/Lambda", "ConcurrentExecutions"),
                   ("AWS/Lambda", "IteratorAge"), ("AWS/DynamoDB", "ReadThrottleEvents"),
                   ("AWS/DynamoDB", "WriteThrottleEvents"), ("AWS/Kinesis", "WriteProvisionedThroughputExceeded"),
                   ("Magnetar", "SealedEntries"), ("Magnetar", "AuthorizerDenials")):
        assert metric in names, metric
    assert "OperationsDashboardUrl" in template["Outputs"]


def test_the_cost_widget_prices_the_requests_per_hour(template: dict[str, Any]) -> None:
    from magnetar.cost.prices import PRICES

    cost = _widget(_dashboard(template), "Estimated cost")
    expressions = {m[-1]["label"]: m[-1]["expression"] for m in cost["metrics"] if "expression" in m[-1]}
    assert expressions["Total"] == "clambda+cddb+ckin+capi+cs3"
    lam = expressions["Lambda"]
    assert lam.count("FILL(inv") == len(HANDLERS) and lam.endswith("*12")  # 5-minute sums, per hour
    assert f"{PRICES['lambda.request'].usd / PRICES['lambda.request'].per:.10f}" in lam
    assert f"+{PRICES['kinesis.ondemand.stream_hour'].usd:g}" in expressions["Kinesis (on-demand)"]
    assert '"S3PutRequests"' in expressions["S3 requests"]


def test_operational_alarms_go_to_the_alarm_topic(template: dict[str, Any]) -> None:
    alarms = _resources(template, "AWS::CloudWatch::Alarm")
    for logical_id in (*NEW_ALARMS, "JournalIteratorAgeAlarm", "LateAfterHoleAlarm"):
        properties = alarms[logical_id]["Properties"]
        assert properties["AlarmActions"] == [TOPIC_ARN], logical_id
        assert properties["OKActions"] == [TOPIC_ARN], logical_id
        assert properties["TreatMissingData"] == "notBreaching", logical_id


def test_alarms_read_the_metrics_the_functions_emit(template: dict[str, Any], config: ModuleType) -> None:
    from magnetar.core import metrics as m

    alarms = {k: v["Properties"] for k, v in _resources(template, "AWS::CloudWatch::Alarm").items()}
    quota = alarms["BacklogQuotaAlarm"]
    assert (quota["MetricName"], quota["Statistic"], quota["Threshold"]) == (m.BACKLOG_QUOTA_RATIO, "Maximum", 0.9)
    assert quota["Dimensions"] == [{"Name": "service", "Value": _service(template, config, "MAINTENANCE_FUNCTION_ID")}]
    assert quota["EvaluationPeriods"] == 3
    denials = alarms["AuthorizerDenialsAlarm"]
    assert (denials["MetricName"], denials["Threshold"]) == (m.AUTHORIZER_DENIALS, 250)
    assert denials["Dimensions"] == [{"Name": "service",
                                      "Value": _service(template, config, "AUTHORIZER_FUNCTION_ID")}]
    for logical_id, metric in (("DeadLetterAlarm", m.DEAD_LETTERED_MESSAGES), ("PublishErrorsAlarm", m.PUBLISH_ERRORS)):
        stats = [q["MetricStat"]["Metric"] for q in alarms[logical_id]["Metrics"] if "MetricStat" in q]
        assert {s["MetricName"] for s in stats} == {metric}
        services = {d["Value"] for s in stats for d in s["Dimensions"]}
        assert services == {_service(template, config, "BROKER_FUNCTION_ID"),
                            _service(template, config, "WEBSOCKET_FUNCTION_ID")}, logical_id
    dynamo = [q["MetricStat"]["Metric"]["MetricName"] for q in alarms["DynamoDbThrottleAlarm"]["Metrics"]
              if "MetricStat" in q]
    assert sorted(dynamo) == ["ReadThrottleEvents", "WriteThrottleEvents"]
    assert alarms["KinesisThrottleAlarm"]["MetricName"] == "WriteProvisionedThroughputExceeded"
    throttled = {q["MetricStat"]["Metric"]["Dimensions"][0]["Value"]["Ref"]
                 for q in alarms["LambdaThrottleAlarm"]["Metrics"] if "MetricStat" in q}
    assert config.MAINTENANCE_FUNCTION_ID not in throttled  # one run at a time: its throttles are by design
    assert config.BROKER_FUNCTION_ID in throttled


def test_a_backlog_quota_ratio_outside_0_to_1_is_refused(tmp_path_factory: pytest.TempPathFactory) -> None:
    layer_dir, stack_module, context = synthesis_inputs(tmp_path_factory, "layer-obs-bad")
    app = App(context={**context, "backlogQuotaAlarmRatio": "1.5"}, outdir=str(tmp_path_factory.mktemp("cdk.out-b")))
    with pytest.raises(ValueError, match=r"backlogQuotaAlarmRatio 1\.5"):
        stack_module.MagnetarStack(app, "Bad", layer_dir=layer_dir)
