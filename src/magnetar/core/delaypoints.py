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
import time

from magnetar.core.points import NamedPoints

ENV_POINTS = "MAGNETAR_DELAY_POINTS"
ENV_DELAY_MS = "MAGNETAR_DELAY_POINT_MS"
duration_ms: int | None = None  # set by the verifier; None: the environment's, or the grace + 1 s

_points = NamedPoints(ENV_POINTS)
fired = _points.fired
enable = _points.enable
disable = _points.disable
disable_all = _points.disable_all


def delay_s() -> float:
    """How long one firing stalls: longer than every deadline and grace period in force."""
    if duration_ms is not None:
        return duration_ms / 1000
    if os.environ.get(ENV_DELAY_MS):
        return int(os.environ[ENV_DELAY_MS]) / 1000
    from magnetar.core.ledger import common

    return (max(common.HOLE_GRACE_MS, common.WRITE_DEADLINE_MS) + 1_000) / 1000


def delay_point(name: str) -> None:
    if _points.take(name):
        time.sleep(delay_s())
