"""Registered functions run end to end on the local cluster: `magnetar functions create` (the CLI,
the HTTP API), messages produced to the input are sealed by the journal consumer, which starts the
dispatcher (the emulated Invoke API's `Event` invocation), which invokes the function's runtime
(the emulated Invoke API, RequestResponse), stores its outputs and acknowledges; `functions stats`
shows the figures."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from typer.testing import CliRunner

import magnetar
from http_helpers import HTTP
from magnetar.cli.main import app as cli
from magnetar.local.function_workers import WORKERS

runner = CliRunner()
EXCLAMATION = (
    "from magnetar import Function\n\n\n"
    "class ExclamationFunction(Function):\n"
    "    def process(self, input, context):\n"
    "        return input + '!'\n"
)


def test_exclamation_function_runs_on_its_input(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code = tmp_path / "exclamation.py"
    code.write_text(EXCLAMATION)
    suffix = uuid.uuid4().hex[:8]
    name, source, sink = f"ex-{suffix}", f"in-{suffix}", f"out-{suffix}"
    url = ["--service-url", cluster.url]
    result = runner.invoke(cli, ["functions", "create", "--py", str(code), "--classname",
                                 "exclamation.ExclamationFunction", "--inputs", source, "--output", sink,
                                 "--name", name, *url])
    assert result.exit_code == 0 and "Created" in result.output, result.output
    client = magnetar.Client(cluster.url)
    try:
        consumer = client.subscribe(sink, "reader", initial_position=magnetar.InitialPosition.Earliest)
        producer = client.create_producer(source)
        values = [f"hello-{i}" for i in range(5)]
        started = time.monotonic()
        for value in values:
            producer.send(value.encode())
        got = []
        while len(got) < 5 and time.monotonic() - started < 30:
            try:
                message = consumer.receive(timeout_millis=2000)
            except magnetar.Timeout:
                continue
            got.append(message.data().decode())
            consumer.acknowledge(message)
        assert sorted(got) == sorted(f"{v}!" for v in values), got
    finally:
        client.close()
    fqfn = ["--tenant", "public", "--namespace", "default", "--name", name]
    deadline = time.monotonic() + 10  # the figures are added once the outputs are stored and acknowledged
    while True:
        result = runner.invoke(cli, ["functions", "stats", *fqfn, *url])
        assert result.exit_code == 0, result.output
        stats = json.loads(result.output)
        if stats["processedSuccessfullyTotal"] == 5 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert stats["processedSuccessfullyTotal"] == 5 and stats["receivedTotal"] == 5, stats
    assert stats["userExceptionsTotal"] == 0 and stats["lastInvocation"]
    status = json.loads(runner.invoke(cli, ["functions", "status", *fqfn, *url]).output)
    assert status["instances"][0]["status"]["numSuccessfullyProcessed"] == 5
    # the code ran in the function's worker process, not in the cluster's (this test's) process
    pid = WORKERS.pids().get(f"public/default/{name}")
    assert pid is not None and pid != os.getpid()


def test_a_crashed_worker_fails_the_batch_which_the_maintenance_run_serves_again(  # type: ignore[no-untyped-def]
        cluster, tmp_path: Path) -> None:

    marker = tmp_path / "crashed-once"
    code = tmp_path / "crashy.py"
    code.write_text(
        "import os\n\n\n"
        "def process(value):\n"
        f"    if not os.path.exists({str(marker)!r}):\n"
        f"        open({str(marker)!r}, 'w').close()\n"
        "        os._exit(3)  # the worker process dies mid-invocation\n"
        "    return value + '!'\n")
    suffix = uuid.uuid4().hex[:8]
    name, source, sink = f"crashy-{suffix}", f"cin-{suffix}", f"cout-{suffix}"
    url = ["--service-url", cluster.url]
    result = runner.invoke(cli, ["functions", "create", "--py", str(code), "--classname", "crashy.process",
                                 "--inputs", source, "--output", sink, "--name", name, *url])
    assert result.exit_code == 0, result.output
    fqfn = f"public/default/{name}"
    client = magnetar.Client(cluster.url)
    try:
        consumer = client.subscribe(sink, "reader", initial_position=magnetar.InitialPosition.Earliest)
        client.create_producer(source).send(b"again")
        deadline = time.monotonic() + 60  # left as soon as it ran: a loaded machine may take a while
        while not marker.exists():  # the first invocation's worker died
            assert time.monotonic() < deadline, "the function never ran"
            time.sleep(0.2)
        answer = None
        # Redelivered: a maintenance run starts its dispatcher. The run is for this function alone
        # (a rule's input naming it: the scheduled run would sweep every topic and function of the
        # session's cluster, thousands once other files ran); the first one past the negative
        # acknowledgement's delay serves it, a later one if it raced.
        for _ in range(3):
            time.sleep(1.2)  # past the negative acknowledgement's delay
            response = HTTP.post(f"{cluster.url}/_magnetar/local/schedules/maintenance",
                                  json={"functions": [fqfn]}, timeout=300)
            assert response.status_code == 200, response.text
            assert response.json()["functionsServed"] in ([], [fqfn]), response.text
            try:  # a new worker process, then the output: back as soon as it is there
                answer = consumer.receive(timeout_millis=20_000)
                break
            except magnetar.Timeout:
                continue
        assert answer is not None, "the message was never processed again"
        assert answer.data() == b"again!"
    finally:
        client.close()
    stats = json.loads(runner.invoke(cli, ["functions", "stats", "--fqfn", fqfn, *url]).output)
    assert stats["systemExceptionsTotal"] >= 1 and stats["processedSuccessfullyTotal"] == 1, stats
    assert WORKERS.pids().get(fqfn) not in (None, os.getpid())


def test_a_maintenance_run_refuses_a_rule_input_it_cannot_take(cluster) -> None:  # type: ignore[no-untyped-def]
    """A rule's input naming functions or topics in a shape the run cannot take is refused with a
    reason (400), before anything is visited."""

    url = f"{cluster.url}/_magnetar/local/schedules/maintenance"
    for body, says in (({"functions": "public/default/f"}, "'functions'"), ({"functions": ["public/f"]}, "'functions'"),
                       ({"functions": ["public//f"]}, "'functions'"), ({"topics": "t"}, "'topics'")):
        answer = HTTP.post(url, json=body, timeout=60)
        assert answer.status_code == 400 and says in answer.json()["reason"], (body, answer.text)
    served = HTTP.post(url, json={"functions": ["public/default/no-such-function"]}, timeout=60)
    assert served.status_code == 200 and served.json()["functionsServed"] == [] and served.json()["topics"] == 0
