"""`spark.readStream.format("magnetar")`: a micro-batch streaming source (PySpark 4's
`DataSourceStreamReader`).

Offsets are JSON maps of topic-partition -> next entry id (see magnetar_spark.offsets); Spark
keeps them in the query's checkpoint, so a query stopped (or killed) and restarted reads each
micro-batch `[start, end)` of every topic-partition again exactly as planned: nothing lost,
nothing read twice within the engine.

- `initialOffset`: `startingOffsets` (default `latest`) made concrete: `earliest` is the first
  entry retention keeps at that moment.
- `latestOffset(start, limit)`: each topic-partition's end now (`lastMessageId` + 1); with
  `maxEntriesPerTrigger` (`ReadMaxRows`, counted in entries) at most that many entries past
  `start`, shared in proportion to each partition's backlog. The topics are resolved again at
  each call, so new partitions of a partitioned topic and new topics matching `topicsPattern`
  join at the next micro-batch, from their first kept entry.
- `trigger(availableNow=True)`: `prepareForTriggerAvailableNow` fixes the target (the ends at
  that moment); micro-batches (rate-capped or not) stop there.
- `commit`: nothing to do: reads are non-durable, the checkpoint is the cursor.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

try:  # admission control and availableNow for Python sources: Spark 4.2+
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # Spark 4.0/4.1 (EMR's emr-spark-8.0.0 is 4.0.2): latestOffset() is called without
    # arguments and the source caps micro-batches itself; these stand-ins are never seen by Spark.
    class ReadLimit:  # type: ignore[no-redef]
        pass

    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        def __init__(self, max_rows: int) -> None:
            self.max_rows = max_rows

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

from magnetar_spark.offsets import EARLIEST, Offsets
from magnetar_spark.options import SourceOptions
from magnetar_spark.reading import partitions_of, read_partition


def cap(start: Offsets, latest: Offsets, budget: int) -> Offsets:
    """`latest` held to at most `budget` entries past `start` in all, shared in proportion to
    each partition's backlog (each one with a backlog gets at least one entry)."""
    backlog = {t: max(0, end - max(start.get(t, 0), 0)) for t, end in latest.items()}
    total = sum(backlog.values())
    if total <= budget:
        return dict(latest)
    out = dict(latest)
    left = budget
    for topic in sorted(backlog, key=lambda t: backlog[t]):
        share = min(backlog[topic], max(1 if left > 0 else 0, budget * backlog[topic] // total), left)
        base = max(start.get(topic, 0), 0)
        out[topic] = base + share if backlog[topic] else latest[topic]
        left -= share
    return out


class MagnetarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.transport: Any = None  # an httpx transport, for tests
        self._target: Offsets | None = None  # availableNow: never past these
        self.typed: Any = None  # the topic's schema as typed columns (magnetar_spark/typed.py, #11)

    def _latest(self) -> Offsets:
        topics = self.opts.resolve(self.transport)
        return self.opts.ends(topics, self.transport, missing_ok=True)

    def initialOffset(self) -> dict[str, int]:
        ends = self._latest()
        return {t: self.opts.start_of(t, end, self.transport) for t, end in ends.items()}

    def latestOffset(self, start: dict[str, int] | None = None, limit: ReadLimit | None = None) -> dict[str, int]:
        latest = dict(self._target) if self._target is not None else self._latest()
        begin = dict(start or {})
        for topic, position in begin.items():  # never behind the start (a topic gone from the pattern stays)
            latest[topic] = max(latest.get(topic, position), position)
        for topic in latest:
            begin.setdefault(topic, EARLIEST)  # a new partition or topic: from its first kept entry
        if limit is None and self.opts.max_entries_per_trigger:  # a Spark without admission control
            limit = ReadMaxRows(self.opts.max_entries_per_trigger)
        if isinstance(limit, ReadMaxRows):
            latest = cap(begin, latest, limit.max_rows)
        return latest

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_entries_per_trigger:
            return ReadMaxRows(self.opts.max_entries_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        ranges = [(t, int(start.get(t, EARLIEST)), int(stop)) for t, stop in sorted(end.items())]
        return partitions_of(self.opts, ranges, self.transport)  # direct reads of sealed segments too

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.opts, partition, self.transport, self.typed)

    def commit(self, end: dict[str, int]) -> None:
        pass
