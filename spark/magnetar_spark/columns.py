"""The connector's columns (those of Apache Pulsar's Spark connector), and a message as a row:

    value                binary
    __key                string
    __topic              string
    __messageId          binary   (32 bytes, see `message_id_bytes`)
    __publishTime        timestamp
    __eventTime          timestamp (null when the producer set none)
    __messageProperties  map<string,string>

A topic with a schema has typed columns in place of `value` (magnetar_spark.typed).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql.types import (
    BinaryType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from magnetar.core.entry import MessageIdData

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
MESSAGE_ID = struct.Struct(">qqqq")  # the `__messageId` layout: ledger, entry, partition, batch index
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def message_id_bytes(text: str) -> bytes:
    """The `__messageId` column: a message id `"L:E:P:B"` as 32 bytes.

    Layout: four big-endian signed 64-bit integers, in order ledger id, entry id, partition
    index, batch index (-1 for "none", as in the text form). The SDK's `MessageId.serialize()`
    writes the same layout, so `MessageId.deserialize(row["__messageId"])` gives the id back.
    """
    mid = MessageIdData.parse(text)
    return MESSAGE_ID.pack(mid.ledger_id, mid.entry_id, mid.partition, mid.batch_index)


def message_id_from_bytes(data: bytes) -> str:
    """The inverse of `message_id_bytes`: 32 bytes back to `"L:E:P:B"`."""
    if len(data) != MESSAGE_ID.size:
        raise ValueError(f"a message id is {MESSAGE_ID.size} bytes, got {len(data)}")
    return str(MessageIdData(*MESSAGE_ID.unpack(bytes(data))))


def timestamp(ms: int | None) -> datetime | None:
    """A timestamp column from milliseconds since the epoch; None for 0 or none (not set)."""
    return None if not ms else _EPOCH + timedelta(milliseconds=int(ms))


def message_row(message: dict[str, Any], decode: Callable[[str], bytes], typed: Any = None) -> tuple[Any, ...]:
    """The row of a message of the broker's read (its JSON); `typed` (magnetar_spark.typed's
    TypedTopic): a topic with a schema, whose fields are the columns before the metadata ones."""
    meta = (
        message.get("key"),
        message.get("topic"),
        message_id_bytes(message["messageId"]),
        timestamp(message.get("publishTime")),
        timestamp(message.get("eventTime")),
        dict(message.get("properties") or {}),
    )
    if typed is not None:
        return typed.row(message, meta)  # type: ignore[no-any-return]
    return (decode(message.get("payload") or ""), *meta)
