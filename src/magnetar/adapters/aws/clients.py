"""boto3 clients, configured only by the standard AWS SDK configuration.

Endpoints and credentials come from the environment, profiles and the default credential chain
(`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_PROFILE`, ...): nothing here names an
endpoint, so the same code talks to AWS, to the embedded emulator or to LocalStack.

Every request is counted where it is made (a botocore `before-send` hook, once per HTTP
attempt, i.e. per billed request) so benchmarks report measured, not estimated, AWS calls.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections import Counter
from functools import cache
from typing import Any

import boto3
from botocore.config import Config

from magnetar.adapters.aws.telemetry import on_needs_retry, on_request_created

_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 4},
    connect_timeout=3,
    read_timeout=10,
    max_pool_connections=64,
    tcp_keepalive=True,
)


class RequestCounter:
    """AWS requests made by this process, by (service, operation); with `by_site` (the
    MAGNETAR_REQUEST_SITES variable, a diagnostic: it walks the caller's frames on every request)
    also by the Magnetar functions that made them ("dynamodb.Query@core/push/x.py:f<core/y.py:g")."""

    def __init__(self, by_site: bool = False) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self._sites: Counter[str] = Counter()
        self.by_site = by_site
        self._lock = threading.Lock()

    def __call__(self, event_name: str = "", **kwargs: Any) -> None:
        # event_name: "before-send.<service>.<Operation>"
        _event, service, operation = event_name.split(".", 2)
        site = f"{service}.{operation}@{_call_site()}" if self.by_site else ""
        with self._lock:
            self._counts[(service, operation)] += 1
            if site:
                self._sites[site] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {f"{s}.{o}": n for (s, o), n in sorted(self._counts.items())}

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

# BatchGetItem/BatchWriteItem answer the items a throttled partition could not take as
# UnprocessedKeys/UnprocessedItems (HTTP 200, so botocore does not retry them): AWS asks callers to
# retry those with exponential backoff, never at once.
UNPROCESSED_ATTEMPTS = 8


def unprocessed_backoff(attempt: int, service: str = "dynamodb") -> None:
    """Wait before retrying a batch's unprocessed items: full jitter, 50 ms doubling up to 2 s.
    The items were throttled: counted as such (AwsThrottles)."""
    from magnetar.adapters.aws.telemetry import record_aws
    from magnetar.core.metric_names import AWS_THROTTLES

    record_aws(AWS_THROTTLES, service)
    time.sleep(random.uniform(0, min(2.0, 0.05 * 2**attempt)))


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
    c.meta.events.register("before-send", REQUESTS)
    # the invocation's telemetry: throttled answers, retried attempts, S3 requests (adapters/aws/telemetry.py)
    c.meta.events.register("request-created", on_request_created)
    c.meta.events.register_first("needs-retry", on_needs_retry)
    return c
