"""Named crash points: one-line calls that do nothing unless enabled.

Enabled (by `enable()` or the `MAGNETAR_CRASH_POINTS` variable, `name[:times],...`), a crash
point kills the invocation the way a Lambda timeout or crash would: it raises `SimulatedCrash`,
a BaseException no handler catches, and the emulated AWS retries as AWS would.
"""

from __future__ import annotations

import os
import threading
from collections import Counter

_lock = threading.Lock()
_armed: dict[str, int] = {}
fired: Counter[str] = Counter()


class SimulatedCrash(BaseException):
    """The invocation dies here."""


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


def _load_env() -> None:
    for spec in filter(None, os.environ.get("MAGNETAR_CRASH_POINTS", "").split(",")):
        name, _, times = spec.partition(":")
        _armed[name.strip()] = int(times or 1)


_load_env()


def crash_point(name: str) -> None:
    if not _armed:
        return
    with _lock:
        left = _armed.get(name, 0)
        if left <= 0:
            return
        _armed[name] = left - 1
        fired[name] += 1
    raise SimulatedCrash(name)
