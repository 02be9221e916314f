"""Pulsar Functions' admin API end to end: multipart registration from a real file through the
HTTP API (API Gateway emulation, the broker Lambda, DynamoDB and S3 on the emulator), the SDK's
admin client, the CLI, the state API and counters, and authorization (`functions` grants)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

import magnetar
from http_helpers import HTTP
from magnetar.cli.main import app as cli
from magnetar.client import exceptions
from magnetar.client.admin import AdminClient
from magnetar.local.cluster import LocalUpProcess
from magnetar.security.tokens import create_token, new_secret_key

runner = CliRunner()
CODE = "def process(value, context):\n    return value + '!'\n"


@pytest.fixture
def code_file(tmp_path: Path) -> Path:
    path = tmp_path / "exclamation.py"
    path.write_text(CODE)
    return path


def _name(prefix: str = "fn") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _config(name: str, **fields: object) -> dict[str, object]:
    return {"tenant": "public", "namespace": "default", "name": name, "className": "exclamation.process",
            "inputs": [f"persistent://public/default/{name}-in"], "output": f"persistent://public/default/{name}-out",
            **fields}


def _register(url: str, name: str, path: Path, method: str = "POST", headers: dict[str, str] | None = None,
              **fields: object) -> httpx.Response:
    with path.open("rb") as code:
        return HTTP.request(method, f"{url}/admin/v3/functions/public/default/{name}", headers=headers,
                             files={"functionConfig": (None, json.dumps(_config(name, **fields))),
                                    "data": (path.name, code, "text/x-python")}, timeout=30)


def _refused(response: httpx.Response, status: int, reason: str) -> None:
    assert response.status_code == status, response.text
    assert reason in response.json()["reason"], response.text


def test_register_get_list_update_delete_over_http(cluster, code_file: Path) -> None:  # type: ignore[no-untyped-def]
    name, base = _name(), f"{cluster.url}/admin/v3/functions/public/default"
    assert _register(cluster.url, name, code_file).status_code == 204
    _refused(_register(cluster.url, name, code_file), 409, "already exists")
    got = HTTP.get(f"{base}/{name}").json()
    assert got["className"] == "exclamation.process" and got["py"] == "exclamation.py"
    assert got["inputs"] == [f"persistent://public/default/{name}-in"] and got["parallelism"] == 1
    assert name in HTTP.get(base).json()
    record = HTTP.get(f"{cluster.url}/magnetar/v1/functions/public/default/{name}").json()
    assert record["version"] == 1 and record["state"] == "RUNNING" and record["dispatched"] is True
    assert record["codeKey"].startswith(f"functions/public/default/{name}/1/") and record["codeSize"] == len(CODE)
    # update: only the config (multipart without data), then new code
    update = HTTP.put(f"{base}/{name}", files={"functionConfig": (None, json.dumps({"parallelism": 3}))})
    assert update.status_code == 204, update.text
    assert HTTP.get(f"{base}/{name}").json()["parallelism"] == 3
    record2 = HTTP.get(f"{cluster.url}/magnetar/v1/functions/public/default/{name}").json()
    assert record2["version"] == 2 and record2["codeKey"] == record["codeKey"]
    code_file.write_text(CODE.replace("!", "?"))
    assert _register(cluster.url, name, code_file, method="PUT").status_code == 204
    record3 = HTTP.get(f"{cluster.url}/magnetar/v1/functions/public/default/{name}").json()
    assert record3["version"] == 3 and record3["codeKey"].startswith(f"functions/public/default/{name}/3/")
    _refused(HTTP.put(f"{base}/{name}", files={"functionConfig": (None, '{"processingGuarantees": "ATMOST_ONCE"}')}),
             400, "cannot be altered")
    # status, stats, stop/start
    status = HTTP.get(f"{base}/{name}/status").json()
    # one instance whatever the parallelism: the dispatcher, running while the function is RUNNING
    assert status["numInstances"] == 1 and status["numRunning"] == 1 and len(status["instances"]) == 1
    stats = HTTP.get(f"{base}/{name}/stats").json()
    assert stats["receivedTotal"] == 0 and stats["processedSuccessfullyTotal"] == 0
    assert HTTP.post(f"{base}/{name}/stop").status_code == 204
    assert HTTP.get(f"{cluster.url}/magnetar/v1/functions/public/default/{name}").json()["state"] == "STOPPED"
    assert HTTP.post(f"{base}/{name}/start").status_code == 204
    assert HTTP.post(f"{base}/{name}/restart").status_code == 204
    # delete
    assert HTTP.delete(f"{base}/{name}").status_code == 204
    _refused(HTTP.get(f"{base}/{name}"), 404, "doesn't exist")
    _refused(HTTP.delete(f"{base}/{name}"), 404, "doesn't exist")
    _refused(HTTP.post(f"{base}/{name}/start"), 404, "doesn't exist")
    assert name not in HTTP.get(base).json()


@pytest.mark.parametrize(("parts", "status", "reason"), [
    ({"functionConfig": (None, "{not json")}, 400, "not valid JSON"),
    ({"functionConfig": (None, '{"inputs": ["x"]}')}, 400, "classname"),
    ({"functionConfig": (None, '{"className": "a.b"}'), "data": ("f.py", b"x")}, 400, "No input topic"),
    ({"functionConfig": (None, '{"className": "a.b", "inputs": ["x"], "parallelism": 0}'), "data": ("f.py", b"x")},
     400, "parallelism"),
    ({"functionConfig": (None, '{"className": "a.b", "inputs": ["x"], "name": "other"}'), "data": ("f.py", b"x")},
     400, "does not match"),
    ({"functionConfig": (None, '{"className": "a.b", "inputs": ["x"]}')}, 400, "package is not provided"),
    ({"functionConfig": (None, '{"className": "a.b", "inputs": ["x"]}'), "data": ("f.py", b"#" * (4 * 1024 * 1024 + 1))},
     413, "exceeds"),
])
def test_bad_registrations_are_4xx_with_a_reason(cluster, parts: dict[str, object], status: int,  # type: ignore[no-untyped-def]
                                                 reason: str) -> None:
    response = HTTP.post(f"{cluster.url}/admin/v3/functions/public/default/{_name('bad')}", files=parts, timeout=30)
    _refused(response, status, reason)


def test_bad_bodies_never_500(cluster) -> None:  # type: ignore[no-untyped-def]
    url = f"{cluster.url}/admin/v3/functions/public/default/{_name('bad')}"
    _refused(HTTP.post(url, json={"className": "a.b"}), 400, "multipart/form-data")
    _refused(HTTP.post(url, content=b"--x\r\n", headers={"content-type": "multipart/form-data; boundary=zz"}),
             400, "Malformed")
    _refused(HTTP.post(f"{cluster.url}/admin/v3/functions/public/nope/f",
                        files={"functionConfig": (None, '{"className": "a.b", "inputs": ["x"]}'), "data": ("f.py", b"x")}),
             400, "Namespace public/nope does not exist")
    _refused(HTTP.get(f"{url}/state/k"), 404, "doesn't exist")
    _refused(HTTP.post(f"{url}/trigger", json={"triggerValue": "x"}), 404, "doesn't exist")


def test_state_and_counters_through_the_sdk(admin: AdminClient, code_file: Path) -> None:
    name = _name()
    admin.create_function(_config(name), code_file.read_bytes(), code_file.name)
    with pytest.raises(exceptions.PulsarException, match="key 'k' doesn't exist"):
        admin.get_function_state("public", "default", name, "k")
    admin.put_function_state("public", "default", name, {"key": "k", "stringValue": "hello"})
    assert admin.get_function_state("public", "default", name, "k") == {"key": "k", "stringValue": "hello", "version": 1}
    admin.put_function_state("public", "default", name, {"key": "b", "byteValue": "/wA="})
    assert admin.get_function_state("public", "default", name, "b")["byteValue"] == "/wA="
    assert admin.increment_function_counter("public", "default", name, "hits", 5) == 5
    with __import__("concurrent.futures").futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: admin.increment_function_counter("public", "default", name, "hits"), range(20)))
    assert admin.get_function_state("public", "default", name, "hits")["numberValue"] == 25
    admin.delete_function_counter("public", "default", name, "hits")
    with pytest.raises(exceptions.PulsarException):
        admin.get_function_state("public", "default", name, "hits")
    with pytest.raises(exceptions.InvalidConfiguration, match="one of stringValue"):
        admin.put_function_state("public", "default", name, {"key": "x"})
    admin.delete_function("public", "default", name)


def test_trigger_publishes_and_answers_the_output(cluster, admin: AdminClient, code_file: Path) -> None:  # type: ignore[no-untyped-def]
    name = _name()
    code_file.write_text("def process(value):\n    return value + '!'\n")  # a plain function: process(input)
    admin.create_function(_config(name), code_file.read_bytes(), code_file.name)
    try:  # the function itself answers (the dispatcher runs it once the value is sealed)
        assert admin.trigger_function("public", "default", name, "hello", timeout_ms=20_000) == "hello!"
        assert HTTP.post(f"{cluster.url}/admin/v3/functions/public/default/{name}/stop").status_code == 204
        with pytest.raises(exceptions.Timeout, match="Request Timed Out"):  # stopped: nobody answers
            admin.trigger_function("public", "default", name, "nobody answers", timeout_ms=1500)
    finally:
        admin.delete_function("public", "default", name)


def test_cli_create_get_list_state_delete(cluster, code_file: Path) -> None:  # type: ignore[no-untyped-def]
    name, url = _name("cli"), ["--service-url", cluster.url]
    fqfn = ["--fqfn", f"public/default/{name}"]
    result = runner.invoke(cli, ["functions", "create", "--py", str(code_file), "--classname", "exclamation.process",
                                 "--inputs", f"{name}-in", "--output", f"{name}-out", "--name", name,
                                 "--parallelism", "2", "--user-config", '{"greeting": "hi"}', "--ram", "268435456",
                                 *url])
    assert result.exit_code == 0 and "Created" in result.output, result.output
    result = runner.invoke(cli, ["functions", "get", *fqfn, *url])
    got = json.loads(result.output)
    assert got["parallelism"] == 2 and got["userConfig"] == {"greeting": "hi"} and got["resources"]["ram"] == 268435456
    assert got["inputs"] == [f"persistent://public/default/{name}-in"]
    assert name in runner.invoke(cli, ["functions", "list", "--tenant", "public", "--namespace", "default", *url]).output
    result = runner.invoke(cli, ["functions", "putstate", *fqfn, "--state", '{"key": "k", "stringValue": "v"}', *url])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["functions", "querystate", *fqfn, "--key", "k", *url])
    assert json.loads(result.output) == {"key": "k", "stringValue": "v", "version": 1}
    result = runner.invoke(cli, ["functions", "status", *fqfn, *url])
    assert json.loads(result.output)["numInstances"] == 1  # the dispatcher, whatever the parallelism
    result = runner.invoke(cli, ["functions", "update", *fqfn, "--parallelism", "4", *url])
    assert result.exit_code == 0, result.output
    assert json.loads(runner.invoke(cli, ["functions", "get", *fqfn, *url]).output)["parallelism"] == 4
    result = runner.invoke(cli, ["functions", "delete", *fqfn, *url])
    assert result.exit_code == 0 and "Deleted" in result.output
    result = runner.invoke(cli, ["functions", "get", *fqfn, *url])
    assert result.exit_code == 1 and "doesn't exist" in result.output


# --- authorization: Pulsar's allowFunctionOps ---------------------------------------------------
@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, bytes]]:
    key = new_secret_key()
    key_file = Path(tmp_path_factory.mktemp("auth")) / "secret.key"
    key_file.write_bytes(key)
    with LocalUpProcess(maintenance_interval_s=0, extra_args=[
            "--auth", "--token-secret-key", str(key_file), "--superuser-role", "admin"]) as proc:
        admin = AdminClient(proc.url, magnetar.AuthenticationToken(create_token("admin", secret_key=key)))
        admin.create_tenant("fns", admin_roles=["owner"], allowed_clusters=["standalone"])
        admin.create_namespace("fns/ns")
        admin.grant_permission_on_namespace("fns/ns", "deployer", ["functions"])
        admin.grant_permission_on_namespace("fns/ns", "writer", ["produce"])
        admin.close()
        yield proc.url, key


def test_functions_need_the_functions_grant_or_a_tenant_admin(secured: tuple[str, bytes], code_file: Path) -> None:
    url, key = secured

    def as_role(role: str, method: str, name: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {create_token(role, secret_key=key)}"}
        path = f"{url}/admin/v3/functions/fns/ns/{name}"
        if method == "POST":
            config = {**_config(name), "tenant": "fns", "namespace": "ns", "inputs": ["persistent://fns/ns/in"],
                      "output": "persistent://fns/ns/out"}
            return HTTP.post(path, headers=headers, timeout=30, files={
                "functionConfig": (None, json.dumps(config)), "data": (code_file.name, code_file.read_bytes())})
        return HTTP.request(method, path, headers=headers, timeout=30)

    assert as_role("deployer", "POST", "by-deployer").status_code == 204
    assert as_role("owner", "POST", "by-owner").status_code == 204
    assert as_role("admin", "POST", "by-admin").status_code == 204
    _refused(as_role("writer", "POST", "by-writer"), 403, "not authorized to manage the functions of namespace fns/ns")
    _refused(as_role("writer", "GET", "by-deployer"), 403, "not authorized")
    _refused(as_role("stranger", "DELETE", "by-deployer"), 403, "not authorized")
    assert HTTP.get(f"{url}/admin/v3/functions/fns/ns", timeout=30).status_code == 401
    assert as_role("deployer", "GET", "by-owner").json()["name"] == "by-owner"
    assert as_role("owner", "DELETE", "by-deployer").status_code == 204
