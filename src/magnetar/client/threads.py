"""The threads an SDK object runs (a producer's sender, a consumer's acknowledgements and listener,
a partitioned consumer's shared poll...): started as daemon threads, joined by the object's
`close`, so that a closed client leaves no thread of its own behind (pulsar-client's close
returns with its threads ended too)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

JOIN_TIMEOUT_S = 10.0  # a close waits this long at most for its threads (a request in flight ends first)


class Workers:
    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self, target: Callable[..., Any], *args: Any, name: str | None = None) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()
        return thread

    def join(self, timeout_s: float = JOIN_TIMEOUT_S) -> None:
        """Wait for every thread started here to end (their owner has told them to), within
        `timeout_s` for all; never for the calling thread (a listener closing its own consumer)."""
        deadline = time.monotonic() + timeout_s
        current = threading.current_thread()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            if thread is not current:
                thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]

    def alive(self) -> list[threading.Thread]:
        with self._lock:
            return [t for t in self._threads if t.is_alive()]
