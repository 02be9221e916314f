"""The connector's columns as Arrow record batches, built a column at a time.

A direct read decodes about a gigabyte per million 1 KB messages on the executor; per-row Python
objects (a tuple, a packed id, a properties list each) cost more than fetching the bytes did. So an
entry's messages become Arrow arrays directly: payloads and keys as lists handed to Arrow once,
the 32-byte message ids as one buffer (the entry's prefix and each batch index), the publish time
repeated, and the common cases of no event times and no properties as null / empty columns with no
per-row work. `rows_as_batches` takes rows of the same columns (a broker read's) for the tasks
that fall back to the broker.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from magnetar.core.compression import decompress
from magnetar.core.entry import Entry, decode_message_columns
from magnetar.core.naming import TopicName
from magnetar_spark.columns import SCHEMA

ARROW_ROWS = 8192  # rows per Arrow record batch (entries are not split: a batch may be a little larger)
_ID_PREFIX = struct.Struct(">qqq")  # ledger id, entry id, partition: then the batch index (">q")
_INDEX = [struct.pack(">q", i) for i in range(1024)]  # the batch indexes of most entries, packed once
_NOT_BATCHED = struct.pack(">q", -1)
_ARROW_SCHEMA: Any = None


def arrow_schema() -> Any:
    """The Arrow schema Spark expects of the connector's columns (what its worker builds for rows)."""
    global _ARROW_SCHEMA
    if _ARROW_SCHEMA is None:
        from pyspark.sql.pandas.types import to_arrow_schema

        try:
            _ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")
        except TypeError:  # Spark 4.0: no timezone argument (timestamps are UTC there)
            _ARROW_SCHEMA = to_arrow_schema(SCHEMA)
    return _ARROW_SCHEMA


def rows_as_batches(rows: Iterator[tuple[Any, ...]]) -> Iterator[Any]:
    """Rows of the connector's columns (a broker read's) as Arrow record batches."""
    import pyarrow as pa

    schema = arrow_schema()
    chunk: list[tuple[Any, ...]] = []
    for row in rows:
        chunk.append((*row[:6], list(row[6].items())))
        if len(chunk) >= ARROW_ROWS:
            yield pa.RecordBatch.from_arrays([pa.array(list(c), schema.field(i).type)
                                              for i, c in enumerate(zip(*chunk, strict=True))], schema=schema)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_arrays([pa.array(list(c), schema.field(i).type)
                                          for i, c in enumerate(zip(*chunk, strict=True))], schema=schema)


def _message_ids(entry: Entry, partition: int, n: int) -> Any:
    """The `__messageId` column of an entry's n messages: 32 bytes each, in one buffer."""
    import numpy as np
    import pyarrow as pa

    prefix = _ID_PREFIX.pack(entry.ledger_id, entry.entry_id, partition)
    if not entry.batched:
        data = b"".join([prefix + _NOT_BATCHED] * n)
    elif n <= len(_INDEX):
        data = b"".join([prefix + index for index in _INDEX[:n]])
    else:
        data = b"".join([prefix + struct.pack(">q", i) for i in range(n)])
    offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _entry_columns(topic: str, partition: int, entry: Entry, schema: Any) -> list[Any]:
    import numpy as np
    import pyarrow as pa

    payloads, keys, props, event_times = decode_message_columns(
        decompress(entry.compression, entry.payload, entry.uncompressed_size))
    n = len(payloads)
    time_type = schema.field(4).type
    published = (pa.array([entry.publish_time * 1000] * n, time_type) if entry.publish_time  # microseconds
                 else pa.nulls(n, time_type))
    events = (pa.array([t * 1000 if t else None for t in event_times], time_type) if any(event_times)
              else pa.nulls(n, time_type))
    if any(props):
        properties = pa.array([list(p.items()) for p in props], schema.field(6).type)
    else:  # no message has properties: n empty maps, no per-row work
        empty = pa.array([], pa.string())
        properties = pa.MapArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)), empty, empty)
    return [pa.array(payloads, schema.field(0).type), pa.array(keys, schema.field(1).type),
            pa.array([topic] * n, schema.field(2).type), _message_ids(entry, partition, n),
            published, events, properties]


def arrow_batches(topic: str, entries: Iterator[Entry]) -> Iterator[Any]:
    """The entries' messages as Arrow record batches of the connector's columns (the values a
    broker read gives: tests/spark/test_direct_unit.py compares them)."""
    import pyarrow as pa

    schema = arrow_schema()
    partition = TopicName.parse(topic).partition_index
    pending: list[list[Any]] = []  # per entry, its columns
    rows = 0

    def batch() -> Any:
        columns = [pa.concat_arrays([p[i] for p in pending]) if len(pending) > 1 else pending[0][i]
                   for i in range(len(schema))]
        pending.clear()
        return pa.RecordBatch.from_arrays(columns, schema=schema)

    for entry in entries:
        if entry.hole:
            continue
        pending.append(_entry_columns(topic, partition, entry, schema))
        rows += len(pending[-1][0])
        if rows >= ARROW_ROWS:
            yield batch()
            rows = 0
    if pending:
        yield batch()
