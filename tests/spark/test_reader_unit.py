"""The batch reader (`BatchReader`: planning, then `read_range` paging) against a fake broker
(httpx.MockTransport): no JVM, no cluster."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from magnetar_spark import MagnetarSourceError, message_id_from_bytes
from magnetar_spark.options import SourceOptions
from magnetar_spark.reading import BatchReader, MagnetarDataLossError, TopicRange
from magnetar_spark.settings import TopicSettings

TOPIC = "persistent://public/default/t#x"
BASE = "/magnetar/v1/reader/persistent/public/default/t%23x/read"


class FakeBroker:
    """A topic of `entries` entries with `per_entry` messages each, kept from entry `first` on;
    `fail` decides per read request."""

    def __init__(self, entries: int, per_entry: int = 2) -> None:
        self.entries = entries
        self.per_entry = per_entry
        self.first = 0  # the first entry retention keeps
        self.requests: list[tuple[int, int]] = []
        self.fail: Callable[[int, int], httpx.Response | None] | None = None  # per (start, max)
        self.readable_after = 0  # reads before entries become readable (journal lag)

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/partitions"):  # not a partitioned topic
            return httpx.Response(200, json={"partitions": 0})
        if request.url.path.endswith("/lastMessageId"):
            assert request.url.raw_path.decode().startswith("/admin/v2/persistent/public/default/t%23x/")
            return httpx.Response(
                200, json={"ledgerId": 0, "entryId": self.entries - 1, "partitionIndex": -1}
            )
        assert request.url.raw_path.decode() == BASE
        body = json.loads(request.content)
        start, max_entries = body["startEntryId"], body["maxEntries"]
        assert 1 <= max_entries <= 1000
        self.requests.append((start, max_entries))
        if self.fail is not None and (answer := self.fail(start, max_entries)) is not None:
            return answer
        if self.readable_after > 0:
            self.readable_after -= 1
            return httpx.Response(200, json={"messages": [], "nextEntryId": start, "firstEntryId": self.first})
        stop = min(self.entries, start + max_entries)
        messages = [
            {
                "messageId": f"3:{e}:-1:{b}",
                "payload": base64.b64encode(f"{e}/{b}".encode()).decode(),
                "properties": {"e": str(e)},
                "publishTime": 1_700_000_000_000 + e,
                "eventTime": 0,
                "redeliveryCount": 0,
                "key": None,
                "producerName": "p",
                "topic": TOPIC,
            }
            for e in range(max(start, self.first), stop)
            for b in range(self.per_entry)
        ]
        return httpx.Response(200, json={"messages": messages, "nextEntryId": max(start, stop),
                                         "firstEntryId": self.first})


def _reader(broker: FakeBroker, **options: str) -> BatchReader:
    # directReads=false: every range through the broker's read endpoint (direct reads: test_direct_unit.py)
    reader = BatchReader(SourceOptions({"service.url": "http://broker.test/", "topic": "t#x",
                                        "directReads": "false", **options}))
    reader.transport = httpx.MockTransport(broker.handler)
    return reader


def _read_all(reader: BatchReader) -> list[tuple[Any, ...]]:
    return [row for p in reader.partitions() for row in reader.read(p)]


def _ranges(reader: BatchReader) -> list[TopicRange]:
    parts = reader.partitions()
    assert all(isinstance(p, TopicRange) for p in parts)
    return [p for p in parts if isinstance(p, TopicRange)]


def test_plans_contiguous_ranges_from_the_snapshot() -> None:
    parts = _ranges(_reader(FakeBroker(10), partitions="3"))
    assert [(p.topic, p.start, p.end) for p in parts] == [(TOPIC, 0, 4), (TOPIC, 4, 7), (TOPIC, 7, 10)]

    # startingEntryId/endingEntryId (both inclusive) bound the snapshot; ranges are [start, end)
    bounded = _reader(FakeBroker(10), partitions="8", startingEntryId="7", endingEntryId="100")
    assert [(p.start, p.end) for p in _ranges(bounded)] == [(7, 8), (8, 9), (9, 10)]
    offsets = _reader(FakeBroker(10), startingOffsets='{"t#x": 6}', endingOffsets='{"t#x": 8}', partitions="1")
    assert [(p.start, p.end) for p in _ranges(offsets)] == [(6, 8)]

    empty = _ranges(_reader(FakeBroker(0)))
    assert [(p.topic, p.start, p.end) for p in empty] == [("", 0, 0)]  # one empty partition
    assert list(_reader(FakeBroker(0)).read(empty[0])) == []


def test_rows_and_paging() -> None:
    broker = FakeBroker(25)
    rows = _read_all(_reader(broker, partitions="2", pageSize="4"))
    assert len(rows) == 50
    value, key, topic, mid, publish, event, props = rows[0]
    assert (value, key, topic, event, props) == (b"0/0", None, TOPIC, None, {"e": "0"})
    assert message_id_from_bytes(mid) == "3:0:-1:0"
    assert int(publish.timestamp() * 1000) == 1_700_000_000_000
    # planning asks past the end what retention keeps (earliest); then each request stays inside
    # its partition's range and pages by at most 4
    assert broker.requests == [(25, 1), (0, 4), (4, 4), (8, 4), (12, 1), (13, 4), (17, 4), (21, 4)]


def test_a_page_too_large_is_read_in_halves_then_grows_again() -> None:
    broker = FakeBroker(40)
    broker.fail = lambda start, n: (
        httpx.Response(502, json={"message": "Internal Server Error"}) if n > 5 else None
    )
    rows = _read_all(_reader(broker, partitions="1", pageSize="40"))
    assert [message_id_from_bytes(r[3]) for r in rows] == [
        f"3:{e}:-1:{b}" for e in range(40) for b in range(2)
    ]
    reads = broker.requests[1:]  # after planning's (40, 1)
    assert reads[:4] == [(0, 40), (0, 20), (0, 10), (0, 5)]
    assert (20, 10) in reads  # four pages of 5 went through: it asks for twice as many again


def test_transient_errors_are_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("magnetar_spark.broker.time.sleep", lambda s: None)
    broker = FakeBroker(3)
    failures = iter([503, 429, 0, 503])
    broker.fail = lambda start, n: (
        httpx.Response(s, json={"reason": "busy"}) if (s := next(failures, 0)) else None
    )
    assert len(_read_all(_reader(broker, partitions="1"))) == 6


def test_broker_refusal_carries_the_reason() -> None:
    broker = FakeBroker(3)
    broker.fail = lambda start, n: httpx.Response(400, json={"reason": "Invalid request body: maxEntries"})
    with pytest.raises(MagnetarSourceError, match="HTTP 400: Invalid request body: maxEntries") as failure:
        _read_all(_reader(broker))
    assert failure.value.status == 400 and failure.value.reason == "Invalid request body: maxEntries"
    # ... when reading too (not only planning)
    reading = FakeBroker(3)
    reading.fail = lambda start, n: (
        httpx.Response(403, json={"reason": "not authorized to read"}) if start < 3 else None
    )
    with pytest.raises(MagnetarSourceError, match="read of persistent://public/default/t#x failed: HTTP 403: "
                                                  "not authorized to read"):
        _read_all(_reader(reading))


def test_waits_for_entries_on_their_way_then_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("magnetar_spark.reading.time.sleep", lambda s: None)
    broker = FakeBroker(3)
    broker.readable_after = 3  # planning's probe, then two empty reads at entry 0
    assert len(_read_all(_reader(broker, partitions="1"))) == 6
    assert broker.requests[1:] == [(0, 3), (0, 3), (0, 3)]

    stuck = FakeBroker(3)
    stuck.readable_after = 10**9
    with pytest.raises(MagnetarSourceError, match="stalled: no entry readable at id 0"):
        _read_all(_reader(stuck, partitions="1", readTimeoutMs="0"))


def test_entries_deleted_by_retention_fail_the_read_or_are_skipped() -> None:
    broker = FakeBroker(10)
    broker.first = 4
    with pytest.raises(MagnetarDataLossError, match=r"entries 2\.\.3 were deleted by retention"):
        _read_all(_reader(broker, startingOffsets='{"t#x": 2}', partitions="1"))
    rows = _read_all(_reader(broker, startingOffsets='{"t#x": 2}', partitions="1", failOnDataLoss="false"))
    assert {message_id_from_bytes(r[3]).split(":")[1] for r in rows} == {str(e) for e in range(4, 10)}
    # earliest is the first entry kept: no loss
    assert len(_read_all(_reader(broker, partitions="1"))) == 12


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "t"}, "'service.url' is required"),
        ({"service.url": "http://x"}, "exactly one of the options 'topic'"),
        ({"service.url": "http://x", "topic": "a/b/c/d"}, "Invalid topic"),
        (
            {"service.url": "http://x", "topic": "t", "pageSize": "1001"},
            "'pageSize' must be between 1 and 1000",
        ),
        ({"service.url": "http://x", "topic": "t", "partitions": "many"}, "'partitions' must be an integer"),
        ({"service.url": "http://x", "topic": "t", "readTimeoutMs": "-1"}, "'readTimeoutMs' must be >= 0"),
    ],
)
def test_bad_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SourceOptions(options)


def test_short_and_full_topic_names() -> None:
    assert (
        TopicSettings({"service.url": "http://x", "topic": "orders"}).topic_path
        == "persistent/public/default/orders"
    )
    full = TopicSettings({"service.url": "http://x", "topic": "non-persistent://t1/ns1/a?b"})
    assert full.topic_path == "non-persistent/t1/ns1/a%3Fb"
    opts = SourceOptions({"service.url": "http://x", "topic": "orders"})
    assert opts.settings_for("t1/ns1/b-partition-2").topic_path == "persistent/t1/ns1/b-partition-2"
