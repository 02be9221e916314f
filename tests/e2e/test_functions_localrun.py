"""Pulsar Functions on the local cluster: Pulsar's exclamation function run by `magnetar
functions localrun` (a subprocess), and function instances (functions/instance.py, in a thread)
for dead letters, the guarantees' ack order, schemas, context.publish and state."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import magnetar
from magnetar.client import exceptions
from magnetar.functions.config import FunctionConfig
from magnetar.functions.instance import InstanceOptions, LocalInstance, wait_ready
from magnetar.functions.state_stores import MemoryFunctionState

# Pulsar's documentation's exclamation function, `from pulsar import Function` made `from magnetar import Function`
EXCLAMATION = """from magnetar import Function

class ExclamationFunction(Function):
  def __init__(self):
    pass

  def process(self, input, context):
    return input + '!'
"""


def _topic(name: str) -> str:
    return f"persistent://public/default/{name}-{uuid.uuid4().hex[:8]}"


def _read(client: magnetar.Client, topic: str, count: int, timeout_s: float = 30.0) -> list[Any]:
    consumer = client.subscribe(topic, f"reader-{uuid.uuid4().hex[:6]}",
                                initial_position=magnetar.InitialPosition.Earliest)
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < count and time.monotonic() < deadline:
            try:
                msg = consumer.receive(timeout_millis=1000)
            except exceptions.Timeout:
                continue
            out.append(msg)
            consumer.acknowledge(msg)
        return out
    finally:
        consumer.close()


def _quiet(client: magnetar.Client, topic: str, seconds: float) -> list[bytes]:
    """What else arrives on `topic` within `seconds` (from the earliest, a fresh subscription)."""
    return [m.data() for m in _read(client, topic, 10_000, timeout_s=seconds)]


def _produce(client: magnetar.Client, topic: str, payloads: list[bytes], **kwargs: Any) -> None:
    producer = client.create_producer(topic, **kwargs)
    for p in payloads:
        producer.send(p)
    producer.close()


@contextmanager
def running(cluster: Any, tmp_path: Path, code: str, classname: str, **fields: Any) -> Iterator[LocalInstance]:
    module = classname.split(".")[0]
    path = tmp_path / f"{module}.py"
    path.write_text(code)
    config = FunctionConfig.model_validate({"name": f"fn-{uuid.uuid4().hex[:6]}", "className": classname,
                                            "subscriptionPosition": "Earliest"} | fields)
    instance = LocalInstance(config, path, InstanceOptions(cluster.url, state=MemoryFunctionState(),
                                                           nack_delay_ms=300, retry_delay_s=0.2))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            instance.run()
        except BaseException as exc:  # a "crash" of the function (tests below) ends the thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        wait_ready(instance)
    except TimeoutError:
        raise AssertionError(f"the instance did not start: {errors!r}") from None
    try:
        yield instance
    finally:
        instance.stop()
        thread.join(timeout=30)


def test_exclamation_function_by_localrun(cluster, client: magnetar.Client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "exclamation.py").write_text(EXCLAMATION)
    source, sink = _topic("in"), _topic("out")
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, "-m", "magnetar.cli.main", "functions", "localrun", "--py", str(tmp_path / "exclamation.py"),
         "--classname", "exclamation.ExclamationFunction", "--inputs", source, "--output", sink,
         "--broker-service-url", cluster.url, "--subs-position", "Earliest", "--state", "memory",
         "--name", "exclamation"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _produce(client, source, [b"hello", b"world"])
        got = _read(client, sink, 2)
        assert sorted(m.data() for m in got) == [b"hello!", b"world!"]
        assert got[0].properties()["__pfn_input_topic__"] == source
    finally:
        process.send_signal(signal.SIGINT)
        try:
            output, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # never left running: the session's other tests count its requests
            process.kill()
            output, _ = process.communicate()
            raise AssertionError(f"localrun did not stop within 60 s of SIGINT:\n{output}") from None
    assert process.returncode == 0, output
    assert "running public/default/exclamation" in output and "receivedTotal 2" in output


def test_failing_function_ends_in_the_dead_letter_topic(cluster, client: magnetar.Client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source, sink, dlq = _topic("in"), _topic("out"), _topic("dlq")
    code = "calls = []\ndef process(input):\n    calls.append(input)\n    if input == 'bad':\n        raise ValueError(input)\n    return input\n"
    with running(cluster, tmp_path, code, "failing.process", inputs=[source], output=sink, maxMessageRetries=2,
                 deadLetterTopic=dlq) as instance:
        _produce(client, source, [b"bad", b"good"])
        dead = _read(client, dlq, 1)
        assert [m.data() for m in dead] == [b"bad"]
        assert dead[0].properties()["REAL_TOPIC"] == source
        assert [m.data() for m in _read(client, sink, 1)] == [b"good"]
        assert instance.runtime is not None
        assert instance.runtime.stats()["userExceptionsTotal"] == 3, "delivered once, redelivered twice"
        assert sys.modules["failing"].calls.count("bad") == 3


class Crash(BaseException):
    """The instance dies in the middle of processing (not an exception the runtime handles)."""


CRASHING = """
import os
from magnetar import Function

class Crashing(Function):
    def process(self, input, context):
        if input == "crash" and context.get_user_config_value("crash"):
            raise __import__("test_functions_crash").Crash()
        return input
"""


@pytest.mark.parametrize(("guarantee", "redelivered"), [("ATMOST_ONCE", False), ("ATLEAST_ONCE", True)])
def test_guarantee_ack_order_after_a_crash(cluster, client: magnetar.Client, tmp_path: Path, guarantee: str,  # type: ignore[no-untyped-def]
                                           redelivered: bool) -> None:
    sys.modules["test_functions_crash"] = sys.modules[__name__]
    source, sink = _topic("in"), _topic("out")
    sub = f"sub-{uuid.uuid4().hex[:6]}"
    fields = {"inputs": [source], "output": sink, "processingGuarantees": guarantee, "subName": sub}
    _produce(client, source, [b"crash"])
    with running(cluster, tmp_path, CRASHING, "crashing1.Crashing", userConfig={"crash": True}, **fields) as instance:
        deadline = time.monotonic() + 30
        while instance.runtime is None or instance.runtime.stats()["receivedTotal"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    with running(cluster, tmp_path, CRASHING, "crashing2.Crashing", **fields):
        _produce(client, source, [b"after"])
        outputs = sorted(m.data() for m in _read(client, sink, 2 if redelivered else 1))
        assert outputs == ([b"after", b"crash"] if redelivered else [b"after"])
        if not redelivered:
            assert _quiet(client, sink, 3) == [b"after"], "at most once: the crashed message is gone"


def test_function_on_a_json_schema_topic_receives_dicts(cluster, client: magnetar.Client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from magnetar.schema import Integer, JsonSchema, Record, String

    class Order(Record):
        item = String(required=True)
        quantity = Integer()

    source, sink = _topic("orders"), _topic("out")
    producer = client.create_producer(source, schema=JsonSchema(Order))
    producer.send(Order(item="tea", quantity=3))
    producer.close()
    code = "def process(order):\n    assert isinstance(order, dict), type(order)\n    return f\"{order['item']} x{order['quantity']}\"\n"
    with running(cluster, tmp_path, code, "orders_fn.process", inputs=[source], output=sink):
        assert [m.data() for m in _read(client, sink, 1)] == [b"tea x3"]


def test_context_publish_counters_and_state(cluster, client: magnetar.Client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source, sink, side, logs = _topic("in"), _topic("out"), _topic("side"), _topic("logs")
    code = f"""
from magnetar import Function

class Counting(Function):
    def process(self, input, context):
        count = context.incr_counter("words", 1)
        context.put_state("last", input)
        context.get_logger().info("counted %s", input)
        context.publish("{side}", "side:" + input, properties={{"n": str(count)}})
        return f"{{count}}:{{context.get_state('last').decode()}}:{{context.get_counter('words')}}"
"""
    with running(cluster, tmp_path, code, "counting.Counting", inputs=[source], output=sink, logTopic=logs,
                 retainOrdering=True) as instance:
        _produce(client, source, [b"a", b"b", b"c"])
        assert [m.data() for m in _read(client, sink, 3)] == [b"1:a:1", b"2:b:2", b"3:c:3"]
        published = _read(client, side, 3)
        assert [(m.data(), m.properties()["n"]) for m in published] == [(b"side:a", "1"), (b"side:b", "2"),
                                                                          (b"side:c", "3")]
        assert instance.runtime is not None and instance.runtime.context.get_counter("words") == 3
        lines = _read(client, logs, 3)
        assert [m.data().decode().rsplit(" ", 1)[-1] for m in lines] == ["a", "b", "c"]
        assert all("INFO counted" in m.data().decode() for m in lines)
        assert lines[0].properties()["loglevel"] == "INFO"


def test_effectively_once_outputs_are_deduplicated_by_the_broker(cluster, client: magnetar.Client, admin,  # type: ignore[no-untyped-def]
                                                                 tmp_path: Path) -> None:
    from magnetar.functions.runtime import producer_name, sequence_id

    source, sink = _topic("in"), _topic("out")
    with running(cluster, tmp_path, EXCLAMATION, "exclamation_eo.ExclamationFunction", inputs=[source], output=sink,
                 processingGuarantees="EFFECTIVELY_ONCE") as instance:
        _produce(client, source, [b"one", b"two"])
        outputs = _read(client, sink, 2, timeout_s=45)
        assert [m.data() for m in outputs] == [b"one!", b"two!"]
        assert instance.runtime is not None
        config = instance.runtime.config
    # the first input redelivered after a crash between its publish and its ack: its output again
    first = _read(client, source, 1)[0]
    name = producer_name(config, first.topic_name())
    assert outputs[0].producer_name() == name
    again = client.create_producer(sink, producer_name=name, batching_enabled=False)
    again.send(b"one!", sequence_id=sequence_id(first.message_id()))
    again.close()
    assert _quiet(client, sink, 4) == [b"one!", b"two!"], "the broker dropped the duplicate"
