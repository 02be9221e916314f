"""Topics: listing, creation, partitions, subscriptions, last message id, stats and permissions
(`/admin/v2/{persistent|non-persistent}/{tenant}/{namespace}...`)."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

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
    query,
    topic_name,
)
from magnetar.api.models import LastMessageId, PartitionedTopicMetadata
from magnetar.api.openapi import OBJECT, STRINGS, Param
from magnetar.api.routes.namespaces import ACTION_LIST, PERMISSIONS
from magnetar.core.admin import DEFAULT_TOPIC_PAGE, MAX_TOPIC_PAGE
from magnetar.core.authz import Access, check_actions
from magnetar.core.errors import InvalidInput

router = Router()  # type: ignore[no-untyped-call]
PAGE_QUERY = {
    "limit": Param({"type": "integer", "minimum": 1, "maximum": MAX_TOPIC_PAGE},
                   description=f"At most this many topics (a page; {DEFAULT_TOPIC_PAGE} when only startAfter or search "
                               "is given)"),
    "startAfter": Param({"type": "string"}, description="The topics after this one (the last name of the previous page)"),
    "search": Param({"type": "string"}, description="Only topics whose local name holds this text (any case)"),
}
PARTITIONS = {"type": "integer", "minimum": 1, "description": "The number of partitions."}
FORCE = {"force": Param({"type": "boolean"}, description="Delete even while producers or consumers are active")}


def _bind(domain: str) -> None:
    ns = f"/admin/v2/{domain}/<tenant>/<namespace>"
    one = f"{ns}/<topic>"

    @guarded(router, "GET", ns, Access.NAMESPACE_MEMBER, response=STRINGS, query=PAGE_QUERY)
    def list_topics(tenant: str, namespace: str) -> Response[str]:
        """The namespace's topics of this domain; with `limit`, `startAfter` or `search`, one page."""
        name = namespace_name(tenant, namespace)
        limit, start_after, search = query("limit"), query("startAfter"), query("search")
        if limit is None and start_after is None and search is None:  # Pulsar's call: every topic
            return json_response(build_broker().admin.list_topics(name, domain))
        if limit is not None and not (limit.isdigit() and len(limit) < 6):
            raise InvalidInput("Query parameter limit must be a positive integer")
        page = build_broker().admin.list_topics_page(name, domain, search or "", start_after or "",
                                                     int(limit) if limit is not None else DEFAULT_TOPIC_PAGE)
        return json_response(page)

    @guarded(router, "GET", f"{ns}/partitioned", Access.NAMESPACE_MEMBER, response=STRINGS)
    def list_partitioned(tenant: str, namespace: str) -> Response[str]:
        """The namespace's partitioned topics."""
        return json_response(build_broker().admin.list_partitioned_topics(namespace_name(tenant, namespace)))

    @guarded(router, "PUT", one, Access.TENANT_ADMIN, domain)
    def create_topic(tenant: str, namespace: str, topic: str) -> Response[str]:
        """Create a non-partitioned topic."""
        build_broker().admin.create_topic(topic_name(domain, tenant, namespace, topic))
        return no_content()

    @guarded(router, "DELETE", one, Access.TENANT_ADMIN, domain, query=FORCE, errors=(409, 412))
    def delete_topic(tenant: str, namespace: str, topic: str) -> Response[str]:
        """Delete a non-partitioned topic (412 while producers or consumers are active, unless force)."""
        build_broker().deletion.delete_topic(topic_name(domain, tenant, namespace, topic), flag_query("force", False))
        return no_content()

    @guarded(router, "DELETE", f"{one}/partitions", Access.TENANT_ADMIN, domain, query=FORCE, errors=(412,))
    def delete_partitioned(tenant: str, namespace: str, topic: str) -> Response[str]:
        """Delete a partitioned topic and every partition (412 while one is in use, unless force)."""
        name = topic_name(domain, tenant, namespace, topic)
        build_broker().deletion.delete_partitioned_topic(name, flag_query("force", False))
        return no_content()

    @guarded(router, "PUT", f"{one}/partitions", Access.TENANT_ADMIN, domain, request=PARTITIONS)
    def create_partitioned(tenant: str, namespace: str, topic: str) -> Response[str]:
        """Create a partitioned topic."""
        build_broker().admin.create_partitioned_topic(topic_name(domain, tenant, namespace, topic), int_body())
        return no_content()

    @guarded(router, "POST", f"{one}/partitions", Access.TENANT_ADMIN, domain, request=PARTITIONS)
    def update_partitioned(tenant: str, namespace: str, topic: str) -> Response[str]:
        """Add partitions to a partitioned topic."""
        build_broker().admin.update_partitioned_topic(topic_name(domain, tenant, namespace, topic), int_body())
        return no_content()

    @guarded(router, "GET", f"{one}/partitions", Access.LOOKUP, domain, response=PartitionedTopicMetadata)
    def partition_metadata(tenant: str, namespace: str, topic: str) -> Response[str]:
        """A topic's number of partitions (0: not partitioned)."""
        return json_response({"partitions": build_broker().admin.partitions(topic_name(domain, tenant, namespace, topic))})

    @guarded(router, "GET", f"{one}/subscriptions", Access.LOOKUP, domain, response=STRINGS)
    def list_subscriptions(tenant: str, namespace: str, topic: str) -> Response[str]:
        """A topic's subscriptions."""
        return json_response(build_broker().admin.list_subscriptions(topic_name(domain, tenant, namespace, topic)))

    @guarded(router, "GET", f"{one}/lastMessageId", Access.CONSUME, domain, response=LastMessageId)
    def last_message_id(tenant: str, namespace: str, topic: str) -> Response[str]:
        """The id of a topic's last message."""
        last = build_broker().last_entry(topic_name(domain, tenant, namespace, topic))
        return json_response({"ledgerId": last[0], "entryId": last[1], "partitionIndex": -1})

    # --- stats (Pulsar's TopicStats, internal stats, partitioned stats) -----------------------
    @guarded(router, "GET", f"{one}/stats", Access.LOOKUP, domain, response=OBJECT)
    def topic_stats(tenant: str, namespace: str, topic: str) -> Response[str]:
        """Pulsar's TopicStats."""
        return json_response(build_broker().stats.topic_stats(topic_name(domain, tenant, namespace, topic)))

    @guarded(router, "GET", f"{one}/internalStats", Access.LOOKUP, domain, response=OBJECT)
    def internal_stats(tenant: str, namespace: str, topic: str) -> Response[str]:
        """Pulsar's PersistentTopicInternalStats."""
        return json_response(build_broker().stats.internal_stats(topic_name(domain, tenant, namespace, topic)))

    @guarded(router, "GET", f"{one}/partitioned-stats", Access.LOOKUP, domain, response=OBJECT,
             query={"perPartition": Param({"type": "boolean"}, description="Stats of each partition too")})
    def partitioned_stats(tenant: str, namespace: str, topic: str) -> Response[str]:
        """Pulsar's PartitionedTopicStats."""
        per_partition = flag_query("perPartition", default=True)
        name = topic_name(domain, tenant, namespace, topic)
        return json_response(build_broker().stats.partitioned_stats(name, per_partition))

    @guarded(router, "GET", f"{one}/partitioned-internalStats", Access.LOOKUP, domain, response=OBJECT)
    def partitioned_internal_stats(tenant: str, namespace: str, topic: str) -> Response[str]:
        """The internal stats of each partition."""
        return json_response(build_broker().stats.partitioned_internal_stats(topic_name(domain, tenant, namespace, topic)))

    # --- permissions on one topic --------------------------------------------------------------
    @guarded(router, "GET", f"{one}/permissions", Access.TENANT_ADMIN, domain, response=PERMISSIONS)
    def topic_permissions(tenant: str, namespace: str, topic: str) -> Response[str]:
        """The roles granted actions on the topic."""
        return json_response(build_broker().authz.topic_permissions(topic_name(domain, tenant, namespace, topic)))

    @guarded(router, "POST", f"{one}/permissions/<role>", Access.TENANT_ADMIN, domain, request=ACTION_LIST)
    def grant_on_topic(tenant: str, namespace: str, topic: str, role: str) -> Response[str]:
        """Grant a role actions on the topic."""
        actions = check_actions(json_body())
        build_broker().authz.grant_on_topic(topic_name(domain, tenant, namespace, topic), unquote(role), actions)
        return no_content()

    @guarded(router, "DELETE", f"{one}/permissions/<role>", Access.TENANT_ADMIN, domain)
    def revoke_on_topic(tenant: str, namespace: str, topic: str, role: str) -> Response[str]:
        """Revoke a role's grant on the topic."""
        build_broker().authz.revoke_on_topic(topic_name(domain, tenant, namespace, topic), unquote(role))
        return no_content()


for _domain in DOMAINS:
    _bind(_domain)
