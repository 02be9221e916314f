"""A small admin client for Pulsar's admin v2 REST paths (tenants, namespaces, topics)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from magnetar.client.transport import Transport, topic_path
from magnetar.core.naming import NamespaceName, TopicName


class AdminClient:
    def __init__(self, service_url: str) -> None:
        self._transport = Transport(service_url)

    def health(self) -> str:
        return str(self._transport.call("GET", "/admin/v2/brokers/health"))

    def tenants(self) -> list[str]:
        result: list[str] = self._transport.call("GET", "/admin/v2/tenants")
        return result

    def create_tenant(self, tenant: str, admin_roles: list[str] | None = None, allowed_clusters: list[str] | None = None) -> None:
        body = {"adminRoles": admin_roles or [], "allowedClusters": allowed_clusters or ["standalone"]}
        self._transport.call("PUT", f"/admin/v2/tenants/{quote(tenant, safe='')}", body)

    def namespaces(self, tenant: str) -> list[str]:
        result: list[str] = self._transport.call("GET", f"/admin/v2/namespaces/{quote(tenant, safe='')}")
        return result

    def create_namespace(self, namespace: str) -> None:
        ns = NamespaceName.parse(namespace)
        self._transport.call("PUT", f"/admin/v2/namespaces/{quote(ns.tenant, safe='')}/{quote(ns.namespace, safe='')}")

    def topics(self, namespace: str, domain: str = "persistent") -> list[str]:
        ns = NamespaceName.parse(namespace)
        result: list[str] = self._transport.call("GET", f"/admin/v2/{domain}/{quote(ns.tenant, safe='')}/{quote(ns.namespace, safe='')}")
        return result

    def create_topic(self, topic: str) -> None:
        self._transport.call("PUT", f"/admin/v2/{topic_path(TopicName.parse(topic))}")

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        self._transport.call("PUT", f"/admin/v2/{topic_path(TopicName.parse(topic))}/partitions", partitions)

    def update_partitioned_topic(self, topic: str, partitions: int) -> None:
        self._transport.call("POST", f"/admin/v2/{topic_path(TopicName.parse(topic))}/partitions", partitions)

    def partitioned_topic_metadata(self, topic: str) -> int:
        result = self._transport.call("GET", f"/admin/v2/{topic_path(TopicName.parse(topic))}/partitions")
        return int(result["partitions"])

    def set_deduplication(self, namespace: str, enabled: bool) -> None:
        ns = NamespaceName.parse(namespace)
        self._transport.call("POST", f"/admin/v2/namespaces/{ns.tenant}/{ns.namespace}/deduplication", enabled)

    def subscriptions(self, topic: str) -> list[str]:
        result: list[str] = self._transport.call("GET", f"/admin/v2/{topic_path(TopicName.parse(topic))}/subscriptions")
        return result

    def last_message_id(self, topic: str) -> dict[str, Any]:
        result: dict[str, Any] = self._transport.call("GET", f"/admin/v2/{topic_path(TopicName.parse(topic))}/lastMessageId")
        return result

    def close(self) -> None:
        self._transport.close()
