"""Named crash points: one-line calls that do nothing unless enabled.

Enabled (by `enable()` or the `MAGNETAR_CRASH_POINTS` variable, `name[:times],...`), a crash
point kills the invocation the way a Lambda timeout or crash would: it raises `SimulatedCrash`,
a BaseException no handler catches, and the emulated AWS retries as AWS would. A *refusal
point* shares the registry: armed, the step's AWS call is refused for certain (a throttled shard
refusing every attempt) and the step fails with the error it would get, so the code that follows
a refusal runs too.
"""

from __future__ import annotations

from magnetar.core.points import NamedPoints

_points = NamedPoints("MAGNETAR_CRASH_POINTS")
fired = _points.fired
enable = _points.enable
disable = _points.disable
disable_all = _points.disable_all


class SimulatedCrash(BaseException):
    """The invocation dies here."""


def crash_point(name: str) -> None:
    if _points.take(name):
        raise SimulatedCrash(name)


def refusal_point(name: str) -> bool:
    """True when armed (and counted): the caller raises the refusal its AWS call would get."""
    return _points.take(name)
