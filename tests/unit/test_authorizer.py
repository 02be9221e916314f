"""The API Gateway Lambda authorizer (functions/authorizer): AWS-shaped events, real tokens.

Events follow the shapes API Gateway sends: an HTTP API REQUEST authorizer with payload format
2.0 (lower-cased headers, `routeArn`) and a WebSocket $connect REQUEST authorizer (`methodArn`,
headers as sent, the Pulsar path and `?token=` in the query). The key set in Secrets Manager is
read through moto.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from magnetar.config import ENV_TOKEN_KEYS_SECRET, ENV_TOKEN_PUBLIC_KEY, ENV_TOKEN_SECRET_KEY
from magnetar.security import identity
from magnetar.security.tokens import create_token, new_key_pair, new_secret_key

HANDLER = Path(__file__).resolve().parents[2] / "functions" / "authorizer" / "handler.py"
ACCOUNT = "123456789012"
REGION = "us-east-1"
HTTP_ROUTE_ARN = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:a1b2c3d4e5/$default/GET/admin/v2/tenants"
WS_METHOD_ARN = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:f6g7h8i9j0/ws/$connect"


@dataclass
class FakeContext:
    """What Powertools' inject_lambda_context reads from Lambda's context object."""

    function_name: str = "Magnetar-AuthorizerFunction-AbCdEf"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:Magnetar-AuthorizerFunction-AbCdEf"
    aws_request_id: str = "5b6f1b4c-1d2e-4f3a-9b8c-7d6e5f4a3b2c"


@pytest.fixture(scope="module")
def authorizer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("magnetar_authorizer_handler", HANDLER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _clear_caches() -> None:
    from aws_lambda_powertools.utilities import parameters

    identity._static_validator.cache_clear()
    identity._validator_of.cache_clear()
    parameters.clear_caches()  # the secret is cached for 5 minutes otherwise


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (ENV_TOKEN_SECRET_KEY, ENV_TOKEN_PUBLIC_KEY, ENV_TOKEN_KEYS_SECRET):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "magnetar-authorizer")
    _clear_caches()
    yield
    _clear_caches()


@pytest.fixture
def secret_key(monkeypatch: pytest.MonkeyPatch) -> bytes:
    key = new_secret_key()
    monkeypatch.setenv(ENV_TOKEN_SECRET_KEY, "data:;base64," + base64.b64encode(key).decode())
    return key


@pytest.fixture(scope="module")
def key_pair() -> tuple[bytes, bytes]:
    return new_key_pair()


def http_event(authorization: str | None = None, query: dict[str, str] | None = None) -> dict[str, Any]:
    """An HTTP API (payload format 2.0) REQUEST authorizer event."""
    headers = {
        "accept": "application/json",
        "content-length": "0",
        "host": "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com",
        "user-agent": "magnetar-python/0.1.0",
        "x-amzn-trace-id": "Root=1-65f0c0de-1234567890abcdef12345678",
        "x-forwarded-for": "203.0.113.7",
        "x-forwarded-port": "443",
        "x-forwarded-proto": "https",
    }
    if authorization is not None:
        headers["authorization"] = authorization
    event: dict[str, Any] = {
        "version": "2.0",
        "type": "REQUEST",
        "routeArn": HTTP_ROUTE_ARN,
        "identitySource": [authorization] if authorization else [],
        "routeKey": "$default",
        "rawPath": "/admin/v2/tenants",
        "rawQueryString": "&".join(f"{k}={v}" for k, v in (query or {}).items()),
        "headers": headers,
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "a1b2c3d4e5",
            "domainName": "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "a1b2c3d4e5",
            "http": {
                "method": "GET",
                "path": "/admin/v2/tenants",
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "magnetar-python/0.1.0",
            },
            "requestId": "JKJaXmPLvHcESHA=",
            "routeKey": "$default",
            "stage": "$default",
            "time": "12/Mar/2024:19:03:58 +0000",
            "timeEpoch": 1710270238390,
        },
    }
    if query:
        event["queryStringParameters"] = query
    return event


def websocket_event(authorization: str | None = None, token: str | None = None) -> dict[str, Any]:
    """A WebSocket API $connect REQUEST authorizer event, as CloudFront's path rewrite leaves it."""
    headers = {
        "Host": "f6g7h8i9j0.execute-api.us-east-1.amazonaws.com",
        "Sec-WebSocket-Extensions": "permessage-deflate; client_max_window_bits",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
        "Upgrade": "websocket",
        "Via": "1.1 0a1b2c3d4e5f.cloudfront.net (CloudFront)",
        "X-Amz-Cf-Id": "p7PQ7Zv3RLoQ0f5XPkMXjFZpFRhcf7N4Zp6fZdcWcNjdYjFJrFuZfw==",
        "X-Amzn-Trace-Id": "Root=1-65f0c0de-abcdef1234567890abcdef12",
        "X-Forwarded-For": "203.0.113.7, 130.176.0.1",
        "X-Forwarded-Port": "443",
        "X-Forwarded-Proto": "https",
    }
    if authorization is not None:
        headers["Authorization"] = authorization
    query = {"path": "/ws/v2/consumer/persistent/public/default/orders/sub"}
    if token is not None:
        query["token"] = token
    return {
        "type": "REQUEST",
        "methodArn": WS_METHOD_ARN,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()},
        "stageVariables": {},
        "requestContext": {
            "routeKey": "$connect",
            "eventType": "CONNECT",
            "extendedRequestId": "KZJ4lFvnoAMFZ8Q=",
            "requestTime": "12/Mar/2024:19:03:58 +0000",
            "messageDirection": "IN",
            "stage": "ws",
            "connectedAt": 1710270238390,
            "requestTimeEpoch": 1710270238391,
            "identity": {"sourceIp": "203.0.113.7"},
            "requestId": "KZJ4lFvnoAMFZ8Q=",
            "domainName": "f6g7h8i9j0.execute-api.us-east-1.amazonaws.com",
            "connectionId": "KZJ4lcEJoAMCLDw=",
            "apiId": "f6g7h8i9j0",
        },
    }


def _context_values_are_flat(context: dict[str, Any]) -> None:
    for key, value in context.items():
        assert isinstance(key, str)
        assert isinstance(value, str | int | float | bool), (key, value)


# --- HTTP API ---------------------------------------------------------------------------------
def test_http_valid_hs256_token(authorizer: ModuleType, secret_key: bytes) -> None:
    token = create_token("app-1", secret_key=secret_key, expires_in_s=3600)
    answer = authorizer.handler(http_event(f"Bearer {token}"), FakeContext())
    assert answer["isAuthorized"] is True
    assert answer["context"]["role"] == "app-1"
    assert abs(answer["context"]["exp"] - (time.time() + 3600)) < 60
    assert "refused" not in answer["context"]
    assert set(answer) == {"isAuthorized", "context"}
    json.dumps(answer)  # API Gateway takes JSON


def test_http_token_without_expiry(authorizer: ModuleType, secret_key: bytes) -> None:
    token = create_token("app-1", secret_key=secret_key)
    answer = authorizer.handler(http_event(f"Bearer {token}"), FakeContext())
    assert answer["context"] == {"role": "app-1", "exp": 0}


def test_http_valid_rs256_token(
    authorizer: ModuleType, monkeypatch: pytest.MonkeyPatch, key_pair: tuple[bytes, bytes]
) -> None:
    private, public = key_pair
    monkeypatch.setenv(ENV_TOKEN_PUBLIC_KEY, "data:;base64," + base64.b64encode(public).decode())
    token = create_token("spark-job", private_key=private, expires_in_s=600)
    answer = authorizer.handler(http_event(f"Bearer {token}"), FakeContext())
    assert answer["isAuthorized"] is True
    assert answer["context"]["role"] == "spark-job"


def test_http_expired_token_is_passed_on_refused(authorizer: ModuleType, secret_key: bytes) -> None:
    token = create_token("app-1", secret_key=secret_key, expires_in_s=60, now=time.time() - 3600)
    answer = authorizer.handler(http_event(f"Bearer {token}"), FakeContext())
    # allowed through on purpose: the broker answers 401 with Pulsar's {"reason"}
    assert answer == {"isAuthorized": True, "context": {"refused": "Token expired"}}


def test_http_wrong_key(authorizer: ModuleType, secret_key: bytes) -> None:
    token = create_token("app-1", secret_key=new_secret_key(), expires_in_s=3600)
    answer = authorizer.handler(http_event(f"Bearer {token}"), FakeContext())
    assert answer["isAuthorized"] is True
    assert "role" not in answer["context"]
    assert "does not verify" in answer["context"]["refused"]


def test_http_rs256_token_against_other_public_key(
    authorizer: ModuleType, monkeypatch: pytest.MonkeyPatch, key_pair: tuple[bytes, bytes]
) -> None:
    _, public = key_pair
    other_private, _ = new_key_pair()
    monkeypatch.setenv(ENV_TOKEN_PUBLIC_KEY, "data:;base64," + base64.b64encode(public).decode())
    token = create_token("spark-job", private_key=other_private)
    answer = authorizer.handler(http_event(f"Bearer {token}"), FakeContext())
    assert "role" not in answer["context"]
    assert answer["context"]["refused"]


@pytest.mark.parametrize("authorization, reason", [
    (None, "No credentials"), ("Bearer ", "No credentials"),
    ("Basic dXNlcjpwYXNz", "Basic authentication is not enabled"),  # no htpasswd file: tests/unit/test_auth_basic_provider.py
])
def test_http_no_token(authorizer: ModuleType, secret_key: bytes, authorization: str | None, reason: str) -> None:
    answer = authorizer.handler(http_event(authorization), FakeContext())
    assert answer["isAuthorized"] is True
    assert answer["context"]["refused"].startswith(reason)


def test_http_malformed_token(authorizer: ModuleType, secret_key: bytes) -> None:
    answer = authorizer.handler(http_event("Bearer not.a.jwt"), FakeContext())
    assert answer["context"]["refused"].startswith("Malformed token")


def test_http_unsigned_token_is_refused(authorizer: ModuleType, secret_key: bytes) -> None:
    header = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
    claims = base64.urlsafe_b64encode(b'{"sub":"admin"}').rstrip(b"=").decode()
    answer = authorizer.handler(http_event(f"Bearer {header}.{claims}."), FakeContext())
    assert "role" not in answer["context"]
    assert "algorithm" in answer["context"]["refused"]


# --- WebSocket $connect -----------------------------------------------------------------------
def _assert_allows_connect(answer: dict[str, Any]) -> None:
    assert answer["policyDocument"] == {
        "Version": "2012-10-17",
        "Statement": [{"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": WS_METHOD_ARN}],
    }
    _context_values_are_flat(answer["context"])
    json.dumps(answer)


def test_websocket_token_in_query(authorizer: ModuleType, secret_key: bytes) -> None:
    token = create_token("browser-user", secret_key=secret_key, expires_in_s=3600)
    answer = authorizer.handler(websocket_event(token=token), FakeContext())
    _assert_allows_connect(answer)
    assert answer["principalId"] == "browser-user"
    assert answer["context"]["role"] == "browser-user"
    assert isinstance(answer["context"]["exp"], int) and answer["context"]["exp"] > time.time()


def test_websocket_authorization_header(authorizer: ModuleType, secret_key: bytes) -> None:
    token = create_token("app-2", secret_key=secret_key, expires_in_s=3600)
    answer = authorizer.handler(websocket_event(authorization=f"Bearer {token}"), FakeContext())
    _assert_allows_connect(answer)
    assert answer["principalId"] == "app-2"


def test_websocket_header_wins_over_query(authorizer: ModuleType, secret_key: bytes) -> None:
    header_token = create_token("from-header", secret_key=secret_key)
    query_token = create_token("from-query", secret_key=secret_key)
    answer = authorizer.handler(
        websocket_event(authorization=f"Bearer {header_token}", token=query_token), FakeContext()
    )
    assert answer["principalId"] == "from-header"


def test_websocket_no_token(authorizer: ModuleType, secret_key: bytes) -> None:
    answer = authorizer.handler(websocket_event(), FakeContext())
    _assert_allows_connect(answer)  # the WebSocket function refuses the upgrade with Pulsar's reason
    assert answer["principalId"] == "anonymous"
    assert answer["context"]["refused"].startswith("No credentials")
    assert "role" not in answer["context"]


def test_websocket_no_query_at_all(authorizer: ModuleType, secret_key: bytes) -> None:
    event = websocket_event()
    event["queryStringParameters"] = None
    event["multiValueQueryStringParameters"] = None
    answer = authorizer.handler(event, FakeContext())
    assert answer["principalId"] == "anonymous"


def test_websocket_expired_token(authorizer: ModuleType, secret_key: bytes) -> None:
    token = create_token("app-1", secret_key=secret_key, expires_in_s=1, now=time.time() - 10)
    answer = authorizer.handler(websocket_event(token=token), FakeContext())
    _assert_allows_connect(answer)
    assert answer["principalId"] == "anonymous"
    assert answer["context"] == {"refused": "Token expired"}


def test_websocket_wrong_key(authorizer: ModuleType, secret_key: bytes) -> None:
    token = create_token("app-1", secret_key=new_secret_key())
    answer = authorizer.handler(websocket_event(token=token), FakeContext())
    assert answer["principalId"] == "anonymous"
    assert "does not verify" in answer["context"]["refused"]


def test_flat_context_drops_none_and_stringifies(authorizer: ModuleType) -> None:
    flat = authorizer._flat({"role": "r", "exp": 5, "none": None, "nested": {"a": 1}, "ok": True})
    assert flat == {"role": "r", "exp": 5, "nested": "{'a': 1}", "ok": True}


# --- the key set in Secrets Manager -----------------------------------------------------------
@pytest.fixture
def secrets_manager(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    moto = pytest.importorskip("moto")
    import boto3

    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SECRETS_MANAGER", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    with moto.mock_aws():
        yield boto3.client("secretsmanager", region_name=REGION)


def _key_document(*entries: tuple[str, str]) -> str:
    return json.dumps({"keys": [{"algorithm": algorithm, "key": key} for algorithm, key in entries]})


def test_key_set_from_secrets_manager(
    authorizer: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    secrets_manager: Any,
    key_pair: tuple[bytes, bytes],
) -> None:
    """A rotation in progress: the old and the new HS256 key and an RS256 public key all verify."""
    old, new = new_secret_key(), new_secret_key()
    private, public = key_pair
    arn = secrets_manager.create_secret(
        Name="MagnetarTokenKeys",
        SecretString=_key_document(
            ("HS256", base64.b64encode(old).decode()),
            ("HS256", base64.b64encode(new).decode()),
            ("RS256", base64.b64encode(public).decode()),
        ),
    )["ARN"]
    monkeypatch.setenv(ENV_TOKEN_KEYS_SECRET, arn)
    # an environment key is ignored once a secret is configured
    monkeypatch.setenv(ENV_TOKEN_SECRET_KEY, "data:;base64," + base64.b64encode(new_secret_key()).decode())

    for role, token in (
        ("signed-with-old", create_token("signed-with-old", secret_key=old, expires_in_s=600)),
        ("signed-with-new", create_token("signed-with-new", secret_key=new, expires_in_s=600)),
        ("signed-with-rsa", create_token("signed-with-rsa", private_key=private, expires_in_s=600)),
    ):
        http = authorizer.handler(http_event(f"Bearer {token}"), FakeContext())
        assert http["context"]["role"] == role
        ws = authorizer.handler(websocket_event(token=token), FakeContext())
        assert ws["principalId"] == role

    stranger = create_token("stranger", secret_key=new_secret_key())
    assert "refused" in authorizer.handler(http_event(f"Bearer {stranger}"), FakeContext())["context"]

    # the old key is dropped: once the cached secret is re-read, its tokens no longer verify
    secrets_manager.put_secret_value(
        SecretId=arn, SecretString=_key_document(("HS256", base64.b64encode(new).decode()))
    )
    _clear_caches()
    old_token = create_token("signed-with-old", secret_key=old)
    assert "does not verify" in authorizer.handler(http_event(f"Bearer {old_token}"), FakeContext())[
        "context"
    ]["refused"]
    new_token = create_token("signed-with-new", secret_key=new)
    assert authorizer.handler(http_event(f"Bearer {new_token}"), FakeContext())["context"]["role"] == (
        "signed-with-new"
    )


def test_key_set_pem_public_key(
    authorizer: ModuleType, monkeypatch: pytest.MonkeyPatch, secrets_manager: Any, key_pair: tuple[bytes, bytes]
) -> None:
    from cryptography.hazmat.primitives import serialization

    private, public = key_pair
    pem = serialization.load_der_public_key(public).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    arn = secrets_manager.create_secret(
        Name="MagnetarTokenKeysPem", SecretString=_key_document(("RS256", pem.decode()))
    )["ARN"]
    monkeypatch.setenv(ENV_TOKEN_KEYS_SECRET, arn)
    token = create_token("pem-role", private_key=private)
    answer = authorizer.handler(websocket_event(authorization=f"Bearer {token}"), FakeContext())
    assert answer["principalId"] == "pem-role"


def test_key_set_secret_read_once_per_cache_period(
    authorizer: ModuleType, monkeypatch: pytest.MonkeyPatch, secrets_manager: Any
) -> None:
    """The secret is cached (5 minutes): a warm authorizer does not call Secrets Manager per request."""
    key = new_secret_key()
    arn = secrets_manager.create_secret(
        Name="MagnetarTokenKeysCached", SecretString=_key_document(("HS256", base64.b64encode(key).decode()))
    )["ARN"]
    monkeypatch.setenv(ENV_TOKEN_KEYS_SECRET, arn)
    token = create_token("cached", secret_key=key)
    assert authorizer.handler(http_event(f"Bearer {token}"), FakeContext())["context"]["role"] == "cached"
    secrets_manager.put_secret_value(SecretId=arn, SecretString=_key_document(("HS256", "")))  # unusable
    assert authorizer.handler(http_event(f"Bearer {token}"), FakeContext())["context"]["role"] == "cached"
