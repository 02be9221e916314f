"""Named points armed by name, a number of times each: what crash points and delay points share.

A point is a one-line call in the code (`crash_point("seal.after_commit")`); it does nothing until
armed, by `enable(name, times)` or by an environment variable (`name[:times],...`), and each
firing is counted in `fired` (the verifier reports the counts).
"""

from __future__ import annotations

import os
import threading
from collections import Counter


class NamedPoints:
    def __init__(self, env: str) -> None:
        self._lock = threading.Lock()
        self._armed: dict[str, int] = {}
        self.fired: Counter[str] = Counter()
        for spec in filter(None, os.environ.get(env, "").split(",")):
            name, _, times = spec.partition(":")
            self._armed[name.strip()] = int(times or 1)

    def enable(self, name: str, times: int = 1) -> None:
        with self._lock:
            self._armed[name] = times

    def disable_all(self) -> None:
        with self._lock:
            self._armed.clear()

    def disable(self, *names: str) -> None:
        with self._lock:
            for name in names:
                self._armed.pop(name, None)

    def take(self, name: str) -> bool:
        """True (and counted) when `name` is armed: the caller fires it."""
        if not self._armed:
            return False
        with self._lock:
            left = self._armed.get(name, 0)
            if left <= 0:
                return False
            self._armed[name] = left - 1
            self.fired[name] += 1
        return True
