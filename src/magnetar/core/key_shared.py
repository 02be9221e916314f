"""Key_Shared's keys and policies: Pulsar's sticky-key hash, and a consumer's policy (AutoSplit, or
Sticky hash ranges; out-of-order delivery) with Pulsar's validation. Who owns a key at a moment is
the cursor's business (`CursorState.key_owner`)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import mmh3

from magnetar.core.errors import ConsumerAssignError

HASH_RANGE = 65536  # Pulsar's Key_Shared hash range


def key_hash(key: str | None) -> int:
    """Pulsar's sticky-key hash: Murmur3 32-bit of the key, modulo the hash range."""
    return mmh3.hash(key or "", signed=False) % HASH_RANGE


@dataclass(frozen=True)
class KeySharedPolicy:
    """A Key_Shared consumer's policy (Pulsar's KeySharedMeta): `ranges` None is AutoSplit (the
    live consumers split the hash range evenly), else Sticky with these inclusive hash ranges
    [start, end] in 0..65535; `out_of_order`: a key moves to a new owner without waiting for the
    old owner's unacknowledged messages (allowOutOfOrderDelivery)."""

    ranges: tuple[tuple[int, int], ...] | None = None
    out_of_order: bool = False

    @property
    def mode(self) -> str:
        return "AutoSplit" if self.ranges is None else "Sticky"

    def covers(self, hash_value: int) -> bool:
        return any(s <= hash_value <= e for s, e in self.ranges or ())

    def check(self) -> None:
        """Pulsar's validation of a Sticky consumer's ranges (ConsumerAssignException)."""
        if self.ranges is None:
            return
        if not self.ranges:
            raise ConsumerAssignError("Ranges for KeyShared policy must not be empty.")
        if len(self.ranges) > MAX_STICKY_RANGES:
            raise ConsumerAssignError(f"Ranges for KeyShared policy: at most {MAX_STICKY_RANGES}")
        spans = sorted(self.ranges)
        for start, end in spans:
            if start > end:
                raise ConsumerAssignError("Fixed hash range start > end")
            if start < 0 or end >= HASH_RANGE:
                raise ConsumerAssignError(f"Fixed hash range [{start}, {end}] is outside [0, {HASH_RANGE - 1}]")
        for (_, end), (start, _) in itertools.pairwise(spans):
            if start <= end:
                raise ConsumerAssignError("Ranges for KeyShared policy must not overlap")

    def overlaps(self, other: KeySharedPolicy) -> bool:
        return any(s <= oe and os_ <= e for s, e in self.ranges or () for os_, oe in other.ranges or ())

    def to_list(self) -> list[Any]:
        return [[list(r) for r in self.ranges] if self.ranges is not None else None, self.out_of_order]

    @classmethod
    def from_list(cls, v: list[Any]) -> KeySharedPolicy:
        return cls(tuple((int(s), int(e)) for s, e in v[0]) if v[0] is not None else None, bool(v[1]))


AUTO_SPLIT = KeySharedPolicy()
MAX_STICKY_RANGES = 64  # keeps the lease (and the cursor item) small
