"""The functions' registry, code store, input index, state and counters on the in-memory ports."""

from __future__ import annotations

import threading

import pytest

from magnetar.adapters.memory import memory_broker
from magnetar.api.multipart import parse
from magnetar.core.broker import Broker
from magnetar.core.errors import Conflict, InvalidInput, NotFound, PayloadTooLarge, RequestTimeout
from magnetar.core.functions.registry import MAX_CODE_BYTES, FunctionCode, FunctionRegistry, state_json
from magnetar.core.functions.trigger import trigger
from magnetar.core.naming import TopicName
from magnetar.functions.config import FunctionConfig

CODE = FunctionCode("exclamation.py", b"def process(x):\n    return x + '!'\n")


@pytest.fixture
def broker() -> Broker:
    return memory_broker()


@pytest.fixture
def registry(broker: Broker) -> FunctionRegistry:
    return broker.functions


def _config(name: str = "excl", **fields: object) -> FunctionConfig:
    return FunctionRegistry.config_of({"className": "exclamation.process", "inputs": ["in"], "output": "out",
                                       **fields}, "public", "default", name)


def test_create_stores_config_code_and_index(registry: FunctionRegistry, broker: Broker) -> None:
    record = registry.create(_config(), CODE)
    assert record.version == 1 and record.state == "RUNNING"
    assert record.code_key.startswith("functions/public/default/excl/1/") and record.code_key.endswith("/exclamation.py")
    assert registry.code(record) == CODE.data
    got = registry.get("public", "default", "excl")
    assert got.inputs == ["persistent://public/default/in"] and got.output == "persistent://public/default/out"
    assert got.py == "exclamation.py"
    assert registry.list_functions("public", "default") == ["excl"]
    assert registry.consumers_of("persistent://public/default/in") == ["public/default/excl"]
    assert registry.consumers_of("in-partition-3") == ["public/default/excl"]  # a partition of the input
    assert registry.consumers_of("out") == []


def test_create_rules(registry: FunctionRegistry) -> None:
    registry.create(_config(), CODE)
    with pytest.raises(Conflict, match="already exists"):
        registry.create(_config(), CODE)
    cases = [
        (_config("a", className=""), "classname"),
        (_config("b", inputs=[]), "No input topic"),
        (_config("c", output="in"), "also being used as an input"),
        (_config("d", retainOrdering=True, retainKeyOrdering=True), "Only one of retain"),
        (_config("e", deadLetterTopic="dlq"), "max retries is set to infinity"),
        (_config("f", topicsPattern="in-[", inputs=[]), "Invalid topicsPattern"),
        (_config("g", py="code.jar"), "py must name"),
    ]
    for config, reason in cases:
        with pytest.raises(InvalidInput, match=reason):
            registry.create(config, CODE)
    with pytest.raises(InvalidInput, match="package is not provided"):
        registry.create(_config("h"), None)
    with pytest.raises(PayloadTooLarge):
        registry.create(_config("i"), FunctionCode("big.py", b"#" * (MAX_CODE_BYTES + 1)))
    with pytest.raises(InvalidInput, match="Namespace public/nope does not exist"):
        registry.create(FunctionRegistry.config_of({"className": "a.b", "inputs": ["x"]}, "public", "nope", "f"), CODE)
    with pytest.raises(InvalidInput, match="does not match the path"):
        FunctionRegistry.config_of({"name": "other"}, "public", "default", "excl")
    with pytest.raises(InvalidInput, match="parallelism must be from 1"):
        registry.create(_config("j", parallelism=0), CODE)
    assert registry.list_functions("public", "default") == ["excl"]


def test_update_merges_bumps_version_and_moves_the_index(registry: FunctionRegistry, broker: Broker) -> None:
    first = registry.create(_config(), CODE)
    second = registry.update("public", "default", "excl", {"inputs": ["in2"], "parallelism": 3}, None)
    assert second.version == 2 and second.code_key == first.code_key  # no new code: the same object
    got = registry.get("public", "default", "excl")
    assert got.parallelism == 3 and got.output == "persistent://public/default/out"  # kept
    assert registry.consumers_of("in") == [] and registry.consumers_of("in2") == ["public/default/excl"]
    third = registry.update("public", "default", "excl", {}, FunctionCode("exclamation.py", b"def process(x): return x\n"))
    assert third.version == 3 and third.code_key != first.code_key
    assert registry.code(third) == b"def process(x): return x\n"
    assert first.code_key not in broker.segments.objects  # type: ignore[attr-defined]
    with pytest.raises(InvalidInput, match="Processing Guarantees cannot be altered"):
        registry.update("public", "default", "excl", {"processingGuarantees": "EFFECTIVELY_ONCE"}, None)
    with pytest.raises(NotFound, match="doesn't exist"):
        registry.update("public", "default", "nope", {}, None)
    with pytest.raises(InvalidInput, match="also being used"):
        registry.update("public", "default", "excl", {"output": "in2"}, None)


def test_update_is_conditional_on_the_version_read(registry: FunctionRegistry, broker: Broker) -> None:
    record = registry.create(_config(), CODE)
    newer = registry.update("public", "default", "excl", {"parallelism": 2}, None)
    assert not broker.metadata.update_function(record, record)  # a writer that read version 1
    assert broker.metadata.get_function("public", "default", "excl") == newer


def test_delete_removes_code_index_and_state(registry: FunctionRegistry, broker: Broker) -> None:
    record = registry.create(_config(), CODE)
    registry.put_state("public", "default", "excl", "k", b"v")
    registry.delete("public", "default", "excl")
    with pytest.raises(NotFound):
        registry.get("public", "default", "excl")
    assert record.code_key not in broker.segments.objects  # type: ignore[attr-defined]
    assert registry.consumers_of("in") == []
    assert broker.metadata.get_function_state(record.fqfn, "k") is None
    with pytest.raises(NotFound):
        registry.delete("public", "default", "excl")


def test_start_stop_status_and_stats(registry: FunctionRegistry) -> None:
    registry.create(_config(parallelism=2), CODE)
    status = registry.status("public", "default", "excl")
    # one instance whatever the parallelism: the dispatcher (core/functions/dispatch.py)
    assert status["numInstances"] == 1 and status["numRunning"] == 1 and len(status["instances"]) == 1
    assert status["instances"][0]["status"]["running"] and status["instances"][0]["status"]["numReceived"] == 0
    registry.stop("public", "default", "excl")
    assert registry.record("public", "default", "excl").state == "STOPPED"
    stopped = registry.status("public", "default", "excl")
    assert stopped["numRunning"] == 0 and not stopped["instances"][0]["status"]["running"]
    registry.start("public", "default", "excl")
    assert registry.record("public", "default", "excl").state == "RUNNING"
    stats = registry.stats("public", "default", "excl")
    assert stats["receivedTotal"] == 0 and stats["processedSuccessfullyTotal"] == 0 and len(stats["instances"]) == 1
    with pytest.raises(NotFound):
        registry.restart("public", "default", "nope")


def test_topics_pattern_is_indexed_by_namespace(registry: FunctionRegistry) -> None:
    registry.create(_config("pat", inputs=[], topicsPattern="persistent://public/default/in-.*"), CODE)
    assert registry.consumers_of("persistent://public/default/in-7") == ["public/default/pat"]
    assert registry.consumers_of("persistent://public/default/other") == []


def test_state_values_counters_and_versions(registry: FunctionRegistry) -> None:
    registry.create(_config(), CODE)
    names = ("public", "default", "excl")
    with pytest.raises(NotFound, match="key 'k' doesn't exist"):
        registry.get_state(*names, "k")
    assert registry.put_state(*names, "k", b"hello") == 1
    assert registry.put_state(*names, "k", b"\xff\x00") == 2
    assert state_json(registry.get_state(*names, "k")) == {"key": "k", "byteValue": "/wA=", "version": 2}
    registry.put_state(*names, "k", b"text")
    assert state_json(registry.get_state(*names, "k"))["stringValue"] == "text"
    assert registry.incr_counter(*names, "c", 5) == 5
    assert registry.incr_counter(*names, "c", -2) == 3
    assert state_json(registry.get_state(*names, "c")) == {"key": "c", "numberValue": 3, "version": 2}
    registry.put_state(*names, "c", number=10)
    assert registry.get_state(*names, "c").counter == 10
    registry.delete_counter(*names, "c")
    with pytest.raises(NotFound):
        registry.get_state(*names, "c")
    with pytest.raises(NotFound):
        registry.put_state("public", "default", "nope", "k", b"v")
    with pytest.raises(InvalidInput, match="one of stringValue"):
        registry.put_state(*names, "k")


def test_counters_are_atomic_under_concurrency(registry: FunctionRegistry) -> None:
    state = registry.state_of("public/default/excl")

    def add() -> None:
        for _ in range(200):
            state.incr_counter("hits", 1)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert state.get_counter("hits") == 800
    state.put_state("v", b"x")
    assert state.get_state("v") == b"x" and state.get_state("none") is None
    state.del_counter("hits")
    assert state.get_counter("hits") == 0


def test_trigger_publishes_to_the_input_and_reads_the_output(broker: Broker) -> None:
    config = broker.functions.create(_config(), CODE)
    stored = broker.functions.get("public", "default", "excl")
    # a stand-in for the function: answers the input's message on the output
    from magnetar.core.entry import Batch, Message

    original_append = broker.writer.append

    def append(topic, batch, producer, create_topic=True):  # type: ignore[no-untyped-def]
        result = original_append(topic, batch, producer, create_topic)
        if str(topic) == "persistent://public/default/in":
            original_append(TopicName.parse("out"), Batch.of([Message(b"hello!")]), "fn")
        return result

    broker.writer.append = append  # type: ignore[method-assign]
    assert trigger(broker, stored, b"hello", timeout_ms=1000) == b"hello!"
    broker.writer.append = original_append  # type: ignore[method-assign]
    with pytest.raises(RequestTimeout, match="Request Timed Out"):
        trigger(broker, stored, b"again", timeout_ms=300)
    with pytest.raises(InvalidInput, match="doesn't consume"):
        trigger(broker, stored, b"x", topic="other", timeout_ms=10)
    assert config.fqfn == "public/default/excl"


def test_multipart_parts_keep_binary_code() -> None:
    import httpx

    code = bytes(range(256)) * 40 + b"\r\n--boundary-like\r\n"
    request = httpx.Request("POST", "http://x", data={"functionConfig": '{"className": "a.b"}'},
                            files={"data": ("f.zip", code, "application/zip")})
    parts = parse(request.headers["content-type"], request.read())
    assert parts["data"].data == code and parts["data"].filename == "f.zip"
    assert parts["functionConfig"].text == '{"className": "a.b"}'
    with pytest.raises(InvalidInput):
        parse("multipart/form-data; boundary=zz", b"not multipart")
    with pytest.raises(InvalidInput):
        parse("application/json", b"{}")
