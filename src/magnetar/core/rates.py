"""One-minute exponentially weighted moving averages, as Pulsar's stats report rates.

A rate is kept as (value per second, time of the last update) inside a record the system writes
anyway (the seal state, a cursor), so rates cost no request of their own.
"""

from __future__ import annotations

import math

RATE_WINDOW_MS = 60_000


def ewma_decay(elapsed_ms: int) -> float:
    """How much of a one-minute moving average survives `elapsed_ms`."""
    return math.exp(-max(elapsed_ms, 0) / RATE_WINDOW_MS)


def ewma_add(rate: float, rate_at: int, amount: float, now_ms: int) -> float:
    """Add `amount` (messages or bytes seen at `now_ms`) to a per-second moving average."""
    decayed = rate * ewma_decay(now_ms - rate_at) if rate_at else 0.0
    return decayed + amount * 1000 / RATE_WINDOW_MS


def decayed(rate: float, rate_at: int, now_ms: int) -> float:
    return rate * ewma_decay(now_ms - rate_at) if rate_at else 0.0
