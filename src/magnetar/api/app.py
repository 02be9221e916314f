"""The broker's HTTP API: the routers of every resource on one Powertools resolver, with
Pulsar's error shape (`{"reason": ...}` and the right status, never a 500 for bad input).

`build_app()` makes a resolver; the Lambda handler makes its own at import, so that each
execution environment has one (Powertools keeps per-request state, such as the route's
arguments, on the resolver: the local runtime, which runs environments as threads of one
process, would otherwise let concurrent requests read each other's). `app` is one for callers
that only need the routes registered (the route table, the OpenAPI document).
"""

from __future__ import annotations

import re

from aws_lambda_powertools.event_handler import Response
from pydantic import ValidationError

from magnetar.api.access import ROUTE_TABLE
from magnetar.api.http import json_response
from magnetar.api.resolver import HttpApiResolver, current_event
from magnetar.api.routes import (
    clusters,
    compaction,
    consumers,
    functions,
    lookup,
    metrics,
    namespaces,
    openapi,
    policies,
    producers,
    read_plan,
    replication,
    schemas,
    subscriptions,
    tenants,
    topics,
)
from magnetar.core.errors import MagnetarError


def build_app() -> HttpApiResolver:
    """A resolver with every resource's routes and Pulsar's error handlers."""
    resolver = HttpApiResolver()
    for module in (tenants, clusters, namespaces, policies, topics, lookup, subscriptions, producers, consumers,
                   read_plan, schemas, compaction, replication, functions, metrics, openapi):
        resolver.include_router(module.router)
    resolver.exception_handler(MagnetarError)(_refused)
    resolver.exception_handler(ValidationError)(_invalid)
    resolver.not_found(_no_route)
    return resolver


def _refused(exc: MagnetarError) -> Response[str]:
    return json_response({"reason": exc.reason}, exc.status)


def _invalid(exc: ValidationError) -> Response[str]:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "body"
    return json_response({"reason": f"Invalid request body: {where}: {first.get('msg')}"}, 400)


def _methods_of(path: str) -> list[str]:
    """The methods some route serves `path` with (a route's parameter is one path segment)."""
    return sorted({r.method for r in ROUTE_TABLE if re.fullmatch(re.sub(r"<\w+>", "[^/]+", r.path), path)})


def _no_route(exc: Exception) -> Response[str]:
    event = current_event()
    allowed = _methods_of(event.path)
    if allowed:  # Pulsar (JAX-RS) answers a known path's other methods with 405 and Allow
        response = json_response({"reason": f"Method {event.http_method} not allowed on {event.path}"}, 405)
        response.headers["Allow"] = ", ".join(allowed)
        return response
    return json_response({"reason": f"No such endpoint: {event.http_method} {event.path}"}, 404)


app = build_app()
