"""Every route declares the access it needs; one middleware checks it before the route runs.

`guarded(router, method, path, access)` registers a route with Powertools and records it in
`ROUTE_TABLE`, which is the route x role table of docs/security.md (and of the test that
enforces it) and, with what each route declares of its bodies (`request=`, `response=`,
`query=`...), the source of the OpenAPI document (`magnetar.api.openapi`). The middleware
reads the caller from the request (`magnetar.security.identity`), builds the target from the
path (tenant, namespace, topic, subscription) and asks the core (`AuthorizationService.check`):
401 without valid credentials, 403 without a grant, before any work or write is done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from magnetar.adapters.aws import build_broker
from magnetar.api.openapi import Doc, Param, Schema
from magnetar.api.resolver import current_event
from magnetar.core.authz import Access, Target
from magnetar.core.naming import NamespaceName, TopicName, check_entity
from magnetar.security.identity import principal_of_http_event


@dataclass(frozen=True)
class RouteAccess:
    method: str
    path: str  # Powertools' rule, e.g. /admin/v2/tenants/<tenant>
    access: Access
    doc: Doc = field(default_factory=Doc, compare=False)  # what the OpenAPI document says of it

    @property
    def openapi_path(self) -> str:
        return self.path.replace("<", "{").replace(">", "}")


ROUTE_TABLE: list[RouteAccess] = []
Handler = Callable[..., Response[str]]


def target_of(args: dict[str, str], domain: str | None) -> Target:
    """What the path names, from the most specific part it has."""
    values = {k: unquote(v) for k, v in args.items()}
    tenant = values.get("tenant")
    if tenant is None:
        return Target()
    if "namespace" not in values:
        return Target(check_entity("tenant", tenant))
    if "topic" in values and domain is not None:
        topic = TopicName.of(domain, tenant, values["namespace"], values["topic"])
        return Target.of_topic(topic, values.get("subscription"))
    namespace = NamespaceName.of(tenant, values["namespace"])
    return Target(namespace.tenant, namespace, None, values.get("subscription"))


def _authorize(access: Access, domain: str | None) -> Callable[[Any, NextMiddleware], Response[str]]:
    def authorize(app: Any, next_middleware: NextMiddleware) -> Response[str]:
        authz = build_broker().authz
        principal = principal_of_http_event(current_event().raw_event)
        authz.authenticate(principal, access)  # 401 comes before anything about the path
        authz.check(principal, access, target_of(app.context.get("_route_args", {}), domain))
        return next_middleware(app)

    return authorize


def require(access: Access) -> None:
    """A further check inside a route, beyond the route's own access (a replicated copy's
    publish: superusers only)."""
    build_broker().authz.check(principal_of_http_event(current_event().raw_event), access)


def guarded(router: Router, method: str, path: str, access: Access, domain: str | None = None, *,
            request: Schema = None, response: Schema = None, query: dict[str, Param] | None = None,
            errors: tuple[int, ...] = (), summary: str = "") -> Callable[[Handler], Handler]:
    """Register `method path` on `router`, requiring `access` of the caller.

    The rest documents the route (`magnetar.api.openapi`): its `request` body and its 200
    `response` (a pydantic model or a JSON schema; no response: 204 No Content), its `query`
    parameters, refusals beyond those its access, path and body imply, and a summary.
    """

    def register(func: Handler) -> Handler:
        doc = Doc(request, response, query or {}, errors, summary or (func.__doc__ or func.__name__).split("\n")[0],
                  func.__module__.rsplit(".", 1)[-1])
        ROUTE_TABLE.append(RouteAccess(method, path, access, doc))
        router.route(path, method, middlewares=[_authorize(access, domain)])(func)
        return func

    return register
