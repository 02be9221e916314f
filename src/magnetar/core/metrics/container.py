"""What one container counts: a Lambda execution environment on AWS, the local runtime's process
locally (every function runs in it). Nothing here is stored: the counters live as long as the
container, and a scrape shows the answering container's (`container` label), beside what the
store holds for every topic.

- Lambda invocations, cold starts and time in the handler, by function (`counted`, the handlers'
  decorator);
- messages pushed to WebSocket consumers (the push gateway's adapter counts what it sent);
- late records: journal records that arrived after their ids were sealed as holes, and whether
  they were re-appended or dead-lettered (the sealer).

The AWS requests are counted where they are made (`magnetar.adapters.aws.clients.REQUESTS`).
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

CONTAINER_ID = uuid.uuid4().hex[:8]  # this container's `container` label
DEFAULT_MEMORY_MB = 1024


@dataclass(frozen=True)
class ContainerSnapshot:
    container: str
    started_at: float  # Unix time
    invocations: dict[str, int] = field(default_factory=dict)
    cold_starts: dict[str, int] = field(default_factory=dict)
    handler_seconds: dict[str, float] = field(default_factory=dict)
    gb_seconds: dict[str, float] = field(default_factory=dict)  # handler time x memory, by function
    pushed: int = 0
    late: dict[str, int] = field(default_factory=dict)  # after_hole, reappended, dead_lettered


class ContainerCounters:
    def __init__(self) -> None:
        self.started_at = time.time()
        self._lock = threading.Lock()
        self._invocations: Counter[str] = Counter()
        self._cold: Counter[str] = Counter()
        self._seconds: defaultdict[str, float] = defaultdict(float)
        self._gb_seconds: defaultdict[str, float] = defaultdict(float)
        self._pushed = 0
        self._late: Counter[str] = Counter()

    def invoked(self, function: str, cold: bool, seconds: float, memory_mb: int) -> None:
        with self._lock:
            self._invocations[function] += 1
            self._cold[function] += int(cold)
            self._seconds[function] += seconds
            self._gb_seconds[function] += seconds * memory_mb / 1024

    def pushed(self, messages: int) -> None:
        with self._lock:
            self._pushed += messages

    def late_records(self, after_hole: int, reappended: int, dead_lettered: int) -> None:
        with self._lock:
            self._late.update(after_hole=after_hole, reappended=reappended, dead_lettered=dead_lettered)

    def snapshot(self) -> ContainerSnapshot:
        with self._lock:
            return ContainerSnapshot(CONTAINER_ID, self.started_at, dict(self._invocations), dict(self._cold),
                                     dict(self._seconds), dict(self._gb_seconds), self._pushed, dict(self._late))


COUNTERS = ContainerCounters()
H = TypeVar("H", bound=Callable[..., Any])


def counted(handler: H) -> H:
    """Count a Lambda handler's invocations, its environment's cold start (the first invocation of
    this import of the handler's module) and the time spent in it, under the function's name."""
    cold = [True]

    @functools.wraps(handler)
    def wrapper(event: Any, context: Any) -> Any:
        started = time.perf_counter()
        first, cold[0] = cold[0], False
        try:
            return handler(event, context)
        finally:
            name = str(getattr(context, "function_name", "") or handler.__module__)
            memory = int(getattr(context, "memory_limit_in_mb", 0) or DEFAULT_MEMORY_MB)
            COUNTERS.invoked(name, first, time.perf_counter() - started, memory)

    return wrapper  # type: ignore[return-value]
