"""HTTP to the broker: JSON in and out, Pulsar's {"reason"} errors raised as SDK exceptions,
transient failures retried with backoff (the broker's operations are safe to retry)."""

from __future__ import annotations

import random
import time
from typing import Any
from urllib.parse import quote

import httpx

from magnetar.client import exceptions
from magnetar.client.auth import Authentication
from magnetar.core.naming import TopicName

RETRYABLE_STATUS = {429, 500, 502, 503, 504}


def topic_path(topic: TopicName) -> str:
    return "/".join(quote(p, safe="") for p in (topic.domain.value, topic.tenant, topic.namespace, topic.local_name))


class Transport:
    def __init__(self, service_url: str, timeout_s: float = 30.0, authentication: Authentication | None = None) -> None:
        """`authentication` signs every request (and every retry) and the push consumers' connects."""
        if authentication is not None and not isinstance(authentication, Authentication):
            raise exceptions.InvalidConfiguration(
                "authentication must be an AuthenticationToken or AuthenticationAwsIam")
        self.base = service_url.rstrip("/")
        self.timeout_s = timeout_s
        self.authentication = authentication
        self.http = httpx.Client(
            base_url=self.base,
            auth=authentication,
            timeout=httpx.Timeout(timeout_s + 10, connect=5.0),
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=50),
        )

    def call(self, method: str, path: str, body: Any = None, deadline_s: float | None = None) -> Any:
        """One logical request, retried on transport errors and 5xx until `deadline_s` passes."""
        deadline = time.monotonic() + (deadline_s if deadline_s is not None else self.timeout_s)
        backoff = 0.05
        while True:
            if self.http.is_closed:
                raise exceptions.AlreadyClosed("Client already closed")
            try:
                response = self.http.request(method, path, json=body)
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
