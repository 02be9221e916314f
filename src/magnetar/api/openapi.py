"""The HTTP API's OpenAPI 3.1 document, made from the routes themselves.

Every route is registered through `magnetar.api.access.guarded`, which records its method, path
and access with what the route declares of itself (`Doc`: request body, 200 response, query
parameters, extra refusals, summary). `document()` turns that table into OpenAPI: bodies from
the pydantic models (`models_json_schema`) or inline JSON schemas for Pulsar's bare JSON bodies
(a partition count, true/false, a list of actions or roles); the path parameters; the success
status (200 with a body, 204 without); the refusals a route can answer with, each with Pulsar's
`{"reason": ...}` body; and its security (a bearer JWT or SigV4; none for public routes).

`GET /openapi.json` serves it; docs/openapi.json is the same document, written by
`python -m magnetar.api.openapi docs/openapi.json` (`make openapi`), and a test keeps the two equal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from magnetar.core.authz import Access

if TYPE_CHECKING:
    from magnetar.api.access import RouteAccess


@dataclass(frozen=True)
class Content:
    """A body given with its media type (the health check's text/plain `ok`) or as optional."""

    media_type: str
    schema: dict[str, Any]
    required: bool = True


# a request or response body: a pydantic model, an inline JSON schema, another media type, or none
Schema = type[BaseModel] | dict[str, Any] | Content | None


@dataclass(frozen=True)
class Param:
    """A query parameter."""

    schema: dict[str, Any]
    required: bool = False
    description: str = ""


@dataclass(frozen=True)
class Doc:
    """What a route declares of itself, besides its method, path and access."""

    request: Schema = None
    response: Schema = None  # None: 204 No Content
    query: dict[str, Param] = field(default_factory=dict)
    errors: tuple[int, ...] = ()  # refusals beyond those its access, path and body imply
    summary: str = ""
    tag: str = ""


# --- schemas shared by the routes --------------------------------------------------------------
def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
OBJECT: dict[str, Any] = {"type": "object"}
COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
PLAIN_TEXT = Content("text/plain", {"type": "string"})

ERROR = "Error"
GATEWAY_ERROR = "ApiGatewayError"
_ERROR_SCHEMAS: dict[str, Any] = {
    ERROR: {
        "type": "object",
        "description": "Pulsar's error body: why the request was refused.",
        "properties": {"reason": {"type": "string"}},
        "required": ["reason"],
    },
    GATEWAY_ERROR: {
        "type": "object",
        "description": "API Gateway's own refusal (payload too large, throttled), before the broker runs.",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    },
}

_ENTITY_PATTERN = r"^[-=:.\w]+$"  # Pulsar's NamedEntity (tenants, namespaces)
_NAME_PATTERN = r"^[^/]+$"
PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "tenant": {"schema": {"type": "string", "pattern": _ENTITY_PATTERN, "maxLength": 255}, "example": "public"},
    "namespace": {"schema": {"type": "string", "pattern": _ENTITY_PATTERN, "maxLength": 255},
                  "example": "default"},
    "topic": {"schema": {"type": "string", "pattern": _NAME_PATTERN, "maxLength": 255}, "example": "orders",
              "description": "The topic's local name; a partition is `<topic>-partition-<i>`."},
    "subscription": {"schema": {"type": "string", "pattern": _NAME_PATTERN, "maxLength": 255}, "example": "sub"},
    "consumer": {"schema": {"type": "string", "pattern": _NAME_PATTERN, "maxLength": 255}, "example": "c1"},
    "producer": {"schema": {"type": "string", "pattern": _NAME_PATTERN, "maxLength": 255}, "example": "p1"},
    "role": {"schema": {"type": "string", "pattern": _NAME_PATTERN}, "example": "app"},
    "cluster": {"schema": {"type": "string", "pattern": _NAME_PATTERN, "maxLength": 255}, "example": "cluster-a",
                "description": "A cluster of the instance (a new one's name: letters, digits, `_ - = : .`)."},
    "version": {"schema": {"type": "string", "pattern": r"^\d+$", "maxLength": 19}, "example": "0",
                "description": "A schema version."},
    "function": {"schema": {"type": "string", "pattern": _ENTITY_PATTERN, "maxLength": 255}, "example": "exclamation",
                 "description": "A function's name (Pulsar's functionName)."},
    "key": {"schema": {"type": "string", "pattern": _NAME_PATTERN, "maxLength": 1024}, "example": "visits",
            "description": "A key of the function's state."},
    "numMessages": {"schema": {"type": "string", "pattern": r"^\d+$", "maxLength": 18}, "example": "10",
                    "description": "How many entries to skip (a batch is one entry)."},
    "timestamp": {"schema": {"type": "string", "pattern": r"^\d+$", "maxLength": 18}, "example": "1700000000000",
                  "description": "A publish time, in ms since the epoch."},
}

_RESPONSE_NAMES = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
                   405: "MethodNotAllowed", 408: "RequestTimeout", 409: "Conflict", 412: "PreconditionFailed", 413: "PayloadTooLarge", 429: "TooManyRequests",
                   503: "ServiceUnavailable"}
_STATUS = {
    200: "OK",
    204: "Done (no content)",
    400: "Invalid request: a bad name, body or query parameter",
    401: "No valid credentials (missing, malformed, expired or unknown token)",
    403: "Authenticated, but the role holds no grant for this operation (or the SigV4 signature was refused)",
    404: "The tenant, namespace, topic, subscription or consumer does not exist",
    405: "Not allowed by the subscription's configuration or the topic's kind",
    408: "Nothing came within the wait (a function trigger's output)",
    409: "Conflict with the current state (exists already, busy, fenced, over a quota)",
    412: "A precondition of the instance does not hold (a cluster in use or missing, an invalid cluster name)",
    413: "The payload is too large",
    429: "Too many requests: retry later",
    503: "A transient refusal: nothing was done, retry",
}
SECURITY_SCHEMES: dict[str, Any] = {
    "bearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "A Pulsar token (`magnetar tokens create`): HS256 or RS256, the role in `sub`.",
    },
    "sigv4": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "x-amazon-apigateway-authtype": "awsSigv4",
        "description": "AWS Signature Version 4 (service `execute-api`) on the stack's IAM-authorized API; "
                       "the role is the caller's IAM principal ARN.",
    },
}


# --- the document ------------------------------------------------------------------------------
def _operation_id(method: str, path: str) -> str:
    parts = [p.strip("<>").replace("-", "_") for p in path.strip("/").split("/")]
    return "_".join([method.lower(), *parts]).replace(".", "_")


def _models(routes: Iterable[RouteAccess]) -> list[tuple[type[BaseModel], Any]]:
    seen: list[tuple[type[BaseModel], Any]] = []
    for route in routes:
        for schema, mode in ((route.doc.request, "validation"), (route.doc.response, "serialization")):
            if isinstance(schema, type) and (schema, mode) not in seen:
                seen.append((schema, mode))
    return seen


def _required(model: type[BaseModel]) -> bool:
    """A body is required unless the model accepts `{}` (the routes read an empty body as `{}`)."""
    try:
        model.model_validate({})
    except ValueError:
        return True
    return False


def _error(status: int) -> dict[str, Any]:
    reason = {"$ref": f"#/components/schemas/{ERROR}"}
    if status in (413, 429):  # API Gateway answers these itself too, with its own body
        schema: dict[str, Any] = {"anyOf": [reason, {"$ref": f"#/components/schemas/{GATEWAY_ERROR}"}]}
    else:
        schema = reason
    return {"description": _STATUS[status], "content": {"application/json": {"schema": schema}}}


def _statuses(route: RouteAccess) -> set[int]:
    doc, public = route.doc, route.access is Access.PUBLIC
    has_path = "<" in route.path
    codes = set(doc.errors) | {429}  # API Gateway throttles every route
    if has_path or doc.request is not None or doc.query:
        codes.add(400)
    if has_path:
        codes.add(404)
    if not public:
        codes |= {401, 403}
    if route.method != "GET":
        codes.add(409)
    if doc.request is not None:
        codes.add(413)
    if route.access in (Access.PRODUCE, Access.CONSUME):
        codes.add(503)
    return codes


def _body(schema: Schema, refs: dict[Any, dict[str, Any]], mode: str) -> tuple[str, dict[str, Any]]:
    if isinstance(schema, Content):
        return schema.media_type, schema.schema
    if isinstance(schema, type):
        return "application/json", refs[(schema, mode)]
    assert schema is not None
    return "application/json", schema


def _operation(route: RouteAccess, refs: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    doc = route.doc
    params: list[dict[str, Any]] = []
    for segment in route.path.split("/"):
        if segment.startswith("<"):
            name = segment.strip("<>")
            params.append({"$ref": f"#/components/parameters/{name}"})
    for name, param in doc.query.items():
        params.append({"name": name, "in": "query", "required": param.required, "schema": param.schema,
                       **({"description": param.description} if param.description else {})})
    responses: dict[str, Any] = {}
    if doc.response is None:
        responses["204"] = {"description": _STATUS[204]}
    else:
        media_type, schema = _body(doc.response, refs, "serialization")
        responses["200"] = {"description": _STATUS[200], "content": {media_type: {"schema": schema}}}
    for status in sorted(_statuses(route)):
        responses[str(status)] = {"$ref": f"#/components/responses/{_RESPONSE_NAMES[status]}"}
    operation: dict[str, Any] = {
        "operationId": _operation_id(route.method, route.path),
        "summary": doc.summary,
        "tags": [doc.tag] if doc.tag else [],
        "x-magnetar-access": route.access.value,
        "security": [] if route.access is Access.PUBLIC else [{"bearerAuth": []}, {"sigv4": []}],
    }
    if params:
        operation["parameters"] = params
    if doc.request is not None:
        media_type, schema = _body(doc.request, refs, "validation")
        if isinstance(doc.request, type):
            required = _required(doc.request)
        else:
            required = doc.request.required if isinstance(doc.request, Content) else True
        operation["requestBody"] = {"required": required, "content": {media_type: {"schema": schema}}}
    operation["responses"] = responses
    return operation


def document(routes: Iterable[RouteAccess] | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of `routes` (by default every route of the broker's app)."""
    if routes is None:
        import magnetar.api.app  # noqa: F401  (registers every route)
        from magnetar.api.access import ROUTE_TABLE

        routes = ROUTE_TABLE
    table = sorted(routes, key=lambda r: (r.openapi_path, r.method))
    refs, defs = models_json_schema(_models(table), ref_template="#/components/schemas/{model}")
    paths: dict[str, dict[str, Any]] = {}
    for route in table:
        paths.setdefault(route.openapi_path, {})[route.method.lower()] = _operation(route, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Magnetar broker HTTP API",
            "version": "v2",
            "description": "Pulsar's admin v2 and REST producer API, and Magnetar's consumer and reader API, "
                           "on API Gateway and Lambda. Errors are `{\"reason\": ...}` with the status.",
        },
        "paths": paths,
        "components": {
            "schemas": {**defs.get("$defs", {}), **_ERROR_SCHEMAS},
            "parameters": {name: {"name": name, "in": "path", "required": True, **spec}
                           for name, spec in PATH_PARAMETERS.items()},
            "responses": {name: _error(status) for status, name in _RESPONSE_NAMES.items()},
            "securitySchemes": SECURITY_SCHEMES,
        },
    }


def render(doc: dict[str, Any] | None = None) -> str:
    """The document as docs/openapi.json holds it."""
    return json.dumps(document() if doc is None else doc, indent=2, sort_keys=False) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if argv:
        with open(argv[0], "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":  # the routes use the module's own classes, not this __main__'s
    from magnetar.api import openapi

    raise SystemExit(openapi.main(sys.argv[1:]))
