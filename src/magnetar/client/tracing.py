"""The SDK's side of tracing: a message sent while the application has an active trace carries
its context in the reserved property `traceparent` (W3C), unless the message sets one itself.

The active trace is, in this order: OpenTelemetry's current span (when `opentelemetry-api` is
installed and a span is recording), else the Lambda invocation's X-Ray trace (`_X_AMZN_TRACE_ID`,
when sampled: an SDK producer inside a traced Lambda function). A consumer reads it back with
`message.properties()["traceparent"]`; the broker's delivery spans link to it (docs/operations.md).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from magnetar.core.tracecontext import format_traceparent, traceparent_from_xray_header, with_trace_context

XRAY_TRACE_ENV = "_X_AMZN_TRACE_ID"  # Lambda's trace header for the invocation in progress


def current_traceparent() -> str | None:
    """The W3C trace context of the application's active trace, None when there is none."""
    return _opentelemetry_traceparent() or traceparent_from_xray_header(os.environ.get(XRAY_TRACE_ENV))


@functools.cache
def _opentelemetry_trace() -> Any:
    """OpenTelemetry's trace API, None when it is not installed: looked for once (a failed import
    searches every path entry again, and this runs for every message sent)."""
    try:
        from opentelemetry import trace  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    return trace


def _opentelemetry_traceparent() -> str | None:
    trace = _opentelemetry_trace()
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid or not context.trace_flags.sampled:
        return None
    return format_traceparent(f"{context.trace_id:032x}", f"{context.span_id:016x}")


def traced_properties(properties: dict[str, str]) -> dict[str, str]:
    """`properties` with the active trace's `traceparent` (the message's own wins)."""
    return with_trace_context(properties, current_traceparent())
