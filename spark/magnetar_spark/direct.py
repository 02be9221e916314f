"""Direct reads: executors fetch sealed segments from S3 themselves, the broker only plans.

Planning (driver): for each topic-partition range `[start, end)` the driver asks the broker for a
read plan (`POST /magnetar/v1/reader/persistent/.../plan`, authorized like a read): the sealed part
of the range as slices of segment objects, each with a presigned GET URL and the byte offset of
every entry. The slices of all ranges are cut into about `partitions` Spark tasks of equal bytes
(cuts fall between entries); what the plan does not cover — the unsealed tail, or all of a range
whose start retention already deleted (so that the broker's read reports the loss exactly as
before) — stays a broker range (`reading.TopicRange`).

Reading (executor): a task GETs its slices (`Range: bytes=a-b`, the next one fetched while the
current one is decoded), cuts each into entries with the offsets and decodes them with the
broker's codec (`magnetar.core.ledger.plan.segment_entries` -> `magnetar.core.entry`), and yields
the rows as Arrow record batches (the same values the broker's read gives: tests compare them).
Executors need no AWS credentials: the URL carries the broker's authority for that object.

- A URL that expired (HTTP 403; tasks that start late in a long job) is planned again for that
  slice; a slice whose object is gone (404: retention trimmed it after planning) is read through
  the broker, which reports the loss (failOnDataLoss).
- No URLs in the plan (a broker without the plan route, a non-persistent topic, `urls` off):
  the range is read through the broker. `directReads=false` always reads through the broker.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql.datasource import InputPartition

from magnetar.core.entry import Entry
from magnetar.core.ledger.plan import segment_entries
from magnetar.core.naming import TopicName
from magnetar_spark.arrow import arrow_batches, rows_as_batches
from magnetar_spark.broker import TRANSIENT_STATUS, BrokerClient
from magnetar_spark.columns import MESSAGE_ID, timestamp
from magnetar_spark.errors import MagnetarSourceError
from magnetar_spark.offsets import EARLIEST
from magnetar_spark.options import SourceOptions
from magnetar_spark.reading import TopicRange, plan_ranges, read_range

log = logging.getLogger("magnetar_spark")
PLAN_PAGE = 200_000  # entries per plan request (the route's maximum)


@dataclass(frozen=True)
class Slice:
    """Entries `first_entry ..` of one segment object: entry i is bytes `[offsets[i], offsets[i+1])`."""

    topic: str
    url: str
    key: str
    first_entry: int
    offsets: tuple[int, ...]

    @property
    def size(self) -> int:
        return self.offsets[-1] - self.offsets[0]

    @property
    def end_entry(self) -> int:
        return self.first_entry + len(self.offsets) - 1

    def split(self, count: int) -> tuple[Slice, Slice]:
        """The first `count` entries and the rest."""
        return (replace(self, offsets=self.offsets[:count + 1]),
                replace(self, first_entry=self.first_entry + count, offsets=self.offsets[count:]))


class DirectRange(InputPartition):
    """A task of a direct read: slices of segment objects, read in order."""

    def __init__(self, index: int, slices: list[Slice]) -> None:
        super().__init__(tuple((s.topic, s.first_entry, s.end_entry) for s in slices))
        self.index = index
        self.slices = slices

    def __repr__(self) -> str:
        return f"DirectRange(index={self.index}, slices={len(self.slices)})"


# --- planning (driver) ---------------------------------------------------------------------------
def plan_calls(http: BrokerClient, start: int, end: int, expires_s: int | None = None) -> tuple[int, list[Slice], int]:
    """(first kept entry, the sealed slices of `[start, end)` with URLs, where they stop); no slices
    when the broker offers no URLs (or no plan route: 404/405)."""
    topic = str(http.settings.topic)
    position, slices, first = start, list[Slice](), 0
    while True:
        request: dict[str, Any] = {"startEntryId": position, "endEntryId": end, "maxEntries": PLAN_PAGE}
        if expires_s is not None:
            request["expiresSeconds"] = expires_s
        try:
            body = http.call("POST", f"/magnetar/v1/reader/{http.settings.topic_path}/plan", "read plan", request,
                             fail_fast=frozenset({404, 405}))
        except MagnetarSourceError as exc:
            if exc.status in (404, 405):
                return first, [], start
            raise
        first = int(body.get("firstEntryId") or 0)
        segments = body.get("segments") or []
        if any(not s.get("url") for s in segments):
            return first, [], start  # no URLs offered: through the broker
        for s in segments:
            slices.append(Slice(topic, str(s["url"]), str(s["key"]), int(s["firstEntryId"]),
                                tuple(int(o) for o in s["offsets"])))
        next_entry = int(body["nextEntryId"])
        stop = min(end, int(body["sealedEntryId"]))
        if not segments or next_entry <= position or next_entry >= stop:
            return first, slices, max(next_entry, position) if slices else start
        position = next_entry


def plan(opts: SourceOptions, ranges: list[tuple[str, int, int]], transport: Any = None) -> list[InputPartition]:
    """Spark partitions of `(topic, start, end)` ranges: sealed slices in about `opts.partitions`
    direct tasks of equal bytes, the rest as broker ranges."""
    slices: list[Slice] = []
    rest: list[tuple[str, int, int]] = []
    for topic, start, end in ranges:
        if end <= max(start, 0):
            continue
        if TopicName.parse(topic).domain.value != "persistent":
            rest.append((topic, start, end))
            continue
        with opts.client(topic, transport) as http:
            first, found, covered = plan_calls(http, max(start, 0), end)
        if not found or (start != EARLIEST and start < first):
            rest.append((topic, start, end))  # nothing to fetch directly, or lost entries: the broker says so
            continue
        slices.extend(found)
        if covered < end:
            rest.append((topic, covered, end))  # the unsealed tail
    tasks: list[InputPartition] = [DirectRange(i, group) for i, group in enumerate(distribute(slices, opts.partitions))]
    tail_tasks = max(1, opts.partitions - len(tasks)) if rest else 0
    for part in plan_ranges(rest, tail_tasks):
        tasks.append(TopicRange(len(tasks), part.topic, part.start, part.end))
    return tasks


def distribute(slices: list[Slice], tasks: int) -> list[list[Slice]]:
    """`slices` in order as at most `tasks` groups of about equal bytes, cut between entries."""
    total = sum(s.size for s in slices)
    if not slices:
        return []
    target = max(1, total / max(1, tasks))
    groups: list[list[Slice]] = [[]]
    queue = deque(slices)
    done = 0  # bytes placed so far
    while queue:
        piece = queue.popleft()
        room = target * len(groups) - done
        if piece.size <= room or len(groups) >= tasks:
            groups[-1].append(piece)
            done += piece.size
            continue
        # the entry boundary nearest to the group's end (at least one entry in a group)
        base, entries = piece.offsets[0], len(piece.offsets) - 1
        cut = min(range(entries + 1), key=lambda i: abs(piece.offsets[i] - base - room))
        if not groups[-1]:
            cut = max(cut, 1)
        if cut >= entries:
            groups[-1].append(piece)
            done += piece.size
            continue
        if cut > 0:
            head, tail = piece.split(cut)
            groups[-1].append(head)
            done += head.size
            queue.appendleft(tail)
        else:
            queue.appendleft(piece)
        groups.append([])
    return [g for g in groups if g]


# --- reading (executor) --------------------------------------------------------------------------
def read(opts: SourceOptions, part: DirectRange, transport: Any = None, typed: Any = None) -> Iterator[Any]:
    """The rows of a direct task, in entry order: Arrow record batches (tuples for a typed topic)."""
    import httpx

    settings = opts.base
    with httpx.Client(timeout=settings.request_timeout_s, transport=transport) as http, \
            ThreadPoolExecutor(max_workers=2, thread_name_prefix="magnetar-s3") as pool:
        ahead: deque[tuple[Slice, Future[bytes | None]]] = deque()
        pending = deque(part.slices)
        while pending or ahead:
            while pending and len(ahead) < 2:  # the next slice downloads while this one is decoded
                piece = pending.popleft()
                ahead.append((piece, pool.submit(fetch, http, piece, settings.max_retries)))
            piece, future = ahead.popleft()
            blob = future.result()
            if blob is None:  # an expired URL (or a gone object): plan this slice again, once
                again = _replanned(opts, piece, transport)
                blob = fetch(http, again, settings.max_retries) if again is not None else None
            if blob is None:  # the object is gone: the broker's read reports the loss (failOnDataLoss)
                fallback = read_range(opts, TopicRange(0, piece.topic, piece.first_entry, piece.end_entry),
                                      transport, typed)
                # one kind of item per task: Spark looks at the first to tell batches from rows
                yield from fallback if typed is not None else rows_as_batches(fallback)
                continue
            entries = segment_entries(blob, piece.offsets)
            if typed is None:
                yield from arrow_batches(piece.topic, entries)
            else:
                yield from typed_rows(piece.topic, entries, typed)


def fetch(http: Any, piece: Slice, max_retries: int) -> bytes | None:
    """The slice's bytes; None when the URL is refused (403: expired) or the object is gone (404)."""
    import httpx

    start, end = piece.offsets[0], piece.offsets[-1]
    attempt = 0
    while True:
        try:
            response = http.get(piece.url, headers={"Range": f"bytes={start}-{end - 1}"})
        except httpx.TransportError as exc:  # a connection went away, a timeout
            if attempt >= max_retries:
                raise MagnetarSourceError(f"magnetar: GET of segment {piece.key} failed: {exc}") from exc
        else:
            status = response.status_code
            if status in (200, 206):
                data: bytes = response.content
                if status == 200:  # an endpoint ignoring Range sends the whole object
                    data = data[start:end]
                if len(data) != end - start:
                    raise MagnetarSourceError(f"magnetar: GET of segment {piece.key} returned {len(data)} bytes, "
                                              f"expected {end - start}")
                return data
            if status in (403, 404):
                return None
            if status not in TRANSIENT_STATUS or attempt >= max_retries:  # 503 SlowDown is retried
                raise MagnetarSourceError(f"magnetar: GET of segment {piece.key} failed: HTTP {status}: "
                                          f"{response.text[:300]}", status=status)
        time.sleep(min(0.2 * 2**attempt, 5.0))
        attempt += 1


def _replanned(opts: SourceOptions, piece: Slice, transport: Any) -> Slice | None:
    with opts.client(piece.topic, transport) as http:
        _, found, _ = plan_calls(http, piece.first_entry, piece.end_entry)
    if len(found) != 1 or found[0].first_entry != piece.first_entry or found[0].end_entry != piece.end_entry:
        return None
    return found[0]


def _meta(topic: str, partition: int, entry: Entry, index: int, message: Any) -> tuple[Any, ...]:
    """The metadata columns of a message, as the broker's read makes them (`columns.message_row`)."""
    mid = MESSAGE_ID.pack(entry.ledger_id, entry.entry_id, partition, index if entry.batched else -1)
    return (message.key, topic, mid, timestamp(entry.publish_time), timestamp(message.event_time),
            dict(message.properties))


def typed_rows(topic: str, entries: Iterator[Entry], typed: Any) -> Iterator[tuple[Any, ...]]:
    partition = TopicName.parse(topic).partition_index
    for entry in entries:
        if entry.hole:
            continue
        for i, m in enumerate(entry.messages):
            yield typed.row_of(m.payload, m.schema_version, _meta(topic, partition, entry, i, m))
