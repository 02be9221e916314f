"""Credentials a client presents on every request: pulsar-client's `AuthenticationToken` and
`AuthenticationBasic`, and
Magnetar's `AuthenticationAwsIam` (AWS SigV4, for an API behind API Gateway's IAM authorization).

    client = magnetar.Client(url, authentication=magnetar.AuthenticationToken(token))
    client = magnetar.Client(url, authentication=magnetar.AuthenticationToken(lambda: vault.read()))
    client = magnetar.Client(url, authentication=magnetar.AuthenticationAwsIam())  # boto3's credentials

Both are `httpx.Auth`s: httpx calls them for every request it sends (retries included), so a
token supplier or a file is read again each time (rotation needs no new client) and every SigV4
signature is fresh. WebSocket connects (push consumers) present the same credentials as headers
of the upgrade request (`websocket_headers`).

This module imports only httpx and the SDK's exceptions (botocore when SigV4 signs), so the Spark
data source can use it on executors that have no boto3. Credentials that cannot be had (a token
file missing, no AWS credentials, a supplier that raised) fail the request with
`AuthenticationError` before it is sent.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from magnetar.client.exceptions import AuthenticationError

TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"  # Pulsar's authPluginClassName
BASIC_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationBasic"
AWS_IAM_PLUGIN = "aws-iam"
SIGV4_SERVICE = "execute-api"
_EXECUTE_API_HOST = re.compile(r"^[^.]+\.execute-api(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com", re.IGNORECASE)


class Authentication(httpx.Auth):
    """What a client presents; pulsar-client's base class name. Subclasses give the headers.

    Built directly, as pulsar-client's `Authentication(dynamicLibPath, authParamsString)`, it names
    a plugin in a shared library: accepted (the arguments checked as pulsar-client checks them),
    and refused with a clear error at the first request, since Magnetar's HTTP API knows tokens,
    Basic credentials and AWS SigV4 only."""

    _plugin: str | None = None

    def __init__(self, dynamicLibPath: str, authParamsString: str) -> None:
        for name, value in (("dynamicLibPath", dynamicLibPath), ("authParamsString", authParamsString)):
            if not isinstance(value, str):
                raise ValueError(f"Argument {name} is expected to be of type 'str' and not '{type(value).__name__}'")
        self._plugin = dynamicLibPath

    def headers(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
        """The headers that authenticate this request (`headers`: the request's own, lower-case)."""
        raise AuthenticationError(
            f"Authentication plugins loaded from a shared library ({self._plugin}) are not supported: use "
            "AuthenticationToken, AuthenticationBasic or AuthenticationAwsIam")

    def websocket_headers(self, url: str) -> dict[str, str]:
        """Headers for the upgrade request (`GET url`) of a WebSocket connect."""
        return self.request_headers("GET", url, {"host": _host(url)}, b"")

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        own = {k.lower(): v for k, v in request.headers.items()}
        request.headers.update(self.request_headers(request.method, str(request.url), own, request.content))
        yield request

    def request_headers(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
        """`headers`, with a failure to get credentials (a missing token file, no AWS credentials,
        a supplier that raised) as the SDK's `AuthenticationError`."""
        try:
            return self.headers(method, url, headers, body)
        except AuthenticationError:
            raise
        except Exception as exc:
            raise AuthenticationError(f"No credentials to present: {type(exc).__name__}: {exc}") from exc


class AuthenticationTLS(Authentication):
    """pulsar-client's TLS client-certificate authentication: accepted (the arguments checked as
    pulsar-client checks them) and refused with a clear error at the first request, since
    Magnetar's HTTP API authenticates tokens, Basic credentials and AWS SigV4, not client certificates."""

    def __init__(self, certificate_path: str, private_key_path: str) -> None:
        for name, value in (("certificate_path", certificate_path), ("private_key_path", private_key_path)):
            if not isinstance(value, str):
                raise ValueError(f"Argument {name} is expected to be of type 'str' and not '{type(value).__name__}'")
        self.certificate_path, self.private_key_path = certificate_path, private_key_path

    def headers(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
        raise AuthenticationError("TLS client certificates (AuthenticationTLS) are not supported: use "
                                  "AuthenticationToken, AuthenticationBasic or AuthenticationAwsIam")


# --- tokens -------------------------------------------------------------------------------------
def _token_from_file(spec: str) -> Callable[[], str]:
    path = Path(unquote(urlsplit(spec).path) if spec.startswith("file://") else spec.removeprefix("file:"))

    def read() -> str:
        return path.expanduser().read_text().strip()

    return read


def token_supplier(params: str) -> Callable[[], str]:
    """A token from Pulsar's `AuthenticationToken` parameters: `token:XYZ`, `file:///path` (read
    again at each use, so a rotated file is picked up), `{"token": ...}` or `{"file": ...}`; any
    other text is the token itself."""
    text = params.strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            raise ValueError("Authentication parameters are not valid JSON") from None
        if isinstance(parsed, dict) and isinstance(parsed.get("token"), str):
            text = "token:" + parsed["token"]
        elif isinstance(parsed, dict) and isinstance(parsed.get("file"), str):
            text = parsed["file"] if parsed["file"].startswith("file:") else "file://" + parsed["file"]
        else:
            raise ValueError('Authentication parameters in JSON need "token" or "file"')
    if text.startswith("token:"):
        token = text[len("token:"):].strip()
        return lambda: token
    if text.startswith("file:"):
        return _token_from_file(text)
    return lambda: text


class AuthenticationToken(Authentication):
    """Pulsar's token authentication: `Authorization: Bearer <token>` on every request.

    `token` is the token (a JWT, e.g. from `magnetar tokens create`), Pulsar's parameter forms
    `token:XYZ` or `file:///path/to/token` (the file is read at each request), or a callable that
    returns a fresh token; it is called for every request, so a rotated token is used at once.
    """

    def __init__(self, token: str | Callable[[], str]) -> None:
        if isinstance(token, str):
            self._supplier = token_supplier(token)
        elif callable(token):
            self._supplier = token
        else:
            raise ValueError("Argument token is expected to be of type 'str' or a function returning 'str'")

    def token(self) -> str:
        value = self._supplier()
        if not isinstance(value, str):
            raise ValueError(f"The token supplier returned {type(value).__name__}, not str")
        value = value.strip()
        if not value:
            raise ValueError("The token is empty")
        return value

    def headers(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token()}"}


# --- HTTP Basic ---------------------------------------------------------------------------------
class AuthenticationBasic(Authentication):
    """Pulsar's basic authentication provider: `Authorization: Basic base64(username:password)`
    on every request, as pulsar-client sends it over HTTP. Either `username` and `password`, or
    `auth_params_string`, JSON `{"username": ..., "password": ..., "method": ...}` (then the
    others are ignored). `method` names the binary protocol's authentication method; over HTTP it
    changes nothing. The broker checks the password against its htpasswd file (Pulsar's basic
    provider, `MAGNETAR_AUTH_BASIC_CONF`; docs/security.md) and knows the caller as the user name;
    a wrong password or an unknown user is refused with 401."""

    def __init__(self, username: str | None = None, password: str | None = None, method: str = "basic",
                 auth_params_string: str | None = None) -> None:
        if auth_params_string is not None:
            if not isinstance(auth_params_string, str):
                raise ValueError("Argument auth_params_string is expected to be of type 'str' and not "
                                 f"'{type(auth_params_string).__name__}'")
            try:
                parsed = json.loads(auth_params_string)
            except ValueError:
                raise ValueError("auth_params_string is not valid JSON") from None
            if not isinstance(parsed, dict) or not isinstance(parsed.get("username", parsed.get("userId")), str) \
                    or not isinstance(parsed.get("password"), str):
                raise ValueError('auth_params_string needs "username" and "password"')
            username, password = parsed.get("username", parsed.get("userId")), parsed["password"]
            method = str(parsed.get("method", "basic"))
        for name, value in (("username", username), ("password", password), ("method", method)):
            if not isinstance(value, str):
                raise ValueError(f"Argument {name} is expected to be of type 'str' and not '{type(value).__name__}'")
        assert username is not None and password is not None
        self.username = username
        self.method = method
        self._value = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode("ascii")

    def headers(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
        return {"Authorization": self._value}


# --- AWS SigV4 ----------------------------------------------------------------------------------
def _host(url: str) -> str:
    """The Host header a client sends for `url` (the port only when it is not the scheme's default)."""
    parts = urlsplit(url)
    default = {"http": 80, "ws": 80, "https": 443, "wss": 443}.get(parts.scheme)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return host if parts.port is None or parts.port == default else f"{host}:{parts.port}"


class AuthenticationAwsIam(Authentication):
    """Magnetar's extension: signs every request with AWS Signature Version 4 for the service
    `execute-api`, as API Gateway's IAM authorization expects; the broker then knows the caller as
    its IAM principal (an assumed role counts as its role), which grants name like any role.

    Credentials come from `session` (a `boto3.Session` or a botocore session) or else the standard
    boto3 chain (environment, profile, SSO, container or instance role); they are read for each
    request, so refreshed credentials are used as they rotate. The region is `region`, else the
    one in an `…execute-api.<region>.amazonaws.com` URL, else the session's. Signed: the method,
    path, query, `host`, `content-type` and the body's SHA-256. A WebSocket connect (push
    consumers) signs its upgrade request the same way (headers, not query parameters), which only a
    WebSocket API with IAM authorization on `$connect` accepts; where `$connect` takes tokens (the
    local runtime), consume with long polling (`delivery="poll"`, persistent topics) or a token.
    """

    requires_request_body = True

    def __init__(self, region: str | None = None, session: Any = None, service: str = SIGV4_SERVICE) -> None:
        self.region = region
        self.service = service
        self._session = session

    def _aws_session(self) -> Any:
        if self._session is None:
            import boto3

            self._session = boto3.Session()
        return self._session

    def _region_for(self, url: str) -> str:
        if self.region:
            return self.region
        match = _EXECUTE_API_HOST.match(urlsplit(url).hostname or "")
        if match:
            return match.group("region").lower()
        session = self._aws_session()
        region = getattr(session, "region_name", None)
        if region is None and hasattr(session, "get_config_variable"):
            region = session.get_config_variable("region")
        if not region:
            raise ValueError("AuthenticationAwsIam needs a region: pass region=, or configure one (AWS_REGION, "
                             "AWS_DEFAULT_REGION or the profile's region)")
        return str(region)

    def credentials(self) -> Any:
        """The current credentials (access key, secret key, session token), frozen for one signature."""
        credentials = self._aws_session().get_credentials()
        if credentials is None:
            raise ValueError("AuthenticationAwsIam found no AWS credentials (environment, profile, or role)")
        return credentials.get_frozen_credentials()

    def headers(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        signed = {"host": headers.get("host") or _host(url)}
        if headers.get("content-type"):
            signed["content-type"] = headers["content-type"]
        request = AWSRequest(method=method, url=url, data=body or b"", headers=signed)
        SigV4Auth(self.credentials(), self.service, self._region_for(url)).add_auth(request)
        return {name: str(request.headers[name]) for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token")
                if name in request.headers}


def from_params(plugin: str | None, params: str | None) -> Authentication | None:
    """An authentication from Pulsar-style `authPluginClassName` and `authParams` (CLI, Spark):
    the token plugin (Pulsar's class name, `token` or none with params) takes `token:XYZ` or
    `file:///path`; `aws-iam` (or `magnetar.AuthenticationAwsIam`) takes an optional `region:NAME`
    or `{"region": NAME}`. No plugin and no params: None."""
    name = (plugin or "").strip()
    params = (params or "").strip() or None
    if name.lower() in ("aws-iam", "awsiam", "sigv4") or name.endswith("AuthenticationAwsIam"):
        region = None
        if params:
            if params.startswith("{"):
                region = json.loads(params).get("region")
            else:
                key, _, value = params.partition(":")
                region = value.strip() if key.strip() == "region" else params
        return AuthenticationAwsIam(region=region)
    if name == BASIC_PLUGIN or name.lower() == "basic" or name.endswith("AuthenticationBasic"):
        if params is None:
            raise ValueError('Basic authentication needs parameters: {"username": ..., "password": ...}')
        return AuthenticationBasic(auth_params_string=params)
    if name and name != TOKEN_PLUGIN and name.lower() != "token" and not name.endswith(".AuthenticationToken") \
            and name != "AuthenticationToken":
        raise ValueError(f"Unsupported authentication plugin {name!r}: use {TOKEN_PLUGIN} or {AWS_IAM_PLUGIN}")
    if params is None:
        if name:
            raise ValueError("Token authentication needs parameters: token:XYZ or file:///path/to/token")
        return None
    return AuthenticationToken(params)
