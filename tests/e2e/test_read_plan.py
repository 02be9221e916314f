"""The read plan route: sealed segments of an entry range with byte offsets and presigned GET URLs
that fetch (from the emulated S3, with no AWS credentials) exactly the bytes the broker reads."""

from __future__ import annotations

import base64
import itertools
import time
import uuid
from typing import Any

import httpx

from http_helpers import HTTP
from magnetar.api.wire import entry_to_wire
from magnetar.core.ledger.plan import segment_entries

ENTRIES = 30


def _topic_path() -> str:
    return f"persistent/public/default/plan-{uuid.uuid4().hex[:8]}"


def _produce(http: httpx.Client, path: str) -> None:
    for e in range(ENTRIES):
        messages = [{"payload": base64.b64encode(f"m-{e}-{i}".encode()).decode(), "key": f"k{i}",
                     "properties": {"e": str(e)}} for i in range(3)]
        response = http.post(f"/topics/{path}", json={"messages": messages})
        assert response.status_code == 200, response.text


def _plan(http: httpx.Client, path: str, **body: Any) -> httpx.Response:
    return http.post(f"/magnetar/v1/reader/{path}/plan", json=body)


def _sealed(http: httpx.Client, path: str) -> None:
    deadline = time.monotonic() + 30
    while _plan(http, path, urls=False).json()["sealedEntryId"] < ENTRIES:
        assert time.monotonic() < deadline, "entries not sealed in time"
        time.sleep(0.2)


def test_plan_urls_fetch_the_bytes_the_broker_reads(cluster: Any) -> None:
    path = _topic_path()
    with httpx.Client(base_url=cluster.url, timeout=30) as http:
        _produce(http, path)
        _sealed(http, path)
        response = _plan(http, path, startEntryId=5, endEntryId=25)
        assert response.status_code == 200, response.text
        plan = response.json()
        assert (plan["firstEntryId"], plan["nextEntryId"]) == (0, 25)
        assert plan["sealedEntryId"] >= ENTRIES and plan["expiresAt"] > time.time() * 1000
        segments = plan["segments"]
        assert segments[0]["firstEntryId"] == 5 and segments[-1]["lastEntryId"] == 24
        for before, after in itertools.pairwise(segments):
            assert after["firstEntryId"] == before["lastEntryId"] + 1  # contiguous
        fetched = []
        with httpx.Client(timeout=30) as s3:  # no credentials: the URL carries them
            for seg in segments:
                a, b = seg["range"]
                assert (a, b) == (seg["offsets"][0], seg["offsets"][-1])
                assert seg["url"].startswith("http://127.0.0.1:")  # the emulator's endpoint
                got = s3.get(seg["url"], headers={"Range": f"bytes={a}-{b - 1}"})
                assert got.status_code == 206, got.text
                fetched += list(segment_entries(got.content, seg["offsets"]))
        assert [e.entry_id for e in fetched] == list(range(5, 25))
        broker: list[dict[str, Any]] = []
        while len(broker) < 20:  # (a broker read stops at a few segments per request)
            page = http.post(f"/magnetar/v1/reader/{path}/read", json={
                "startEntryId": 5 + len(broker), "maxEntries": 20 - len(broker), "format": "entries"}).json()
            assert page["entries"], page
            broker += page["entries"]
        assert [entry_to_wire(e, -1, 0, []) for e in fetched] == broker
        # a URL does not open other objects: its signature covers its key only
        tampered = segments[0]["url"].replace(".seg?", ".seg-other?")
        assert HTTP.get(tampered, timeout=30).status_code in (403, 404)


def test_plan_pages_and_stops_at_the_seal(cluster: Any) -> None:
    path = _topic_path()
    with httpx.Client(base_url=cluster.url, timeout=30) as http:
        _produce(http, path)
        _sealed(http, path)
        first = _plan(http, path, maxEntries=7, urls=False).json()
        assert first["nextEntryId"] == 7 and "expiresAt" not in first
        assert all("url" not in s for s in first["segments"])
        assert sum(s["lastEntryId"] - s["firstEntryId"] + 1 for s in first["segments"]) == 7
        rest = _plan(http, path, startEntryId=7, endEntryId=10_000).json()
        assert rest["nextEntryId"] == rest["sealedEntryId"]  # never past the seal
        assert rest["segments"][0]["firstEntryId"] == 7
        beyond = _plan(http, path, startEntryId=10_000).json()
        assert beyond["segments"] == [] and beyond["nextEntryId"] == 10_000


def test_plan_refusals_are_4xx_with_a_reason(cluster: Any) -> None:
    path = _topic_path()
    with httpx.Client(base_url=cluster.url, timeout=30) as http:
        missing = _plan(http, path)
        assert missing.status_code == 404 and "not found" in missing.json()["reason"]
        _produce(http, path)
        for body in ({"startEntryId": -1}, {"maxEntries": 0}, {"maxEntries": 10**9}, {"expiresSeconds": 5},
                     {"endEntryId": "x"}, {"other": 1}):
            response = _plan(http, path, **body)
            assert response.status_code == 400, (body, response.text)
            assert response.json()["reason"].startswith("Invalid request body"), body
        # non-persistent topics store nothing to plan
        response = http.post(f"/magnetar/v1/reader/non-{path}/plan", json={})
        assert response.status_code in (404, 405) and response.json()["reason"]
