"""Pulsar's HTTP lookup (`/lookup/v2/topic/...`): the official client given the HTTP API's
`http://` URL finds the binary protocol proxy there and produces and consumes through it, as it
does with a Pulsar cluster's web service URL."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from http_helpers import HTTP
from magnetar.cli.main import app as cli
from magnetar.client import exceptions
from magnetar.client.admin import AdminClient
from magnetar.local.cluster import LocalUpProcess

pulsar = pytest.importorskip("pulsar")

from e2e.pulsar_protocol_fixtures import drain, quiet_logger  # noqa: E402


@pytest.fixture(scope="module")
def local_up() -> Iterator[LocalUpProcess]:
    """`magnetar local up` in its own process: it records its cluster with its HTTP and binary
    protocol URLs (before its HTTP port opens), which the lookup answers."""
    with LocalUpProcess(maintenance_interval_s=0) as proc:
        yield proc


def test_the_lookup_answers_the_clusters_binary_protocol_url(local_up: LocalUpProcess) -> None:
    response = HTTP.get(f"{local_up.url}/lookup/v2/topic/persistent/public/default/looked-up")
    assert response.status_code == 200, response.text
    assert response.json() == {"brokerUrl": local_up.pulsar_url, "brokerUrlTls": "", "httpUrl": local_up.url,
                               "httpUrlTls": "", "nativeUrl": local_up.pulsar_url}


def test_the_admin_client_and_the_cli_look_a_topic_up(local_up: LocalUpProcess, cluster) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient(local_up.url)
    try:
        assert admin.lookup_topic("persistent://public/default/looked-up") == local_up.pulsar_url
    finally:
        admin.close()
    result = CliRunner().invoke(cli, ["admin", "topics", "lookup", "persistent://public/default/looked-up",
                                      "--service-url", local_up.url])
    assert result.exit_code == 0 and result.output.strip() == local_up.pulsar_url, result.output
    without = AdminClient(cluster.url)  # the session cluster runs no proxy
    try:
        with pytest.raises(exceptions.PulsarException, match="serves no binary protocol"):
            without.lookup_topic("persistent://public/default/looked-up")
    finally:
        without.close()
    refused = CliRunner().invoke(cli, ["admin", "topics", "lookup", "persistent://public/default/t",
                                       "--service-url", cluster.url])
    assert refused.exit_code == 1 and "serves no binary protocol" in refused.output


@pytest.mark.parametrize(("path", "status", "reason"), [
    ("persistent/public/nowhere/t", 404, "Namespace public/nowhere does not exist"),
    ("persistent/nobody/default/t", 404, "does not exist"),
    ("persistent/public/default/a%2Fb", 400, ""),
])
def test_a_lookup_of_what_cannot_be_served_is_refused_with_a_reason(
        local_up: LocalUpProcess, path: str, status: int, reason: str) -> None:
    response = HTTP.get(f"{local_up.url}/lookup/v2/topic/{path}")
    assert response.status_code == status, response.text
    assert reason in response.json()["reason"]


def test_a_cluster_without_a_proxy_answers_404_with_the_reason(cluster) -> None:  # type: ignore[no-untyped-def]
    """The session cluster runs no binary protocol proxy: nothing to send a client to."""
    response = HTTP.get(f"{cluster.url}/lookup/v2/topic/persistent/public/default/t")
    assert response.status_code == 404
    assert "serves no binary protocol" in response.json()["reason"]


def test_the_official_client_on_the_http_url_produces_and_consumes(local_up: LocalUpProcess) -> None:
    client = pulsar.Client(local_up.url, operation_timeout_seconds=15, logger=quiet_logger())
    try:
        consumer = client.subscribe("http-lookup-topic", "sub", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer("http-lookup-topic")
        ids = [producer.send(f"m{i}".encode()) for i in range(3)]
        received = drain(consumer, 3)
        assert [m.data() for m in received] == [b"m0", b"m1", b"m2"]
        assert [str(m.message_id()) for m in received] == [str(i) for i in ids]
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=500)
    finally:
        client.close()


def test_the_official_client_on_the_http_url_serves_a_partitioned_topic(local_up: LocalUpProcess) -> None:
    """Its partition count comes from `GET /admin/v2/.../partitions`, then each partition is looked up."""
    admin = AdminClient(local_up.url)
    try:
        admin.create_partitioned_topic("persistent://public/default/http-lookup-partitioned", 3)
    finally:
        admin.close()
    client = pulsar.Client(local_up.url, operation_timeout_seconds=15, logger=quiet_logger())
    try:
        consumer = client.subscribe("http-lookup-partitioned", "sub", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer("http-lookup-partitioned")
        for i in range(6):
            producer.send(f"m{i}".encode(), partition_key=f"k{i}")
        received = drain(consumer, 6)
        assert sorted(m.data() for m in received) == [f"m{i}".encode() for i in range(6)]
        assert len({m.topic_name() for m in received}) > 1  # from more than one partition
    finally:
        client.close()


def test_the_namespace_topic_list_by_mode(cluster, admin) -> None:  # type: ignore[no-untyped-def]
    """`GET /admin/v2/namespaces/{tenant}/{namespace}/topics?mode=`: what an HTTP client's pattern
    consumer matches (persistent topics unless asked otherwise)."""
    admin.create_topic("persistent://public/default/mode-listed")
    admin.create_topic("non-persistent://public/default/mode-listed-np")
    base = f"{cluster.url}/admin/v2/namespaces/public/default/topics"
    persistent, everything = HTTP.get(base).json(), HTTP.get(f"{base}?mode=ALL").json()
    only_np = HTTP.get(f"{base}?mode=NON_PERSISTENT").json()
    assert "persistent://public/default/mode-listed" in persistent and all(t.startswith("persistent://")
                                                                          for t in persistent)
    assert only_np and all(t.startswith("non-persistent://") for t in only_np)
    assert "non-persistent://public/default/mode-listed-np" in only_np
    assert set(everything) == set(persistent) | set(only_np)
    refused = HTTP.get(f"{base}?mode=SOME")
    assert refused.status_code == 400 and "mode" in refused.json()["reason"]
    assert HTTP.get(f"{cluster.url}/admin/v2/namespaces/public/nowhere/topics").status_code == 404


def test_the_official_client_on_the_http_url_consumes_by_pattern(local_up: LocalUpProcess) -> None:
    client = pulsar.Client(local_up.url, operation_timeout_seconds=15, logger=quiet_logger())
    try:
        producers = [client.create_producer(f"http-pattern-{i}") for i in range(2)]
        consumer = client.subscribe(re.compile("persistent://public/default/http-pattern-.*"), "sub",
                                    initial_position=pulsar.InitialPosition.Earliest)
        for i, producer in enumerate(producers):
            producer.send(f"p{i}".encode())
        assert sorted(m.data() for m in drain(consumer, 2)) == [b"p0", b"p1"]
    finally:
        client.close()
