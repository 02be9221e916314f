"""Clusters, tenants' allowed clusters and replication clusters through the HTTP API, the SDK's
admin client and the CLI, against the session's local cluster (which registered itself at start)."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from typer.testing import CliRunner

from http_helpers import HTTP
from magnetar.cli.main import app as cli
from magnetar.client import exceptions
from magnetar.client.admin import AdminClient

runner = CliRunner()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _refused(response: httpx.Response, status: int, reason: str) -> None:
    assert response.status_code == status, response.text
    assert reason in response.json()["reason"], response.text


@pytest.fixture
def tenant(admin: AdminClient) -> str:
    """A tenant allowing this cluster and two more, with a namespace `ns`."""
    name = _name("rep")
    for cluster in (f"{name}-east", f"{name}-west"):
        admin.create_cluster(cluster, {"serviceUrl": f"http://{cluster}:8080"})
    admin.create_tenant(name, [], ["standalone", f"{name}-east", f"{name}-west"])
    admin.create_namespace(f"{name}/ns")
    return name


def test_the_local_cluster_registered_itself_with_its_urls(cluster, admin: AdminClient) -> None:  # type: ignore[no-untyped-def]
    assert "standalone" in HTTP.get(f"{cluster.url}/admin/v2/clusters").json()
    data = admin.get_cluster("standalone")
    assert data["serviceUrl"] == cluster.url
    assert set(data) == {"serviceUrl", "serviceUrlTls", "brokerServiceUrl", "brokerServiceUrlTls",
                         "authenticationPlugin", "authenticationParameters"}
    assert "standalone" in admin.get_tenant("public")["allowedClusters"]
    cluster.register_cluster()  # again: nothing changes
    assert admin.get_cluster("standalone") == data
    assert admin.get_tenant("public")["allowedClusters"].count("standalone") == 1


def test_cluster_lifecycle_on_pulsars_paths_and_codes(cluster) -> None:  # type: ignore[no-untyped-def]
    name = _name("c")
    path = f"{cluster.url}/admin/v2/clusters/{name}"
    body = {"serviceUrl": "http://c1:8080", "brokerServiceUrl": "pulsar://c1:6650", "proxyServiceUrl": "pulsar://p:6650"}
    assert HTTP.put(path, json=body).status_code == 204
    _refused(HTTP.put(path, json=body), 409, "already exists")
    got = HTTP.get(path).json()
    assert got["serviceUrl"] == "http://c1:8080" and got["brokerServiceUrl"] == "pulsar://c1:6650"
    assert "proxyServiceUrl" not in got  # accepted, not kept
    assert name in HTTP.get(f"{cluster.url}/admin/v2/clusters").json()
    assert HTTP.post(path, json={"serviceUrlTls": "https://c1:8443"}).status_code == 204
    got = HTTP.get(path).json()
    assert got["serviceUrlTls"] == "https://c1:8443" and got["serviceUrl"] == ""  # replaced, as Pulsar
    assert HTTP.delete(path).status_code == 204
    _refused(HTTP.get(path), 404, "does not exist")
    _refused(HTTP.post(path, json=body), 404, "does not exist")
    _refused(HTTP.delete(path), 404, "does not exist")


@pytest.mark.parametrize(("body", "status", "reason"), [
    ({"serviceUrl": "pulsar://c:6650"}, 400, "Illegal serviceUrl"),
    ({"brokerServiceUrl": "http://c:8080"}, 400, "Illegal brokerServiceUrl"),
    ({"serviceUrl": 8080}, 400, "serviceUrl"),
    ([1], 400, "Invalid request body"),
])
def test_bad_cluster_data_is_a_400(cluster, body: object, status: int, reason: str) -> None:  # type: ignore[no-untyped-def]
    _refused(HTTP.put(f"{cluster.url}/admin/v2/clusters/{_name('bad')}", json=body), status, reason)


def test_bad_cluster_names_and_bodies(cluster) -> None:  # type: ignore[no-untyped-def]
    _refused(HTTP.put(f"{cluster.url}/admin/v2/clusters/a%2Fb", json={}), 412, "Cluster name is not valid")
    _refused(HTTP.put(f"{cluster.url}/admin/v2/clusters/a%23b", json={}), 412, "Cluster name is not valid")
    _refused(HTTP.put(f"{cluster.url}/admin/v2/clusters/{_name('x')}", content=b"{nope"), 400, "not valid JSON")


def test_tenants_allow_existing_clusters_only(cluster, admin: AdminClient) -> None:  # type: ignore[no-untyped-def]
    path = f"{cluster.url}/admin/v2/tenants/{_name('t')}"
    _refused(HTTP.put(path, json={"allowedClusters": ["no-such-cluster"]}), 412, "Clusters do not exist")
    _refused(HTTP.put(path, json={"allowedClusters": []}), 412, "Clusters can not be empty")
    assert HTTP.put(path, json={"adminRoles": []}).status_code == 204  # absent: this cluster
    assert HTTP.get(path).json()["allowedClusters"] == ["standalone"]
    _refused(HTTP.post(path, json={"allowedClusters": ["no-such-cluster"]}), 412, "Clusters do not exist")


def test_namespace_replication_clusters(cluster, admin: AdminClient, tenant: str) -> None:  # type: ignore[no-untyped-def]
    path = f"{cluster.url}/admin/v2/namespaces/{tenant}/ns/replication"
    assert HTTP.get(path).json() == ["standalone"]  # never set: this cluster
    _refused(HTTP.post(path, json=[]), 412, "should not be null or empty")
    _refused(HTTP.post(path, json=["no-such-cluster"]), 403, "Invalid cluster id: no-such-cluster")
    _refused(HTTP.post(path, json="east"), 400, "JSON array")
    _refused(HTTP.post(path, content=b"[oops"), 400, "not valid JSON")
    other = _name("other")
    admin.create_cluster(other, {})
    _refused(HTTP.post(path, json=[other]), 403, "not in the list of allowed clusters")
    assert HTTP.post(path, json=["standalone", f"{tenant}-east"]).status_code == 204
    assert admin.get_namespace_replication_clusters(f"{tenant}/ns") == sorted(["standalone", f"{tenant}-east"])
    assert HTTP.get(f"{cluster.url}/admin/v2/namespaces/{tenant}/ns").json()["replication_clusters"] == \
        sorted(["standalone", f"{tenant}-east"])
    # in use: the tenant cannot drop it, and it cannot be deleted
    _refused(HTTP.post(f"{cluster.url}/admin/v2/tenants/{tenant}", json={"allowedClusters": ["standalone"]}),
             412, "Active namespaces")
    _refused(HTTP.delete(f"{cluster.url}/admin/v2/clusters/{tenant}-east"), 412, "Cluster not empty")
    admin.update_tenant(tenant, [], ["standalone", f"{tenant}-east"])  # west is not used: it may go
    admin.delete_cluster(f"{tenant}-west")
    admin.delete_cluster(other)
    with pytest.raises(exceptions.PulsarException) as refused:
        admin.delete_cluster(f"{tenant}-east")
    assert refused.value.status == 412


def test_topic_replication_clusters(cluster, admin: AdminClient, tenant: str) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://{tenant}/ns/orders"
    path = f"{cluster.url}/admin/v2/persistent/{tenant}/ns/orders/replication"
    _refused(HTTP.post(path, json=["standalone"]), 404, "not found")
    admin.create_topic(topic)
    assert HTTP.get(path).json() is None  # unset: none of its own
    assert HTTP.get(f"{path}?applied=true").json() == ["standalone"]
    admin.set_namespace_replication_clusters(f"{tenant}/ns", ["standalone", f"{tenant}-east"])
    assert admin.get_replication_clusters(topic, applied=True) == sorted(["standalone", f"{tenant}-east"])
    _refused(HTTP.post(path, json=["no-such-cluster"]), 403, "Invalid cluster id")
    _refused(HTTP.post(path, json=[]), 412, "empty")
    assert HTTP.post(path, json=[f"{tenant}-west"]).status_code == 204
    assert admin.get_replication_clusters(topic) == [f"{tenant}-west"]
    assert admin.get_replication_clusters(topic, applied=True) == [f"{tenant}-west"]
    _refused(HTTP.post(f"{cluster.url}/admin/v2/tenants/{tenant}",
                        json={"allowedClusters": ["standalone", f"{tenant}-east"]}), 412, "orders replicates")
    assert HTTP.delete(path).status_code == 204
    assert admin.get_replication_clusters(topic) is None
    assert admin.get_replication_clusters(topic, applied=True) == sorted(["standalone", f"{tenant}-east"])
    _refused(HTTP.get(f"{path}?applied=maybe"), 400, "true or false")


# --- the CLI ---------------------------------------------------------------------------------------
def run(cluster, *args: str) -> str:  # type: ignore[no-untyped-def]
    result = runner.invoke(cli, [*args, "--service-url", cluster.url])
    assert result.exit_code == 0, result.output
    return result.output


def test_cli_clusters(cluster) -> None:  # type: ignore[no-untyped-def]
    name = _name("cli")
    run(cluster, "admin", "clusters", "create", name, "--url", "http://c:8080", "--broker-url", "pulsar://c:6650",
        "--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken", "--auth-parameters", "token:x")
    assert name in run(cluster, "admin", "clusters", "list")
    out = run(cluster, "admin", "clusters", "get", name)
    assert '"brokerServiceUrl": "pulsar://c:6650"' in out and '"authenticationParameters": "token:x"' in out
    run(cluster, "admin", "clusters", "update", name, "--url-secure", "https://c:8443",
        "--broker-url-secure", "pulsar+ssl://c:6651")
    out = run(cluster, "admin", "clusters", "get", name)
    assert '"serviceUrlTls": "https://c:8443"' in out and '"serviceUrl": ""' in out
    bad = runner.invoke(cli, ["admin", "clusters", "create", _name("cli"), "--url", "pulsar://c:6650",
                              "--service-url", cluster.url])
    assert bad.exit_code == 1 and "Illegal serviceUrl" in bad.output
    run(cluster, "admin", "clusters", "delete", name)
    assert name not in run(cluster, "admin", "clusters", "list")


def test_cli_replication_clusters(cluster, admin: AdminClient, tenant: str) -> None:  # type: ignore[no-untyped-def]
    east, west = f"{tenant}-east", f"{tenant}-west"
    run(cluster, "admin", "namespaces", "set-clusters", f"{tenant}/ns", "--clusters", f"standalone,{east}")
    assert admin.get_namespace_replication_clusters(f"{tenant}/ns") == sorted(["standalone", east])
    assert east in run(cluster, "admin", "namespaces", "get-clusters", f"{tenant}/ns")
    topic = f"persistent://{tenant}/ns/cli-topic"
    admin.create_topic(topic)
    run(cluster, "admin", "topics", "set-replication-clusters", topic, "--clusters", west)
    assert west in run(cluster, "admin", "topics", "get-replication-clusters", topic)
    run(cluster, "admin", "topics", "remove-replication-clusters", topic)
    assert "null" in run(cluster, "admin", "topics", "get-replication-clusters", topic)
    assert east in run(cluster, "admin", "topics", "get-replication-clusters", topic, "--applied")
    refused = runner.invoke(cli, ["admin", "namespaces", "set-clusters", f"{tenant}/ns", "--clusters", "nowhere",
                                  "--service-url", cluster.url])
    assert refused.exit_code == 1 and "Invalid cluster id: nowhere" in refused.output


def test_local_up_with_a_cluster_name_registers_that_cluster() -> None:
    """`magnetar local up --cluster-name east` in its own process: its functions know the name (the
    default replication cluster), its cluster is recorded with its URLs, and tenant public allows
    it instead of the bootstrap's unrecorded `standalone`."""
    from magnetar.local.cluster import LocalUpProcess

    with LocalUpProcess(maintenance_interval_s=0, extra_args=["--cluster-name", "east"]) as proc:
        admin = AdminClient(proc.url)
        try:
            deadline = time.monotonic() + 30  # the ports open before the cluster records itself
            while "east" not in admin.get_tenant("public")["allowedClusters"]:
                assert time.monotonic() < deadline, admin.get_tenant("public")
                time.sleep(0.2)
            assert admin.clusters() == ["east"]
            assert admin.get_tenant("public")["allowedClusters"] == ["east"]
            data = admin.get_cluster("east")
            assert data["serviceUrl"] == proc.url and data["brokerServiceUrl"] == proc.pulsar_url
            assert admin.get_namespace_replication_clusters("public/default") == ["east"]
            admin.create_tenant("acme")  # no allowed clusters given: this cluster
            assert admin.get_tenant("acme")["allowedClusters"] == ["east"]
        finally:
            admin.close()
