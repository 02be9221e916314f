"""Cutting a direct read's segment slices into Spark tasks of about equal bytes (no cluster)."""

from __future__ import annotations

import itertools
import random

from magnetar_spark.direct import Slice, distribute


def _slices(sizes_per_segment: list[list[int]]) -> list[Slice]:
    out, entry = [], 0
    for n, sizes in enumerate(sizes_per_segment):
        offsets = [0, *itertools.accumulate(sizes)]
        out.append(Slice("persistent://t/ns/x", f"http://s3/{n}", f"k{n}", entry, tuple(offsets)))
        entry += len(sizes)
    return out


def _entries(groups: list[list[Slice]]) -> list[int]:
    return [s.first_entry + i for g in groups for s in g for i in range(len(s.offsets) - 1)]


def test_groups_keep_every_entry_once_in_order_and_balance_bytes() -> None:
    rng = random.Random(7)
    for _ in range(200):
        segments = [[rng.randint(1, 2000) for _ in range(rng.randint(1, 40))] for _ in range(rng.randint(1, 6))]
        slices = _slices(segments)
        total_entries = sum(len(s) for s in segments)
        largest = max(max(s) for s in segments)
        for tasks in (1, 2, 3, 4, 7):
            groups = distribute(slices, tasks)
            assert 1 <= len(groups) <= tasks
            assert _entries(groups) == list(range(total_entries))
            sizes = [sum(s.size for s in g) for g in groups]
            assert sum(sizes) == sum(map(sum, segments))
            if len(groups) == tasks:  # none is more than an entry or so off the even share
                assert max(sizes) - min(sizes) <= 2 * largest + sum(sizes) // tasks // 10 + 1, (sizes, tasks)
            for g in groups:  # a slice keeps its object's absolute offsets (the Range it GETs)
                for s in g:
                    original = slices[int(s.key[1:])]
                    assert set(s.offsets) <= set(original.offsets)


def test_one_big_segment_is_cut_between_entries() -> None:
    groups = distribute(_slices([[100] * 40]), 4)
    assert [(g[0].first_entry, g[0].end_entry) for g in groups] == [(0, 10), (10, 20), (20, 30), (30, 40)]
    assert [g[0].offsets[0] for g in groups] == [0, 1000, 2000, 3000]


def test_nothing_to_read_is_no_task() -> None:
    assert distribute([], 4) == []


def test_arrow_batches_hold_the_rows_the_broker_read_gives() -> None:
    """The columns of a direct read (Arrow, from the entries) against the broker's (the read route's
    message JSON made into rows), for messages with and without keys, properties, event times, a null
    value, and unbatched entries."""
    import base64

    from magnetar.api.wire import entry_messages
    from magnetar.core.entry import Batch, Message, hole_entry, make_entry
    from magnetar_spark import columns
    from magnetar_spark.arrow import arrow_batches, arrow_schema

    topic = "persistent://t/ns/orders-partition-3"
    messages = [Message(b"a", "k1", {"p": "1"}, 1_700_000_000_123), Message(b"b"),
                Message(b"", "k2", null_value=True), Message(b"\x00\xff", None, {"x": "y", "z": ""}, 5)]
    entries = [make_entry(topic, 2, 10, 1, 1_700_000_000_000, "p", Batch.of(messages)),
               hole_entry(topic, 2, 11, 5),
               make_entry(topic, 2, 12, 1, 0, "p", Batch.of([Message(b"solo", "k")], batched=False))]
    direct = [row for batch in arrow_batches(topic, iter(entries)) for row in batch.to_pylist()]
    assert all(b.schema.equals(arrow_schema()) for b in arrow_batches(topic, iter(entries)))
    broker = [columns.message_row(m, base64.b64decode) for e in entries if not e.hole
              for m in entry_messages(topic, 3, e)]
    names = [f.name for f in columns.SCHEMA.fields]
    as_rows = [tuple(dict(r[n]) if n == "__messageProperties" else r[n] for n in names) for r in direct]
    assert len(as_rows) == 5 and as_rows == broker


def test_broker_rows_as_arrow_batches_are_the_same_rows() -> None:
    """A slice that falls back to the broker mid-task: its rows become batches like the others."""
    from datetime import UTC, datetime

    from magnetar_spark.arrow import arrow_schema, rows_as_batches

    rows = [(b"v", None, "persistent://t/ns/x", bytes(32), datetime(2026, 1, 1, tzinfo=UTC), None, {"a": "b"}),
            (b"w", "k", "persistent://t/ns/x", bytes(32), None, datetime(2026, 1, 2, tzinfo=UTC), {})]
    (batch,) = list(rows_as_batches(iter(rows)))
    assert batch.schema.equals(arrow_schema())
    back = [tuple(dict(r[n]) if n == "__messageProperties" else r[n] for n in batch.schema.names)
            for r in batch.to_pylist()]
    assert back == rows
