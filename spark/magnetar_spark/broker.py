"""The broker's HTTP API as the connector calls it: `BrokerClient`, one per topic, retrying
transient failures and raising a refusal as `MagnetarSourceError` with the broker's reason.

    GET  /admin/v2/{topic}/lastMessageId          the last entry id: the end of a read's snapshot
    POST /magnetar/v1/reader/{topic}/read         a page of entries (the non-durable reader)
    GET  /admin/v2/{topic}/partitions             a partitioned topic's partition count
    GET  /admin/v2/{domain}/{tenant}/{namespace}  the namespace's topics (and `/partitioned`)

The other calls go through `BrokerClient.call` where they are made: the read plan
(magnetar_spark.direct), publish and stats (magnetar_spark.sink), the schema (magnetar_spark.source).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from magnetar.core.naming import TopicName
from magnetar_spark.errors import MagnetarSourceError
from magnetar_spark.settings import TopicSettings

TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
# What a response too large for Lambda (6 MB) or API Gateway looks like: retried with a smaller page.
TOO_LARGE_STATUS = frozenset({413, 500, 502})


@dataclass
class Page:
    """One answer of the read endpoint."""

    messages: list[dict[str, Any]]
    next_entry: int
    first_entry: int | None  # the first entry retention keeps (None: a broker that does not say)


class BrokerClient:
    """The HTTP calls about one topic (`settings.topic`), with retries of transient failures."""

    def __init__(self, settings: TopicSettings, transport: Any = None) -> None:
        import httpx  # on the executors too: imported where used

        self._httpx = httpx
        self.settings = settings
        self.client = httpx.Client(
            base_url=settings.service_url,
            timeout=settings.request_timeout_s,
            headers={"Accept": "application/json", "User-Agent": "magnetar-spark"},
            transport=transport,
            auth=settings.authentication(),
        )

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(
        self,
        method: str,
        path: str,
        what: str,
        body: dict[str, Any] | None = None,
        fail_fast: frozenset[int] = frozenset(),
    ) -> Any:
        """The JSON answer; retries transient failures except the statuses in `fail_fast`."""
        topic = self.settings.topic
        attempt = 0
        while True:
            try:
                response = self.client.request(method, path, json=body)
            except self._httpx.TransportError as exc:
                if attempt >= self.settings.max_retries:
                    raise MagnetarSourceError(
                        f"magnetar: {what} of {topic} failed: cannot reach {self.settings.service_url}: {exc}"
                    ) from exc
            else:
                if response.status_code < 400:
                    try:
                        return response.json()
                    except ValueError:
                        raise MagnetarSourceError(
                            f"magnetar: {what} of {topic} failed: the answer is not JSON: {response.text[:200]!r}",
                            status=response.status_code,
                        ) from None
                reason = _reason(response)
                status = response.status_code
                if (
                    status not in TRANSIENT_STATUS
                    or status in fail_fast
                    or attempt >= self.settings.max_retries
                ):
                    raise MagnetarSourceError(
                        f"magnetar: {what} of {topic} failed: HTTP {response.status_code}: {reason}",
                        status=response.status_code,
                        reason=reason,
                    )
            time.sleep(min(0.2 * 2**attempt, 5.0))
            attempt += 1

    def last_entry_id(self) -> int:
        body = self.call("GET", f"/admin/v2/{self.settings.topic_path}/lastMessageId", "lastMessageId")
        return int(body["entryId"])

    def page(self, start: int, max_entries: int) -> Page:
        """The messages of the entries from `start` (at most `max_entries`) and where to continue.

        A page that fails the way an oversized response fails (413, or the 500/502 API Gateway
        answers when the Lambda response exceeds 6 MB) is not retried here: the reader asks again
        for half as many entries (magnetar_spark.reading.read_range).
        """
        body = self.call(
            "POST",
            f"/magnetar/v1/reader/{self.settings.topic_path}/read",
            "read",
            {"startEntryId": start, "maxEntries": max_entries},
            fail_fast=TOO_LARGE_STATUS if max_entries > 1 else frozenset(),
        )
        next_entry = body.get("nextEntryId")
        first = body.get("firstEntryId")
        return Page(list(body.get("messages") or []), start if next_entry is None else int(next_entry),
                    None if first is None else int(first))

    def partition_count(self, topic: str) -> int:
        """The partitions of `topic`; 0 for a topic that is not partitioned."""
        path = "/".join(quote(p, safe="") for p in _path_parts(topic))
        try:
            body = self.call("GET", f"/admin/v2/{path}/partitions", "partitions")
        except MagnetarSourceError as exc:
            if exc.status == 404:
                return 0
            raise
        return int(body.get("partitions") or 0)

    def namespace_topics(self, domain: str, tenant: str, namespace: str) -> list[str]:
        """The namespace's topics (partitions included) and its partitioned topics."""
        base = f"/admin/v2/{quote(domain, safe='')}/{quote(tenant, safe='')}/{quote(namespace, safe='')}"
        topics = list(self.call("GET", base, "list topics") or [])
        partitioned = list(self.call("GET", f"{base}/partitioned", "list partitioned topics") or [])
        return [str(t) for t in topics + partitioned]


def _reason(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("reason"):
        return str(body["reason"])
    text = (response.text or "").strip()
    return text[:500] or response.reason_phrase or "no reason given"


def _path_parts(topic: str) -> tuple[str, str, str, str]:
    t = TopicName.parse(topic)
    return (t.domain.value, t.tenant, t.namespace, t.local_name)
