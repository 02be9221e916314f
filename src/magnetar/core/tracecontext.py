"""A message's trace context: W3C `traceparent` in a reserved message property.

A producer door (the SDK, the REST producer, the WebSocket producer, the binary protocol proxy)
sets the property `traceparent` on a message published while a trace is active, unless the
message already has one, so that the spans of its consumers can name their producer's trace.
X-Ray trace ids are W3C ids in another spelling (`1-<8 hex epoch>-<24 hex>` and 32 hex digits),
so one header converts into the other both ways.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

TRACEPARENT = "traceparent"  # the reserved property (OpenTelemetry's messaging convention)
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_XRAY_ROOT = re.compile(r"^1-([0-9a-f]{8})-([0-9a-f]{24})$")
_SPAN_ID = re.compile(r"^[0-9a-f]{16}$")


def parse_traceparent(value: str | None) -> tuple[str, str, bool] | None:
    """(trace id, parent span id, sampled) of a W3C traceparent, None when it is not one."""
    if not value:
        return None
    match = _TRACEPARENT.match(value.strip().lower())
    if match is None or match.group(1) == "0" * 32 or match.group(2) == "0" * 16:
        return None
    return match.group(1), match.group(2), bool(int(match.group(3), 16) & 1)


def format_traceparent(trace_id: str, span_id: str, sampled: bool = True) -> str:
    return f"00-{trace_id}-{span_id}-{'01' if sampled else '00'}"


def xray_to_w3c_trace_id(xray_trace_id: str) -> str | None:
    """`1-5759e988-bd862e3fe1be46a994272793` -> `5759e988bd862e3fe1be46a994272793`."""
    match = _XRAY_ROOT.match(xray_trace_id.strip().lower())
    return match.group(1) + match.group(2) if match else None


def w3c_to_xray_trace_id(trace_id: str) -> str:
    """`5759e988bd862e3fe1be46a994272793` -> `1-5759e988-bd862e3fe1be46a994272793`."""
    return f"1-{trace_id[:8]}-{trace_id[8:]}"


def traceparent_from_xray_header(header: str | None) -> str | None:
    """The W3C traceparent of an X-Ray trace header (`Root=1-...;Parent=...;Sampled=1`, Lambda's
    `_X_AMZN_TRACE_ID`); None without a sampled root and parent."""
    if not header:
        return None
    fields = dict(part.split("=", 1) for part in header.split(";") if "=" in part)
    trace_id = xray_to_w3c_trace_id(fields.get("Root", ""))
    parent = fields.get("Parent", "").lower()
    if trace_id is None or not _SPAN_ID.match(parent) or fields.get("Sampled") != "1":
        return None
    return format_traceparent(trace_id, parent)


def with_trace_context(properties: Mapping[str, str], traceparent: str | None) -> dict[str, str]:
    """`properties` with `traceparent` added, unless they carry one already (or there is none)."""
    if traceparent is None or TRACEPARENT in properties:
        return dict(properties)
    return {**properties, TRACEPARENT: traceparent}


def producer_trace_ids(properties: Iterable[Mapping[str, str]], limit: int = 10) -> list[str]:
    """The distinct producer trace ids (X-Ray spelling) named by messages' properties, at most `limit`."""
    found: dict[str, None] = {}
    for props in properties:
        parsed = parse_traceparent(props.get(TRACEPARENT))
        if parsed is not None:
            found[w3c_to_xray_trace_id(parsed[0])] = None
            if len(found) >= limit:
                break
    return list(found)
