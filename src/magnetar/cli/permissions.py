"""`magnetar admin ... permissions`: pulsar-admin's grant/revoke verbs for namespaces, topics,
subscriptions, and the tenant commands that set admin roles.

    magnetar admin namespaces grant-permission my-tenant/ns --role app --actions produce,consume
    magnetar admin namespaces revoke-permission my-tenant/ns --role app
    magnetar admin namespaces permissions my-tenant/ns
    magnetar admin namespaces grant-subscription-permission my-tenant/ns --subscription sub --roles app,ops
    magnetar admin namespaces revoke-subscription-permission my-tenant/ns --subscription sub --role ops
    magnetar admin namespaces subscription-permissions my-tenant/ns
    magnetar admin topics grant-permission persistent://my-tenant/ns/t --role app --actions consume
    magnetar admin topics revoke-permission|permissions ...
    magnetar admin tenants update|get my-tenant [--admin-roles a,b]
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from magnetar.cli.common import (
    DEFAULT_URL,
    AuthParams,
    AuthPlugin,
    ServiceUrl,
    admin_client,
    call,
    split_list,
)

console = Console()
ACTIONS_HELP = "Comma-separated actions: produce, consume (also functions, sources, sinks, packages)."
Role = Annotated[str, typer.Option("--role", help="The role (a token's subject, or an IAM principal ARN).")]
Actions = Annotated[list[str], typer.Option("--actions", help=ACTIONS_HELP)]
Namespace = Annotated[str, typer.Argument(help="tenant/namespace")]
Topic = Annotated[str, typer.Argument(help="persistent://tenant/namespace/topic (or a short name)")]
Subscription = Annotated[str, typer.Option("--subscription", "-s", help="The subscription.")]
AdminRoles = Annotated[list[str] | None, typer.Option("--admin-roles", "-r", help="Comma-separated admin roles.")]
AllowedClusters = Annotated[list[str] | None, typer.Option("--allowed-clusters", "-c", help="Comma-separated clusters.")]


def _actions(values: list[str]) -> list[str]:
    actions = split_list(values)
    if not actions:
        raise typer.BadParameter("give at least one action, e.g. --actions produce,consume", param_hint="--actions")
    return actions


def register(tenants_app: typer.Typer, namespaces_app: typer.Typer, topics_app: typer.Typer) -> None:
    """Add the commands to `magnetar admin tenants|namespaces|topics`."""

    @tenants_app.command("update")
    def tenants_update(tenant: str, admin_roles: AdminRoles = None, allowed_clusters: AllowedClusters = None,
                       service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                       auth_params: AuthParams = None) -> None:
        """Replace a tenant's admin roles and allowed clusters (pulsar-admin tenants update)."""
        admin = admin_client(service_url, auth_plugin, auth_params)
        call(admin.update_tenant, tenant, split_list(admin_roles), split_list(allowed_clusters) or None)
        console.print(f"updated tenant {tenant}")

    @tenants_app.command("get")
    def tenants_get(tenant: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                    auth_params: AuthParams = None) -> None:
        """A tenant's admin roles and allowed clusters (pulsar-admin tenants get)."""
        console.print_json(data=call(admin_client(service_url, auth_plugin, auth_params).get_tenant, tenant))

    @namespaces_app.command("grant-permission")
    def namespaces_grant(namespace: Namespace, role: Role, actions: Actions, service_url: ServiceUrl = DEFAULT_URL,
                         auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
        """Let a role produce and/or consume on every topic of the namespace."""
        granted = _actions(actions)
        call(admin_client(service_url, auth_plugin, auth_params).grant_permission_on_namespace, namespace, role,
             granted)
        console.print(f"granted {','.join(granted)} on {namespace} to {role}")

    @namespaces_app.command("revoke-permission")
    def namespaces_revoke(namespace: Namespace, role: Role, service_url: ServiceUrl = DEFAULT_URL,
                          auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
        """Take away a role's namespace grant."""
        call(admin_client(service_url, auth_plugin, auth_params).revoke_permission_on_namespace, namespace, role)
        console.print(f"revoked the permissions of {role} on {namespace}")

    @namespaces_app.command("permissions")
    def namespaces_permissions(namespace: Namespace, service_url: ServiceUrl = DEFAULT_URL,
                               auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
        """The namespace's grants: {role: [actions]}."""
        console.print_json(data=call(admin_client(service_url, auth_plugin, auth_params).namespace_permissions,
                                     namespace))

    @namespaces_app.command("grant-subscription-permission")
    def namespaces_grant_subscription(
        namespace: Namespace, subscription: Subscription,
        roles: Annotated[list[str], typer.Option("--roles", help="Comma-separated roles that may consume on it.")],
        service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None, auth_params: AuthParams = None,
    ) -> None:
        """Restrict a subscription of the namespace to these roles (they still need consume)."""
        names = split_list(roles)
        if not names:
            raise typer.BadParameter("give at least one role", param_hint="--roles")
        call(admin_client(service_url, auth_plugin, auth_params).grant_permission_on_subscription, namespace,
             subscription, names)
        console.print(f"subscription {subscription} of {namespace}: roles {','.join(names)}")

    @namespaces_app.command("revoke-subscription-permission")
    def namespaces_revoke_subscription(namespace: Namespace, subscription: Subscription, role: Role,
                                       service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                                       auth_params: AuthParams = None) -> None:
        """Remove a role from a subscription's allowed roles."""
        call(admin_client(service_url, auth_plugin, auth_params).revoke_permission_on_subscription, namespace,
             subscription, role)
        console.print(f"revoked {role} on subscription {subscription} of {namespace}")

    @namespaces_app.command("subscription-permissions")
    def namespaces_subscription_permissions(namespace: Namespace, service_url: ServiceUrl = DEFAULT_URL,
                                            auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
        """The namespace's subscription restrictions: {subscription: [roles]}."""
        console.print_json(data=call(admin_client(service_url, auth_plugin, auth_params).subscription_permissions,
                                     namespace))

    @topics_app.command("grant-permission")
    def topics_grant(topic: Topic, role: Role, actions: Actions, service_url: ServiceUrl = DEFAULT_URL,
                     auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
        """Let a role produce and/or consume on one topic (a partitioned topic: all its partitions)."""
        granted = _actions(actions)
        call(admin_client(service_url, auth_plugin, auth_params).grant_permission_on_topic, topic, role, granted)
        console.print(f"granted {','.join(granted)} on {topic} to {role}")

    @topics_app.command("revoke-permission")
    def topics_revoke(topic: Topic, role: Role, service_url: ServiceUrl = DEFAULT_URL,
                      auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
        """Take away a role's grant on the topic."""
        call(admin_client(service_url, auth_plugin, auth_params).revoke_permission_on_topic, topic, role)
        console.print(f"revoked the permissions of {role} on {topic}")

    @topics_app.command("permissions")
    def topics_permissions(topic: Topic, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                           auth_params: AuthParams = None) -> None:
        """The grants that apply to the topic: {role: [actions]}."""
        console.print_json(data=call(admin_client(service_url, auth_plugin, auth_params).topic_permissions, topic))
