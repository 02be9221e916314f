"""Tenants, namespaces and topics: Pulsar's admin model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from magnetar.core.clusters import GLOBAL_CLUSTER, STANDALONE, ClusterData, valid_cluster_name
from magnetar.core.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    PreconditionFailed,
    RetryableError,
    StalePolicies,
    TopicLimitReached,
)
from magnetar.core.naming import DEFAULT_TENANT, MAX_NAME_LENGTH, NamespaceName, TopicName, check_entity
from magnetar.core.policies import (
    BACKLOG_QUOTA,
    MAX_TOPICS,
    REPLICATION_CLUSTERS,
    TOPIC_LIMIT_REASON,
    TopicPolicies,
    effective_policies,
    replication_clusters,
)
from magnetar.core.ports import Clock, MetadataStore, NamespaceInfo, TenantInfo
from magnetar.core.replication import is_replicator

MAX_PARTITIONS = 1024
DEFAULT_TOPIC_PAGE = 100  # a page of list_topics_page
MAX_TOPIC_PAGE = 1000
POLICY_WRITE_ATTEMPTS = 10  # a policy edit read again after a concurrent one, this many times


class AdminService:
    def __init__(self, metadata: MetadataStore, clock: Clock,
                 on_policy_change: Callable[[], None] | None = None, cluster_name: str = STANDALONE) -> None:
        self.metadata = metadata
        self.clock = clock
        self.cluster_name = cluster_name  # this deployment's cluster (Pulsar's clusterName)
        # called after a policy changes here (this container's policy cache; others expire in 10 s)
        self.on_policy_change = on_policy_change

    def _changed(self) -> None:
        if self.on_policy_change is not None:
            self.on_policy_change()

    def list_tenants(self) -> list[str]:
        return sorted(self.metadata.list_tenants())

    def get_tenant(self, name: str) -> TenantInfo:
        tenant = self.metadata.get_tenant(check_entity("tenant", name))
        if tenant is None:
            raise NotFound(f"Tenant {name} does not exist")
        return tenant

    def create_tenant(self, name: str, admin_roles: list[str], allowed_clusters: list[str] | None = None) -> None:
        """Pulsar's createTenant; `allowed_clusters` None: this cluster only."""
        clusters = self._check_allowed_clusters(allowed_clusters)
        info = TenantInfo(check_entity("tenant", name), tuple(admin_roles), clusters)
        if not self.metadata.create_tenant(info):
            raise AlreadyExists(f"Tenant {name} already exists")

    def update_tenant(self, name: str, admin_roles: list[str], allowed_clusters: list[str] | None = None) -> None:
        """Pulsar's updateTenant: a cluster a namespace (or topic) of the tenant still replicates
        to cannot leave its allowed clusters (412)."""
        clusters = self._check_allowed_clusters(allowed_clusters)
        current = self.metadata.get_tenant(check_entity("tenant", name))
        if current is None:
            raise NotFound(f"Tenant {name} does not exist")
        for cluster in set(current.allowed_clusters) - set(clusters) - {GLOBAL_CLUSTER}:
            user = self._replicating_to(name, cluster)
            if user is not None:
                raise PreconditionFailed(f"Active namespaces: {user} replicates to cluster {cluster}")
        if not self.metadata.update_tenant(TenantInfo(name, tuple(admin_roles), clusters)):
            raise NotFound(f"Tenant {name} does not exist")
        self._changed()

    def _check_allowed_clusters(self, allowed_clusters: list[str] | None) -> tuple[str, ...]:
        """Pulsar's validateClusters: a non-empty list of existing clusters (or `global`)."""
        if allowed_clusters is None:
            allowed_clusters = [self.cluster_name]
        if not allowed_clusters or any(not c.strip() for c in allowed_clusters):
            raise PreconditionFailed("Clusters can not be empty")
        known = set(self.list_clusters()) | {GLOBAL_CLUSTER}
        missing = sorted(set(allowed_clusters) - known)
        if missing:
            raise PreconditionFailed(f"Clusters do not exist: {', '.join(missing)}")
        return tuple(dict.fromkeys(allowed_clusters))

    # --- clusters (Pulsar's /admin/v2/clusters) -------------------------------------------------
    def list_clusters(self) -> list[str]:
        """The instance's clusters. This deployment's own cluster is recorded on first use (with no
        URLs) when nothing recorded it yet: every broker belongs to a cluster that exists."""
        clusters = set(self.metadata.list_clusters())
        if self.cluster_name not in clusters:
            self.metadata.create_cluster(self.cluster_name, ClusterData())
            clusters.add(self.cluster_name)
        return sorted(clusters)

    def get_cluster(self, name: str) -> ClusterData:
        data = self.metadata.get_cluster(name)
        if data is None:
            raise NotFound(f"Cluster {name} does not exist")
        return data

    def lookup(self, topic: TopicName) -> ClusterData:
        """Pulsar's HTTP topic lookup: the cluster whose binary protocol serves `topic` — this one's.
        Every proxy task serves every topic (there is no owner broker to redirect to), so the answer
        is this cluster's own URLs; a cluster recorded without a binary protocol URL has no proxy."""
        self.get_namespace(topic.namespace_name)
        data = self.metadata.get_cluster(self.cluster_name) or ClusterData()
        if not (data.broker_service_url or data.broker_service_url_tls):
            raise NotFound(f"Cluster {self.cluster_name} serves no binary protocol: it is recorded without a "
                           "brokerServiceUrl (its proxy is not deployed)")
        return data

    def create_cluster(self, name: str, data: ClusterData) -> None:
        if not valid_cluster_name(name):
            raise PreconditionFailed(f"Cluster name is not valid: {name!r}")
        if not self.metadata.create_cluster(name, data.check()):
            raise AlreadyExists(f"Cluster {name} already exists")

    def update_cluster(self, name: str, data: ClusterData) -> None:
        if not self.metadata.update_cluster(name, data.check()):
            raise NotFound(f"Cluster {name} does not exist")

    def join_instance(self, name: str, data: ClusterData) -> None:
        """A deployment records itself as a cluster of the instance (created or updated: running it
        again changes nothing) and joins tenant `public`'s allowed clusters. Clusters `public`
        names that were never recorded (the bootstrap's `standalone` under another cluster name)
        leave its list; the tenant is written conditionally on what was read, so clusters joining
        at once all stay allowed."""
        if not self.metadata.create_cluster(name, data):
            self.metadata.update_cluster(name, data)
        for _ in range(POLICY_WRITE_ATTEMPTS):
            tenant = self.metadata.get_tenant(DEFAULT_TENANT)
            if tenant is None or name in tenant.allowed_clusters:
                return
            known = {*self.metadata.list_clusters(), GLOBAL_CLUSTER}
            allowed = (*(c for c in tenant.allowed_clusters if c in known), name)
            self.metadata.update_tenant(replace(tenant, allowed_clusters=allowed), expected=tenant)
        raise RetryableError(f"Tenant {DEFAULT_TENANT} keeps changing: cluster {name} not added; retry")

    def delete_cluster(self, name: str) -> None:
        """Pulsar's deleteCluster: refused (412) while a tenant allows the cluster or a namespace
        or topic replicates to it."""
        if self.metadata.get_cluster(name) is None:
            raise NotFound(f"Cluster {name} does not exist")
        for tenant in sorted(self.metadata.list_tenants()):
            info = self.metadata.get_tenant(tenant)
            if info is not None and name in info.allowed_clusters:
                raise PreconditionFailed(f"Cluster not empty: tenant {tenant} allows cluster {name}")
            user = self._replicating_to(tenant, name)
            if user is not None:
                raise PreconditionFailed(f"Cluster not empty: {user} replicates to cluster {name}")
        if not self.metadata.delete_cluster(name):
            raise NotFound(f"Cluster {name} does not exist")

    def _replicating_to(self, tenant: str, cluster: str) -> str | None:
        """A namespace or topic of the tenant whose own replication clusters name `cluster`."""
        for ns in sorted(self.metadata.list_namespaces(tenant)):
            name = NamespaceName(tenant, ns)
            info = self.metadata.get_namespace(name)
            if info is None:
                continue
            if cluster in (info.policies.get(REPLICATION_CLUSTERS) or ()):
                return str(name)
            topics = info.topics_with_policies
            if topics is None:  # not indexed: every topic of the namespace
                topics = frozenset(self.metadata.list_topics(name)) | frozenset(self.metadata.list_partitioned_topics(name))
            for topic in sorted(topics):
                if cluster in (self.metadata.get_topic_policies(TopicName.parse(topic)).get(REPLICATION_CLUSTERS) or ()):
                    return topic
        return None

    # --- replication clusters of namespaces and topics ----------------------------------------
    def check_replication_clusters(self, tenant: str, clusters: object) -> list[str]:
        """Pulsar's checks of a replication-cluster list: a non-empty JSON list of names (412
        when empty or naming `global`), each an existing cluster (403 "Invalid cluster id") that
        the tenant allows (403)."""
        if not isinstance(clusters, list) or not all(isinstance(c, str) for c in clusters):
            raise InvalidInput("Request body must be a JSON array of cluster names")
        if not clusters:
            raise PreconditionFailed("ClusterIds should not be null or empty")
        wanted = sorted(set(clusters))
        if GLOBAL_CLUSTER in wanted:
            raise PreconditionFailed("Cannot specify global in the list of replication clusters")
        known = set(self.list_clusters())
        allowed = self.get_tenant(tenant).allowed_clusters
        for cluster in wanted:
            if cluster not in known:
                raise Forbidden(f"Invalid cluster id: {cluster}")
            if cluster not in allowed:
                raise Forbidden(f"Cluster {cluster} is not in the list of allowed clusters list for tenant {tenant}")
        return wanted

    def set_replication_clusters(self, namespace: NamespaceName, clusters: object) -> None:
        self.get_namespace(namespace)
        self.set_policy(namespace, REPLICATION_CLUSTERS, self.check_replication_clusters(namespace.tenant, clusters))

    def namespace_replication_clusters(self, namespace: NamespaceName) -> list[str]:
        """The namespace's list; this cluster alone when it was never set (as Pulsar's default)."""
        return list(replication_clusters(self.get_namespace(namespace).policies, self.cluster_name))

    def set_topic_replication_clusters(self, topic: TopicName, clusters: object) -> None:
        self.topic_policies(topic)  # the topic exists (404) before its list is checked
        self.set_topic_policy(topic, REPLICATION_CLUSTERS, self.check_replication_clusters(topic.tenant, clusters))

    def topic_replication_clusters(self, topic: TopicName, applied: bool = False) -> list[str] | None:
        """The topic's own list (None when unset, as Pulsar); `applied`: the list in effect
        (the topic's, else its namespace's, else this cluster)."""
        own = self.topic_policies(topic).get(REPLICATION_CLUSTERS)
        if not applied:
            return list(own) if own else None
        merged = effective_policies(self.get_namespace(topic.namespace_name).policies, {REPLICATION_CLUSTERS: own} if own else {})
        return list(replication_clusters(merged, self.cluster_name))

    def remove_topic_replication_clusters(self, topic: TopicName) -> None:
        self.remove_topic_policy(topic, REPLICATION_CLUSTERS)

    def list_namespaces(self, tenant: str) -> list[str]:
        self.get_tenant(tenant)
        return sorted(f"{tenant}/{ns}" for ns in self.metadata.list_namespaces(tenant))

    def create_namespace(self, name: NamespaceName) -> None:
        self.get_tenant(name.tenant)
        if not self.metadata.create_namespace(NamespaceInfo(name)):
            raise AlreadyExists(f"Namespace {name} already exists")

    def get_namespace(self, name: NamespaceName) -> NamespaceInfo:
        info = self.metadata.get_namespace(name)
        if info is None:
            raise NotFound(f"Namespace {name} does not exist")
        return info

    def set_policy(self, namespace: NamespaceName, name: str, value: object) -> None:
        """Set one namespace policy (Pulsar's field names, e.g. deduplicationEnabled)."""
        info = self.get_namespace(namespace)
        if name == MAX_TOPICS and isinstance(value, int) and value > 0 and not info.policies.get(MAX_TOPICS):
            # topics are counted while a limit is set: count those created before it
            self.metadata.set_topic_count(namespace, self.count_topics(namespace))
        self.update_policies(namespace, lambda policies: _with(policies, name, value), info)
        self._changed()

    def count_topics(self, namespace: NamespaceName) -> int:
        """Topics as Pulsar's maxTopicsPerNamespace counts them: each plain topic, and each
        partition of a partitioned topic (created on first use or not)."""
        partitioned = {name: self.metadata.get_partitions(TopicName.parse(name)) or 0
                       for name in self.metadata.list_partitioned_topics(namespace)}
        plain = [t for t in self.metadata.list_topics(namespace)
                 if str(TopicName.parse(t).partitioned_topic) not in partitioned]
        return len(plain) + sum(partitioned.values())

    def _max_topics(self, namespace: NamespaceName) -> int:
        policies = self.get_namespace(namespace).policies
        if policies.get("deleted"):  # being deleted (core.deletion): it takes no new topic
            raise NotFound(f"Namespace {namespace} does not exist")
        return TopicPolicies.of(policies).max_topics

    def remove_policy(self, namespace: NamespaceName, name: str, quota_type: str | None = None) -> None:
        self.update_policies(namespace, lambda policies: _without(policies, name, quota_type))
        self._changed()

    def update_policies(self, namespace: NamespaceName, change: Callable[[dict[str, Any]], dict[str, Any]],
                        info: NamespaceInfo | None = None) -> None:
        """Read, change and write the namespace's policies, the write conditional on the read: an
        edit made meanwhile (through this cluster or another) is read again and kept."""
        for _ in range(POLICY_WRITE_ATTEMPTS):
            info = info or self.get_namespace(namespace)
            if self.metadata.set_namespace_policies(namespace, change(dict(info.policies)), info.policies):
                return
            info = None
        raise RetryableError(f"The policies of {namespace} keep changing; retry")

    def policy(self, namespace: NamespaceName, name: str) -> Any:
        """The namespace's value of one policy as set, None when it is not set."""
        return self.get_namespace(namespace).policies.get(name)

    # --- topic-level policies (Pulsar's topic policies: they override the namespace's) --------
    def set_topic_policy(self, topic: TopicName, name: str, value: object) -> None:
        self._update_topic_policies(topic, lambda policies: _with(policies, name, value))

    def remove_topic_policy(self, topic: TopicName, name: str, quota_type: str | None = None) -> None:
        self._update_topic_policies(topic, lambda policies: _without(policies, name, quota_type))

    def _update_topic_policies(self, topic: TopicName, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Read, change and write a topic's overrides, the write conditional on the read (an edit
        made meanwhile, through this cluster or another, is read again and kept)."""
        for _ in range(POLICY_WRITE_ATTEMPTS):
            policies = self.topic_policies(topic)
            try:
                if not self.metadata.set_topic_policies(topic, change(dict(policies)), policies):
                    raise NotFound(f"Topic {topic} not found")
            except StalePolicies:
                continue
            self._changed()
            return
        raise RetryableError(f"The policies of {topic} keep changing; retry")

    def topic_policies(self, topic: TopicName) -> dict[str, Any]:
        if topic.partition_index >= 0:
            raise InvalidInput(f"{topic} names a partition: topic policies are set on the partitioned topic")
        exists = str(topic) in self.metadata.list_topics(topic.namespace_name) or self.metadata.get_partitions(topic)
        if not exists:
            raise NotFound(f"Topic {topic} not found")
        return self.metadata.get_topic_policies(topic)

    def list_topics(self, namespace: NamespaceName, domain: str | None = None) -> list[str]:
        self.get_namespace(namespace)
        topics = self.metadata.list_topics(namespace)
        return sorted(t for t in topics if domain is None or t.startswith(f"{domain}://"))

    def list_topics_page(self, namespace: NamespaceName, domain: str, search: str = "", start_after: str = "",
                         limit: int = DEFAULT_TOPIC_PAGE) -> list[str]:
        """One page of the namespace's topics of `domain`, sorted by name: those after
        `start_after` (a full name, or a topic's local name) whose local name holds `search`
        (case-insensitive), at most `limit`. A console pages through a namespace of any size
        this way: the next page starts after the last name of this one."""
        if not 1 <= limit <= MAX_TOPIC_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_TOPIC_PAGE}")
        if len(search) > MAX_NAME_LENGTH or len(start_after) > 3 * MAX_NAME_LENGTH:
            raise InvalidInput("search and startAfter are at most a topic name long")
        self.get_namespace(namespace)
        prefix = f"{domain}://{namespace}/"
        after = start_after if "://" in start_after or not start_after else prefix + start_after
        return self.metadata.list_topics_page(namespace, prefix, after, limit, search)

    def create_topic(self, topic: TopicName) -> None:
        max_topics = self._max_topics(topic.namespace_name)
        partitioned = self.metadata.get_partitions(topic.partitioned_topic) if topic.partition_index >= 0 else None
        if partitioned is not None:
            max_topics = 0  # a partition: counted with its partitioned topic
        try:
            created = self.metadata.create_topic(topic, self.clock.now_ms(), max_topics)
        except TopicLimitReached:
            raise TopicLimitReached(TOPIC_LIMIT_REASON) from None
        if not created:
            raise AlreadyExists(f"Topic {topic} already exists")

    def create_partitioned_topic(self, topic: TopicName, partitions: int) -> None:
        if topic.partition_index >= 0:
            raise InvalidInput(f"{topic} names a partition; give the partitioned topic's name")
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidInput(f"Number of partitions must be between 1 and {MAX_PARTITIONS}")
        max_topics = self._max_topics(topic.namespace_name)
        if max_topics and partitions > max_topics:
            raise TopicLimitReached(TOPIC_LIMIT_REASON)
        if not self.metadata.create_partitioned_topic(topic, partitions, max_topics):
            raise AlreadyExists(f"Topic {topic} already exists")

    def update_partitioned_topic(self, topic: TopicName, partitions: int) -> None:
        current = self.metadata.get_partitions(topic)
        if current is None:
            raise NotFound(f"Partitioned topic {topic} does not exist")
        if not current < partitions <= MAX_PARTITIONS:
            raise InvalidInput(f"Partitions can only grow: {topic} has {current}, asked for {partitions}")
        max_topics = self._max_topics(topic.namespace_name)
        if not self.metadata.update_partitions(topic, partitions, max_topics, current):
            raise Conflict(f"Partitions of {topic} changed meanwhile; retry")

    def partitions(self, topic: TopicName) -> int:
        """Pulsar's partitioned-topic metadata: 0 for a topic that is not partitioned."""
        return self.metadata.get_partitions(topic) or 0

    def list_partitioned_topics(self, namespace: NamespaceName) -> list[str]:
        self.get_namespace(namespace)
        return sorted(self.metadata.list_partitioned_topics(namespace))

    def list_subscriptions(self, topic: TopicName) -> list[str]:
        if str(topic) not in self.metadata.list_topics(topic.namespace_name):
            raise NotFound(f"Topic {topic} not found")
        # replicators' cursors are not subscriptions (Pulsar lists them under stats' replication)
        return sorted(s for s in self.metadata.list_subscriptions(topic) if not is_replicator(s))


def _with(policies: dict[str, Any], name: str, value: object) -> dict[str, Any]:
    if name == BACKLOG_QUOTA and isinstance(value, dict):  # one quota type at a time, as Pulsar's map
        return {**policies, name: {**(policies.get(name) or {}), **value}}
    return {**policies, name: value}


def _without(policies: dict[str, Any], name: str, quota_type: str | None) -> dict[str, Any]:
    if name == BACKLOG_QUOTA and quota_type:
        quotas = {k: v for k, v in (policies.get(name) or {}).items() if k != quota_type}
        return {**policies, name: quotas} if quotas else {k: v for k, v in policies.items() if k != name}
    return {k: v for k, v in policies.items() if k != name}
