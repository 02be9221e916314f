"""Namespaces and their permissions (`/admin/v2/namespaces/{tenant}/{namespace}...`)."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from magnetar.adapters.aws import build_broker
from magnetar.api.access import guarded
from magnetar.api.http import flag_query, json_body, json_response, namespace_name, no_content, query
from magnetar.api.openapi import OBJECT, STRINGS, Param
from magnetar.core.authz import ACTIONS, Access, check_actions, check_roles
from magnetar.core.errors import InvalidInput
from magnetar.core.naming import check_subscription

router = Router()  # type: ignore[no-untyped-call]
ACTION_LIST = {"type": "array", "items": {"enum": list(ACTIONS)}, "description": "Pulsar's AuthActions."}
ROLE_LIST = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}
PERMISSIONS = {"type": "object", "additionalProperties": ACTION_LIST, "description": "Role -> actions."}
NS = "/admin/v2/namespaces/<tenant>/<namespace>"


@guarded(router, "GET", "/admin/v2/namespaces/<tenant>", Access.TENANT_ADMIN, response=STRINGS)
def list_namespaces(tenant: str) -> Response[str]:
    """A tenant's namespaces."""
    return json_response(build_broker().admin.list_namespaces(unquote(tenant)))


@guarded(router, "PUT", NS, Access.TENANT_ADMIN)
def create_namespace(tenant: str, namespace: str) -> Response[str]:
    """Create a namespace."""
    build_broker().admin.create_namespace(namespace_name(tenant, namespace))
    return no_content()


@guarded(router, "DELETE", NS, Access.TENANT_ADMIN, errors=(409, 412),
         query={"force": Param({"type": "boolean"}, description="Delete its topics too")})
def delete_namespace(tenant: str, namespace: str) -> Response[str]:
    """Delete a namespace (409 while it has topics, unless force, or functions)."""
    build_broker().deletion.delete_namespace(namespace_name(tenant, namespace), flag_query("force", False))
    return no_content()


# Pulsar's `mode` of a namespace's topic list: the domain(s) it lists
TOPIC_MODES = {"PERSISTENT": "persistent", "NON_PERSISTENT": "non-persistent", "ALL": None}


@guarded(router, "GET", f"{NS}/topics", Access.NAMESPACE_MEMBER, response=STRINGS,
         query={"mode": Param({"enum": list(TOPIC_MODES)}, description="PERSISTENT (the default), "
                                                                       "NON_PERSISTENT or ALL")})
def list_namespace_topics(tenant: str, namespace: str) -> Response[str]:
    """The namespace's topics, of one domain or both (what a client's pattern consumer matches)."""
    mode = query("mode") or "PERSISTENT"
    if mode not in TOPIC_MODES:
        raise InvalidInput(f"Query parameter mode must be one of {', '.join(TOPIC_MODES)}")
    return json_response(build_broker().admin.list_topics(namespace_name(tenant, namespace), TOPIC_MODES[mode]))


@guarded(router, "GET", NS, Access.TENANT_ADMIN, response=OBJECT)
def get_namespace(tenant: str, namespace: str) -> Response[str]:
    """A namespace's policies."""
    return json_response(build_broker().admin.get_namespace(namespace_name(tenant, namespace)).policies)


# --- permissions: grants of produce/consume to roles, restrictions of subscriptions to roles ----
@guarded(router, "GET", f"{NS}/permissions", Access.TENANT_ADMIN, response=PERMISSIONS)
def namespace_permissions(tenant: str, namespace: str) -> Response[str]:
    """The roles granted actions on the namespace."""
    return json_response(build_broker().authz.namespace_permissions(namespace_name(tenant, namespace)))


@guarded(router, "POST", f"{NS}/permissions/<role>", Access.TENANT_ADMIN, request=ACTION_LIST)
def grant_on_namespace(tenant: str, namespace: str, role: str) -> Response[str]:
    """Grant a role actions on the namespace."""
    actions = check_actions(json_body())
    build_broker().authz.grant_on_namespace(namespace_name(tenant, namespace), unquote(role), actions)
    return no_content()


@guarded(router, "DELETE", f"{NS}/permissions/<role>", Access.TENANT_ADMIN)
def revoke_on_namespace(tenant: str, namespace: str, role: str) -> Response[str]:
    """Revoke a role's grant on the namespace."""
    build_broker().authz.revoke_on_namespace(namespace_name(tenant, namespace), unquote(role))
    return no_content()


@guarded(router, "GET", f"{NS}/permissions/subscription", Access.TENANT_ADMIN,
         response={"type": "object", "additionalProperties": ROLE_LIST, "description": "Subscription -> roles."})
def subscription_permissions(tenant: str, namespace: str) -> Response[str]:
    """The subscriptions restricted to roles."""
    return json_response(build_broker().authz.subscription_permissions(namespace_name(tenant, namespace)))


@guarded(router, "POST", f"{NS}/permissions/subscription/<subscription>", Access.TENANT_ADMIN, request=ROLE_LIST)
def grant_on_subscription(tenant: str, namespace: str, subscription: str) -> Response[str]:
    """Restrict a subscription to roles."""
    roles = check_roles(json_body())
    build_broker().authz.grant_on_subscription(namespace_name(tenant, namespace),
                                               check_subscription(unquote(subscription)), roles)
    return no_content()


@guarded(router, "DELETE", f"{NS}/permissions/<subscription>/<role>", Access.TENANT_ADMIN)
def revoke_on_subscription(tenant: str, namespace: str, subscription: str, role: str) -> Response[str]:
    """Remove a role from a subscription's restriction."""
    build_broker().authz.revoke_on_subscription(namespace_name(tenant, namespace),
                                                check_subscription(unquote(subscription)), unquote(role))
    return no_content()
