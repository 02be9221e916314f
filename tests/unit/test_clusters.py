"""Clusters and replication clusters on the in-memory ports: Pulsar's rules and status codes."""

from __future__ import annotations

import pytest

from magnetar.adapters.memory import (
    ManualClock,
    MemoryJournal,
    MemoryMetadataStore,
    MemorySegmentStore,
    memory_broker,
)
from magnetar.core.broker import Broker
from magnetar.core.clusters import ClusterData
from magnetar.core.errors import AlreadyExists, Forbidden, InvalidInput, NotFound, PreconditionFailed
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.policies import REPLICATION_CLUSTERS, effective_policies, replication_clusters
from magnetar.core.ports import NamespaceInfo, TenantInfo

NS = NamespaceName("public", "default")


@pytest.fixture
def broker() -> Broker:
    b = memory_broker()
    b.admin.create_cluster("east", ClusterData(service_url="http://east:8080"))
    b.admin.create_cluster("west", ClusterData(broker_service_url="pulsar://west:6650"))
    return b


def test_cluster_data_round_trips_pulsars_json_and_ignores_other_fields() -> None:
    data = ClusterData("http://a:8080", "https://a:8443", "pulsar://a:6650", "pulsar+ssl://a:6651", "p", "k=v")
    json = data.to_json()
    assert json == {"serviceUrl": "http://a:8080", "serviceUrlTls": "https://a:8443",
                    "brokerServiceUrl": "pulsar://a:6650", "brokerServiceUrlTls": "pulsar+ssl://a:6651",
                    "authenticationPlugin": "p", "authenticationParameters": "k=v"}
    assert ClusterData.from_json({**json, "proxyServiceUrl": "pulsar://proxy:6650"}) == data
    assert ClusterData.from_json({"serviceUrl": None}) == ClusterData()
    with pytest.raises(InvalidInput):
        ClusterData.from_json({"serviceUrl": 8080})


@pytest.mark.parametrize("field, value", [("service_url", "https://a:8080"), ("service_url_tls", "http://a"),
                                          ("broker_service_url", "http://a:6650"),
                                          ("broker_service_url_tls", "pulsar://a:6651"), ("service_url", "http://")])
def test_urls_with_the_wrong_scheme_or_no_host_are_refused(field: str, value: str) -> None:
    with pytest.raises(InvalidInput, match="Illegal"):
        ClusterData(**{field: value}).check()


def test_create_get_update_list_delete(broker: Broker) -> None:
    admin = broker.admin
    assert admin.list_clusters() == ["east", "standalone", "west"]  # this cluster is recorded on first use
    assert admin.get_cluster("east").service_url == "http://east:8080"
    with pytest.raises(AlreadyExists):
        admin.create_cluster("east", ClusterData())
    admin.update_cluster("east", ClusterData(service_url="http://east2:8080"))
    assert admin.get_cluster("east") == ClusterData(service_url="http://east2:8080")
    with pytest.raises(NotFound):
        admin.update_cluster("north", ClusterData())
    admin.delete_cluster("east")
    with pytest.raises(NotFound):
        admin.get_cluster("east")
    with pytest.raises(NotFound):
        admin.delete_cluster("east")


@pytest.mark.parametrize("name", ["a/b", "", "sp ace", "x" * 256, "bad#name"])
def test_invalid_cluster_names_are_refused_with_412(broker: Broker, name: str) -> None:
    with pytest.raises(PreconditionFailed, match="Cluster name is not valid"):
        broker.admin.create_cluster(name, ClusterData())


def test_tenants_allow_existing_clusters_only(broker: Broker) -> None:
    admin = broker.admin
    with pytest.raises(PreconditionFailed, match="Clusters do not exist: north"):
        admin.create_tenant("acme", [], ["east", "north"])
    with pytest.raises(PreconditionFailed, match="Clusters can not be empty"):
        admin.create_tenant("acme", [], [])
    with pytest.raises(PreconditionFailed, match="Clusters can not be empty"):
        admin.create_tenant("acme", [], [" "])
    admin.create_tenant("acme", [], None)  # this cluster only
    assert admin.get_tenant("acme").allowed_clusters == ("standalone",)
    admin.update_tenant("acme", [], ["east", "global"])
    assert admin.get_tenant("acme").allowed_clusters == ("east", "global")
    with pytest.raises(PreconditionFailed, match="Clusters do not exist"):
        admin.update_tenant("acme", [], ["north"])


def test_namespace_replication_clusters_rules(broker: Broker) -> None:
    admin = broker.admin
    assert admin.namespace_replication_clusters(NS) == ["standalone"]  # never set: this cluster
    with pytest.raises(Forbidden, match="not in the list of allowed clusters"):
        admin.set_replication_clusters(NS, ["east"])
    admin.update_tenant("public", [], ["standalone", "east", "west"])
    with pytest.raises(Forbidden, match="Invalid cluster id: north"):
        admin.set_replication_clusters(NS, ["east", "north"])
    with pytest.raises(PreconditionFailed, match="empty"):
        admin.set_replication_clusters(NS, [])
    with pytest.raises(PreconditionFailed, match="global"):
        admin.set_replication_clusters(NS, ["global"])
    with pytest.raises(InvalidInput):
        admin.set_replication_clusters(NS, "east")
    with pytest.raises(InvalidInput):
        admin.set_replication_clusters(NS, [1])
    admin.set_replication_clusters(NS, ["west", "east", "west"])
    assert admin.namespace_replication_clusters(NS) == ["east", "west"]
    with pytest.raises(NotFound):
        admin.set_replication_clusters(NamespaceName("public", "ghost"), ["east"])


def test_a_cluster_in_use_is_neither_deleted_nor_removed_from_its_tenant(broker: Broker) -> None:
    admin = broker.admin
    admin.update_tenant("public", [], ["standalone", "east", "west"])
    admin.set_replication_clusters(NS, ["standalone", "east"])
    with pytest.raises(PreconditionFailed, match="Cluster not empty: tenant public allows cluster east"):
        admin.delete_cluster("east")
    with pytest.raises(PreconditionFailed, match="public/default replicates to cluster east"):
        admin.update_tenant("public", [], ["standalone", "west"])
    admin.update_tenant("public", [], ["standalone", "east"])  # west is not used: it may leave
    admin.set_replication_clusters(NS, ["standalone"])
    admin.update_tenant("public", [], ["standalone"])
    admin.delete_cluster("east")
    assert "east" not in admin.list_clusters()


def test_topic_replication_overrides_its_namespace(broker: Broker) -> None:
    admin = broker.admin
    topic = TopicName.parse("persistent://public/default/orders")
    with pytest.raises(NotFound):
        admin.set_topic_replication_clusters(topic, ["standalone"])
    admin.create_topic(topic)
    admin.update_tenant("public", [], ["standalone", "east", "west"])
    assert admin.topic_replication_clusters(topic) is None
    assert admin.topic_replication_clusters(topic, applied=True) == ["standalone"]
    admin.set_replication_clusters(NS, ["standalone", "east"])
    assert admin.topic_replication_clusters(topic, applied=True) == ["east", "standalone"]
    admin.set_topic_replication_clusters(topic, ["west"])
    assert admin.topic_replication_clusters(topic) == ["west"]
    assert admin.topic_replication_clusters(topic, applied=True) == ["west"]
    with pytest.raises(Forbidden):
        admin.set_topic_replication_clusters(topic, ["north"])
    # the topic's list keeps west in use: the tenant cannot drop it, nor can it be deleted
    with pytest.raises(PreconditionFailed, match="orders replicates to cluster west"):
        admin.update_tenant("public", [], ["standalone", "east"])
    merged = effective_policies(admin.get_namespace(NS).policies, broker.metadata.get_topic_policies(topic))
    assert replication_clusters(merged, "standalone") == ("west",)
    admin.remove_topic_replication_clusters(topic)
    assert admin.topic_replication_clusters(topic) is None
    merged = effective_policies(admin.get_namespace(NS).policies, broker.metadata.get_topic_policies(topic))
    assert replication_clusters(merged, "standalone") == ("east", "standalone")


def test_the_effective_rule() -> None:
    assert replication_clusters({}, "here") == ("here",)
    assert replication_clusters({REPLICATION_CLUSTERS: None}, "here") == ("here",)
    assert replication_clusters({REPLICATION_CLUSTERS: []}, "here") == ("here",)
    assert replication_clusters(effective_policies({REPLICATION_CLUSTERS: ["a", "b"]}, {}), "here") == ("a", "b")
    assert replication_clusters(effective_policies({REPLICATION_CLUSTERS: ["a", "b"]}, {REPLICATION_CLUSTERS: ["c"]}),
                                "here") == ("c",)


def test_a_broker_knows_its_cluster_name() -> None:
    metadata = MemoryMetadataStore()
    metadata.create_tenant(TenantInfo("public", (), ("east",)))
    metadata.create_namespace(NamespaceInfo(NS))
    clock = ManualClock()
    broker = Broker(metadata, MemorySegmentStore(), MemoryJournal(clock), clock, cluster_name="east")
    assert broker.admin.namespace_replication_clusters(NS) == ["east"]
    assert broker.admin.list_clusters() == ["east"]


def test_clusters_joining_the_instance_all_stay_allowed_by_public() -> None:
    from magnetar.adapters.memory import MemoryMetadataStore
    from magnetar.core.admin import AdminService
    from magnetar.core.clusters import ClusterData
    from magnetar.core.ports import SystemClock, TenantInfo

    store = MemoryMetadataStore()
    store.create_tenant(TenantInfo("public", (), ("standalone",)))  # the bootstrap's, before any cluster records itself
    for name in ("east", "west", "east"):  # a restart joins again: nothing changes
        AdminService(store, SystemClock(), cluster_name=name).join_instance(name, ClusterData(f"http://{name}:8080"))
    tenant = store.get_tenant("public")
    assert tenant is not None and tenant.allowed_clusters == ("east", "west")  # the unrecorded standalone left
    assert sorted(store.list_clusters()) == ["east", "west"]
    assert store.get_cluster("west") == ClusterData("http://west:8080")


def test_a_lookup_answers_this_clusters_own_urls_once_it_has_a_binary_protocol(broker: Broker) -> None:
    topic = TopicName.parse("persistent://public/default/t")
    with pytest.raises(NotFound, match="serves no binary protocol"):  # `standalone`, this one, not recorded
        broker.admin.lookup(topic)
    broker.admin.create_cluster("standalone", ClusterData(service_url="http://me:8080"))
    with pytest.raises(NotFound, match="serves no binary protocol"):  # recorded without a proxy
        broker.admin.lookup(topic)
    data = ClusterData(service_url="http://me:8080", broker_service_url_tls="pulsar+ssl://me:6651")
    broker.admin.update_cluster("standalone", data)
    assert broker.admin.lookup(topic) == data
    with pytest.raises(NotFound, match="Namespace public/nowhere does not exist"):
        broker.admin.lookup(TopicName.parse("persistent://public/nowhere/t"))
