"""The SDK's credentials: AuthenticationToken and AuthenticationAwsIam as httpx auth, on every
request of Transport/AdminClient and on the push consumers' WebSocket upgrade; 401/403 as
AuthenticationError/AuthorizationError; the CLI's and the Spark source's credential options."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import magnetar
from magnetar.client import exceptions, push, transport
from magnetar.client.admin import AdminClient
from magnetar.client.auth import AuthenticationAwsIam, AuthenticationToken, from_params

URL = "http://broker.test:8080"


def _client(auth: httpx.Auth, handler: Any) -> httpx.Client:
    return httpx.Client(base_url=URL, auth=auth, transport=httpx.MockTransport(handler))


def _ok(seen: list[httpx.Request]) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    return handler


@pytest.fixture
def mock_http(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Transport's httpx.Client answers from `state["handler"]` (set by the test)."""
    state: dict[str, Any] = {"requests": []}

    def handler(request: httpx.Request) -> httpx.Response:
        state["requests"].append(request)
        response: httpx.Response = state["handler"](request)
        return response

    monkeypatch.setattr(transport.httpx, "Client",
                        functools.partial(httpx.Client, transport=httpx.MockTransport(handler)))
    return state


# --- tokens -----------------------------------------------------------------------------------
def test_token_string_is_sent_as_bearer() -> None:
    seen: list[httpx.Request] = []
    with _client(magnetar.AuthenticationToken("abc.def.ghi"), _ok(seen)) as http:
        http.get("/admin/v2/tenants")
        http.post("/topics/persistent/public/default/t", json={"messages": []})
    assert [r.headers["authorization"] for r in seen] == ["Bearer abc.def.ghi"] * 2


def test_token_parameter_forms(tmp_path: Path) -> None:
    file = tmp_path / "token.txt"
    file.write_text("from-file-1\n")
    assert AuthenticationToken("token:xyz").token() == "xyz"
    assert AuthenticationToken(f"file://{file}").token() == "from-file-1"
    assert AuthenticationToken(json.dumps({"token": "j"})).token() == "j"
    assert AuthenticationToken(json.dumps({"file": str(file)})).token() == "from-file-1"
    rotating = AuthenticationToken(f"file://{file}")
    file.write_text("from-file-2")  # the file is read at each request: a rotation needs no new client
    assert rotating.token() == "from-file-2"


def test_callable_token_is_called_for_every_request() -> None:
    calls: list[int] = []

    def supplier() -> str:
        calls.append(1)
        return f"token-{len(calls)}"

    seen: list[httpx.Request] = []
    with _client(AuthenticationToken(supplier), _ok(seen)) as http:
        for _ in range(3):
            http.get("/admin/v2/brokers/health")
    assert len(calls) == 3
    assert [r.headers["authorization"] for r in seen] == ["Bearer token-1", "Bearer token-2", "Bearer token-3"]


def test_token_argument_is_checked() -> None:
    with pytest.raises(ValueError, match="str"):
        AuthenticationToken(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        AuthenticationToken(lambda: " ").token()


def test_transport_retries_ask_for_a_fresh_token(mock_http: dict[str, Any]) -> None:
    answers = iter([httpx.Response(503, json={"reason": "busy"}), httpx.Response(200, json=["public"])])
    mock_http["handler"] = lambda request: next(answers)
    tokens = iter(["first", "second"])
    admin = AdminClient(URL, AuthenticationToken(lambda: next(tokens)))
    assert admin.tenants() == ["public"]
    assert [r.headers["authorization"] for r in mock_http["requests"]] == ["Bearer first", "Bearer second"]


def test_401_and_403_raise_pulsar_exceptions_with_the_reason(mock_http: dict[str, Any]) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if "authorization" not in request.headers:
            return httpx.Response(401, json={"reason": "Authentication required"})
        return httpx.Response(403, json={"reason": "Role app is not authorized to consume"})

    mock_http["handler"] = handler
    with pytest.raises(exceptions.AuthenticationError, match="Authentication required") as anonymous:
        AdminClient(URL).tenants()
    assert anonymous.value.status == 401 and len(mock_http["requests"]) == 1  # not retried
    with pytest.raises(exceptions.AuthorizationError, match="not authorized to consume") as refused:
        AdminClient(URL, magnetar.AuthenticationToken("t")).namespace_permissions("public/default")
    assert refused.value.status == 403
    assert issubclass(exceptions.AuthenticationError, exceptions.PulsarException)


def test_unreadable_credentials_fail_before_sending(mock_http: dict[str, Any], tmp_path: Path) -> None:
    mock_http["handler"] = lambda request: httpx.Response(200, json=[])
    admin = AdminClient(URL, AuthenticationToken(f"file://{tmp_path}/missing"))
    with pytest.raises(exceptions.AuthenticationError, match="No credentials"):
        admin.tenants()
    assert mock_http["requests"] == []


def test_client_passes_authentication_positionally_like_pulsar_client(mock_http: dict[str, Any]) -> None:
    mock_http["handler"] = lambda request: httpx.Response(200, json={"partitions": 0})
    client = magnetar.Client(URL, magnetar.AuthenticationToken("tok"), delivery="poll")
    try:
        assert client.get_topic_partitions("orders") == ["persistent://public/default/orders"]
    finally:
        client.close()
    assert mock_http["requests"][0].headers["authorization"] == "Bearer tok"
    with pytest.raises(ValueError, match="Argument authentication is expected to be either None or of type"):
        magnetar.Client(URL, "a-token-string")  # type: ignore[arg-type]  # pulsar-client's error


def test_admin_permission_paths_and_bodies(mock_http: dict[str, Any]) -> None:
    mock_http["handler"] = lambda request: httpx.Response(204)
    admin = AdminClient(URL, AuthenticationToken("t"))
    admin.grant_permission_on_namespace("my-tenant/ns", "app", ["produce", "consume"])
    admin.revoke_permission_on_namespace("my-tenant/ns", "app")
    admin.namespace_permissions("my-tenant/ns")
    admin.grant_permission_on_topic("non-persistent://my-tenant/ns/t", "app", {"consume"})
    admin.revoke_permission_on_topic("persistent://my-tenant/ns/t", "app")
    admin.topic_permissions("persistent://my-tenant/ns/t")
    admin.grant_permission_on_subscription("my-tenant/ns", "sub", ["app", "ops"])
    admin.revoke_permission_on_subscription("my-tenant/ns", "sub", "ops")
    admin.subscription_permissions("my-tenant/ns")
    admin.update_tenant("my-tenant", ["boss"], ["standalone"])
    calls = [(r.method, r.url.raw_path.decode(), json.loads(r.content) if r.content else None)
             for r in mock_http["requests"]]
    ns = "/admin/v2/namespaces/my-tenant/ns"
    assert calls == [
        ("POST", f"{ns}/permissions/app", ["consume", "produce"]),
        ("DELETE", f"{ns}/permissions/app", None),
        ("GET", f"{ns}/permissions", None),
        ("POST", "/admin/v2/non-persistent/my-tenant/ns/t/permissions/app", ["consume"]),
        ("DELETE", "/admin/v2/persistent/my-tenant/ns/t/permissions/app", None),
        ("GET", "/admin/v2/persistent/my-tenant/ns/t/permissions", None),
        ("POST", f"{ns}/permissions/subscription/sub", ["app", "ops"]),
        ("DELETE", f"{ns}/permissions/sub/ops", None),
        ("GET", f"{ns}/permissions/subscription", None),
        ("POST", "/admin/v2/tenants/my-tenant", {"adminRoles": ["boss"], "allowedClusters": ["standalone"]}),
    ]
    assert {r.headers["authorization"] for r in mock_http["requests"]} == {"Bearer t"}


# --- AWS SigV4 ----------------------------------------------------------------------------------
class FakeSession:
    """What AuthenticationAwsIam asks of a boto3 session."""

    def __init__(self, region: str | None = "eu-west-1", token: str | None = "session-token") -> None:
        self.region_name = region
        self.credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)

    def get_credentials(self) -> Credentials:
        return self.credentials


def _verify_sigv4(method: str, url: str, headers: httpx.Headers | dict[str, str], body: bytes,
                  credentials: Credentials, region: str) -> bool:
    """What the receiving end does: recompute the signature over the headers the request names."""
    authorization = headers["authorization"]
    match = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                         r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})", authorization)
    assert match, authorization
    access_key, _day, signed_region, service, signed_headers, signature = match.groups()
    assert (access_key, signed_region, service) == (credentials.access_key, region, "execute-api")
    names = signed_headers.split(";")
    request = AWSRequest(method=method, url=url, data=body, headers={n: headers[n] for n in names})
    request.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(credentials, "execute-api", region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    return bool(expected == signature)


def test_sigv4_signs_each_request_verifiably() -> None:
    session = FakeSession()
    seen: list[httpx.Request] = []
    with _client(magnetar.AuthenticationAwsIam(session=session), _ok(seen)) as http:
        http.post("/admin/v2/namespaces/t/ns/permissions/app?x=1", json=["produce"])
        http.get("/admin/v2/persistent/t/ns/a%20topic/permissions")
    post, get = seen
    signed = post.headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    assert signed == ["content-type", "host", "x-amz-date", "x-amz-security-token"]
    assert post.headers["x-amz-security-token"] == "session-token"
    for request in (post, get):
        assert _verify_sigv4(request.method, str(request.url), request.headers, request.content,
                             session.credentials, "eu-west-1")
    # a body changed after signing no longer verifies
    assert not _verify_sigv4("POST", str(post.url), post.headers, b'["consume"]', session.credentials, "eu-west-1")


def test_sigv4_region_from_the_execute_api_url_then_the_session() -> None:
    seen: list[httpx.Request] = []
    auth = AuthenticationAwsIam(session=FakeSession(region="us-east-1", token=None))
    with httpx.Client(auth=auth, transport=httpx.MockTransport(_ok(seen))) as http:
        http.get("https://abc123.execute-api.ap-southeast-2.amazonaws.com/admin/v2/tenants")
        http.get("https://pulsar.example.com/admin/v2/tenants")
    assert "/ap-southeast-2/execute-api/" in seen[0].headers["authorization"]
    assert "/us-east-1/execute-api/" in seen[1].headers["authorization"]
    assert "x-amz-security-token" not in seen[0].headers
    assert "/eu-central-1/" in AuthenticationAwsIam("eu-central-1", FakeSession()).websocket_headers(
        "wss://abc.execute-api.us-east-1.amazonaws.com/ws/v2/consumer/x")["Authorization"]


def test_sigv4_without_credentials_is_an_authentication_error(mock_http: dict[str, Any]) -> None:
    class NoCredentials(FakeSession):
        def get_credentials(self) -> Any:
            return None

    mock_http["handler"] = lambda request: httpx.Response(200, json=[])
    with pytest.raises(exceptions.AuthenticationError, match="no AWS credentials"):
        AdminClient(URL, AuthenticationAwsIam(session=NoCredentials())).tenants()


# --- WebSocket connects (push consumers) -----------------------------------------------------------
def test_websocket_headers() -> None:
    assert AuthenticationToken(lambda: "fresh").websocket_headers("ws://h:8080/ws/v2/consumer/x") == {
        "Authorization": "Bearer fresh"}
    session = FakeSession()
    url = "ws://127.0.0.1:8080/ws/v2/consumer/persistent/public/default/t/sub?subscriptionType=Shared"
    headers = AuthenticationAwsIam(session=session).websocket_headers(url)
    assert set(headers) == {"Authorization", "X-Amz-Date", "X-Amz-Security-Token"}
    lowered = {k.lower(): v for k, v in headers.items()} | {"host": "127.0.0.1:8080"}
    assert _verify_sigv4("GET", url, lowered, b"", session.credentials, "eu-west-1")


def test_push_consumer_sends_credentials_on_the_upgrade_and_maps_401(monkeypatch: pytest.MonkeyPatch) -> None:
    from websockets.datastructures import Headers
    from websockets.exceptions import InvalidStatus
    from websockets.http11 import Response

    from magnetar.core.naming import TopicName

    connects: list[dict[str, Any]] = []

    def refuse(url: str, **kwargs: Any) -> Any:
        connects.append({"url": url, **kwargs})
        raise InvalidStatus(Response(401, "Unauthorized", Headers(), b'{"reason": "Token expired"}'))

    monkeypatch.setattr(push, "connect", refuse)
    tokens = iter(["t1", "t2"])
    tr = transport.Transport(URL, authentication=AuthenticationToken(lambda: next(tokens)))
    with pytest.raises(exceptions.AuthenticationError, match="Token expired"):
        push.PushConsumer(tr, "ws://broker.test:8080", TopicName.parse("orders"), "sub")
    assert connects[0]["additional_headers"] == {"Authorization": "Bearer t1"}
    assert connects[0]["url"].startswith("ws://broker.test:8080/ws/v2/consumer/persistent/public/default/orders/sub?")

    def forbid(url: str, **kwargs: Any) -> Any:
        raise InvalidStatus(Response(403, "Forbidden", Headers(), b'{"reason": "not allowed to consume"}'))

    monkeypatch.setattr(push, "connect", forbid)
    with pytest.raises(exceptions.AuthorizationError, match="not allowed to consume"):
        push.PushConsumer(tr, "ws://broker.test:8080", TopicName.parse("orders"), "sub")
    tr.close()


# --- Pulsar-style parameters (CLI, Spark) ---------------------------------------------------------
def test_from_params() -> None:
    assert from_params(None, None) is None
    token = from_params("org.apache.pulsar.client.impl.auth.AuthenticationToken", "token:abc")
    assert isinstance(token, AuthenticationToken) and token.token() == "abc"
    assert isinstance(from_params(None, "token:abc"), AuthenticationToken)
    iam = from_params("aws-iam", "region:eu-north-1")
    assert isinstance(iam, AuthenticationAwsIam) and iam.region == "eu-north-1"
    with pytest.raises(ValueError, match="Unsupported"):
        from_params("org.apache.pulsar.client.impl.auth.AuthenticationTls", "tlsCertFile:x")
    with pytest.raises(ValueError, match="needs parameters"):
        from_params("org.apache.pulsar.client.impl.auth.AuthenticationToken", None)


def test_cli_credentials_from_options_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer

    from magnetar.cli.common import AUTH_TOKEN_ENV, authentication

    monkeypatch.delenv(AUTH_TOKEN_ENV, raising=False)
    assert authentication(None, None) is None
    monkeypatch.setenv(AUTH_TOKEN_ENV, "env-token")
    from_env = authentication(None, None)
    assert isinstance(from_env, AuthenticationToken) and from_env.token() == "env-token"
    from_option = authentication(None, "token:opt")  # the option wins over the environment
    assert isinstance(from_option, AuthenticationToken) and from_option.token() == "opt"
    with pytest.raises(typer.BadParameter):
        authentication("Kerberos", "x")


def test_spark_source_sends_the_token_on_planning_and_reads(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from magnetar_spark import MagnetarSourceError
    from magnetar_spark.options import SourceOptions
    from magnetar_spark.reading import BatchReader

    token_file = tmp_path / "reader.token"
    token_file.write_text("file-token\n")
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization", ""))
        if request.headers.get("authorization") != "Bearer file-token":
            return httpx.Response(401, json={"reason": "Authentication required"})
        if request.url.path.endswith("/partitions"):
            return httpx.Response(200, json={"partitions": 0})
        if request.url.path.endswith("/lastMessageId"):
            return httpx.Response(200, json={"ledgerId": 0, "entryId": 0, "partitionIndex": -1})
        message = {"messageId": "0:0:-1:-1", "payload": "aGk=", "properties": {}, "publishTime": 1, "key": None,
                   "topic": "persistent://public/default/t"}
        return httpx.Response(200, json={"messages": [message], "nextEntryId": 1, "firstEntryId": 0})

    options = {"service.url": URL, "topic": "t", "directReads": "false",
               "PULSAR.client.authPluginClassName": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
               "pulsar.client.authParams": f"file://{token_file}"}
    reader = BatchReader(SourceOptions(options))
    reader.transport = httpx.MockTransport(handler)
    rows = [row for partition in reader.partitions() for row in reader.read(partition)]
    assert [r[0] for r in rows] == [b"hi"] and set(seen) == {"Bearer file-token"}

    anonymous = BatchReader(SourceOptions({"service.url": URL, "topic": "t"}))
    anonymous.transport = httpx.MockTransport(handler)
    with pytest.raises(MagnetarSourceError, match="HTTP 401: Authentication required") as refused:
        anonymous.partitions()
    assert refused.value.status == 401
    with pytest.raises(ValueError, match="authParams is required"):
        SourceOptions({"service.url": URL, "topic": "t",
                       "pulsar.client.authPluginClassName": "org.apache.pulsar.client.impl.auth.AuthenticationToken"})
    with pytest.raises(ValueError, match="must be"):
        SourceOptions({"service.url": URL, "topic": "t", "pulsar.client.authPluginClassName": "Kerberos",
                       "pulsar.client.authParams": "x"})
