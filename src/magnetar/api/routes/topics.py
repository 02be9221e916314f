"""Topics: listing, creation, partitions, subscriptions, last message id, stats and permissions
(`/admin/v2/{persistent|non-persistent}/{tenant}/{namespace}...`)."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import Router

from magnetar.adapters.aws import build_broker
from magnetar.api.access import guarded
from magnetar.api.http import (
    DOMAINS,
    flag_query,
    int_body,
    json_body,
    json_response,
    namespace_name,
    no_content,
    topic_name,
)
from magnetar.core.authz import Access, check_actions

router = Router()


def _bind(domain: str) -> None:
    ns = f"/admin/v2/{domain}/<tenant>/<namespace>"
    one = f"{ns}/<topic>"

    @guarded(router, "GET", ns, Access.NAMESPACE_MEMBER)
    def list_topics(tenant: str, namespace: str) -> Response[str]:
        return json_response(build_broker().admin.list_topics(namespace_name(tenant, namespace), domain))

    @guarded(router, "GET", f"{ns}/partitioned", Access.NAMESPACE_MEMBER)
    def list_partitioned(tenant: str, namespace: str) -> Response[str]:
        return json_response(build_broker().admin.list_partitioned_topics(namespace_name(tenant, namespace)))

    @guarded(router, "PUT", one, Access.TENANT_ADMIN, domain)
    def create_topic(tenant: str, namespace: str, topic: str) -> Response[str]:
        build_broker().admin.create_topic(topic_name(domain, tenant, namespace, topic))
        return no_content()

    @guarded(router, "PUT", f"{one}/partitions", Access.TENANT_ADMIN, domain)
    def create_partitioned(tenant: str, namespace: str, topic: str) -> Response[str]:
        build_broker().admin.create_partitioned_topic(topic_name(domain, tenant, namespace, topic), int_body())
        return no_content()

    @guarded(router, "POST", f"{one}/partitions", Access.TENANT_ADMIN, domain)
    def update_partitioned(tenant: str, namespace: str, topic: str) -> Response[str]:
        build_broker().admin.update_partitioned_topic(topic_name(domain, tenant, namespace, topic), int_body())
        return no_content()

    @guarded(router, "GET", f"{one}/partitions", Access.LOOKUP, domain)
    def partition_metadata(tenant: str, namespace: str, topic: str) -> Response[str]:
        return json_response({"partitions": build_broker().admin.partitions(topic_name(domain, tenant, namespace, topic))})

    @guarded(router, "GET", f"{one}/subscriptions", Access.LOOKUP, domain)
    def list_subscriptions(tenant: str, namespace: str, topic: str) -> Response[str]:
        return json_response(build_broker().admin.list_subscriptions(topic_name(domain, tenant, namespace, topic)))

    @guarded(router, "GET", f"{one}/lastMessageId", Access.CONSUME, domain)
    def last_message_id(tenant: str, namespace: str, topic: str) -> Response[str]:
        last = build_broker().last_entry(topic_name(domain, tenant, namespace, topic))
        return json_response({"ledgerId": last[0], "entryId": last[1], "partitionIndex": -1})

    # --- stats (Pulsar's TopicStats, internal stats, partitioned stats) -----------------------
    @guarded(router, "GET", f"{one}/stats", Access.LOOKUP, domain)
    def topic_stats(tenant: str, namespace: str, topic: str) -> Response[str]:
        return json_response(build_broker().stats.topic_stats(topic_name(domain, tenant, namespace, topic)))

    @guarded(router, "GET", f"{one}/internalStats", Access.LOOKUP, domain)
    def internal_stats(tenant: str, namespace: str, topic: str) -> Response[str]:
        return json_response(build_broker().stats.internal_stats(topic_name(domain, tenant, namespace, topic)))

    @guarded(router, "GET", f"{one}/partitioned-stats", Access.LOOKUP, domain)
    def partitioned_stats(tenant: str, namespace: str, topic: str) -> Response[str]:
        per_partition = flag_query("perPartition", default=True)
        name = topic_name(domain, tenant, namespace, topic)
        return json_response(build_broker().stats.partitioned_stats(name, per_partition))

    @guarded(router, "GET", f"{one}/partitioned-internalStats", Access.LOOKUP, domain)
    def partitioned_internal_stats(tenant: str, namespace: str, topic: str) -> Response[str]:
        return json_response(build_broker().stats.partitioned_internal_stats(topic_name(domain, tenant, namespace, topic)))

    # --- permissions on one topic --------------------------------------------------------------
    @guarded(router, "GET", f"{one}/permissions", Access.TENANT_ADMIN, domain)
    def topic_permissions(tenant: str, namespace: str, topic: str) -> Response[str]:
        return json_response(build_broker().authz.topic_permissions(topic_name(domain, tenant, namespace, topic)))

    @guarded(router, "POST", f"{one}/permissions/<role>", Access.TENANT_ADMIN, domain)
    def grant_on_topic(tenant: str, namespace: str, topic: str, role: str) -> Response[str]:
        actions = check_actions(json_body())
        build_broker().authz.grant_on_topic(topic_name(domain, tenant, namespace, topic), unquote(role), actions)
        return no_content()

    @guarded(router, "DELETE", f"{one}/permissions/<role>", Access.TENANT_ADMIN, domain)
    def revoke_on_topic(tenant: str, namespace: str, topic: str, role: str) -> Response[str]:
        build_broker().authz.revoke_on_topic(topic_name(domain, tenant, namespace, topic), unquote(role))
        return no_content()


for _domain in DOMAINS:
    _bind(_domain)
