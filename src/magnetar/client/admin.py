"""A small admin client for Pulsar's admin v2 REST paths (tenants, namespaces, topics, policies, permissions)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from magnetar.client import exceptions
from magnetar.client.auth import Authentication
from magnetar.client.transport import Transport, topic_path
from magnetar.core.naming import NamespaceName, TopicName


class AdminClient:
    """`authentication`: as `magnetar.Client`'s (`AuthenticationToken`, `AuthenticationAwsIam`).
    `unreachable_after_s`: a service that refuses connections before it has answered anything
    fails a request after this long (None: retried until the request's deadline)."""

    def __init__(self, service_url: str, authentication: Authentication | None = None, *,
                 unreachable_after_s: float | None = None) -> None:
        self._transport = Transport(service_url, authentication=authentication,
                                    unreachable_after_s=unreachable_after_s)

    def health(self) -> str:
        return str(self._transport.call("GET", "/admin/v2/brokers/health"))

    def tenants(self) -> list[str]:
        result: list[str] = self._transport.call("GET", "/admin/v2/tenants")
        return result

    @staticmethod
    def _tenant_body(admin_roles: list[str] | None, allowed_clusters: list[str] | None) -> dict[str, Any]:
        """Pulsar's TenantInfo; no allowed clusters: the broker's own cluster."""
        body: dict[str, Any] = {"adminRoles": admin_roles or []}
        if allowed_clusters:
            body["allowedClusters"] = allowed_clusters
        return body

    def create_tenant(self, tenant: str, admin_roles: list[str] | None = None, allowed_clusters: list[str] | None = None) -> None:
        self._transport.call("PUT", f"/admin/v2/tenants/{quote(tenant, safe='')}",
                             self._tenant_body(admin_roles, allowed_clusters))

    def update_tenant(self, tenant: str, admin_roles: list[str] | None = None,
                      allowed_clusters: list[str] | None = None) -> None:
        """Replace the tenant's admin roles and allowed clusters (Pulsar's `POST /tenants/{t}`)."""
        self._transport.call("POST", f"/admin/v2/tenants/{quote(tenant, safe='')}",
                             self._tenant_body(admin_roles, allowed_clusters))

    def get_tenant(self, tenant: str) -> dict[str, Any]:
        """The tenant's info: `{"adminRoles": [...], "allowedClusters": [...]}`."""
        result: dict[str, Any] = self._transport.call("GET", f"/admin/v2/tenants/{quote(tenant, safe='')}")
        return result

    # --- clusters of the instance (Pulsar's /admin/v2/clusters, ClusterData JSON) ---------------
    def clusters(self) -> list[str]:
        result: list[str] = self._transport.call("GET", "/admin/v2/clusters")
        return result

    def get_cluster(self, cluster: str) -> dict[str, Any]:
        """Pulsar's ClusterData: serviceUrl, serviceUrlTls, brokerServiceUrl, brokerServiceUrlTls,
        authenticationPlugin, authenticationParameters."""
        result: dict[str, Any] = self._transport.call("GET", f"/admin/v2/clusters/{quote(cluster, safe='')}")
        return result

    def create_cluster(self, cluster: str, data: dict[str, Any]) -> None:
        """`data`: Pulsar's ClusterData JSON (e.g. {"serviceUrl": "http://host:8080"})."""
        self._transport.call("PUT", f"/admin/v2/clusters/{quote(cluster, safe='')}", data)

    def update_cluster(self, cluster: str, data: dict[str, Any]) -> None:
        self._transport.call("POST", f"/admin/v2/clusters/{quote(cluster, safe='')}", data)

    def delete_cluster(self, cluster: str) -> None:
        self._transport.call("DELETE", f"/admin/v2/clusters/{quote(cluster, safe='')}")

    def set_namespace_replication_clusters(self, namespace: str, clusters: list[str]) -> None:
        self._transport.call("POST", f"{self._namespace_path(namespace)}/replication", list(clusters))

    def get_namespace_replication_clusters(self, namespace: str) -> list[str]:
        result: list[str] = self._transport.call("GET", f"{self._namespace_path(namespace)}/replication")
        return result

    def set_replication_clusters(self, topic: str, clusters: list[str]) -> None:
        """The topic's own replication clusters (over its namespace's)."""
        self._transport.call("POST", f"/admin/v2/{topic_path(TopicName.parse(topic))}/replication", list(clusters))

    def get_replication_clusters(self, topic: str, applied: bool = False) -> list[str] | None:
        """The topic's own list (None when unset); `applied`: the list in effect."""
        path = f"/admin/v2/{topic_path(TopicName.parse(topic))}/replication?applied={str(applied).lower()}"
        result: list[str] | None = self._transport.call("GET", path)
        return result

    def remove_replication_clusters(self, topic: str) -> None:
        self._transport.call("DELETE", f"/admin/v2/{topic_path(TopicName.parse(topic))}/replication")

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

    def delete_topic(self, topic: str, force: bool = False) -> None:
        """Pulsar's topics().delete: a non-partitioned topic (or one partition); TopicNotFound when
        absent, a 412 refusal while producers or consumers are active, unless `force`."""
        self._transport.call("DELETE", f"/admin/v2/{topic_path(TopicName.parse(topic))}?force={str(force).lower()}")

    def delete_partitioned_topic(self, topic: str, force: bool = False) -> None:
        """Pulsar's topics().deletePartitionedTopic: every partition and the partitioned metadata."""
        path = f"/admin/v2/{topic_path(TopicName.parse(topic))}/partitions?force={str(force).lower()}"
        self._transport.call("DELETE", path)

    def delete_namespace(self, namespace: str, force: bool = False) -> None:
        """Pulsar's namespaces().deleteNamespace: refused while it has topics, unless `force`."""
        self._transport.call("DELETE", f"{self._namespace_path(namespace)}?force={str(force).lower()}")

    def delete_tenant(self, tenant: str, force: bool = False) -> None:
        """Pulsar's tenants().deleteTenant (superusers): refused while it has namespaces, unless `force`."""
        self._transport.call("DELETE", f"/admin/v2/tenants/{quote(tenant, safe='')}?force={str(force).lower()}")

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        self._transport.call("PUT", f"/admin/v2/{topic_path(TopicName.parse(topic))}/partitions", partitions)

    def update_partitioned_topic(self, topic: str, partitions: int) -> None:
        self._transport.call("POST", f"/admin/v2/{topic_path(TopicName.parse(topic))}/partitions", partitions)

    def partitioned_topic_metadata(self, topic: str) -> int:
        result = self._transport.call("GET", f"/admin/v2/{topic_path(TopicName.parse(topic))}/partitions")
        return int(result["partitions"])

    def lookup_topic(self, topic: str) -> str:
        """The binary protocol URL the topic is served at (Pulsar's `lookups().lookupTopic`): this
        cluster's proxy, `pulsar://...` (or `pulsar+ssl://...` when it serves TLS only)."""
        result = self._transport.call("GET", f"/lookup/v2/topic/{topic_path(TopicName.parse(topic))}")
        return str(result["brokerUrl"] or result["brokerUrlTls"])

    def set_deduplication(self, namespace: str, enabled: bool) -> None:
        ns = NamespaceName.parse(namespace)
        self._transport.call("POST", f"/admin/v2/namespaces/{ns.tenant}/{ns.namespace}/deduplication", enabled)

    def subscriptions(self, topic: str) -> list[str]:
        result: list[str] = self._transport.call("GET", f"/admin/v2/{topic_path(TopicName.parse(topic))}/subscriptions")
        return result

    def last_message_id(self, topic: str) -> dict[str, Any]:
        result: dict[str, Any] = self._transport.call("GET", f"/admin/v2/{topic_path(TopicName.parse(topic))}/lastMessageId")
        return result

    # --- policies: namespace level and topic-level overrides (Pulsar's paths) -------------------
    def _policy_path(self, target: str, name: str) -> str:
        """A namespace (`tenant/ns`) or a topic (anything with `://`, or a short topic name with no `/`)."""
        if "://" in target or "/" not in target:
            return f"/admin/v2/{topic_path(TopicName.parse(target))}/{name}"
        ns = NamespaceName.parse(target)
        return f"/admin/v2/namespaces/{quote(ns.tenant, safe='')}/{quote(ns.namespace, safe='')}/{name}"

    def set_policy(self, target: str, name: str, value: Any, **query: str) -> None:
        """POST one policy, e.g. set_policy("public/default", "messageTTL", 60)."""
        suffix = "?" + "&".join(f"{k}={quote(v)}" for k, v in query.items()) if query else ""
        self._transport.call("POST", self._policy_path(target, name) + suffix, value)

    def get_policy(self, target: str, name: str) -> Any:
        return self._transport.call("GET", self._policy_path(target, name))

    def remove_policy(self, target: str, name: str, **query: str) -> None:
        suffix = "?" + "&".join(f"{k}={quote(v)}" for k, v in query.items()) if query else ""
        self._transport.call("DELETE", self._policy_path(target, name) + suffix)

    def set_retention(self, target: str, retention_time_minutes: int, retention_size_mb: int) -> None:
        body = {"retentionTimeInMinutes": retention_time_minutes, "retentionSizeInMB": retention_size_mb}
        self.set_policy(target, "retention", body)

    def get_retention(self, target: str) -> dict[str, int] | None:
        result: dict[str, int] | None = self.get_policy(target, "retention")
        return result

    def set_message_ttl(self, target: str, seconds: int) -> None:
        self.set_policy(target, "messageTTL", seconds)

    def get_message_ttl(self, target: str) -> int | None:
        result = self.get_policy(target, "messageTTL")
        return None if result is None else int(result)

    def set_backlog_quota(self, target: str, limit_size: int = -1, limit_time: int = -1,
                          policy: str = "producer_request_hold", quota_type: str = "destination_storage") -> None:
        body = {"limitSize": limit_size, "limitTime": limit_time, "policy": policy}
        self.set_policy(target, "backlogQuota", body, backlogQuotaType=quota_type)

    def get_backlog_quotas(self, target: str) -> dict[str, Any]:
        result: dict[str, Any] = self.get_policy(target, "backlogQuotaMap") or {}
        return result

    def remove_backlog_quota(self, target: str, quota_type: str = "destination_storage") -> None:
        self.remove_policy(target, "backlogQuota", backlogQuotaType=quota_type)

    def get_deduplication(self, namespace: str) -> bool:
        return bool(self.get_policy(namespace, "deduplication"))

    # --- permissions (Pulsar's paths and bodies) ---------------------------------------------------
    @staticmethod
    def _namespace_path(namespace: str) -> str:
        ns = NamespaceName.parse(namespace)
        return f"/admin/v2/namespaces/{quote(ns.tenant, safe='')}/{quote(ns.namespace, safe='')}"

    def grant_permission_on_namespace(self, namespace: str, role: str, actions: list[str] | set[str]) -> None:
        """Let `role` do `actions` ("produce", "consume", ...) on every topic of the namespace."""
        path = f"{self._namespace_path(namespace)}/permissions/{quote(role, safe='')}"
        self._transport.call("POST", path, sorted(actions))

    def revoke_permission_on_namespace(self, namespace: str, role: str) -> None:
        self._transport.call("DELETE", f"{self._namespace_path(namespace)}/permissions/{quote(role, safe='')}")

    def namespace_permissions(self, namespace: str) -> dict[str, list[str]]:
        """`{role: [actions]}` of the namespace's grants."""
        result: dict[str, list[str]] = self._transport.call("GET", f"{self._namespace_path(namespace)}/permissions") or {}
        return result

    def grant_permission_on_topic(self, topic: str, role: str, actions: list[str] | set[str]) -> None:
        """Let `role` do `actions` on this topic (a partitioned topic's grant covers its partitions)."""
        path = f"/admin/v2/{topic_path(TopicName.parse(topic))}/permissions/{quote(role, safe='')}"
        self._transport.call("POST", path, sorted(actions))

    def revoke_permission_on_topic(self, topic: str, role: str) -> None:
        path = f"/admin/v2/{topic_path(TopicName.parse(topic))}/permissions/{quote(role, safe='')}"
        self._transport.call("DELETE", path)

    def topic_permissions(self, topic: str) -> dict[str, list[str]]:
        """`{role: [actions]}` that apply to the topic (its namespace's grants and its own)."""
        path = f"/admin/v2/{topic_path(TopicName.parse(topic))}/permissions"
        result: dict[str, list[str]] = self._transport.call("GET", path) or {}
        return result

    def grant_permission_on_subscription(self, namespace: str, subscription: str, roles: list[str] | set[str]) -> None:
        """Only `roles` (among those allowed to consume) may consume on `subscription` in the namespace."""
        path = f"{self._namespace_path(namespace)}/permissions/subscription/{quote(subscription, safe='')}"
        self._transport.call("POST", path, sorted(roles))

    def revoke_permission_on_subscription(self, namespace: str, subscription: str, role: str) -> None:
        path = f"{self._namespace_path(namespace)}/permissions/{quote(subscription, safe='')}/{quote(role, safe='')}"
        self._transport.call("DELETE", path)

    def subscription_permissions(self, namespace: str) -> dict[str, list[str]]:
        """`{subscription: [roles]}` of the namespace's subscription restrictions."""
        path = f"{self._namespace_path(namespace)}/permissions/subscription"
        result: dict[str, list[str]] = self._transport.call("GET", path) or {}
        return result

    # --- stats (Pulsar's TopicStats, PersistentTopicInternalStats, PartitionedTopicStats JSON) -----
    def topic_stats(self, topic: str) -> dict[str, Any]:
        result: dict[str, Any] = self._transport.call("GET", f"/admin/v2/{topic_path(TopicName.parse(topic))}/stats")
        return result

    def topic_internal_stats(self, topic: str) -> dict[str, Any]:
        path = f"/admin/v2/{topic_path(TopicName.parse(topic))}/internalStats"
        result: dict[str, Any] = self._transport.call("GET", path)
        return result

    def partitioned_topic_stats(self, topic: str, per_partition: bool = True) -> dict[str, Any]:
        path = f"/admin/v2/{topic_path(TopicName.parse(topic))}/partitioned-stats?perPartition={str(per_partition).lower()}"
        result: dict[str, Any] = self._transport.call("GET", path)
        return result

    # --- compaction (pulsar-admin topics compact / compaction-status) -----------------------------
    def trigger_compaction(self, topic: str) -> None:
        self._transport.call("PUT", f"/admin/v2/{topic_path(TopicName.parse(topic))}/compaction")

    def compaction_status(self, topic: str) -> dict[str, Any]:
        """Pulsar's LongRunningProcessStatus: {"status": NOT_RUN|RUNNING|SUCCESS|ERROR, "lastError"?}."""
        result: dict[str, Any] = self._transport.call("GET", f"/admin/v2/{topic_path(TopicName.parse(topic))}/compaction")
        return result

    # --- schemas (Pulsar's schema registry paths and bodies) ---------------------------------------
    def _schema_path(self, topic: str, suffix: str) -> str:
        t = TopicName.parse(topic).partitioned_topic
        return f"/admin/v2/schemas/{quote(t.tenant, safe='')}/{quote(t.namespace, safe='')}/{quote(t.local_name, safe='')}/{suffix}"

    def get_schema(self, topic: str, version: int | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self._transport.call(
            "GET", self._schema_path(topic, "schema" if version is None else f"schema/{version}"))
        return result

    def get_all_schemas(self, topic: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._transport.call("GET", self._schema_path(topic, "schemas"))[
            "getSchemaResponses"]
        return result

    def upload_schema(self, topic: str, schema_type: str, schema: str = "",
                      properties: dict[str, str] | None = None) -> int:
        """Post a schema (Pulsar's PostSchemaPayload); the version it has."""
        body = {"type": schema_type, "schema": schema, "properties": properties or {}}
        return int(self._transport.call("POST", self._schema_path(topic, "schema"), body)["version"]["version"])

    def delete_schema(self, topic: str) -> int:
        return int(self._transport.call("DELETE", self._schema_path(topic, "schema"))["version"])

    def test_schema_compatibility(self, topic: str, schema_type: str, schema: str = "",
                                  properties: dict[str, str] | None = None) -> dict[str, Any]:
        body = {"type": schema_type, "schema": schema, "properties": properties or {}}
        result: dict[str, Any] = self._transport.call("POST", self._schema_path(topic, "compatibility"), body)
        return result

    def set_schema_compatibility_strategy(self, namespace: str, strategy: str) -> None:
        self._transport.call("PUT", f"{self._namespace_path(namespace)}/schemaCompatibilityStrategy", strategy)

    def get_schema_compatibility_strategy(self, namespace: str) -> str:
        return str(self._transport.call("GET", f"{self._namespace_path(namespace)}/schemaCompatibilityStrategy"))

    # --- Pulsar Functions (Pulsar's /admin/v3/functions, FunctionConfig JSON) ---------------------
    @staticmethod
    def _function_path(tenant: str, namespace: str, name: str | None = None) -> str:
        path = f"/admin/v3/functions/{quote(tenant, safe='')}/{quote(namespace, safe='')}"
        return path if name is None else f"{path}/{quote(name, safe='')}"

    @staticmethod
    def _function_form(config: dict[str, Any], code: bytes | None,
                       filename: str | None) -> tuple[dict[str, str], dict[str, tuple[str | None, bytes]]]:
        from magnetar.core.functions.registry import MAX_CODE_BYTES

        if code is not None and len(code) > MAX_CODE_BYTES:
            raise exceptions.MessageTooBig(f"Function code of {len(code)} bytes exceeds {MAX_CODE_BYTES} bytes "
                                           "(API Gateway and Lambda's request limits)", 413)
        files: dict[str, tuple[str | None, bytes]] = {"functionConfig": (None, json.dumps(config).encode())}
        if code is not None:
            files["data"] = (filename or config.get("py") or "function.py", code)
        return {}, files

    def create_function(self, config: dict[str, Any], code: bytes | None = None, filename: str | None = None) -> None:
        """Register a function: `config` is Pulsar's FunctionConfig JSON (tenant, namespace, name,
        className, inputs, output, ...), `code` the .py file's (or .zip's) bytes."""
        form, files = self._function_form(config, code, filename)
        path = self._function_path(config.get("tenant", "public"), config.get("namespace", "default"), config["name"])
        self._transport.call("POST", path, form=form, files=files)

    def update_function(self, config: dict[str, Any], code: bytes | None = None, filename: str | None = None) -> None:
        """Update a function: the FunctionConfig fields given replace the stored ones; new code (optional)."""
        form, files = self._function_form(config, code, filename)
        path = self._function_path(config.get("tenant", "public"), config.get("namespace", "default"), config["name"])
        self._transport.call("PUT", path, form=form, files=files)

    def get_function(self, tenant: str, namespace: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._transport.call("GET", self._function_path(tenant, namespace, name))
        return result

    def function_record(self, tenant: str, namespace: str, name: str) -> dict[str, Any]:
        """Magnetar's registry record: functionConfig, version, state, code location."""
        path = f"/magnetar/v1/functions/{quote(tenant, safe='')}/{quote(namespace, safe='')}/{quote(name, safe='')}"
        result: dict[str, Any] = self._transport.call("GET", path)
        return result

    def delete_function(self, tenant: str, namespace: str, name: str) -> None:
        self._transport.call("DELETE", self._function_path(tenant, namespace, name))

    def functions(self, tenant: str, namespace: str) -> list[str]:
        result: list[str] = self._transport.call("GET", self._function_path(tenant, namespace))
        return result

    def function_status(self, tenant: str, namespace: str, name: str) -> dict[str, Any]:
        """Pulsar's FunctionStatus (numInstances, numRunning, instances)."""
        result: dict[str, Any] = self._transport.call("GET", f"{self._function_path(tenant, namespace, name)}/status")
        return result

    def function_stats(self, tenant: str, namespace: str, name: str) -> dict[str, Any]:
        """Pulsar's FunctionStats (receivedTotal, processedSuccessfullyTotal, ...)."""
        result: dict[str, Any] = self._transport.call("GET", f"{self._function_path(tenant, namespace, name)}/stats")
        return result

    def start_function(self, tenant: str, namespace: str, name: str) -> None:
        self._transport.call("POST", f"{self._function_path(tenant, namespace, name)}/start")

    def stop_function(self, tenant: str, namespace: str, name: str) -> None:
        self._transport.call("POST", f"{self._function_path(tenant, namespace, name)}/stop")

    def restart_function(self, tenant: str, namespace: str, name: str) -> None:
        self._transport.call("POST", f"{self._function_path(tenant, namespace, name)}/restart")

    def trigger_function(self, tenant: str, namespace: str, name: str, value: str | bytes,
                         topic: str | None = None, timeout_ms: int | None = None) -> str | None:
        """Publish `value` to the function's input; the output's next message (None: no output topic)."""
        files: dict[str, tuple[str | None, bytes]] = {"data": (None, value.encode() if isinstance(value, str) else value)}
        if topic:
            files["topic"] = (None, topic.encode())
        path = f"{self._function_path(tenant, namespace, name)}/trigger"
        if timeout_ms is not None:
            path += f"?timeoutMs={timeout_ms}"
        result = self._transport.call("POST", path, files=files, deadline_s=(timeout_ms or 10_000) / 1000 + 20)
        return None if result is None else str(result)

    def get_function_state(self, tenant: str, namespace: str, name: str, key: str) -> dict[str, Any]:
        """Pulsar's FunctionState: key, stringValue | byteValue (base64) | numberValue, version."""
        path = f"{self._function_path(tenant, namespace, name)}/state/{quote(key, safe='')}"
        result: dict[str, Any] = self._transport.call("GET", path)
        return result

    def put_function_state(self, tenant: str, namespace: str, name: str, state: dict[str, Any]) -> None:
        """`state`: Pulsar's FunctionState, e.g. {"key": "k", "stringValue": "v"} (or numberValue)."""
        path = f"{self._function_path(tenant, namespace, name)}/state/{quote(str(state['key']), safe='')}"
        self._transport.call("POST", path, state)

    def increment_function_counter(self, tenant: str, namespace: str, name: str, key: str, amount: int = 1) -> int:
        path = (f"/magnetar/v1/functions/{quote(tenant, safe='')}/{quote(namespace, safe='')}/{quote(name, safe='')}"
                f"/counters/{quote(key, safe='')}")
        return int(self._transport.call("POST", path, {"amount": amount})["value"])

    def delete_function_counter(self, tenant: str, namespace: str, name: str, key: str) -> None:
        path = (f"/magnetar/v1/functions/{quote(tenant, safe='')}/{quote(namespace, safe='')}/{quote(name, safe='')}"
                f"/counters/{quote(key, safe='')}")
        self._transport.call("DELETE", path)

    def close(self) -> None:
        self._transport.close()
