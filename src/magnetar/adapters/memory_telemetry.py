"""In-memory telemetry for unit tests: the metrics and spans the core emitted, as lists."""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from magnetar.core.ports.telemetry import Span, Telemetry, Unit
from magnetar.core.tracecontext import format_traceparent


@dataclass(frozen=True)
class Recorded:
    name: str
    value: float
    unit: Unit
    namespace: str | None


class InMemoryMetrics:
    def __init__(self) -> None:
        self.recorded: list[Recorded] = []
        self._lock = threading.Lock()

    def add(self, name: str, value: float, unit: Unit = Unit.COUNT, namespace: str | None = None) -> None:
        with self._lock:
            self.recorded.append(Recorded(name, value, unit, namespace))

    def total(self, name: str, namespace: str | None = None) -> float:
        """The sum of `name`'s values (of one namespace when given)."""
        return sum(r.value for r in self.recorded if r.name == name and (namespace is None or r.namespace == namespace))

    def values(self, name: str) -> list[float]:
        return [r.value for r in self.recorded if r.name == name]


@dataclass
class RecordedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    annotations: dict[str, str | int | float | bool] = field(default_factory=dict)

    @property
    def traceparent(self) -> str | None:
        return format_traceparent(self.trace_id, self.span_id)

    def annotate(self, key: str, value: str | int | float | bool) -> None:
        self.annotations[key] = value


class InMemoryTracer:
    """Every span recorded (one trace per outermost span), in the order they started."""

    active = True

    def __init__(self) -> None:
        self.spans: list[RecordedSpan] = []
        self._stack = threading.local()

    def _current(self) -> list[RecordedSpan]:
        if not hasattr(self._stack, "spans"):
            self._stack.spans = []
        spans: list[RecordedSpan] = self._stack.spans
        return spans

    @contextlib.contextmanager
    def span(self, name: str) -> Iterator[Span]:
        stack = self._current()
        parent = stack[-1] if stack else None
        span = RecordedSpan(name, parent.trace_id if parent else secrets.token_hex(16), secrets.token_hex(8),
                            parent.span_id if parent else None)
        self.spans.append(span)
        stack.append(span)
        try:
            yield span
        finally:
            stack.pop()

    def traceparent(self) -> str | None:
        stack = self._current()
        return stack[-1].traceparent if stack else None

    def named(self, name: str) -> list[RecordedSpan]:
        return [s for s in self.spans if s.name == name]


def in_memory_telemetry() -> tuple[Telemetry, InMemoryMetrics, InMemoryTracer]:
    metrics, tracer = InMemoryMetrics(), InMemoryTracer()
    return Telemetry(metrics, tracer), metrics, tracer
