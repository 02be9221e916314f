"""The configuration store of a local instance as a global table (`local up --clusters east,west`):
a replica in every cluster's region, the home's changes copied after a delay; an outage of the
home's cluster cuts the others off the home replica, and they read their own replica."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest

import magnetar
from http_helpers import HTTP
from magnetar.local.cluster import free_port, free_run
from magnetar.local.instance import LOCAL_CONFIG_TABLE, LocalInstance

DELAY_MS = 300


@pytest.fixture(scope="module")
def instance() -> Iterator[LocalInstance]:
    with LocalInstance(["east", "west"], port=free_run(2), pulsar_port=0, aws_port=free_port(),
                       config_replication_delay_ms=DELAY_MS, cluster_args=["--maintenance-interval", "0"]) as running:
        yield running


def _url(instance: LocalInstance, name: str) -> str:
    return next(p.url for p in instance.processes if p.name == name)


def _replica(instance: LocalInstance, cluster: str) -> Any:
    region = next(p.region for p in instance.processes if p.name == cluster)
    return boto3.client("dynamodb", region_name=region, endpoint_url=instance.endpoint,
                        aws_access_key_id="test", aws_secret_access_key="test")


def _replica_item(instance: LocalInstance, cluster: str, pk: str, sk: str) -> dict[str, Any] | None:
    item: dict[str, Any] | None = _replica(instance, cluster).get_item(
        TableName=LOCAL_CONFIG_TABLE, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True).get("Item")
    return item


def _until(check: Any, timeout_s: float = 15) -> float:
    """Poll `check` until it holds; the monotonic time it first held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(0.02)
    raise AssertionError("never held")


def _namespace(instance: LocalInstance) -> str:
    namespace = f"public/cfg-{uuid.uuid4().hex[:8]}"
    east = httpx.Client(base_url=_url(instance, "east"), timeout=30)
    assert east.put(f"/admin/v2/namespaces/{namespace}").status_code == 204
    assert east.post(f"/admin/v2/namespaces/{namespace}/replication", json=["east", "west"]).status_code == 204
    return namespace


def test_a_policy_set_through_west_is_read_at_once_and_reaches_wests_replica_after_the_delay(
        instance: LocalInstance) -> None:
    namespace = _namespace(instance)
    tenant, name = namespace.split("/")
    west = httpx.Client(base_url=_url(instance, "west"), timeout=30)

    def replica_ttl() -> int | None:
        item = _replica_item(instance, "west", f"NAMESPACES#{tenant}", name)
        return None if item is None else json.loads(item.get("policies", {}).get("S", "{}")).get(
            "message_ttl_in_seconds")

    before = time.monotonic()
    assert west.post(f"/admin/v2/namespaces/{namespace}/messageTTL", json=120).status_code == 204
    assert west.get(f"/admin/v2/namespaces/{namespace}/messageTTL").json() == 120  # the home, at once
    seen = _until(lambda: replica_ttl() == 120)
    assert seen - before >= DELAY_MS / 1000  # never before the delay
    assert seen - before < DELAY_MS / 1000 + 3
    # a deletion replicates too: a cluster's registration
    cluster = f"gone-{uuid.uuid4().hex[:6]}"
    assert west.put(f"/admin/v2/clusters/{cluster}", json={"serviceUrl": "http://gone:8080"}).status_code == 204
    _until(lambda: _replica_item(instance, "west", "CLUSTERS", cluster) is not None)
    assert west.delete(f"/admin/v2/clusters/{cluster}").status_code == 204
    assert _replica_item(instance, "east", "CLUSTERS", cluster) is None  # the home replica, at once
    _until(lambda: _replica_item(instance, "west", "CLUSTERS", cluster) is None)


def test_during_an_outage_of_the_home_west_reads_its_replica_and_refuses_configuration_changes(
        instance: LocalInstance) -> None:
    namespace = _namespace(instance)
    tenant, name = namespace.split("/")
    topic = f"persistent://{namespace}/during-home-outage"
    west_url, east_url = _url(instance, "west"), _url(instance, "east")
    west_admin = httpx.Client(base_url=west_url, timeout=60)
    assert west_admin.post(f"/admin/v2/namespaces/{namespace}/messageTTL", json=300).status_code == 204
    _until(lambda: _replica_item(instance, "west", f"NAMESPACES#{tenant}", name) is not None
           and "300" in _replica_item(instance, "west", f"NAMESPACES#{tenant}", name)["policies"]["S"])  # type: ignore[index]
    west = magnetar.Client(west_url)
    try:
        consumer = west.subscribe(topic, "sub", initial_position=magnetar.InitialPosition.Earliest)
        producer = west.create_producer(topic, producer_name="p-west", batching_enabled=False)
        producer.send(b"before")
        assert consumer.receive(timeout_millis=30_000).data() == b"before"
        assert HTTP.post(f"{west_url}/_magnetar/local/clusters/east/outage", timeout=10).status_code == 200
        _until(lambda: _refused(east_url), timeout_s=20)
        # messaging goes on in west
        for i in range(3):
            producer.send(f"during-{i}".encode())
        got = []
        for _ in range(3):
            message = consumer.receive(timeout_millis=30_000)
            got.append(message.data().decode())
            consumer.acknowledge(message)
        assert got == [f"during-{i}" for i in range(3)]
        # reads come from west's replica
        assert west_admin.get(f"/admin/v2/namespaces/{namespace}/messageTTL").json() == 300
        assert namespace in west_admin.get(f"/admin/v2/namespaces/{tenant}").json()
        # a change is refused, retryable, with a reason naming the configuration store; nothing written
        refused = west_admin.post(f"/admin/v2/namespaces/{namespace}/messageTTL", json=600)
        assert refused.status_code == 503, refused.text
        assert "configuration store" in refused.json()["reason"]
        created = west_admin.put(f"/admin/v2/namespaces/{tenant}/cfg-new-{uuid.uuid4().hex[:6]}")
        assert created.status_code == 503, created.text
        assert west_admin.get(f"/admin/v2/namespaces/{namespace}/messageTTL").json() == 300
    finally:
        assert HTTP.delete(f"{west_url}/_magnetar/local/clusters/east/outage", timeout=10).status_code == 200
        west.close()
    _until(lambda: not _refused(east_url), timeout_s=20)
    # back: the change goes through (once the client tries the home again) and every replica converges
    _until(lambda: west_admin.post(f"/admin/v2/namespaces/{namespace}/messageTTL", json=600).status_code == 204,
           timeout_s=30)
    assert HTTP.get(f"{east_url}/admin/v2/namespaces/{namespace}/messageTTL", timeout=30).json() == 600
    _until(lambda: "600" in _replica_item(instance, "west", f"NAMESPACES#{tenant}", name)["policies"]["S"])  # type: ignore[index]


def _refused(url: str) -> bool:
    try:
        HTTP.get(f"{url}/admin/v2/clusters", timeout=2)
        return False
    except httpx.TransportError:
        return True
