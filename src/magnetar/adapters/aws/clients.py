"""boto3 clients, configured only by the standard AWS SDK configuration.

Endpoints and credentials come from the environment, profiles and the default credential chain
(`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_PROFILE`, ...): nothing here names an
endpoint, so the same code talks to AWS, to the embedded emulator or to LocalStack.

Every request is counted where it is made (a botocore `before-send` hook, once per HTTP
attempt, i.e. per billed request) so benchmarks report measured, not estimated, AWS calls; with
the refusals for throttling and the SDK's retries, they are `/metrics`' `magnetar_aws_*`.
"""

from __future__ import annotations

import os
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any

import boto3
from botocore.config import Config

from magnetar.adapters.aws.telemetry import on_request_created, record_aws, throttled_answer
from magnetar.core.metrics import AWS_THROTTLES

_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 4},
    connect_timeout=3,
    read_timeout=10,
    max_pool_connections=64,
    tcp_keepalive=True,
)


_ATTEMPT = re.compile(r"attempt=(\d+)")
# the requests made within `RequestCounter.scoped()` (and in the threads its caller hands that context to)
_SCOPE: ContextVar[Counter[tuple[str, str]] | None] = ContextVar("magnetar_request_scope", default=None)


class RequestCounter:
    """AWS requests made by this process, by (service, operation); with `by_site` (the
    MAGNETAR_REQUEST_SITES variable, a diagnostic: it walks the caller's frames on every request)
    also by the Magnetar functions that made them ("dynamodb.Query@core/push/x.py:f<core/y.py:g").
    Also the refusals for throttling (`attempted`, after each attempt) and the SDK's retries (an
    attempt past the first, from botocore's `amz-sdk-request` header)."""

    def __init__(self, by_site: bool = False) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self._throttles: Counter[tuple[str, str]] = Counter()
        self._retries: Counter[tuple[str, str]] = Counter()
        self._sites: Counter[str] = Counter()
        self.by_site = by_site
        self._lock = threading.Lock()

    def __call__(self, event_name: str = "", request: Any = None, **kwargs: Any) -> None:
        # event_name: "before-send.<service>.<Operation>"
        _event, service, operation = event_name.split(".", 2)
        site = f"{service}.{operation}@{_call_site()}" if self.by_site else ""
        header = request.headers.get("amz-sdk-request") if request is not None else None
        attempt = _ATTEMPT.search(header.decode() if isinstance(header, bytes) else header or "")
        scope = _SCOPE.get()
        with self._lock:
            self._counts[(service, operation)] += 1
            if attempt is not None and int(attempt.group(1)) > 1:
                self._retries[(service, operation)] += 1
            if site:
                self._sites[site] += 1
            if scope is not None:
                scope[(service, operation)] += 1

    def attempted(self, event_name: str = "", response: Any = None, **kwargs: Any) -> None:
        """botocore's `needs-retry.<service>.<Operation>`, after every attempt: a throttled one is
        recorded (`throttled`). Returns None: the retry decision stays botocore's."""
        if response and throttled_answer(response):
            _event, service, operation = event_name.split(".", 2)
            self.throttled(service, operation)

    def throttled(self, service: str, operation: str) -> None:
        """A throttling refusal, the one sink: counted here (`/metrics`' magnetar_aws_throttles) and
        in the current invocation's telemetry (CloudWatch's AwsThrottles, per AWS service)."""
        with self._lock:
            self._throttles[(service, operation)] += 1
        record_aws(AWS_THROTTLES, service)

    @contextmanager
    def scoped(self) -> Iterator[Counter[tuple[str, str]]]:
        """Count the requests made within the block (this thread, and threads that run with a copy
        of its context: `contextvars.copy_context()`), by (service, operation)."""
        counts: Counter[tuple[str, str]] = Counter()
        token = _SCOPE.set(counts)
        try:
            yield counts
        finally:
            _SCOPE.reset(token)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {f"{s}.{o}": n for (s, o), n in sorted(self._counts.items())}

    def by_operation(self) -> dict[str, dict[tuple[str, str], int]]:
        """Requests, throttles and retries, each by (service, operation)."""
        with self._lock:
            return {"requests": dict(self._counts), "throttles": dict(self._throttles), "retries": dict(self._retries)}

    def sites(self) -> dict[str, int]:
        """Requests by operation and call site (empty unless counted `by_site`)."""
        with self._lock:
            return dict(self._sites.most_common())

    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._throttles.clear()
            self._retries.clear()
            self._sites.clear()


def _call_site(depth: int = 3) -> str:
    """The innermost `depth` Magnetar functions on the stack outside the adapters and the local
    runtime (the core code that asked for the request), innermost first."""
    frame = sys._getframe(2)
    found: list[str] = []
    while frame is not None and len(found) < depth:
        path = frame.f_code.co_filename.replace("\\", "/")
        if "/magnetar/" in path and "/magnetar/adapters/" not in path and "/magnetar/local/" not in path:
            found.append(f"{path.rsplit('/magnetar/', 1)[1]}:{frame.f_code.co_name}")
        frame = frame.f_back  # type: ignore[assignment]
    return "<".join(found)


REQUESTS = RequestCounter(by_site=bool(os.environ.get("MAGNETAR_REQUEST_SITES")))


def count_requests(c: Any) -> Any:
    """Count a client's requests, throttles and retries in REQUESTS (every client of this process)
    and, throttles through REQUESTS, in the current invocation's telemetry."""
    c.meta.events.register("before-send", REQUESTS)
    c.meta.events.register_first("needs-retry", REQUESTS.attempted)
    # the invocation's telemetry: retried attempts, S3 requests (adapters/aws/telemetry.py)
    c.meta.events.register("request-created", on_request_created)
    return c


# BatchGetItem/BatchWriteItem answer the items a throttled partition could not take as
# UnprocessedKeys/UnprocessedItems (HTTP 200, so botocore does not retry them): AWS asks callers to
# retry those with exponential backoff, never at once.
UNPROCESSED_ATTEMPTS = 8


def unprocessed_backoff(attempt: int, operation: str, service: str = "dynamodb") -> None:
    """Wait before retrying a batch's unprocessed items: full jitter, 50 ms doubling up to 2 s.
    The items were throttled: counted as such (REQUESTS.throttled)."""
    REQUESTS.throttled(service, operation)
    time.sleep(random.uniform(0, min(2.0, 0.05 * 2**attempt)))


# callables every new client is handed to (its events, before its first request): the local
# runtime's emulation of the network between regions (magnetar.local.network), nothing on AWS
_CLIENT_HOOKS: list[Callable[[Any], None]] = []


def add_client_hook(hook: Callable[[Any], None]) -> None:
    """Hand every client made from now on to `hook` (and forget the clients made before)."""
    _CLIENT_HOOKS.append(hook)
    _client.cache_clear()


def client(service: str, region: str | None = None) -> Any:
    """One client per service per process (clients are thread-safe; sessions are not) and per
    endpoint in effect: a process that moves to another endpoint (tests, `magnetar local up` after
    another emulator) never reuses a client made for the previous one. `region`: another region
    than the process's (the instance's configuration store at its home replica)."""
    variable = f"AWS_ENDPOINT_URL_{service.upper().replace('-', '_')}"
    return _client(service, os.environ.get(variable) or os.environ.get("AWS_ENDPOINT_URL"), region or None)


@cache
def _client(service: str, endpoint: str | None, region: str | None = None) -> Any:
    session = boto3.session.Session()
    c = session.client(service, config=_CONFIG, region_name=region)  # type: ignore[call-overload]
    for hook in _CLIENT_HOOKS:
        hook(c)
    return count_requests(c)
