"""Named delay points: one-line calls that do nothing unless enabled (the twins of crash points).

A crash point kills a step; a delay point stalls it — an SDK retrying under throttling, a network
stall, a paused Lambda — long enough to cross every deadline and grace period the step relies on
(the writer's reservation deadline, the sealer's hole grace, an ack timeout), and then lets it go
on as if nothing happened. Enabled by `enable()` or the `MAGNETAR_DELAY_POINTS` variable
(`name[:times],...`), each firing sleeps `delay_s()` seconds (`MAGNETAR_DELAY_POINT_MS`, default
the hole grace plus one second, read when the point fires, so a shortened grace is crossed too).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter

_lock = threading.Lock()
_armed: dict[str, int] = {}
fired: Counter[str] = Counter()
ENV_POINTS = "MAGNETAR_DELAY_POINTS"
ENV_DELAY_MS = "MAGNETAR_DELAY_POINT_MS"
duration_ms: int | None = None  # set by the verifier; None: the environment's, or the grace + 1 s


def enable(name: str, times: int = 1) -> None:
    with _lock:
        _armed[name] = times


def disable_all() -> None:
    with _lock:
        _armed.clear()


def disable(*names: str) -> None:
    with _lock:
        for name in names:
            _armed.pop(name, None)


def delay_s() -> float:
    """How long one firing stalls: longer than every deadline and grace period in force."""
    if duration_ms is not None:
        return duration_ms / 1000
    if os.environ.get(ENV_DELAY_MS):
        return int(os.environ[ENV_DELAY_MS]) / 1000
    from magnetar.core.ledger import common

    return (max(common.HOLE_GRACE_MS, common.WRITE_DEADLINE_MS) + 1_000) / 1000


def _load_env() -> None:
    for spec in filter(None, os.environ.get(ENV_POINTS, "").split(",")):
        name, _, times = spec.partition(":")
        _armed[name.strip()] = int(times or 1)


_load_env()


def delay_point(name: str) -> None:
    if not _armed:
        return
    with _lock:
        left = _armed.get(name, 0)
        if left <= 0:
            return
        _armed[name] = left - 1
        fired[name] += 1
    time.sleep(delay_s())
