"""The journal consumer on Kinesis enhanced fan-out (stack prop / context `journalFanOut`, default on).

On: a registered stream consumer, the journal consumer's event-source mapping on the consumer's ARN
(SubscribeToShard, not counted against the 5 GetRecords/s a shard allows all its readers) with no
batching window, and the broker functions read sealed entries only (MAGNETAR_TAIL_READS=off).
Off: the shared-throughput mapping on the stream, as before, and tail reads on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from infra_helpers import synthesis_inputs

pytest.importorskip("aws_cdk")

from aws_cdk import App
from aws_cdk.assertions import Template

REPO_ROOT = Path(__file__).resolve().parents[2]
CONSUMER_ID = "JournalStreamConsumer"
CONSUMER_ARN = {"Fn::GetAtt": [CONSUMER_ID, "ConsumerARN"]}
STREAM_ARN = {"Fn::GetAtt": ["JournalStream", "Arn"]}
# What Lambda needs for an enhanced fan-out mapping (AWS: services-kinesis-create).
STREAM_READS = {
    "kinesis:DescribeStream",
    "kinesis:DescribeStreamSummary",
    "kinesis:GetRecords",
    "kinesis:GetShardIterator",
    "kinesis:ListShards",
}
CONSUMER_READS = {"kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard"}

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory, config: ModuleType) -> Any:
    """Synthesize the stack with cdk.json's context plus `extra_context` and/or constructor arguments."""
    layer_dir, stack_module, base_context = synthesis_inputs(tmp_path_factory, "layer-efo")
    cache: dict[str, Template] = {}

    def make(extra_context: dict[str, str] | None = None, **kwargs: Any) -> Template:
        key = json.dumps([extra_context, kwargs], sort_keys=True)
        if key not in cache:
            app = App(
                context={**base_context, **(extra_context or {})},
                outdir=str(tmp_path_factory.mktemp("cdk.out-efo")),
            )
            stack = stack_module.MagnetarStack(app, "Magnetar", layer_dir=layer_dir, **kwargs)
            cache[key] = Template.from_stack(stack)
        return cache[key]

    return make


@pytest.fixture(scope="module")
def fan_out(synth: Any) -> Template:
    return synth()  # the default


@pytest.fixture(scope="module")
def polling(synth: Any) -> Template:
    return synth({"journalFanOut": "false"})


def _mapping(template: Template) -> Mapping[str, Any]:
    template.resource_count_is("AWS::Lambda::EventSourceMapping", 1)
    [(logical_id, mapping)] = template.find_resources("AWS::Lambda::EventSourceMapping").items()
    return {"LogicalId": logical_id, **mapping["Properties"]}


def _role_statements(template: Template, function_id: str) -> list[Mapping[str, Any]]:
    function = template.find_resources("AWS::Lambda::Function")[function_id]
    role_ref = {"Ref": function["Properties"]["Role"]["Fn::GetAtt"][0]}
    return [
        statement
        for policy in template.find_resources("AWS::IAM::Policy").values()
        if role_ref in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: Mapping[str, Any]) -> set[str]:
    action = statement["Action"]
    return set(action) if isinstance(action, list) else {action}


def _resources(statement: Mapping[str, Any]) -> list[Any]:
    resource = statement["Resource"]
    return resource if isinstance(resource, list) else [resource]


def _env(template: Template, function_id: str) -> Mapping[str, Any]:
    function = template.find_resources("AWS::Lambda::Function")[function_id]
    return function["Properties"]["Environment"]["Variables"]  # type: ignore[no-any-return]


def test_the_stream_consumer_exists(fan_out: Template) -> None:
    fan_out.resource_count_is("AWS::Kinesis::StreamConsumer", 1)
    consumer = fan_out.find_resources("AWS::Kinesis::StreamConsumer")[CONSUMER_ID]
    assert consumer["Properties"] == {"ConsumerName": "magnetar-journal-consumer", "StreamARN": STREAM_ARN}


def test_the_mapping_subscribes_on_the_consumer_without_batching_window(
    fan_out: Template, config: ModuleType
) -> None:
    props = _mapping(fan_out)
    assert props["EventSourceArn"] == CONSUMER_ARN
    assert props["MaximumBatchingWindowInSeconds"] == 0
    assert props["FunctionName"] == {"Ref": config.JOURNAL_CONSUMER_FUNCTION_ID}


@pytest.mark.parametrize("setting", ["fan_out", "polling"])
def test_the_mapping_keeps_its_settings_and_logical_id(
    request: pytest.FixtureRequest, config: ModuleType, setting: str
) -> None:
    """The same mapping either way: only its source and batching window change (a new ARN makes
    CloudFormation replace the mapping, under the same logical id)."""
    props = _mapping(request.getfixturevalue(setting))
    assert (
        props["LogicalId"] == "JournalConsumerFunctionKinesisEventSourceMagnetarJournalStream182025E7817885E3"
    )
    assert props["StartingPosition"] == "TRIM_HORIZON"
    assert props["BatchSize"] == config.JOURNAL_BATCH_SIZE
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BisectBatchOnFunctionError"] is False
    assert props["ParallelizationFactor"] == 1
    # Unset means unlimited: the sealer must never skip a record.
    assert "MaximumRetryAttempts" not in props
    assert "MaximumRecordAgeInSeconds" not in props


def test_off_keeps_the_polling_mapping_on_the_stream(polling: Template, config: ModuleType) -> None:
    polling.resource_count_is("AWS::Kinesis::StreamConsumer", 0)
    props = _mapping(polling)
    assert props["EventSourceArn"] == STREAM_ARN
    assert props["MaximumBatchingWindowInSeconds"] == config.JOURNAL_MAX_BATCHING_WINDOW_S
    statements = _role_statements(polling, config.JOURNAL_CONSUMER_FUNCTION_ID)
    assert not [s for s in statements if CONSUMER_ARN in _resources(s)]


@pytest.mark.parametrize(
    ("setting", "value"),
    [("fan_out", "off"), ("polling", "on")],
)
def test_tail_reads_follow_the_flag(
    request: pytest.FixtureRequest, config: ModuleType, setting: str, value: str
) -> None:
    template = request.getfixturevalue(setting)
    assert config.ENV_TAIL_READS == "MAGNETAR_TAIL_READS"
    for function_id in (config.BROKER_FUNCTION_ID, config.WEBSOCKET_FUNCTION_ID):
        assert _env(template, function_id)[config.ENV_TAIL_READS] == value, function_id
    # Neither the journal consumer (the reader itself) nor the maintenance function read the tail.
    for function_id in (config.JOURNAL_CONSUMER_FUNCTION_ID, config.MAINTENANCE_FUNCTION_ID):
        assert config.ENV_TAIL_READS not in _env(template, function_id), function_id


def test_tail_reads_value_is_what_the_handlers_parse(
    config: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    for value, expected in (("off", False), ("on", True)):
        monkeypatch.setenv(config.ENV_TAIL_READS, value)
        assert config.tail_reads_from_env() is expected


def test_consumer_permissions_are_exact_and_scoped(fan_out: Template, config: ModuleType) -> None:
    """SubscribeToShard and DescribeStreamConsumer on the consumer's ARN, in a statement of their
    own; the stream's reads on the stream's ARN; nothing on Resource "*" (but active tracing's X-Ray
    calls, which have no resource)."""
    statements = _role_statements(fan_out, config.JOURNAL_CONSUMER_FUNCTION_ID)
    on_consumer = [s for s in statements if CONSUMER_ARN in _resources(s)]
    assert len(on_consumer) == 1
    [statement] = on_consumer
    assert statement["Effect"] == "Allow"
    assert _actions(statement) == CONSUMER_READS
    assert _resources(statement) == [CONSUMER_ARN]
    on_stream = set().union(*(_actions(s) for s in statements if STREAM_ARN in _resources(s)))
    assert on_stream >= STREAM_READS
    for s in statements:
        if _actions(s) != {"xray:PutTelemetryRecords", "xray:PutTraceSegments"}:
            assert "*" not in _resources(s), s


def test_only_the_journal_consumer_may_subscribe(fan_out: Template, config: ModuleType) -> None:
    for function_id in (
        config.BROKER_FUNCTION_ID,
        config.WEBSOCKET_FUNCTION_ID,
        config.MAINTENANCE_FUNCTION_ID,
        config.AUTHORIZER_FUNCTION_ID,
    ):
        statements = _role_statements(fan_out, function_id)
        assert not [s for s in statements if CONSUMER_ARN in _resources(s)], function_id


def test_flag_from_argument_wins_over_context(synth: Any) -> None:
    template = synth({"journalFanOut": "true"}, journal_fan_out=False)
    template.resource_count_is("AWS::Kinesis::StreamConsumer", 0)
    assert _mapping(template)["EventSourceArn"] == STREAM_ARN


def test_the_batching_window_is_a_setting_of_either_mapping(synth: Any) -> None:
    """journalBatchingWindow: fewer, larger seals for that much more end-to-end latency."""
    assert _mapping(synth({"journalBatchingWindow": "2"}))["MaximumBatchingWindowInSeconds"] == 2
    assert _mapping(synth({"journalFanOut": "false", "journalBatchingWindow": "0"}))[
        "MaximumBatchingWindowInSeconds"] == 0
    assert _mapping(synth(journal_batching_window_s=5))["MaximumBatchingWindowInSeconds"] == 5
    with pytest.raises(ValueError, match="0 to 300 s"):
        synth({"journalBatchingWindow": "301"})


def test_the_seal_latency_target_is_a_setting_of_the_journal_consumer(synth: Any) -> None:
    """sealLatencyMs: how long a busy shard's small batch may wait to be sealed (seals follow the load)."""
    assert _env(synth(), "JournalConsumerFunction")["MAGNETAR_SEAL_LATENCY_MS"] == "200"
    assert _env(synth({"sealLatencyMs": "500"}), "JournalConsumerFunction")["MAGNETAR_SEAL_LATENCY_MS"] == "500"
    assert _env(synth(seal_latency_ms=0), "JournalConsumerFunction")["MAGNETAR_SEAL_LATENCY_MS"] == "0"
    with pytest.raises(Exception, match="0 to 10000 ms"):
        synth({"sealLatencyMs": "60000"})


def test_the_journal_consumer_gets_the_memory_the_cost_model_prices(synth: Any) -> None:
    from magnetar.config import FUNCTION_MEMORY_MB, LAMBDA_MEMORY_MB

    functions = synth().find_resources("AWS::Lambda::Function")
    assert functions["JournalConsumerFunction"]["Properties"]["MemorySize"] == FUNCTION_MEMORY_MB[
        "magnetar-journal-consumer"] < LAMBDA_MEMORY_MB
    assert functions["BrokerFunction"]["Properties"]["MemorySize"] == LAMBDA_MEMORY_MB
