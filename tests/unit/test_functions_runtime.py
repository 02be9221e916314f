"""The functions runtime and Context on the in-memory publish/ack seam (functions/memory.py):
Pulsar's exclamation function, plain functions, SerDe, each guarantee's ack order, retries and
the dead-letter topic, effectively-once keys, schemas, context.publish, state, stats, loading."""

from __future__ import annotations

import json
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest

import magnetar
from magnetar.client.message import Message, MessageId
from magnetar.functions.config import FunctionConfig
from magnetar.functions.context import secret_value
from magnetar.functions.memory import MemoryBus
from magnetar.functions.runtime import (
    INPUT_MSG_ID_PROPERTY,
    INPUT_TOPIC_PROPERTY,
    FunctionRuntime,
    InstanceFailure,
    load_function,
    producer_name,
    sequence_id,
)
from magnetar.functions.schemas import GenericJsonSchema, schema_from_info
from magnetar.functions.serde import IdentitySerDe, PickleSerDe, serde_class
from magnetar.functions.state_stores import MemoryFunctionState

IN = "persistent://public/default/in"
OUT = "persistent://public/default/out"

EXCLAMATION = '''
from magnetar import Function

class ExclamationFunction(Function):
  def __init__(self):
    pass

  def process(self, input, context):
    return input + '!'
'''


def message(payload: bytes, entry: int = 0, topic: str = IN, redeliveries: int = 0, key: str = "",
            batch_index: int = -1, properties: dict[str, str] | None = None) -> Message:
    return Message(payload, MessageId(-1, 1, entry, batch_index, topic), topic, properties or {}, key, 0, 1234,
                   redeliveries)


def runtime(function: Any, bus: MemoryBus, **config: Any) -> FunctionRuntime:
    fields = {"name": "fn", "inputs": [IN], "output": OUT} | config
    return FunctionRuntime(FunctionConfig.model_validate(fields), function, bus, bus, state=MemoryFunctionState(),
                           retry_delay_s=0)


@pytest.fixture
def exclamation(tmp_path: Path) -> Any:
    path = tmp_path / "exclamation.py"
    path.write_text(EXCLAMATION)
    return load_function(path, "exclamation.ExclamationFunction")


def test_exclamation_function_from_pulsars_docs(exclamation: Any) -> None:
    bus = MemoryBus()
    outcome = runtime(exclamation, bus).process_batch([message(b"hello", 0), message(b"world", 1)])
    assert bus.payloads(OUT) == [b"hello!", b"world!"]
    assert outcome.published == 2 and len(outcome.acked) == 2 and not outcome.nacked
    stored = bus.topics[OUT][0]
    assert stored.properties[INPUT_TOPIC_PROPERTY] == IN
    assert stored.properties[INPUT_MSG_ID_PROPERTY] == "(1,0,-1,-1)"


def test_plain_function_and_identity_serde(tmp_path: Path) -> None:
    (tmp_path / "double.py").write_text("def process(input):\n    return input * 2\n")
    fn = load_function(tmp_path / "double.py", "double.process")
    bus = MemoryBus()
    runtime(fn, bus).process_batch([message(b"21"), message(b"1.5", 1), message(b"ab", 2), message(b"\xff", 3)])
    assert bus.payloads(OUT) == [b"42", b"3.0", b"abab", b"\xff\xff"]  # int, float, str, bytes (Pulsar's serde)


def test_identity_serde_is_pulsars() -> None:
    serde = IdentitySerDe()
    assert serde.serialize("é") == "é".encode() and serde.serialize(b"x") == b"x" and serde.serialize(3) == b"3"
    assert serde.deserialize(b"3") == 3 and serde.deserialize(b"x") == "x"
    with pytest.raises(TypeError):
        serde.serialize({"a": 1})
    assert PickleSerDe().deserialize(PickleSerDe().serialize({"a": 1})) == {"a": 1}
    assert serde_class("serde.IdentitySerDe") is IdentitySerDe
    assert serde_class("pulsar.functions.serde.PickleSerDe") is PickleSerDe
    assert magnetar.IdentitySerDe is IdentitySerDe and issubclass(magnetar.PickleSerDe, magnetar.SerDe)


def test_none_publishes_nothing_and_acks() -> None:
    bus = MemoryBus()
    outcome = runtime(lambda value: None, bus).process_batch([message(b"x")])
    assert bus.topics == {} and outcome.acked == ["(1,0,-1,-1)"]


def test_atmost_once_acks_before_calling() -> None:
    bus = MemoryBus()
    seen: list[list[tuple[str, str]]] = []

    def fn(value: Any) -> Any:
        seen.append(list(bus.events))
        raise ValueError("boom")

    outcome = runtime(fn, bus, processingGuarantees="ATMOST_ONCE").process_batch([message(b"x")])
    assert seen == [[("ack", "(1,0,-1,-1)")]], "acknowledged before the function ran"
    assert not outcome.nacked and bus.topics == {}, "a failure loses it"


def test_atleast_once_acks_only_after_the_output_is_stored() -> None:
    bus = MemoryBus(store_on_flush=True)
    rt = runtime(lambda value: value, bus)
    rt.process_batch([message(b"a")])
    assert bus.events == [("publish", OUT), ("ack", "(1,0,-1,-1)")]


def test_atleast_once_failed_publish_is_nacked() -> None:
    bus = MemoryBus(failing={OUT})
    outcome = runtime(lambda value: value, bus).process_batch([message(b"a")])
    assert outcome.nacked == ["(1,0,-1,-1)"] and not outcome.acked and outcome.system_exceptions == 1


def test_user_exception_nacks_until_max_retries_then_dead_letter() -> None:
    bus = MemoryBus()

    def fn(value: Any) -> Any:
        raise RuntimeError("no")

    rt = runtime(fn, bus, maxMessageRetries=2, deadLetterTopic="persistent://public/default/dlq")
    for redeliveries in range(2):  # delivered, redelivered once: negatively acknowledged
        assert rt.process_batch([message(b"bad", redeliveries=redeliveries)]).nacked == ["(1,0,-1,-1)"]
    outcome = rt.process_batch([message(b"bad", redeliveries=2, key="k")])  # the last retry fails
    assert outcome.dead_lettered == ["(1,0,-1,-1)"] and outcome.acked == ["(1,0,-1,-1)"]
    dead = bus.topics["persistent://public/default/dlq"][0]
    assert dead.payload == b"bad" and dead.partition_key == "k"
    assert dead.properties["REAL_TOPIC"] == IN and dead.properties["ORIGIN_MESSAGE_ID"] == "(1,0,-1,-1)"
    assert rt.stats()["userExceptionsTotal"] == 3 and rt.stats()["receivedTotal"] == 3


def test_default_dead_letter_topic_is_pulsars() -> None:
    bus = MemoryBus()
    rt = runtime(lambda v: v, bus, maxMessageRetries=0)
    rt.process_batch([message(b"x", redeliveries=1)])  # past its retries: not processed
    assert list(bus.topics) == [f"{IN}-public.default.fn-DLQ"]
    assert rt.stats()["processedSuccessfullyTotal"] == 0


def test_without_max_retries_a_failure_is_redelivered_forever() -> None:
    bus = MemoryBus()
    rt = runtime(lambda v: 1 / 0, bus)
    assert rt.process_batch([message(b"x", redeliveries=50)]).nacked == ["(1,0,-1,-1)"]


def test_effectively_once_keys_and_dedup() -> None:
    bus = MemoryBus()
    rt = runtime(lambda v: v, bus, processingGuarantees="EFFECTIVELY_ONCE")
    first = message(b"a", entry=7, batch_index=2)
    rt.process_batch([first])
    rt.process_batch([first])  # redelivered after a crash between publish and ack
    assert bus.payloads(OUT) == [b"a"], "the republished output was dropped"
    out = bus.topics[OUT][0]
    assert out.sequence_id == sequence_id(first.message_id()) == (7 << 20) + 3
    assert out.producer_name == producer_name(rt.config, IN)
    assert out.producer_name != producer_name(rt.config, IN + "-partition-1")
    assert sequence_id(MessageId(-1, 1, 7, -1)) < sequence_id(MessageId(-1, 1, 7, 0)) < sequence_id(MessageId(-1, 2, 8, -1))
    assert bus.acked == ["(1,7,-1,2)", "(1,7,-1,2)"]


def test_effectively_once_retries_in_place_then_dead_letters() -> None:
    bus = MemoryBus()
    calls: list[Any] = []

    def flaky(v: Any) -> Any:
        calls.append(v)
        if len(calls) < 3:
            raise RuntimeError("not yet")
        return v

    rt = runtime(flaky, bus, processingGuarantees="EFFECTIVELY_ONCE", maxMessageRetries=5)
    outcome = rt.process_batch([message(b"a"), message(b"b", 1)])
    assert bus.payloads(OUT) == [b"a", b"b"] and not outcome.nacked, "in order, nothing redelivered"
    always = runtime(lambda v: 1 / 0, MemoryBus(), processingGuarantees="EFFECTIVELY_ONCE", maxMessageRetries=1)
    assert always.process_batch([message(b"x")]).dead_lettered == ["(1,0,-1,-1)"]
    assert always.stats()["userExceptionsTotal"] == 2


def test_effectively_once_failed_publish_fails_the_instance() -> None:
    bus = MemoryBus(failing={OUT})
    with pytest.raises(InstanceFailure):
        runtime(lambda v: v, bus, processingGuarantees="EFFECTIVELY_ONCE").process_batch([message(b"a"), message(b"b", 1)])
    assert bus.acked == [], "nothing acknowledged: the instance restarts from there"


def test_no_auto_ack_leaves_acks_to_the_function() -> None:
    bus = MemoryBus()

    class Acking(magnetar.Function):
        def process(self, input: Any, context: Any) -> Any:
            if input == "ack-me":
                context.ack(context.get_message_id(), context.get_current_message_topic_name())
            return input

    runtime(Acking(), bus, autoAck=False).process_batch([message(b"ack-me"), message(b"other", 1)])
    assert bus.acked == ["(1,0,-1,-1)"] and bus.payloads(OUT) == [b"ack-me", b"other"]


def test_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FN_TEST_SECRET", "s3cret")
    bus = MemoryBus()
    seen: dict[str, Any] = {}
    results: list[Any] = []

    class Inspect(magnetar.Function):
        def process(self, input: Any, context: magnetar.Context) -> Any:
            seen.update(
                id=str(context.get_message_id()), key=context.get_message_key(),
                eventtime=context.get_message_eventtime(), props=context.get_message_properties(),
                topic=context.get_current_message_topic_name(), pkey=context.get_partition_key(),
                okey=context.get_ordering_key(), tenant=context.get_function_tenant(),
                namespace=context.get_function_namespace(), name=context.get_function_name(),
                fid=context.get_function_id(), version=context.get_function_version(),
                instance=context.get_instance_id(), greeting=context.get_user_config_value("greeting"),
                missing=context.get_user_config_value("missing"), config=context.get_user_config_map(),
                env_secret=context.get_secret("from_env"), literal=context.get_secret("literal"),
                no_secret=context.get_secret("none"), inputs=context.get_input_topics(),
                output=context.get_output_topic(), serde=context.get_output_serde_class_name())
            context.get_logger().info("processing %s", input)
            context.record_metric("size", len(input))
            context.publish("persistent://public/default/side", input.upper(), properties={"p": "1"},
                            callback=lambda result, mid: results.append(result),
                            message_conf={"partition_key": "side-key"})
            context.publish("persistent://public/default/pickled", {"a": 1}, "serde.PickleSerDe")
            context.incr_counter("seen", 2)
            context.put_state("last", input)
            return f"{context.get_counter('seen')}:{context.get_state('last')!r}"

    rt = runtime(Inspect(), bus, userConfig={"greeting": "hi"},
                 secrets={"from_env": {"env": "FN_TEST_SECRET"}, "literal": "plain"})
    rt.process_batch([message(b"abc", entry=3, key="k1", properties={"a": "b"})])
    assert seen == {
        "id": "(1,3,-1,-1)", "key": "k1", "eventtime": 1234, "props": {"a": "b"}, "topic": IN, "pkey": "k1",
        "okey": "k1", "tenant": "public", "namespace": "default", "name": "fn", "fid": rt.function_id,
        "version": "0", "instance": 0, "greeting": "hi", "missing": None, "config": {"greeting": "hi"},
        "env_secret": "s3cret", "literal": "plain", "no_secret": None, "inputs": [IN], "output": OUT,
        "serde": "serde.IdentitySerDe"}
    side = bus.topics["persistent://public/default/side"][0]
    assert side.payload == b"ABC" and side.properties == {"p": "1"} and side.partition_key == "side-key"
    assert results == [magnetar.Result.Ok]
    assert PickleSerDe().deserialize(bus.payloads("persistent://public/default/pickled")[0]) == {"a": 1}
    assert bus.payloads(OUT) == [b"2:b'abc'"]
    assert rt.stats()["userMetrics"]["size"] == {"count": 1, "sum": 3.0, "min": 3.0, "max": 3.0}
    with pytest.raises(TypeError):
        rt.context.record_metric("bad", "x")


def test_secret_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("S_VAR", "v")
    assert secret_value({"a": "env:S_VAR"}, "a") == "v"
    assert secret_value({"a": {"env": "S_UNSET_VAR"}}, "a") is None
    assert secret_value({"a": {"path": "p", "key": "k"}}, "a") == {"path": "p", "key": "k"}


def test_stats_are_pulsars() -> None:
    bus = MemoryBus()
    rt = runtime(lambda v: 1 / 0 if v == "bad" else v, bus)
    rt.process_batch([message(b"ok"), message(b"bad", 1)])
    stats = rt.stats()
    assert (stats["receivedTotal"], stats["processedSuccessfullyTotal"], stats["userExceptionsTotal"],
            stats["systemExceptionsTotal"]) == (2, 1, 1, 0)
    assert stats["avgProcessLatency"] >= 0 and stats["lastInvocation"] > 0
    assert "ZeroDivisionError" in stats["latestUserExceptions"][0]["exceptionString"]


def test_schema_topics_decode_to_records_and_encode_outputs() -> None:
    definition = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})
    avro = schema_from_info("AVRO", definition)
    js = schema_from_info("JSON", definition)
    assert isinstance(js, GenericJsonSchema) and avro is not None
    assert schema_from_info("BYTES", "") is None and schema_from_info("STRING", "") is not None
    schemas = {IN: js, OUT: avro}
    bus = MemoryBus()
    got: list[Any] = []

    def fn(record: Any) -> Any:
        got.append(record)
        return {"name": record["name"].upper()}

    rt = FunctionRuntime(FunctionConfig(name="fn", inputs=[IN], output=OUT), fn, bus, bus,
                         input_schema=schemas.get, output_schema=schemas.get)
    rt.process_batch([message(js.encode({"name": "ada"}))])
    assert got == [{"name": "ada"}]
    assert avro.decode(bus.payloads(OUT)[0]) == {"name": "ADA"}


def test_memory_state_shares_keys_as_pulsar() -> None:
    state = MemoryFunctionState()
    assert state.get_state("k") is None and state.get_counter("c") == 0
    assert state.incr_counter("c", 5) == 5 and state.incr_counter("c", -2) == 3
    assert state.get_state("c") == (3).to_bytes(8, "big")
    state.put_state("k", b"v")
    assert state.get_state("k") == b"v"
    with pytest.raises(ValueError):
        state.get_counter("k")
    state.del_counter("c")
    assert state.get_counter("c") == 0


def test_load_from_zip_and_errors(tmp_path: Path) -> None:
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("bundle/src/zipped_fn.py", textwrap.dedent("""
            from magnetar import Function
            class Upper(Function):
                def process(self, input, context):
                    return input.upper()
        """))
    fn = load_function(archive, "zipped_fn.Upper")
    bus = MemoryBus()
    runtime(fn, bus).process_batch([message(b"zip")])
    assert bus.payloads(OUT) == [b"ZIP"]
    with pytest.raises(ValueError):
        load_function(archive, "")


def test_localrun_refuses_a_function_without_inputs(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from magnetar.cli.main import app

    (tmp_path / "f.py").write_text("def process(input):\n    return input\n")
    result = CliRunner().invoke(app, ["functions", "localrun", "--py", str(tmp_path / "f.py"), "--classname", "f.process"])
    assert result.exit_code == 1 and "--inputs or --topics-pattern" in result.output
    result = CliRunner().invoke(app, ["functions", "localrun", "--py", str(tmp_path / "f.py"), "--classname", "f.process",
                                      "--inputs", "in", "--processing-guarantees", "SOMETIMES"])
    assert result.exit_code == 1 and "processingGuarantees" in result.output
