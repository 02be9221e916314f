"""`spark.read.format("magnetar")`: a PySpark 4 Python data source over Magnetar's HTTP API.

It reads one topic (or one partition of a partitioned topic, by its `-partition-<i>` name) as a
batch, with the columns of the Pulsar Spark connector:

    value                binary
    __key                string
    __topic              string
    __messageId          binary   (32 bytes, see `message_id_bytes`)
    __publishTime        timestamp
    __eventTime          timestamp (null when the producer set none)
    __messageProperties  map<string,string>

Planning (on the driver) asks the broker for the topic's last entry id once
(`GET /admin/v2/.../lastMessageId`) and splits the entry ids `[startingEntryId, last]` into
`partitions` contiguous ranges; each Spark task then pages through its range with the
non-durable reader endpoint (`POST /magnetar/v1/reader/.../read`). Because the end is fixed at
planning, a query sees a consistent prefix of the topic, whatever is produced meanwhile.

Options (case-insensitive):

    service.url        the HTTP API, e.g. http://127.0.0.1:8080 (required)
    topic              persistent://tenant/ns/name, tenant/ns/name, or a short name (required)
    partitions         number of Spark input partitions (default 4)
    startingEntryId    first entry id to read, inclusive (default 0)
    endingEntryId      last entry id to read, inclusive (default: the last entry at planning)
    pageSize           entries per read request, 1..1000 (default 1000)
    requestTimeoutMs   timeout of one HTTP request (default 30000)
    maxRetries         retries of a transient failure: connection error, 429, 5xx (default 5)
    readTimeoutMs      how long a task waits for entries below the snapshot that are not
                       readable yet before failing (default 30000)
    pulsar.client.authPluginClassName
                       org.apache.pulsar.client.impl.auth.AuthenticationToken (the Pulsar
                       connector's option), or aws-iam (SigV4 with the node's AWS credentials)
    pulsar.client.authParams
                       token:XYZ or file:///path/to/token (read on each node, at each request);
                       for aws-iam optionally region:NAME

Credentials go on every request, from the driver (planning) and the executors (reading).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import (
    BinaryType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from magnetar.core.entry import MessageIdData
from magnetar.core.naming import TopicName
from magnetar_spark.broker import BrokerClient
from magnetar_spark.errors import MagnetarSourceError
from magnetar_spark.settings import TopicSettings, text_option

SHORT_NAME = "magnetar"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MESSAGE_ID = struct.Struct(">qqqq")

SCHEMA = StructType(
    [
        StructField("value", BinaryType(), True),
        StructField("__key", StringType(), True),
        StructField("__topic", StringType(), True),
        StructField("__messageId", BinaryType(), True),
        StructField("__publishTime", TimestampType(), True),
        StructField("__eventTime", TimestampType(), True),
        StructField("__messageProperties", MapType(StringType(), StringType(), True), True),
    ]
)


# --- message ids -------------------------------------------------------------------------------
def message_id_bytes(text: str) -> bytes:
    """The `__messageId` column: a message id `"L:E:P:B"` as 32 bytes.

    Layout: four big-endian signed 64-bit integers, in order ledger id, entry id, partition
    index, batch index (-1 for "none", as in the text form). The SDK's `MessageId.serialize()`
    writes the same layout, so `MessageId.deserialize(row["__messageId"])` gives the id back.
    """
    mid = MessageIdData.parse(text)
    return _MESSAGE_ID.pack(mid.ledger_id, mid.entry_id, mid.partition, mid.batch_index)


def message_id_from_bytes(data: bytes) -> str:
    """The inverse of `message_id_bytes`: 32 bytes back to `"L:E:P:B"`."""
    if len(data) != _MESSAGE_ID.size:
        raise ValueError(f"a message id is {_MESSAGE_ID.size} bytes, got {len(data)}")
    return str(MessageIdData(*_MESSAGE_ID.unpack(bytes(data))))


def _timestamp(ms: int | None) -> datetime | None:
    return None if not ms else _EPOCH + timedelta(milliseconds=int(ms))


# --- planning and rows ------------------------------------------------------------------------
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


def _row(message: dict[str, Any], decode: Any, typed: Any = None) -> tuple[Any, ...]:
    """One row; `typed` (magnetar_spark/typed.py's TypedTopic): a topic with a schema, whose
    fields are the columns before the metadata ones."""
    meta = (
        message.get("key"),
        message.get("topic"),
        message_id_bytes(message["messageId"]),
        _timestamp(message.get("publishTime")),
        _timestamp(message.get("eventTime")),
        dict(message.get("properties") or {}),
    )
    if typed is not None:
        return typed.row(message, meta)  # type: ignore[no-any-return]
    return (decode(message.get("payload") or ""), *meta)


def typed_topic(options: Mapping[str, str]) -> Any:
    """The topic's schema as typed columns (magnetar_spark/typed.py), asked once on the driver;
    None for a topic without schema (or of a type typed columns are not made of)."""
    from magnetar_spark.typed import TypedTopic

    name = text_option(options, "topic")
    if name is None:  # several topics: the binary value column
        return None
    settings = TopicSettings(options)
    base = TopicName.parse(name).partitioned_topic
    path = "/admin/v2/schemas/" + "/".join(quote(p, safe="") for p in (base.tenant, base.namespace, base.local_name))
    with BrokerClient(settings) as broker:
        try:
            return TypedTopic.fetch(lambda suffix: broker.call("GET", suffix, "schema", fail_fast=frozenset({404})),
                                    path)
        except MagnetarSourceError as exc:
            if exc.status == 404:
                return None
            raise


class MagnetarDataSource(DataSource):
    """`spark.read.format("magnetar")`: see the module docstring for the options."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        """The connector's columns; for a topic with an AVRO, JSON or primitive schema, its fields
        (typed) instead of the binary value (magnetar_spark/typed.py)."""
        typed = self._typed()
        return typed.schema if typed is not None else SCHEMA

    def _typed(self) -> Any:
        if "_typed_topic" not in self.__dict__:
            self._typed_topic = typed_topic(self.options)
        return self._typed_topic

    def reader(self, schema: StructType) -> DataSourceReader:
        fixed = self.schema()
        if [f.name for f in schema.fields] != [f.name for f in fixed.fields]:
            raise ValueError(f"magnetar: the schema is fixed: {fixed.simpleString()}")
        # topic / topics / topicsPattern, offsets, failOnDataLoss: magnetar_spark.options and .reading
        from magnetar_spark.options import SourceOptions
        from magnetar_spark.reading import BatchReader

        reader = BatchReader(SourceOptions(self.options))
        reader.typed = self._typed()  # a topic with a schema: typed columns (magnetar_spark/typed.py)
        return reader

    def streamReader(self, schema: StructType) -> Any:
        """`spark.readStream.format("magnetar")`: magnetar_spark.stream."""
        from magnetar_spark.options import SourceOptions
        from magnetar_spark.stream import MagnetarStreamReader

        reader = MagnetarStreamReader(SourceOptions(self.options, streaming=True))
        reader.typed = self._typed()  # a topic with a schema: typed columns (magnetar_spark/typed.py)
        return reader

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        """`df.write.format("magnetar")`: magnetar_spark.sink."""
        from magnetar_spark.sink import MagnetarWriter

        return MagnetarWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        """`df.writeStream.format("magnetar")`: magnetar_spark.sink."""
        from magnetar_spark.sink import MagnetarStreamWriter

        return MagnetarStreamWriter(self.options, schema, overwrite)
