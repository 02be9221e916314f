"""Reading entry ranges of topic-partitions: the batch reader and the tasks of the stream reader.

Planning (on the driver) takes each selected topic-partition's end once (`lastMessageId` + 1)
and splits the ranges `[start, end)` into about `partitions` Spark tasks (`plan_ranges`), or
plans direct reads of sealed segments (magnetar_spark.direct); because the ends are fixed at
planning, a query sees a consistent prefix of each topic, whatever is produced meanwhile.

A task reads `[start, end)` of one topic-partition through the non-durable reader endpoint. The
broker answers each page with `firstEntryId`, the first entry retention keeps: a range starting
below it lost `start..firstEntryId-1`. With `failOnDataLoss` (the default) that fails the query
with `MagnetarDataLossError` naming the range; with `failOnDataLoss=false` it is logged as a
warning and skipped. A range that starts at EARLIEST (-2) starts at the first kept entry with no
error: nothing was promised below it.
"""

from __future__ import annotations

import base64
import logging
import math
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from magnetar.core.entry import MessageIdData
from magnetar_spark.broker import TOO_LARGE_STATUS
from magnetar_spark.columns import message_row
from magnetar_spark.errors import MagnetarSourceError
from magnetar_spark.offsets import EARLIEST
from magnetar_spark.options import SourceOptions

log = logging.getLogger("magnetar_spark")


class MagnetarDataLossError(MagnetarSourceError):
    """Entries a read or a checkpoint points to were deleted by retention (failOnDataLoss=true)."""

    def __init__(self, topic: str, first: int, last: int, kept_from: int) -> None:
        super().__init__(
            f"magnetar: data loss on {topic}: entries {first}..{last} were deleted by retention "
            f"(the topic keeps entries from {kept_from} on); set failOnDataLoss=false to skip them"
        )
        self.topic = topic
        self.first = first
        self.last = last


class TopicRange(InputPartition):
    """Entry ids `[start, end)` of one topic-partition; `start` may be EARLIEST (-2)."""

    def __init__(self, index: int, topic: str, start: int, end: int) -> None:
        super().__init__((topic, start, end))
        self.index = index
        self.topic = topic
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"TopicRange(index={self.index}, topic={self.topic}, start={self.start}, end={self.end})"


def split_range(start: int, end: int, parts: int) -> list[tuple[int, int]]:
    """`[start, end]` (inclusive) as at most `parts` contiguous, nearly equal, non-empty ranges."""
    count = end - start + 1
    if count <= 0:
        return []
    parts = max(1, min(parts, count))
    size, extra = divmod(count, parts)
    out = []
    lo = start
    for i in range(parts):
        hi = lo + size + (1 if i < extra else 0) - 1
        out.append((lo, hi))
        lo = hi + 1
    return out


def plan_ranges(ranges: list[tuple[str, int, int]], tasks: int) -> list[TopicRange]:
    """`(topic, start, end)` ranges as Spark partitions: about `tasks` of them, each range at
    least one, a range split in proportion to its size (a range from EARLIEST is not split)."""
    live = [(t, s, e) for t, s, e in ranges if e > max(s, 0)]
    total = sum(e - max(s, 0) for _, s, e in live)
    out: list[TopicRange] = []
    for topic, start, end in live:
        count = end - max(start, 0)
        pieces = 1 if start == EARLIEST else max(1, min(count, math.floor(tasks * count / total + 0.5)))
        if pieces == 1:
            out.append(TopicRange(len(out), topic, start, end))
            continue
        for lo, hi in split_range(start, end - 1, pieces):
            out.append(TopicRange(len(out), topic, lo, hi + 1))
    return out


def read_range(opts: SourceOptions, part: TopicRange, transport: Any = None,
               typed: Any = None) -> Iterator[tuple[Any, ...]]:
    """The rows of one range, in entry order; `typed`: the topic's schema as typed columns (#11)."""
    extra = () if typed is None else (typed,)
    topic, end = part.topic, part.end
    earliest = part.start == EARLIEST
    position = 0 if earliest else part.start
    if position >= end:
        return
    s = opts.settings_for(topic)
    decode = base64.b64decode
    page_size, successes = s.page_size, 0
    stalled_since: float | None = None
    with opts.client(topic, transport) as http:
        while position < end:
            want = min(page_size, end - position)
            try:
                page = http.page(position, want)
            except MagnetarSourceError as exc:
                if exc.status in TOO_LARGE_STATUS and want > 1:
                    page_size, successes = max(1, want // 2), 0
                    continue
                raise
            successes += 1
            if successes >= 4 and page_size < s.page_size:
                page_size, successes = min(s.page_size, page_size * 2), 0
            if page.first_entry is not None and position < page.first_entry:
                if not earliest:
                    last_lost = page.first_entry - 1  # all of the gap, past this task's range too
                    if opts.fail_on_data_loss:
                        raise MagnetarDataLossError(topic, position, last_lost, page.first_entry)
                    log.warning("magnetar: data loss on %s: entries %d..%d were deleted by retention; skipped "
                                "(failOnDataLoss=false)", topic, position, last_lost)
                position = page.first_entry
                if position >= end:
                    return
            for message in page.messages:
                entry_id = MessageIdData.parse(message["messageId"]).entry_id
                if position <= entry_id < end:
                    yield message_row(message, decode, *extra)
            if page.next_entry > position:
                position = page.next_entry
                stalled_since = None
                continue
            now = time.monotonic()  # below the snapshot, not readable yet: on its way to a segment
            stalled_since = stalled_since if stalled_since is not None else now
            if now - stalled_since >= s.read_timeout_s:
                raise MagnetarSourceError(
                    f"magnetar: read of {topic} stalled: no entry readable at id {position} "
                    f"(range {part.start}..{end - 1}) after {s.read_timeout_s:g}s"
                )
            time.sleep(0.2)


class BatchReader(DataSourceReader):
    """`spark.read.format("magnetar")`: every selected topic-partition from its starting to its
    ending offset, the ends fixed when the read is planned (a consistent snapshot)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.transport: Any = None  # an httpx transport, for tests
        self.typed: Any = None  # the topic's schema as typed columns (magnetar_spark/typed.py, #11)

    def ranges(self) -> list[tuple[str, int, int]]:
        opts = self.opts
        topics = opts.resolve(self.transport)
        ends = opts.ends(topics, self.transport, missing_ok=opts.pattern is not None)
        out = []
        for topic in topics:
            start = opts.start_of(topic, ends[topic], self.transport)
            out.append((topic, start, opts.end_of(topic, ends[topic])))
        return out

    def partitions(self) -> list[InputPartition]:
        return partitions_of(self.opts, self.ranges(), self.transport)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.opts, partition, self.transport, self.typed)


def partitions_of(opts: SourceOptions, ranges: list[tuple[str, int, int]], transport: Any = None) -> list[InputPartition]:
    """The Spark partitions of a read's ranges: sealed segments read straight from S3 where the
    broker's plan offers URLs (`directReads`, magnetar_spark.direct), the rest through the broker."""
    if opts.direct_reads:
        from magnetar_spark import direct

        planned: list[InputPartition] = direct.plan(opts, ranges, transport)
    else:
        planned = list(plan_ranges(ranges, opts.partitions))
    return planned or [TopicRange(0, "", 0, 0)]  # nothing to read: one empty partition


def read_partition(opts: SourceOptions, partition: InputPartition, transport: Any = None,
                   typed: Any = None) -> Iterator[Any]:
    """The rows of one partition (tuples, or Arrow record batches from a direct read)."""
    if isinstance(partition, TopicRange):
        if partition.topic:
            yield from read_range(opts, partition, transport, typed)
        return
    from magnetar_spark import direct

    assert isinstance(partition, direct.DirectRange)
    yield from direct.read(opts, partition, transport, typed)
