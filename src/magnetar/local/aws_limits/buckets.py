"""The limits' accounting: token buckets, and the state they share under one lock."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field


class Bucket:
    """A token bucket: `rate` tokens a second, at most `capacity`; `charge` may go into debt."""

    __slots__ = ("capacity", "rate", "stamp", "tokens")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate, self.capacity, self.tokens, self.stamp = rate, capacity, capacity, now

    def level(self, now: float) -> float:
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        return self.tokens

    def take(self, n: float, now: float) -> bool:
        if self.level(now) >= min(n, self.capacity):
            self.tokens -= n
            return True
        return False

    def charge(self, n: float, now: float) -> None:
        self.level(now)
        self.tokens -= n


@dataclass
class _State:
    """The limits' counters (one lock; every operation on it is a few dictionary look-ups)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    buckets: dict[tuple[str, ...], Bucket] = field(default_factory=dict)
    calls: dict[tuple[str, ...], deque[float]] = field(default_factory=dict)

    def bucket(self, key: tuple[str, ...], rate: float, now: float, capacity: float | None = None) -> Bucket:
        b = self.buckets.get(key)
        if b is None:
            b = self.buckets[key] = Bucket(rate, rate if capacity is None else capacity, now)
        return b
