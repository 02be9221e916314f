"""The OpenAPI document: generated from the routes, served at /openapi.json, kept in docs/."""

from __future__ import annotations

import json
from pathlib import Path

import schemathesis

from http_helpers import HTTP
from magnetar.api import openapi
from magnetar.api.access import ROUTE_TABLE
from magnetar.api.app import app  # noqa: F401  (registers every route)
from magnetar.core.authz import Access

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
ERROR_REF = "#/components/schemas/Error"


def _operations(document: dict) -> dict[tuple[str, str], dict]:  # type: ignore[type-arg]
    return {(method.upper(), path): op for path, item in document["paths"].items() for method, op in item.items()}


def test_docs_openapi_json_is_current() -> None:
    assert DOC.read_text() == openapi.render(), "docs/openapi.json is stale: run `make openapi`"


def test_the_served_document_is_the_generated_one(cluster) -> None:  # type: ignore[no-untyped-def]
    response = HTTP.get(f"{cluster.url}/openapi.json", timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == openapi.document()


def test_every_route_is_an_operation_with_its_security_and_refusals() -> None:
    document = openapi.document()
    operations = _operations(document)
    assert len(operations) == len(ROUTE_TABLE) == len({(r.method, r.path) for r in ROUTE_TABLE})
    responses = document["components"]["responses"]
    for route in ROUTE_TABLE:
        op = operations[(route.method, route.openapi_path)]
        codes = set(op["responses"])
        assert codes & {"200", "204"}, (route, codes)
        if route.access is Access.PUBLIC:
            assert op["security"] == [] and "401" not in codes
        else:
            assert op["security"] == [{"bearerAuth": []}, {"sigv4": []}]
            assert {"401", "403"} <= codes, route
        if "<" in route.path:
            assert {"400", "404"} <= codes, route
        for code, response in op["responses"].items():
            if int(code) >= 400:  # every refusal is Pulsar's {"reason": ...}
                resolved = responses[response["$ref"].rsplit("/", 1)[-1]]
                assert ERROR_REF in json.dumps(resolved["content"]["application/json"]["schema"]), (route, code)
    assert "bearerAuth" in document["components"]["securitySchemes"]
    assert document["components"]["securitySchemes"]["sigv4"]["x-amazon-apigateway-authtype"] == "awsSigv4"


def test_public_routes_are_the_ones_api_gateway_serves_without_an_authorizer() -> None:
    from magnetar.config import PUBLIC_ROUTES

    public = {f"{r.method} {r.openapi_path}" for r in ROUTE_TABLE if r.access is Access.PUBLIC}
    assert public == set(PUBLIC_ROUTES) == {"GET /openapi.json"}


def test_bodies_come_from_the_models_and_pulsars_bare_json() -> None:
    ops = _operations(openapi.document())
    produce = ops[("POST", "/topics/persistent/{tenant}/{namespace}/{topic}")]
    assert produce["requestBody"]["required"] is True
    assert produce["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ProduceRequest"}
    assert "413" in produce["responses"] and "429" in produce["responses"]
    subscribe = ops[("PUT", "/magnetar/v1/consumer/persistent/{tenant}/{namespace}/{topic}/{subscription}/{consumer}")]
    assert subscribe["requestBody"]["required"] is False  # every field has a default
    partitions = ops[("PUT", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/partitions")]
    assert partitions["requestBody"]["content"]["application/json"]["schema"]["type"] == "integer"
    grant = ops[("POST", "/admin/v2/namespaces/{tenant}/{namespace}/permissions/{role}")]
    assert grant["requestBody"]["content"]["application/json"]["schema"]["items"]["enum"][:2] == ["produce", "consume"]
    ttl = ops[("POST", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/messageTTL")]
    assert ttl["requestBody"]["required"] is False and ttl["parameters"][-1]["name"] == "messageTTL"
    health = ops[("GET", "/admin/v2/brokers/health")]
    assert "text/plain" in health["responses"]["200"]["content"]


def test_schemathesis_reads_every_operation() -> None:
    schema = schemathesis.openapi.from_dict(openapi.document())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == len(ROUTE_TABLE)
