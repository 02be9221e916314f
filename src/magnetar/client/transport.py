"""HTTP to the broker: JSON in and out, Pulsar's {"reason"} errors raised as SDK exceptions,
transient failures retried with backoff (the broker's operations are safe to retry).

The service a transport talks to can change under it (client failover, client/failover.py):
`switch` replaces the base URL, the authentication and the WebSocket URL at once, and every
attempt of a request (a retry too) goes to the service current when it is made. Each switch
increments `generation`, which is how consumers tell the cluster a message came from."""

from __future__ import annotations

import functools
import logging
import random
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from magnetar.client import exceptions
from magnetar.client.auth import Authentication
from magnetar.core.naming import TopicName

RETRYABLE_STATUS = {429, 500, 502, 503, 504}
log = logging.getLogger(__name__)


class ServiceSwitched(exceptions.ConnectError):
    """A request pinned to one service (`call(..., generation=...)`) was not sent: the client
    switched to another service since (what it carries belongs to the former one)."""


@dataclass(frozen=True)
class Endpoint:
    """One service: its HTTP base URL, the authentication presented there, its WebSocket base URL."""

    base: str
    authentication: Authentication | None
    websocket: str | None = None
    generation: int = 0  # how many switches the transport had made when this service became current


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The process's TLS context for HTTPS (httpx's default: the system's or `SSL_CERT_FILE`'s CA
    certificates, as the environment says when it is first asked for), shared by every client:
    building one loads the whole CA bundle, ~36 ms of CPU, which a process making many clients
    (the CLI, tests, a function that makes a client per invocation) paid for each."""
    return httpx.create_ssl_context()


def topic_path(topic: TopicName) -> str:
    return "/".join(quote(p, safe="") for p in (topic.domain.value, topic.tenant, topic.namespace, topic.local_name))


SCHEMES = ("http", "https")


def check_service_url(url: str) -> None:
    """pulsar-client's checks of a service URL, with its ValueErrors and messages, for the HTTP
    API's schemes (`pulsar://` is the binary protocol's: the official clients' URL, not the SDK's)."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        raise ValueError(f"The scheme part is missing: {url}")
    if scheme.lower() not in SCHEMES:
        hint = " (the SDK takes the HTTP API's http:// or https:// URL)" if scheme.startswith("pulsar") else ""
        raise ValueError(f"Invalid scheme: {scheme}{hint}")
    if not rest.strip("/"):
        raise ValueError("No service url is provided yet")
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:  # a port that is not a number, a malformed host
        raise ValueError(f"Invalid service url {url}: {exc}") from None


def _check_authentication(authentication: object) -> None:
    if authentication is not None and not isinstance(authentication, Authentication):
        raise exceptions.InvalidConfiguration(
            "authentication must be an AuthenticationToken or AuthenticationAwsIam")


class Transport:
    def __init__(self, service_url: str, timeout_s: float = 30.0, authentication: Authentication | None = None,
                 websocket_url: str | None = None, unreachable_after_s: float | None = None) -> None:
        """`authentication` signs every request (and every retry) and the push consumers' connects.
        `websocket_url`: where push consumers connect (None: derived from `service_url`).
        `unreachable_after_s`: while the service has answered nothing yet, a refused connection
        fails the request after this long (the command line's clients: a cluster that is not up
        is said at once); None: retried until the request's deadline, as any transport error."""
        check_service_url(service_url)
        _check_authentication(authentication)
        self.unreachable_after_s = unreachable_after_s
        self._answered = False  # a response came from the service (any status)
        self._endpoint = Endpoint(service_url.rstrip("/"), authentication, websocket_url)
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        self.timeout_s = timeout_s
        self.http = httpx.Client(
            base_url=self.base,
            auth=authentication,
            verify=tls_context(),
            timeout=httpx.Timeout(timeout_s + 10, connect=5.0),
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=50),
        )

    # --- the current service ------------------------------------------------------------------
    @property
    def generation(self) -> int:
        """Incremented by each switch: which stay on a service a request or a message belongs to."""
        return self._endpoint.generation

    @property
    def base(self) -> str:
        return self._endpoint.base

    @property
    def authentication(self) -> Authentication | None:
        return self._endpoint.authentication

    @property
    def websocket_url(self) -> str | None:
        return self._endpoint.websocket

    def switch(self, service_url: str, authentication: Authentication | None,
               websocket_url: str | None = None) -> None:
        """Talk to another service from the next attempt on: requests in flight that fail with a
        connection error are retried there (within their deadline); the listeners (push consumers,
        consumers) are told, after the switch, on this thread."""
        _check_authentication(authentication)
        with self._lock:
            former = self._endpoint
            endpoint = Endpoint(service_url.rstrip("/"), authentication, websocket_url, former.generation + 1)
            if (endpoint.base, endpoint.authentication, endpoint.websocket) == (
                    former.base, former.authentication, former.websocket):
                return
            log.info("switching service from %s to %s", former.base, endpoint.base)
            self._endpoint = endpoint
            self.http.base_url = httpx.URL(endpoint.base)
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener()
            except Exception:  # one listener must not keep the others on the former service
                log.exception("a service switch listener failed")

    def add_switch_listener(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_switch_listener(self, listener: Callable[[], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    # --- requests --------------------------------------------------------------------------------
    def call(self, method: str, path: str, body: Any = None, deadline_s: float | None = None,
             generation: int | None = None, form: dict[str, str] | None = None,
             files: dict[str, tuple[str | None, bytes]] | None = None) -> Any:
        """One logical request, retried on transport errors and 5xx until `deadline_s` passes.
        `form` and `files`: a multipart/form-data body (fields, and files as (name, bytes)) instead of JSON.
        Each attempt goes to the service current at that moment. `generation` pins the request
        to that service: once the client has switched away from it, `ServiceSwitched` is raised
        instead of an attempt (acknowledgements, which mean nothing to another cluster)."""
        started = time.monotonic()
        deadline = started + (deadline_s if deadline_s is not None else self.timeout_s)
        backoff = 0.05
        while True:
            if self.http.is_closed:
                raise exceptions.AlreadyClosed("Client already closed")
            endpoint = self._endpoint
            if generation is not None and generation != endpoint.generation:
                raise ServiceSwitched(f"{method} {path}: the client switched to {endpoint.base}")
            try:
                # the URL and the authentication of one service, read together (a switch may come between attempts)
                url = path if path.startswith(("http://", "https://")) else (
                    endpoint.base + ("" if path.startswith("/") else "/") + path)
                if form is not None or files is not None:
                    response = self.http.request(method, url, data=form, files=files, auth=endpoint.authentication)
                else:
                    response = self.http.request(method, url, json=body, auth=endpoint.authentication)
            except httpx.TransportError as exc:
                if time.monotonic() + backoff >= deadline or self._unreachable(exc, started):
                    raise exceptions.ConnectError(f"cannot reach {endpoint.base} ({method} {path}): {exc}") from exc
            else:
                self._answered = True
                if response.status_code < 300:
                    if not response.content:
                        return None
                    if response.headers.get("content-type", "").startswith("application/json"):
                        return response.json()
                    return response.text
                reason = _reason(response)
                if response.status_code not in RETRYABLE_STATUS or time.monotonic() + backoff >= deadline:
                    raise exceptions.from_response(response.status_code, reason)
            time.sleep(backoff * random.uniform(0.5, 1.5))
            backoff = min(backoff * 2, 1.0)

    def _unreachable(self, exc: httpx.TransportError, started: float) -> bool:
        """A refused connection (or an unknown host) to a service that never answered, for longer
        than `unreachable_after_s`; an unsupported URL, at once (no retry helps)."""
        if isinstance(exc, httpx.UnsupportedProtocol):
            return True
        limit = self.unreachable_after_s
        return (limit is not None and not self._answered and isinstance(exc, httpx.ConnectError)
                and time.monotonic() - started >= limit)

    def close(self) -> None:
        self.http.close()


def _reason(response: httpx.Response) -> str:
    try:
        body = response.json()
        return str(body.get("reason") or body.get("message") or body)
    except ValueError:
        return response.text or f"HTTP {response.status_code}"
