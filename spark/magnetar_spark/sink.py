"""`df.write.format("magnetar")` and `df.writeStream.format("magnetar")`: rows published to topics.

Columns (others are ignored, so a DataFrame read from Magnetar can be written back):

    value                binary or string (required)
    __key                string: the message key (partitioned targets are routed by it)
    __messageProperties  map<string,string>
    __eventTime          timestamp (or long, ms since the epoch)
    __topic              string: the target topic of the row, when the `topic` option is not given

Options: `service.url`, `topic`, `batchSize` (messages per entry, default 100), and the source's
HTTP options (timeouts, retries, authentication).

Each Spark task is one producer per target topic (partition), named after the write and the
task's Spark partition; each row's sequence id is its position in the task's input, so a task
that Spark runs again (a retry, a speculative copy, a micro-batch replayed after a restart)
publishes the same sequence ids under the same producer name. With deduplication on for the
topic (`deduplicationEnabled`, as in Pulsar) the broker answers those as duplicates and stores
nothing twice. Messages go out batched: up to `batchSize` messages per entry, up to 1,000 entries
(256 KiB) per request through the group publish (`batches`).

- batch writes: producer `spark-<write id>-<partition>`, the write id drawn once on the driver;
  sequence ids 0, 1, 2, ... in the partition.
- streaming writes: producer `spark-<query id>-<partition>` (the query id survives restarts, it
  is in the checkpoint); sequence ids `batchId << 31 | position`, growing from batch to batch.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from magnetar.core.entry import Message, encode_messages
from magnetar_spark.broker import BrokerClient
from magnetar_spark.errors import MagnetarSourceError
from magnetar_spark.offsets import canonical_topic
from magnetar_spark.options import SourceOptions
from magnetar_spark.settings import int_option, text_option

log = logging.getLogger("magnetar_spark")
MAX_ENTRIES_PER_REQUEST = 1_000
MAX_REQUEST_BYTES = 256 * 1024
MAX_ENTRY_BYTES = 128 * 1024
SEQUENCE_BITS = 31  # streaming: batchId << 31 | position in the task's input


@dataclass
class PublishCommit(WriterCommitMessage):
    partition: int
    published: int
    duplicates: int


def _event_ms(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return max(0, int(aware.timestamp() * 1000))
    return max(0, int(value))


def _payload(value: Any) -> bytes:
    if value is None:
        raise ValueError("magnetar: a row's value is null (write empty bytes, or filter the row out)")
    return value.encode() if isinstance(value, str) else bytes(value)


class _Publisher:
    """One task's producers: rows grouped per target topic-partition into entries and requests."""

    def __init__(self, opts: SourceOptions, producer: str, transport: Any = None) -> None:
        self.opts = opts
        self.producer = producer
        self.transport = transport
        self.batch_size = opts.batch_size
        self.partition_counts: dict[str, int] = {}
        self.pending: dict[str, list[tuple[int, Message]]] = {}
        self.published = 0
        self.duplicates = 0

    def _target(self, topic: str, key: str | None, sequence: int) -> str:
        count = self.partition_counts.get(topic)
        if count is None:
            with self.opts.client(topic, self.transport) as http:
                count = self.partition_counts[topic] = http.partition_count(topic)
        if not count:
            return topic
        if key:
            import mmh3  # Pulsar's key routing, as the SDK's partitioned producer

            index = (mmh3.hash(key, signed=False) & 0x7FFFFFFF) % count
        else:
            index = sequence % count
        return f"{topic}-partition-{index}"

    def add(self, topic: str, sequence: int, message: Message) -> None:
        target = self._target(topic, message.key, sequence)
        queue = self.pending.setdefault(target, [])
        queue.append((sequence, message))
        if len(queue) >= self.batch_size * MAX_ENTRIES_PER_REQUEST // 4:
            self.flush(target)

    def flush(self, target: str | None = None) -> None:
        for topic in [target] if target else list(self.pending):
            rows = self.pending.pop(topic, [])
            if rows:
                self._send(topic, rows)

    def _send(self, topic: str, rows: list[tuple[int, Message]]) -> None:
        entries: list[list[tuple[int, Message]]] = [[]]
        size = 0
        for row in rows:
            weight = len(row[1].payload) + 64
            if entries[-1] and (len(entries[-1]) >= self.batch_size or size + weight > MAX_ENTRY_BYTES):
                entries.append([])
                size = 0
            entries[-1].append(row)
            size += weight
        request: list[dict[str, Any]] = []
        request_bytes = 0
        with BrokerClient(self.opts.settings_for(topic), self.transport) as http:
            for entry in entries:
                raw = encode_messages([m for _, m in entry])
                batch = {
                    "payload": base64.b64encode(raw).decode(), "numMessages": len(entry), "compression": "NONE",
                    "uncompressedSize": len(raw), "key": next((m.key for _, m in entry if m.key), None),
                    "batched": True, "sequenceId": entry[0][0], "highestSequenceId": entry[-1][0],
                }
                if request and (len(request) >= MAX_ENTRIES_PER_REQUEST or request_bytes + len(raw) > MAX_REQUEST_BYTES):
                    self._post(http, request)
                    request, request_bytes = [], 0
                request.append(batch)
                request_bytes += len(raw)
            if request:
                self._post(http, request)

    def _post(self, http: BrokerClient, batches: list[dict[str, Any]]) -> None:
        body = http.call("POST", f"/topics/{http.settings.topic_path}", "publish",
                         {"producerName": self.producer, "batches": batches})
        for result, batch in zip(body.get("batches") or [], batches, strict=False):
            if result.get("duplicate"):
                self.duplicates += batch["numMessages"]
            else:
                self.published += batch["numMessages"]


def _write_rows(opts: SourceOptions, rows: Iterator[Any], producer: str, first_sequence: int,
                transport: Any = None) -> tuple[int, int]:
    publisher = _Publisher(opts, producer, transport)
    default_topic = opts.topics[0] if opts.topics else None
    for position, row in enumerate(rows):
        fields = row.asDict() if hasattr(row, "asDict") else dict(row)
        topic = fields.get("__topic") or default_topic
        if not topic:
            raise ValueError("magnetar: a row without __topic, and no 'topic' option")
        message = Message(
            _payload(fields.get("value")),
            fields.get("__key"),
            {str(k): str(v) for k, v in (fields.get("__messageProperties") or {}).items()},
            _event_ms(fields.get("__eventTime")),
        )
        publisher.add(topic if topic == default_topic else canonical_topic(str(topic)), first_sequence + position,
                      message)
    publisher.flush()
    return publisher.published, publisher.duplicates


def _check_schema(schema: StructType, opts: SourceOptions) -> None:
    names = {f.name for f in schema.fields}
    if "value" not in names:
        raise ValueError("magnetar: the DataFrame to write needs a `value` column (binary or string)")
    if not opts.topics and "__topic" not in names:
        raise ValueError("magnetar: give the option 'topic' or a `__topic` column")


def _sink_options(options: Mapping[str, str]) -> SourceOptions:
    opts = SourceOptions(options, sink=True)
    if opts.pattern is not None or (opts.topics and len(opts.topics) > 1):
        raise ValueError("magnetar: a write goes to one 'topic' (or to each row's __topic)")
    opts.batch_size = int_option(options, "batchSize", 100, 1, 10_000)
    return opts


def deduplication_status(opts: SourceOptions, transport: Any = None) -> str | None:
    """`Enabled` / `Disabled` for the `topic` option's topic (its stats), None when unknown (no
    topic option, a topic not created yet, stats refused). A warning when it is disabled: then a
    retried task publishes its rows again."""
    if not opts.topics:
        return None
    topic = opts.topics[0]
    try:
        with opts.client(topic, transport) as http:
            which = "partitioned-stats" if http.partition_count(topic) else "stats"
            status = http.call("GET", f"/admin/v2/{http.settings.topic_path}/{which}", "stats",
                               fail_fast=frozenset({404}))
    except MagnetarSourceError:
        return None
    value = status.get("deduplicationStatus") if isinstance(status, dict) else None
    if value == "Disabled":
        log.warning("magnetar: deduplication is off for %s: a Spark task that is retried publishes its rows "
                    "again; turn it on (magnetar admin namespaces set-deduplication NS --enable)", topic)
    return None if value is None else str(value)


def _task() -> tuple[int, Any]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return (ctx.partitionId(), ctx) if ctx is not None else (0, None)


class MagnetarWriter(DataSourceWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise ValueError("magnetar: a topic is only appended to: use mode('append')")
        self.opts = _sink_options(options)
        _check_schema(schema, self.opts)
        self.write_id = text_option(options, "producerName") or uuid.uuid4().hex[:12]
        self.transport: Any = None  # an httpx transport, for tests
        deduplication_status(self.opts)

    def write(self, iterator: Iterator[Any]) -> PublishCommit:
        partition, _ = _task()
        published, duplicates = _write_rows(self.opts, iterator, f"spark-{self.write_id}-{partition}", 0,
                                            self.transport)
        return PublishCommit(partition, published, duplicates)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        done = [m for m in messages if isinstance(m, PublishCommit)]
        log.info("magnetar: published %d messages (%d duplicates skipped)", sum(m.published for m in done),
                 sum(m.duplicates for m in done))


class MagnetarStreamWriter(DataSourceStreamWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        self.opts = _sink_options(options)
        _check_schema(schema, self.opts)
        self.name_option = text_option(options, "producerName")
        self.fallback_id = uuid.uuid4().hex[:12]  # no query id in the task (not seen in Spark 4.x)
        self.transport: Any = None
        deduplication_status(self.opts)

    def write(self, iterator: Iterator[Any]) -> PublishCommit:
        partition, ctx = _task()
        query = ctx.getLocalProperty("sql.streaming.queryId") if ctx else None
        batch = int((ctx.getLocalProperty("streaming.sql.batchId") if ctx else None) or 0)
        producer = f"spark-{self.name_option or query or self.fallback_id}-{partition}"
        published, duplicates = _write_rows(self.opts, iterator, producer, batch << SEQUENCE_BITS, self.transport)
        return PublishCommit(partition, published, duplicates)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass
