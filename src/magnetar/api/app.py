"""The broker's HTTP API: the routers of every resource on one Powertools resolver, with
Pulsar's error shape (`{"reason": ...}` and the right status, never a 500 for bad input)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from pydantic import ValidationError

from magnetar.api.http import json_response
from magnetar.api.resolver import HttpApiResolver, current_event
from magnetar.api.routes import consumers, namespaces, openapi, policies, producers, tenants, topics
from magnetar.core.errors import MagnetarError

app = HttpApiResolver()
for _module in (tenants, namespaces, policies, topics, producers, consumers, openapi):
    app.include_router(_module.router)


@app.exception_handler(MagnetarError)  # type: ignore[untyped-decorator]
def _refused(exc: MagnetarError) -> Response[str]:
    return json_response({"reason": exc.reason}, exc.status)


@app.exception_handler(ValidationError)  # type: ignore[untyped-decorator]
def _invalid(exc: ValidationError) -> Response[str]:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "body"
    return json_response({"reason": f"Invalid request body: {where}: {first.get('msg')}"}, 400)


@app.not_found
def _no_route(exc: Exception) -> Response[str]:
    event = current_event()
    return json_response({"reason": f"No such endpoint: {event.http_method} {event.path}"}, 404)
