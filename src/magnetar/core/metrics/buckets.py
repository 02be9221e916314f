"""Pulsar's histogram buckets for the storage write latency and the entry size.

The sealer counts every entry it seals into these buckets in the seal state (the same write that
moves the seal point, so they cost no request): the latency from the entry's reservation to its
record's arrival in the journal (the publish's storage write, what the producer waits for) and the
entry's size. `/metrics` shows them under Pulsar's names (`pulsar_storage_write_latency_le_*`,
`pulsar_entry_size_le_*`). A bucket holds the values above the previous bound up to its own, the
last one everything above the last bound (Pulsar's `overflow`).
"""

from __future__ import annotations

import bisect

# Pulsar's bounds (ms) and the suffixes of its metric names, the overflow bucket last
WRITE_LATENCY_BOUNDS_MS: tuple[float, ...] = (0.5, 1, 5, 10, 20, 50, 100, 200, 1000)
WRITE_LATENCY_SUFFIXES = ("0_5", "1", "5", "10", "20", "50", "100", "200", "1000", "overflow")
ENTRY_SIZE_BOUNDS: tuple[int, ...] = (128, 512, 1024, 2048, 4096, 16 * 1024, 100 * 1024, 1024 * 1024)
ENTRY_SIZE_SUFFIXES = ("128", "512", "1_kb", "2_kb", "4_kb", "16_kb", "100_kb", "1_mb", "overflow")


def counted(counts: tuple[int, ...], value: float, bounds: tuple[float, ...]) -> tuple[int, ...]:
    """`counts` (one per bucket; empty: none yet) with `value` counted in its bucket."""
    out = list(counts) if counts else [0] * (len(bounds) + 1)
    out[bisect.bisect_left(bounds, value)] += 1
    return tuple(out)


def buckets(counts: tuple[int, ...], bounds: tuple[float, ...]) -> tuple[int, ...]:
    """Every bucket's count (zeros for a state that never counted)."""
    return counts if counts else (0,) * (len(bounds) + 1)
