"""Tenants and the broker's health (`/admin/v2/tenants`, `/admin/v2/brokers/health`)."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router

from magnetar.adapters.aws import build_broker
from magnetar.api.access import guarded
from magnetar.api.http import body, flag_query, json_response, no_content
from magnetar.api.models import TenantInfo, TenantRequest
from magnetar.api.openapi import PLAIN_TEXT, STRINGS, Param
from magnetar.core.authz import Access

router = Router()  # type: ignore[no-untyped-call]


@guarded(router, "GET", "/admin/v2/brokers/health", Access.AUTHENTICATED, response=PLAIN_TEXT)
def health() -> Response[str]:
    """The broker's health check: `ok`."""
    return Response(status_code=200, content_type=content_types.TEXT_PLAIN, body="ok")


@guarded(router, "GET", "/admin/v2/tenants", Access.SUPERUSER, response=STRINGS)
def list_tenants() -> Response[str]:
    """The tenants."""
    return json_response(build_broker().admin.list_tenants())


@guarded(router, "GET", "/admin/v2/tenants/<tenant>", Access.TENANT_ADMIN, response=TenantInfo)
def get_tenant(tenant: str) -> Response[str]:
    """A tenant's admin roles and allowed clusters."""
    info = build_broker().admin.get_tenant(unquote(tenant))
    return json_response({"adminRoles": list(info.admin_roles), "allowedClusters": list(info.allowed_clusters)})


@guarded(router, "PUT", "/admin/v2/tenants/<tenant>", Access.SUPERUSER, request=TenantRequest, errors=(412,))
def create_tenant(tenant: str) -> Response[str]:
    """Create a tenant."""
    request = body(TenantRequest)
    build_broker().admin.create_tenant(unquote(tenant), request.adminRoles, request.allowedClusters)
    return no_content()


@guarded(router, "POST", "/admin/v2/tenants/<tenant>", Access.SUPERUSER, request=TenantRequest, errors=(412,))
def update_tenant(tenant: str) -> Response[str]:
    """Update a tenant's admin roles and allowed clusters."""
    request = body(TenantRequest)
    build_broker().admin.update_tenant(unquote(tenant), request.adminRoles, request.allowedClusters)
    return no_content()


@guarded(router, "DELETE", "/admin/v2/tenants/<tenant>", Access.SUPERUSER, errors=(409,),
         query={"force": Param({"type": "boolean"}, description="Delete its namespaces and their topics too")})
def delete_tenant(tenant: str) -> Response[str]:
    """Delete a tenant (409 while it has namespaces, unless force)."""
    build_broker().deletion.delete_tenant(unquote(tenant), flag_query("force", False))
    return no_content()
