"""Registered functions' Lambda functions on the in-memory ports: what the registry deploys for a
configuration (memory from resources, timeout from timeoutMs, reserved concurrency from
parallelism), the 400s for what Lambda cannot give, a refused deployment undoing the registration,
updates, restarts and deletes reaching the deployer, functionArn functions left alone; and the
dispatcher's side: topicsPattern inputs, schemas on the dispatched path, throttled invocations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from magnetar.adapters.memory import memory_broker
from magnetar.adapters.memory_functions import MemoryFunctionDeployer
from magnetar.core.broker import Broker
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import InvalidInput, TooManyRequests
from magnetar.core.functions.deployment import MB_PER_VCPU, deployment_of, memory_mb
from magnetar.core.functions.dispatch import FunctionDispatcher
from magnetar.core.functions.inputs import input_topics
from magnetar.core.functions.registry import FunctionCode, FunctionRegistry
from magnetar.core.naming import TopicName
from magnetar.core.schema.types import SchemaData
from magnetar.functions.config import FunctionConfig
from magnetar.functions.invocation import FunctionHost, InProcessInvoker

CODE = FunctionCode("exclamation.py", b"def process(x):\n    return x + '!'\n")
MIB = 1024 * 1024


@pytest.fixture
def deployer() -> MemoryFunctionDeployer:
    return MemoryFunctionDeployer(account_concurrency=110)


@pytest.fixture
def broker(deployer: MemoryFunctionDeployer) -> Broker:
    broker: Broker = memory_broker()
    broker.functions.deployer = deployer
    return broker


def _config(name: str = "excl", **fields: object) -> FunctionConfig:
    return FunctionRegistry.config_of({"className": "exclamation.process", "inputs": ["in"], "output": "out",
                                       **fields}, "public", "default", name)


def test_memory_follows_ram_and_cpu_as_lambda_sizes_it() -> None:
    assert memory_mb(_config()) == 1024  # neither given: Pulsar's default 1 GB of RAM
    assert memory_mb(_config(resources={"ram": 256 * MIB})) == 256
    assert memory_mb(_config(resources={"ram": 300 * MIB + 1})) == 301  # rounded up to whole MB
    assert memory_mb(_config(resources={"cpu": 2})) == 2 * MB_PER_VCPU  # a vCPU per 1,769 MB
    assert memory_mb(_config(resources={"cpu": 0.1, "ram": 512 * MIB})) == 512  # the larger of the two
    deployment = deployment_of(_config(timeoutMs=1500, parallelism=3))
    assert (deployment.timeout_s, deployment.concurrency) == (2, 3)  # the timeout in whole seconds


@pytest.mark.parametrize(("fields", "reason"), [
    ({"resources": {"cpu": 6}}, "needs 10,614 MB of Lambda memory"),
    ({"resources": {"cpu": 0}}, "resources.cpu must be positive"),
    ({"resources": {"ram": 64 * MIB}}, "resources.ram must be from"),
    ({"resources": {"ram": 20_000 * MIB}}, "resources.ram must be from"),
    ({"timeoutMs": 600_000}, "timeoutMs must be from 1 to 300000"),
    ({"parallelism": 0}, "parallelism must be from 1 to 1000"),
    ({"functionArn": "my-function"}, "functionArn must be a Lambda function's ARN"),
])
def test_what_lambda_cannot_give_is_refused_with_a_reason(broker: Broker, deployer: MemoryFunctionDeployer,
                                                          fields: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason):
        broker.functions.create(_config(**fields), CODE)
    assert deployer.functions == {} and broker.functions.list_functions("public", "default") == []


def test_create_deploys_and_status_and_get_report_the_function_arn(broker: Broker,
                                                                  deployer: MemoryFunctionDeployer) -> None:
    broker.functions.create(_config(resources={"ram": 512 * MIB}, timeoutMs=30_000, parallelism=2), CODE)
    deployed = deployer.functions["public/default/excl"]
    assert (deployed.memory_mb, deployed.timeout_s, deployed.concurrency) == (512, 30, 2)
    status = broker.functions.status("public", "default", "excl")
    assert status["functionArn"] == deployed.arn and status["instances"][0]["status"]["workerId"] == deployed.arn
    assert status["deployment"]["memoryMb"] == 512 and status["deployment"]["reservedConcurrency"] == 2
    assert status["numRunning"] == 1 and status["instances"][0]["status"]["error"] == ""
    described = broker.functions.describe("public", "default", "excl")
    assert described.functionArn == deployed.arn
    assert broker.functions.get("public", "default", "excl").functionArn is None  # not stored: ours
    # `get`'s answer sent back as an update keeps the function ours
    broker.functions.update("public", "default", "excl", described.model_dump(mode="json", exclude_none=True), None)
    assert json.loads(broker.functions.record("public", "default", "excl").config).get("functionArn") is None
    assert "public/default/excl" in deployer.functions


def test_a_refused_deployment_undoes_the_registration(broker: Broker, deployer: MemoryFunctionDeployer) -> None:
    broker.functions.create(_config("first", parallelism=5), CODE)
    code_objects = set(broker.segments.objects)  # type: ignore[attr-defined]
    with pytest.raises(InvalidInput, match="UnreservedConcurrentExecution below its minimum"):
        broker.functions.create(_config("second", parallelism=6), CODE)  # 110 - 100 unreserved: 10 to reserve
    assert broker.functions.list_functions("public", "default") == ["first"]
    assert broker.functions.consumers_of("in") == ["public/default/first"]  # its index entries are gone too
    assert set(broker.segments.objects) == code_objects  # type: ignore[attr-defined]  # and its code
    assert list(deployer.functions) == ["public/default/first"]


def test_update_deploys_before_storing_restart_and_delete(broker: Broker, deployer: MemoryFunctionDeployer) -> None:
    broker.functions.create(_config(), CODE)
    with pytest.raises(InvalidInput, match="UnreservedConcurrentExecution"):
        broker.functions.update("public", "default", "excl", {"parallelism": 50}, None)
    assert broker.functions.get("public", "default", "excl").parallelism == 1  # nothing stored
    broker.functions.update("public", "default", "excl", {"parallelism": 4, "resources": {"cpu": 1}}, None)
    assert deployer.functions["public/default/excl"].concurrency == 4
    assert deployer.functions["public/default/excl"].memory_mb == MB_PER_VCPU
    broker.functions.restart("public", "default", "excl")
    assert deployer.restarts["public/default/excl"] != ""  # new execution environments
    deployer.functions.clear()  # (its Lambda function deleted behind our back)
    assert "does not exist" in broker.functions.status("public", "default", "excl")["instances"][0]["status"]["error"]
    broker.functions.restart("public", "default", "excl")  # creates it again
    assert "public/default/excl" in deployer.functions
    broker.functions.delete("public", "default", "excl")
    assert deployer.functions == {}


def test_a_function_of_the_users_lambda_is_not_deployed(broker: Broker, deployer: MemoryFunctionDeployer) -> None:
    arn = "arn:aws:lambda:us-east-1:123456789012:function:team-excl"
    broker.functions.create(_config(functionArn=arn), None)
    assert deployer.functions == {}
    status = broker.functions.status("public", "default", "excl")
    assert status["functionArn"] == arn and "deployment" not in status


# --- the dispatcher ----------------------------------------------------------------------------
def _produce(broker: Broker, topic: str, *values: bytes, schema_version: int | None = None) -> None:
    for value in values:
        broker.writer.append(TopicName.parse(topic), Batch.of([Message(value, schema_version=schema_version)]), "p")


def _read(broker: Broker, topic: str) -> list[Message]:
    entries = broker.read_entries(TopicName.parse(topic), 0, 1000)
    return [m for e in entries if not e.hole for m in e.messages]


def test_topics_pattern_inputs_are_the_namespaces_matching_topics(broker: Broker, tmp_path: Path) -> None:
    broker.admin.create_topic(TopicName.parse("orders-eu"))
    broker.admin.create_partitioned_topic(TopicName.parse("orders-us"), 2)
    broker.admin.create_topic(TopicName.parse("invoices"))
    config = FunctionRegistry.config_of({"className": "exclamation.process", "output": "orders-out-x",
                                         "topicsPattern": "persistent://public/default/orders-[a-z]+",
                                         "subscriptionPosition": "Earliest"}, "public", "default", "pat")
    assert [t.local_name for t in input_topics(broker.metadata, config)] == ["orders-eu", "orders-us"]
    fqfn = broker.functions.create(config, CODE).fqfn
    _produce(broker, "orders-eu", b"a")
    _produce(broker, "orders-us-partition-1", b"b")
    _produce(broker, "invoices", b"c")
    dispatcher = FunctionDispatcher(broker, InProcessInvoker(FunctionHost(broker.functions, tmp_path)), nack_delay_ms=0)
    report = dispatcher.serve(fqfn, 10_000)
    assert report.received == 2 and report.acked == 2
    assert sorted(m.payload for m in _read(broker, "orders-out-x")) == [b"a!", b"b!"]


def test_schema_topics_reach_a_dispatched_function_as_records(broker: Broker, tmp_path: Path) -> None:
    avro = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "int"}, {"name": "item", "type": "string"}]}
    out_schema = {"type": "record", "name": "Line", "fields": [{"name": "text", "type": "string"}]}
    in_topic, out_topic = TopicName.parse("avro-in"), TopicName.parse("avro-out")
    version = broker.schemas.put(in_topic, SchemaData("AVRO", json.dumps(avro)), "FULL")
    out_version = broker.schemas.put(out_topic, SchemaData("AVRO", json.dumps(out_schema)), "FULL")
    code = FunctionCode("orders.py", b"def process(order):\n"
                                     b"    return {'text': f\"{order['id']}: {order['item']}\"}\n")
    fqfn = broker.functions.create(FunctionRegistry.config_of(
        {"className": "orders.process", "inputs": ["avro-in"], "output": "avro-out",
         "subscriptionPosition": "Earliest"}, "public", "default", "orders"), code).fqfn
    from magnetar.schema import AvroSchema

    writer = AvroSchema(None, avro)
    _produce(broker, "avro-in", writer.encode({"id": 7, "item": "tea"}), schema_version=version)
    report = FunctionDispatcher(broker, InProcessInvoker(FunctionHost(broker.functions, tmp_path))).serve(fqfn, 10_000)
    assert report.acked == 1, report
    [output] = _read(broker, "avro-out")
    assert AvroSchema(None, out_schema).decode(output.payload) == {"text": "7: tea"}
    assert output.schema_version == out_version  # stored as written with the output topic's schema


class _Throttling(InProcessInvoker):
    def __init__(self, host: FunctionHost, refusals: int) -> None:
        super().__init__(host)
        self.refusals = refusals

    def invoke(self, fqfn: str, event: dict[str, Any], function_arn: str | None = None) -> dict[str, Any]:
        if self.refusals:
            self.refusals -= 1
            raise TooManyRequests("throttled")
        return super().invoke(fqfn, event, function_arn)


def test_a_throttled_invocation_is_tried_again_not_failed(broker: Broker, tmp_path: Path) -> None:
    fqfn = broker.functions.create(_config(subscriptionPosition="Earliest", maxMessageRetries=0,
                                           deadLetterTopic="dlq"), CODE).fqfn
    _produce(broker, "in", b"x")
    invoker = _Throttling(FunctionHost(broker.functions, tmp_path), refusals=3)
    report = FunctionDispatcher(broker, invoker).serve(fqfn, 60_000)
    assert report.throttled == 3 and report.failures == 0 and report.acked == 1
    assert [m.payload for m in _read(broker, "out")] == [b"x!"]  # not dead-lettered for the throttles


def test_the_invocation_names_the_users_lambda_and_carries_config_and_code(broker: Broker, tmp_path: Path) -> None:
    arn = "arn:aws:lambda:us-east-1:123456789012:function:team-excl"
    fqfn = broker.functions.create(_config(functionArn=arn, subscriptionPosition="Earliest", timeoutMs=9_000),
                                   CODE).fqfn
    seen: list[tuple[dict[str, Any], str | None]] = []
    host = FunctionHost(broker.functions, tmp_path)

    class Recording(InProcessInvoker):
        def invoke(self, fqfn: str, event: dict[str, Any], function_arn: str | None = None) -> dict[str, Any]:
            seen.append((event, function_arn))
            return super().invoke(fqfn, event, function_arn)

    _produce(broker, "in", b"y")
    FunctionDispatcher(broker, Recording(host)).serve(fqfn, 10_000)
    [(event, target)] = seen
    record = broker.functions.record("public", "default", "excl")
    assert target == arn and event["config"] == record.config
    assert event["code"] == {"key": record.code_key, "size": record.code_size, "sha256": record.code_sha256}
    assert event["timeoutMs"] == 7_000  # the function's 9 s, less the margin to return in
