"""A delay point fired on a manual clock: its one firing moves the clock past the writer's
deadline instead of sleeping."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from magnetar.adapters.memory import ManualClock
from magnetar.core import delaypoints
from magnetar.core.ledger import WRITE_DEADLINE_MS


@contextlib.contextmanager
def stalled(clock: ManualClock, point: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(delaypoints, "duration_ms", 0)
    monkeypatch.setattr(delaypoints.time, "sleep", lambda s: clock.advance(WRITE_DEADLINE_MS + 1))
    delaypoints.enable(point)
    try:
        yield
    finally:
        delaypoints.disable_all()
