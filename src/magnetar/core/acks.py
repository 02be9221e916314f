"""A consumer's acknowledgements, as one receive or acknowledge request carries them, and how they
change a cursor (`CursorState`): individual entries, messages of batch entries, a cumulative
position, negative acknowledgements. Applied first in every dispatch step (`dispatch.py`), on one
partition or on several (`dispatch_partitions.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.core.cursor import CursorState
from magnetar.core.errors import NotAllowed


@dataclass(frozen=True)
class Acks:
    """Acknowledgements from one consumer: whole entries, messages of batch entries
    ((entry, batch size, indexes)), everything up to `cumulative` (entry, batch size, index),
    and negative acknowledgements (redelivered after `nack_delay_ms`)."""

    entries: tuple[int, ...] = ()
    batch: tuple[tuple[int, int, tuple[int, ...]], ...] = ()
    cumulative: tuple[int, int, int] | None = None
    nacks: tuple[int, ...] = ()
    nack_delay_ms: int = 0
    epoch: int | None = None  # acks made before a seek (another epoch) are dropped
    consumer: str = ""

    def __bool__(self) -> bool:
        return bool(self.entries or self.batch or self.nacks) or self.cumulative is not None

    def apply(self, state: CursorState, now: int) -> None:
        if self.epoch is not None and self.epoch != state.epoch:
            return
        if self.cumulative is not None:
            if state.subscription_type in ("Shared", "Key_Shared"):
                raise NotAllowed(f"Cumulative acknowledgement is not allowed on a {state.subscription_type} subscription")
            entry, size, index = self.cumulative
            if 0 <= index < size - 1:  # up to a message inside a batch: that batch stays partly acked
                state.acknowledge_cumulative(entry - 1)
                state.acknowledge([], {entry: (size, list(range(index + 1)))})
            else:
                state.acknowledge_cumulative(entry)
        if self.entries or self.batch:
            state.acknowledge(list(self.entries), {e: (n, list(ix)) for e, n, ix in self.batch})
        if self.nacks:
            state.negative_acknowledge(self.consumer, list(self.nacks), now + self.nack_delay_ms)


NO_ACKS = Acks()
