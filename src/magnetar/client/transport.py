"""HTTP to the broker: JSON in and out, Pulsar's {"reason"} errors raised as SDK exceptions,
transient failures retried with backoff (the broker's operations are safe to retry).

The service a transport talks to can change under it (client failover, client/failover.py):
`switch` replaces the base URL, the authentication and the WebSocket URL at once, and every
attempt of a request (a retry too) goes to the service current when it is made. Each switch
increments `generation`, which is how consumers tell the cluster a message came from."""

from __future__ import annotations

import logging
import random
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


def topic_path(topic: TopicName) -> str:
    return "/".join(quote(p, safe="") for p in (topic.domain.value, topic.tenant, topic.namespace, topic.local_name))


def _check_authentication(authentication: object) -> None:
    if authentication is not None and not isinstance(authentication, Authentication):
        raise exceptions.InvalidConfiguration(
            "authentication must be an AuthenticationToken or AuthenticationAwsIam")


class Transport:
    def __init__(self, service_url: str, timeout_s: float = 30.0, authentication: Authentication | None = None,
                 websocket_url: str | None = None) -> None:
        """`authentication` signs every request (and every retry) and the push consumers' connects.
        `websocket_url`: where push consumers connect (None: derived from `service_url`)."""
        _check_authentication(authentication)
        self._endpoint = Endpoint(service_url.rstrip("/"), authentication, websocket_url)
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        self.timeout_s = timeout_s
        self.http = httpx.Client(
            base_url=self.base,
            auth=authentication,
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
        deadline = time.monotonic() + (deadline_s if deadline_s is not None else self.timeout_s)
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
                if time.monotonic() + backoff >= deadline:
                    raise exceptions.ConnectError(f"{method} {path}: {exc}") from exc
            else:
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

    def close(self) -> None:
        self.http.close()


def _reason(response: httpx.Response) -> str:
    try:
        body = response.json()
        return str(body.get("reason") or body.get("message") or body)
    except ValueError:
        return response.text or f"HTTP {response.status_code}"
