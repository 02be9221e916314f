"""The core's telemetry on AWS: CloudWatch metrics in the Embedded Metric Format and X-Ray traces,
both through Powertools.

Each handler wraps itself in `LambdaTelemetry.instrument`:

    telemetry = LambdaTelemetry()

    @logger.inject_lambda_context(clear_state=True)
    @telemetry.instrument
    def handler(event, context): ...

- **Metrics**: what the core records during the invocation (`EmfMetrics`, the `Metrics` port) is
  gathered per dimension set and written to the function's log at its end, one EMF line per
  namespace (dimensions `namespace` + `service`, and `service` alone for the function's totals)
  and one for the function's own metrics; CloudWatch Logs turns the lines into metrics. No
  PutMetricData call, no extra latency. The invocation is found through a context variable, so
  the concurrent invocations of the local runtime (one process) keep their metrics apart, and
  the core's thread pools run their tasks in a copy of it.
- **Traces**: Powertools' Tracer (X-Ray) when the function runs with active tracing (the stack
  turns it on; Lambda samples 1 request a second and 5 % of the rest); the core's spans become
  subsegments with annotations. Off outside Lambda, unless `MAGNETAR_TRACING=on` (a segment per
  invocation, sent to the X-Ray daemon at `AWS_XRAY_DAEMON_ADDRESS`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from magnetar.core import metrics as m
from magnetar.core.metrics.container import counted
from magnetar.core.ports.telemetry import NO_SPAN, Span, Telemetry, Unit
from magnetar.core.tracecontext import format_traceparent, xray_to_w3c_trace_id

log = logging.getLogger(__name__)

GENERIC_SERVICE = "magnetar"  # POWERTOOLS_SERVICE_NAME when it names no function (the local runtime)
ENV_TRACING = "MAGNETAR_TRACING"  # "on": trace outside Lambda too (an X-Ray daemon must listen)
MAX_VALUES = 99  # values of one metric in one EMF line (CloudWatch takes 100; Powertools flushes at 100)
# the error codes botocore's standard retry mode treats as throttling (and DynamoDB's cancellation
# reason for a throttled item of a transaction, which is the caller's to retry)
THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException", "TooManyRequestsException",
    "ProvisionedThroughputExceededException", "TransactionInProgressException", "RequestLimitExceeded",
    "BandwidthLimitExceeded", "LimitExceededException", "RequestThrottled", "SlowDown", "PriorRequestNotComplete",
    "EC2ThrottledException",
})


def throttled_answer(response: Any) -> bool:
    """Whether botocore's `needs-retry` answer (http response, parsed) is a throttling refusal."""
    parsed = response[1] if isinstance(response, tuple) and len(response) > 1 else {}
    if not isinstance(parsed, dict):
        return False
    reasons = parsed.get("CancellationReasons") or []
    return (parsed.get("Error") or {}).get("Code") in THROTTLING_CODES or any(
        r.get("Code") == "ThrottlingError" for r in reasons)


Handler = TypeVar("Handler", bound=Callable[..., Any])


@dataclass
class _Series:
    unit: Unit
    values: list[float] = field(default_factory=list)


class Invocation:
    """One invocation's metrics by dimension set: (`namespace`, `AwsService`), (None, None) for the
    function's own. Counts add up; milliseconds keep each value (percentiles); ratios keep the max."""

    def __init__(self) -> None:
        self.sets: dict[tuple[str | None, str | None], dict[str, _Series]] = {}
        self._lock = threading.Lock()

    def add(self, name: str, value: float, unit: Unit, namespace: str | None = None,
            aws_service: str | None = None) -> None:
        with self._lock:
            series = self.sets.setdefault((namespace, aws_service), {}).setdefault(name, _Series(unit))
            if unit is Unit.MILLISECONDS:
                if len(series.values) < MAX_VALUES:
                    series.values.append(value)
            elif not series.values:
                series.values.append(value)
            elif unit is Unit.NONE:
                series.values[0] = max(series.values[0], value)
            else:
                series.values[0] += value

    def emf_lines(self, service: str, namespace: str = m.CLOUDWATCH_NAMESPACE) -> list[dict[str, Any]]:
        """The EMF documents of the invocation, serialized by Powertools."""
        from aws_lambda_powertools.metrics import EphemeralMetrics

        lines: list[dict[str, Any]] = []
        with self._lock:
            sets = sorted(self.sets.items(), key=lambda kv: (kv[0][0] or "", kv[0][1] or ""))
        for (tenant_ns, aws_service), series in sets:
            metrics = EphemeralMetrics(namespace=namespace, service=service)
            if tenant_ns is not None:
                metrics.add_dimension(m.NAMESPACE_DIMENSION, tenant_ns)
            if aws_service is not None:
                metrics.add_dimension(m.AWS_SERVICE_DIMENSION, aws_service)
            if tenant_ns is not None or aws_service is not None:
                metrics.add_dimensions(**{m.SERVICE_DIMENSION: service})  # the function's total as well
            for name, s in series.items():
                for value in s.values:
                    metrics.add_metric(name=name, unit=s.unit.value, value=value)
            lines.append(dict(metrics.serialize_metric_set()))
        return lines


_CURRENT: ContextVar[Invocation | None] = ContextVar("magnetar_invocation", default=None)


def current_invocation() -> Invocation | None:
    return _CURRENT.get()


class EmfMetrics:
    """The `Metrics` port: into the current invocation's metrics (none outside an invocation)."""

    def add(self, name: str, value: float, unit: Unit = Unit.COUNT, namespace: str | None = None) -> None:
        invocation = _CURRENT.get()
        if invocation is not None:
            invocation.add(name, value, unit, namespace)


def record_aws(name: str, aws_service: str, value: float = 1) -> None:
    """An AWS call's throttle (`clients.REQUESTS.throttled`, the one sink of throttles) or retry, per
    AWS service."""
    invocation = _CURRENT.get()
    if invocation is not None:
        invocation.add(name, value, Unit.COUNT, aws_service=aws_service)


def on_request_created(request: Any = None, event_name: str = "", **_: Any) -> None:
    """botocore `request-created` (once per HTTP attempt): S3 requests for the cost model, and the
    attempts after the first of a call (AwsRetries)."""
    invocation = _CURRENT.get()
    if invocation is None:
        return
    parts = [*event_name.split(".", 2), "", ""]  # request-created.<service>.<Operation>
    service, operation = parts[1], parts[2]
    attempt = ((getattr(request, "context", None) or {}).get("retries") or {}).get("attempt", 1)
    if attempt > 1:
        invocation.add(m.AWS_RETRIES, 1, Unit.COUNT, aws_service=service)
    if service == "s3":
        if operation in ("GetObject", "HeadObject", "ListObjectsV2"):
            invocation.add(m.S3_GET_REQUESTS, 1, Unit.COUNT)
        elif operation in ("PutObject", "DeleteObjects", "DeleteObject", "CopyObject"):
            invocation.add(m.S3_PUT_REQUESTS, 1, Unit.COUNT)


# --- tracing ----------------------------------------------------------------------------------
def tracing_wanted() -> bool:
    """Inside Lambda, Powertools decides (active tracing, POWERTOOLS_TRACE_DISABLED); outside, only
    with MAGNETAR_TRACING=on."""
    if os.environ.get("LAMBDA_TASK_ROOT"):
        return os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").lower() not in ("1", "true")
    return os.environ.get(ENV_TRACING, "off").lower() in ("1", "on", "true")


class _XRaySpan:
    def __init__(self, subsegment: Any) -> None:
        self._subsegment = subsegment

    @property
    def traceparent(self) -> str | None:
        return _traceparent_of(self._subsegment)

    def annotate(self, key: str, value: str | int | float | bool) -> None:
        with contextlib.suppress(Exception):
            self._subsegment.put_annotation(key, value)


def _traceparent_of(entity: Any) -> str | None:
    if entity is None or not getattr(entity, "sampled", False):
        return None
    trace_id = xray_to_w3c_trace_id(str(getattr(entity, "trace_id", "")))
    span_id = str(getattr(entity, "id", "") or "")
    return format_traceparent(trace_id, span_id) if trace_id and len(span_id) == 16 else None


class XRayTracer:
    """The `Tracer` port on Powertools' Tracer (X-Ray): spans are subsegments of the invocation's
    segment; nothing while tracing is off or the invocation is not sampled."""

    def __init__(self) -> None:
        self._tracer: Any = None
        self.enabled = tracing_wanted()

    def powertools(self) -> Any:
        if self._tracer is None:
            from aws_lambda_powertools import Tracer

            # auto_patch: every AWS call of the invocation is a subsegment of its own
            self._tracer = Tracer(disabled=not self.enabled)
            if self.enabled:
                from aws_xray_sdk.core import xray_recorder

                xray_recorder.configure(context_missing="IGNORE_ERROR")  # a thread outside an invocation
        return self._tracer

    def _entity(self) -> Any:
        if not self.enabled:
            return None
        from aws_xray_sdk.core import xray_recorder

        try:
            return xray_recorder.get_trace_entity()
        except Exception:
            return None

    @property
    def active(self) -> bool:
        entity = self._entity()
        return bool(entity is not None and getattr(entity, "sampled", False))

    @contextlib.contextmanager
    def span(self, name: str) -> Iterator[Span]:
        if not self.active:
            yield NO_SPAN
            return
        with self.powertools().provider.in_subsegment(name=name) as subsegment:
            yield _XRaySpan(subsegment)

    def traceparent(self) -> str | None:
        return _traceparent_of(self._entity()) if self.active else None


# --- the handlers' side -----------------------------------------------------------------------
_TELEMETRY: Telemetry | None = None
_TRACER: XRayTracer | None = None


def aws_telemetry() -> Telemetry:
    """The telemetry of this process's broker (`build_broker`): EMF metrics, X-Ray spans."""
    global _TELEMETRY, _TRACER
    if _TELEMETRY is None:
        _TRACER = XRayTracer()
        _TELEMETRY = Telemetry(EmfMetrics(), _TRACER)
    return _TELEMETRY


def metrics_disabled() -> bool:
    return os.environ.get("POWERTOOLS_METRICS_DISABLED", "false").lower() in ("1", "true")


class LambdaTelemetry:
    """A handler's metrics and trace: `instrument` wraps the handler (one per handler module, so
    a new execution environment, a new import, is a cold start)."""

    def __init__(self, service: str | None = None) -> None:
        self.service = service
        self.cold = True

    def service_name(self, context: Any = None) -> str:
        """The `service` dimension: the function's POWERTOOLS_SERVICE_NAME (the stack sets one per
        function); where it names none (the local runtime runs every function in one process, with
        the generic GENERIC_SERVICE), the function's name, which locally is that service name."""
        if self.service:
            return self.service
        named = os.environ.get("POWERTOOLS_SERVICE_NAME")
        if named and named != GENERIC_SERVICE:
            return named
        return str(getattr(context, "function_name", "") or GENERIC_SERVICE)

    def instrument(self, handler: Handler) -> Handler:
        """The handler with its EMF metrics, its spans when traced, and the container's counters
        that `GET /metrics` shows (`core.metrics.container.counted`): one decorator per handler."""
        handler = counted(handler)

        @functools.wraps(handler)
        def run(event: Any, context: Any) -> Any:
            invocation = Invocation()
            if self.cold:
                invocation.add(m.COLD_START, 1, Unit.COUNT)
                self.cold = False
            token = _CURRENT.set(invocation)
            try:
                return self._traced(handler, event, context)
            finally:
                _CURRENT.reset(token)
                self.flush(invocation, self.service_name(context))

        return run  # type: ignore[return-value]

    def _traced(self, handler: Handler, event: Any, context: Any) -> Any:
        aws_telemetry()
        tracer = _TRACER
        if tracer is None or not tracer.enabled:
            return handler(event, context)
        powertools = tracer.powertools()
        traced = powertools.capture_lambda_handler(handler, capture_response=False)
        if os.environ.get("LAMBDA_TASK_ROOT"):  # Lambda's facade segment is the parent
            return traced(event, context)
        from aws_xray_sdk.core import xray_recorder

        xray_recorder.begin_segment(name=self.service_name(context), sampling=1)  # outside Lambda: a segment of our own
        try:
            return traced(event, context)
        finally:
            xray_recorder.end_segment()

    def flush(self, invocation: Invocation, service: str) -> None:
        """The invocation's EMF lines, to the function's log (stdout, as Lambda collects it)."""
        if metrics_disabled() or not invocation.sets:
            return
        try:
            lines = invocation.emf_lines(service)
        except Exception:  # metrics never fail the invocation
            log.exception("metrics not written")
            return
        out = sys.stdout
        for line in lines:
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
        out.flush()
