"""Telemetry ports: the metrics and the trace spans the core emits.

The core says what happened (`Metrics.add`: a name, a value, a unit, the namespace it concerns)
and where a message's path goes (`Tracer.span`: publish, journal write, seal, dispatch, delivery,
acknowledgement); the adapters decide where it goes: CloudWatch's Embedded Metric Format and
X-Ray through Powertools on AWS (`magnetar.adapters.aws.telemetry`), lists in memory for unit
tests (`magnetar.adapters.memory_telemetry`), nowhere by default (`NO_TELEMETRY`).

Dimensions stay low-cardinality: a namespace (`tenant/ns`), never a topic. The metric names are
the constants of `magnetar.core.metrics` (its CloudWatch section), which the CDK dashboard and
alarms read too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol


class Unit(StrEnum):
    """CloudWatch's units, the few the core uses."""

    COUNT = "Count"
    BYTES = "Bytes"
    MILLISECONDS = "Milliseconds"
    NONE = "None"  # ratios


class Metrics(Protocol):
    def add(self, name: str, value: float, unit: Unit = Unit.COUNT, namespace: str | None = None) -> None:
        """Record `value` for metric `name` (per `namespace` when given, else for the function)."""


class Span(Protocol):
    @property
    def traceparent(self) -> str | None:
        """This span's W3C trace context (`00-<trace id>-<span id>-<flags>`); None when not sampled."""

    def annotate(self, key: str, value: str | int | float | bool) -> None:
        """An indexed attribute (X-Ray annotation): searchable, low-cardinality values preferred."""


class Tracer(Protocol):
    @property
    def active(self) -> bool:
        """A trace is being recorded now (sampled): spans cost something only then."""

    def span(self, name: str) -> contextlib.AbstractContextManager[Span]:
        """A span for the block, a child of the current one."""

    def traceparent(self) -> str | None:
        """The current span's W3C trace context, None when no trace is active."""


class _NoSpan:
    traceparent: str | None = None

    def annotate(self, key: str, value: str | int | float | bool) -> None:
        return None


NO_SPAN = _NoSpan()


class NoMetrics:
    def add(self, name: str, value: float, unit: Unit = Unit.COUNT, namespace: str | None = None) -> None:
        return None


class NoTracer:
    active = False

    @contextlib.contextmanager
    def span(self, name: str) -> Iterator[Span]:
        yield NO_SPAN

    def traceparent(self) -> str | None:
        return None


@dataclass(frozen=True)
class Telemetry:
    """What the core's services are given: metrics and a tracer (nothing by default)."""

    metrics: Metrics = field(default_factory=NoMetrics)
    tracer: Tracer = field(default_factory=NoTracer)


NO_TELEMETRY = Telemetry()
