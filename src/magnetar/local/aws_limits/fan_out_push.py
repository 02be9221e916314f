"""Enhanced fan-out's push, emulated: a registered consumer's read waits for the shard's next record.

On AWS a SubscribeToShard subscription pushes each record to its consumer about 70 ms after it
arrives, and an idle shard costs its consumer nothing. moto has no streaming SubscribeToShard, so
the local event-source mapping reads with GetRecords (`magnetar.local.esm`); were it to ask every
70 ms, each idle shard would cost the local stack 14 requests a second for nothing. Instead a
fan-out read that asks to be held (`HOLD_HEADER`, milliseconds) and finds nothing new waits here,
outside moto's lock, until the shard takes a write or the hold runs out, and its answer says it
was held (`HELD_HEADER`: the reader may ask again at once). A read woken by a write is answered
after a random part of `PUSH_DELAY_S`, as a record met a poll every 70 ms before: records reach
the consumer as late as they did, and an idle shard costs one read a hold.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

HOLD_HEADER = "X-Magnetar-Fan-Out-Hold-Ms"  # the reader's ask: hold an empty read this long
HELD_HEADER = "x-magnetar-fan-out-held"  # the answer's word: it was held (ask again at once)
_HOLD_ENVIRON = "HTTP_" + HOLD_HEADER.upper().replace("-", "_")
PUSH_DELAY_S = 0.07  # enhanced fan-out pushes a record ~70 ms after it arrives (at most, here)
MAX_HOLD_S = 5.0  # a reader asking for longer is held this long
_SMALL_ANSWER = 2048  # an answer this long or longer holds records: no need to parse it to know

ShardKey = tuple[str, str, str, str]  # account, region, stream, shard
Read = Callable[[], tuple[str, list[tuple[str, str]], bytes]]


def hold_asked_s(environ: dict[str, Any]) -> float:
    """How long the reader asked its empty read to be held (0: answer at once)."""
    try:
        return min(MAX_HOLD_S, max(0.0, float(environ.get(_HOLD_ENVIRON) or 0) / 1000))
    except ValueError:
        return 0.0


def _empty(data: bytes) -> bool:
    if len(data) >= _SMALL_ANSWER:
        return False
    try:
        return not json.loads(data).get("Records")
    except (ValueError, AttributeError):
        return False


class ShardWrites:
    """How many writes each shard has taken since the emulator started: a held read wakes at the next."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._count: dict[ShardKey, int] = {}

    def count(self, shard: ShardKey) -> int:
        with self._changed:
            return self._count.get(shard, 0)

    def wrote(self, shards: Iterable[ShardKey]) -> None:
        with self._changed:
            for shard in set(shards):
                self._count[shard] = self._count.get(shard, 0) + 1
            self._changed.notify_all()

    def wait_past(self, shard: ShardKey, seen: int, timeout_s: float) -> bool:
        """Wait until the shard has taken a write past `seen`; False when `timeout_s` ran out first."""
        with self._changed:
            return self._changed.wait_for(lambda: self._count.get(shard, 0) != seen, timeout_s)

    def read_held(self, shard: ShardKey, hold_s: float, read: Read) -> tuple[str, list[tuple[str, str]], bytes]:
        """`read()`'s answer; when it is empty and `hold_s` > 0, the answer of a read made again once
        the shard has taken a write (or the empty one when the hold ran out), marked as held."""
        seen = self.count(shard)  # before the read: a write that lands during it wakes the hold at once
        status, headers, data = read()
        if hold_s <= 0 or not status.startswith("200") or not _empty(data):
            return status, headers, data
        if self.wait_past(shard, seen, hold_s):
            time.sleep(random.uniform(0, PUSH_DELAY_S))
            status, headers, data = read()
        return status, [*headers, (HELD_HEADER, "1")], data
