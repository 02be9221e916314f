"""Registered functions' Lambda functions on the local cluster: `magnetar functions create` has the
broker create one through the (emulated) Lambda API, sized by --ram/--cpu, --timeout-ms and
--parallelism; status and get report its ARN; what Lambda cannot give is a 400 with a reason; the
timeout and the reserved concurrency hold when it runs; deleting the function deletes it. Also the
dispatched path's inputs by --topics-pattern and its schema topics."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from typer.testing import CliRunner

import magnetar
from http_helpers import HTTP
from magnetar.adapters.aws.functions import function_lambda_name
from magnetar.cli.main import app as cli

runner = CliRunner()
MIB = 1024 * 1024


def _lambda(cluster: Any) -> Any:
    return boto3.client("lambda", endpoint_url=cluster.url, region_name="us-east-1")


def _cli(cluster: Any, *args: str) -> Any:
    return runner.invoke(cli, [*args, "--service-url", cluster.url])


def _create(cluster: Any, tmp_path: Path, name: str, code: str, *options: str) -> Any:
    path = tmp_path / f"{name.replace('-', '_')}.py"
    path.write_text(code)
    return _cli(cluster, "functions", "create", "--py", str(path), "--classname", f"{path.stem}.process",
                "--name", name, *options)


def _receive(client: magnetar.Client, topic: str, count: int, within_s: float = 30) -> list[bytes]:
    consumer = client.subscribe(topic, f"r-{uuid.uuid4().hex[:6]}", initial_position=magnetar.InitialPosition.Earliest)
    got: list[bytes] = []
    deadline = time.monotonic() + within_s
    while len(got) < count and time.monotonic() < deadline:
        try:
            message = consumer.receive(timeout_millis=1000)
        except magnetar.Timeout:
            continue
        got.append(message.data())
        consumer.acknowledge(message)
    consumer.close()
    return got


def test_create_deploys_a_sized_lambda_function_reported_by_status_and_deleted_with_it(  # type: ignore[no-untyped-def]
        cluster, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    name = f"sized-{suffix}"
    result = _create(cluster, tmp_path, name, "def process(x):\n    return x\n", "--inputs", f"sin-{suffix}",
                     "--ram", str(512 * MIB), "--timeout-ms", "4500", "--parallelism", "3")
    assert result.exit_code == 0, result.output
    fqfn = f"public/default/{name}"
    found = _lambda(cluster).get_function(FunctionName=function_lambda_name(fqfn))
    configuration = found["Configuration"]
    assert (configuration["MemorySize"], configuration["Timeout"]) == (512, 5)
    assert found["Concurrency"]["ReservedConcurrentExecutions"] == 3
    assert configuration["Environment"]["Variables"]["MAGNETAR_FUNCTION_FQFN"] == fqfn
    status = json.loads(_cli(cluster, "functions", "status", "--fqfn", fqfn).output)
    assert status["functionArn"] == configuration["FunctionArn"]
    assert status["deployment"]["memoryMb"] == 512 and status["deployment"]["reservedConcurrency"] == 3
    got = json.loads(_cli(cluster, "functions", "get", "--fqfn", fqfn).output)
    assert got["functionArn"] == configuration["FunctionArn"]
    # --cpu: 1,769 MB per vCPU
    result = _cli(cluster, "functions", "update", "--fqfn", fqfn, "--cpu", "2")
    assert result.exit_code == 0, result.output
    deadline = time.monotonic() + 5
    while _lambda(cluster).get_function_configuration(FunctionName=function_lambda_name(fqfn))["MemorySize"] != 3538:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert _cli(cluster, "functions", "delete", "--fqfn", fqfn).exit_code == 0
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        _lambda(cluster).get_function(FunctionName=function_lambda_name(fqfn))


@pytest.mark.parametrize(("config", "reason"), [
    ({"resources": {"cpu": 8}}, "Lambda gives at most 10,240 MB"),
    ({"resources": {"ram": 1000}}, "resources.ram must be from"),
    ({"timeoutMs": 900_000}, "timeoutMs must be from 1 to 300000"),
    ({"parallelism": 5000}, "parallelism must be from 1 to 1000"),
    ({"parallelism": 950}, "UnreservedConcurrentExecution below its minimum"),  # Lambda's own refusal
])
def test_what_lambda_cannot_give_is_a_400_with_a_reason(cluster, config: dict[str, Any], reason: str) -> None:  # type: ignore[no-untyped-def]
    name = f"bad-{uuid.uuid4().hex[:8]}"
    body = {"className": "f.process", "inputs": ["x"], **config}
    response = HTTP.post(f"{cluster.url}/admin/v3/functions/public/default/{name}",
                          files={"functionConfig": (None, json.dumps(body), "application/json"),
                                 "data": ("f.py", b"def process(x):\n    return x\n")}, timeout=30)
    assert response.status_code == 400, response.text
    assert reason in response.json()["reason"]
    assert HTTP.get(f"{cluster.url}/admin/v3/functions/public/default/{name}").status_code == 404  # not registered


def test_an_invocation_past_its_timeout_fails_and_runs_no_further(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    suffix = uuid.uuid4().hex[:8]
    name, source, sink = f"slow-{suffix}", f"slin-{suffix}", f"slout-{suffix}"
    code = "import time\n\n\ndef process(x):\n    time.sleep(5)\n    return x\n"
    result = _create(cluster, tmp_path, name, code, "--inputs", source, "--output", sink, "--timeout-ms", "1000")
    assert result.exit_code == 0, result.output
    client = magnetar.Client(cluster.url)
    try:
        client.create_producer(source).send(b"late")
        fqfn = f"public/default/{name}"
        deadline = time.monotonic() + 20
        while True:
            status = HTTP.get(f"{cluster.url}/admin/v3/functions/{fqfn}/status").json()["instances"][0]["status"]
            if status["numSystemExceptions"] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert status["numSystemExceptions"] >= 1, status
        assert "Task timed out after" in json.dumps(status["latestSystemExceptions"])
        assert status["numSuccessfullyProcessed"] == 0
        assert _receive(client, sink, 1, within_s=2) == []
    finally:
        client.close()


def test_reserved_concurrency_throttles_invocations_over_the_parallelism(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import threading

    suffix = uuid.uuid4().hex[:8]
    name = f"one-{suffix}"
    code = "import time\n\n\ndef process(x):\n    time.sleep(3)\n    return x\n"
    assert _create(cluster, tmp_path, name, code, "--inputs", f"oin-{suffix}").exit_code == 0
    function = function_lambda_name(f"public/default/{name}")
    deadline = time.monotonic() + 5
    while _lambda(cluster).get_function_configuration(FunctionName=function)["State"] != "Active":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    record = HTTP.get(f"{cluster.url}/magnetar/v1/functions/public/default/{name}").json()
    event = {"fqfn": f"public/default/{name}", "version": 1, "config": json.dumps(record["functionConfig"]),
             "code": {"key": record["codeKey"], "size": record["codeSize"], "sha256": record["codeSha256"]},
             "messages": [{"messageId": "1:0:-1:-1", "topic": f"persistent://public/default/oin-{suffix}",
                           "payload": "eA==", "properties": {}}]}
    answers: list[str] = []
    together = threading.Barrier(3)

    def invoke() -> None:
        together.wait()  # all three at once: one runs (3 s), the others find its one slot taken
        try:
            response = _lambda(cluster).invoke(FunctionName=function, Payload=json.dumps(event).encode())
            answers.append("ok" if not response.get("FunctionError") else "error")
        except ClientError as exc:
            answers.append(exc.response["Error"]["Code"])

    threads = [threading.Thread(target=invoke) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(answers) == ["TooManyRequestsException", "TooManyRequestsException", "ok"], answers


def test_topics_pattern_function_consumes_every_matching_topic(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    suffix = uuid.uuid4().hex[:8]
    client = magnetar.Client(cluster.url)
    try:
        for topic in (f"pat-{suffix}-a", f"pat-{suffix}-b", f"other-{suffix}"):
            client.create_producer(topic).close()  # the topics exist
        result = _create(cluster, tmp_path, f"pattern-{suffix}", "def process(x):\n    return x + '!'\n",
                         "--topics-pattern", f"persistent://public/default/pat-{suffix}-.*",
                         "--output", f"pout-{suffix}")
        assert result.exit_code == 0, result.output
        client.create_producer(f"pat-{suffix}-a").send(b"a")
        client.create_producer(f"pat-{suffix}-b").send(b"b")
        client.create_producer(f"other-{suffix}").send(b"c")
        assert sorted(_receive(client, f"pout-{suffix}", 2)) == [b"a!", b"b!"]
        assert sorted(_receive(client, f"pout-{suffix}", 3, within_s=3)) == [b"a!", b"b!"]  # not other-
    finally:
        client.close()


def test_a_dispatched_function_on_a_json_topic_receives_records(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from magnetar.schema import Integer, JsonSchema, Record, String

    class Order(Record):
        item = String(required=True)
        quantity = Integer()

    suffix = uuid.uuid4().hex[:8]
    source, sink = f"jin-{suffix}", f"jout-{suffix}"
    client = magnetar.Client(cluster.url)
    try:
        client.create_producer(source, schema=JsonSchema(Order)).close()  # the topic's schema
        code = ("def process(order):\n    assert isinstance(order, dict), type(order)\n"
                "    return f\"{order['item']} x{order['quantity']}\"\n")
        result = _create(cluster, tmp_path, f"orders-{suffix}", code, "--inputs", source, "--output", sink)
        assert result.exit_code == 0, result.output
        client.create_producer(source, schema=JsonSchema(Order)).send(Order(item="tea", quantity=3))
        assert _receive(client, sink, 1) == [b"tea x3"]
    finally:
        client.close()


def test_a_function_registered_with_its_own_lambda_runs_there(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """As a MagnetarFunction deploys it: a Lambda function of the team's running the functions
    runtime, registered with --function-arn; the broker creates none for it."""
    suffix = uuid.uuid4().hex[:8]
    lam = _lambda(cluster)
    created = lam.create_function(
        FunctionName=f"team-{suffix}", Runtime="python3.12", Handler="handler.handler", Timeout=10, MemorySize=256,
        Role="arn:aws:iam::000000000000:role/team-function", Code={"S3Bucket": "team-assets", "S3Key": "fn.zip"})
    name, source, sink = f"own-{suffix}", f"owin-{suffix}", f"owout-{suffix}"
    result = _create(cluster, tmp_path, name, "def process(x):\n    return x + '?'\n", "--inputs", source,
                     "--output", sink, "--function-arn", created["FunctionArn"])
    assert result.exit_code == 0, result.output
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        lam.get_function(FunctionName=function_lambda_name(f"public/default/{name}"))
    status = HTTP.get(f"{cluster.url}/admin/v3/functions/public/default/{name}/status").json()
    assert status["functionArn"] == created["FunctionArn"] and "deployment" not in status
    client = magnetar.Client(cluster.url)
    try:
        client.create_producer(source).send(b"who")
        assert _receive(client, sink, 1) == [b"who?"]
    finally:
        client.close()


def test_a_new_runtime_package_is_deployed_by_the_next_restart(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """After a stack upgrade (a new runtime package), a function keeps its code until it is deployed
    again: the deployer then updates the code (UpdateFunctionCode) before the configuration."""
    from dataclasses import replace

    from magnetar.adapters.aws.function_deployer import (
        ENV_RUNTIME_CODE,
        DeploymentSettings,
        LambdaFunctionDeployer,
    )
    from magnetar.core.functions.deployment import deployment_of
    from magnetar.functions.config import FunctionConfig

    suffix = uuid.uuid4().hex[:8]
    name = f"upgrade-{suffix}"
    assert _create(cluster, tmp_path, name, "def process(x):\n    return x\n", "--inputs", f"uin-{suffix}").exit_code == 0
    fqfn = f"public/default/{name}"
    function = function_lambda_name(fqfn)
    before = _lambda(cluster).get_function_configuration(FunctionName=function)["Environment"]["Variables"]
    settings = DeploymentSettings.from_env()
    assert settings is not None and before[ENV_RUNTIME_CODE] == settings.code_ref
    upgraded = LambdaFunctionDeployer(replace(settings, code_key="function_runtime-v2.zip"))
    config = FunctionConfig.model_validate(HTTP.get(f"{cluster.url}/admin/v3/functions/{fqfn}").json())
    deployed = upgraded.deploy(deployment_of(config, restart="now"))
    assert deployed.arn.endswith(function)
    deadline = time.monotonic() + 5
    while True:
        after = _lambda(cluster).get_function_configuration(FunctionName=function)
        if after["LastUpdateStatus"] == "Successful" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    variables = after["Environment"]["Variables"]
    assert variables[ENV_RUNTIME_CODE].endswith("/function_runtime-v2.zip") and variables["MAGNETAR_RESTARTED"] == "now"
