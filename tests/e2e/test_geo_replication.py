"""Geo-replication between the clusters of a local instance (`local up --clusters east,west`):
through the SDK and the HTTP API of each cluster, an outage staged on the network."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

import magnetar
from magnetar.local.cluster import free_port
from magnetar.local.instance import LocalInstance


def _free_run(n: int) -> int:
    """A first port with the n - 1 following ones free too."""
    for _ in range(50):
        base = free_port()
        if base + n < 65535 and all(_free(base + i) for i in range(n)):
            return base
    raise RuntimeError("no run of free ports")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@pytest.fixture(scope="module")
def instance() -> Iterator[LocalInstance]:
    with LocalInstance(["east", "west"], port=_free_run(2), pulsar_port=_free_run(2), aws_port=free_port(),
                       cluster_args=["--maintenance-interval", "0"]) as running:
        yield running


def _url(instance: LocalInstance, name: str) -> str:
    return next(p.url for p in instance.processes if p.name == name)


def _replicated_namespace(instance: LocalInstance) -> str:
    namespace = f"public/geo-{uuid.uuid4().hex[:8]}"
    east = httpx.Client(base_url=_url(instance, "east"), timeout=30)
    assert east.put(f"/admin/v2/namespaces/{namespace}").status_code == 204
    response = east.post(f"/admin/v2/namespaces/{namespace}/replication", json=["east", "west"])
    assert response.status_code == 204, response.text
    west = httpx.Client(base_url=_url(instance, "west"), timeout=30)
    deadline = time.monotonic() + 20  # the configuration store is shared: west sees it
    while time.monotonic() < deadline:
        got = west.get(f"/admin/v2/namespaces/{namespace}/replication")
        if got.status_code == 200 and sorted(got.json()) == ["east", "west"]:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("west does not see the namespace's replication clusters")
    return namespace


def _receive_all(consumer: magnetar.Consumer, count: int, timeout_s: float = 60) -> list[magnetar.Message]:
    out: list[magnetar.Message] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count and time.monotonic() < deadline:
        try:
            message = consumer.receive(timeout_millis=2000)
        except magnetar.Timeout:
            continue
        out.append(message)
        consumer.acknowledge(message)
    return out


def _maintenance(instance: LocalInstance, name: str) -> None:
    response = httpx.post(f"{_url(instance, name)}/_magnetar/local/schedules/maintenance", timeout=120)
    assert response.status_code == 200, response.text


def test_messages_published_in_each_cluster_reach_both_once_in_order(instance: LocalInstance) -> None:
    topic = f"persistent://{_replicated_namespace(instance)}/orders"
    east, west = magnetar.Client(_url(instance, "east")), magnetar.Client(_url(instance, "west"))
    try:
        consumers = {name: client.subscribe(topic, "sub", initial_position=magnetar.InitialPosition.Earliest)
                     for name, client in (("east", east), ("west", west))}
        for name, client in (("east", east), ("west", west)):
            producer = client.create_producer(topic, producer_name=f"p-{name}")
            for i in range(20):
                producer.send(f"{name}-{i}".encode())
            producer.close()
        for name, consumer in consumers.items():
            messages = _receive_all(consumer, 40)
            texts = [m.data().decode() for m in messages]
            assert sorted(texts) == sorted([f"{c}-{i}" for c in ("east", "west") for i in range(20)]), name
            for origin in ("east", "west"):  # per producer, in the order published
                mine = [t for t in texts if t.startswith(origin)]
                assert mine == [f"{origin}-{i}" for i in range(20)], (name, origin)
            for m in messages:
                remote = not m.data().decode().startswith(name)
                assert m.is_replicated() == remote
                assert m.replicated_from() == (("west" if name == "east" else "east") if remote else "")
            with pytest.raises(magnetar.Timeout):  # nothing twice
                consumer.receive(timeout_millis=3000)
    finally:
        east.close()
        west.close()


def test_an_outage_loses_and_duplicates_nothing(instance: LocalInstance) -> None:
    topic = f"persistent://{_replicated_namespace(instance)}/outage"
    east, west = magnetar.Client(_url(instance, "east")), magnetar.Client(_url(instance, "west"))
    try:
        west_consumer = west.subscribe(topic, "sub", initial_position=magnetar.InitialPosition.Earliest)
        producer = east.create_producer(topic, producer_name="p-east")
        producer.send(b"before")
        assert [m.data() for m in _receive_all(west_consumer, 1)] == [b"before"]
        off = httpx.post(f"{_url(instance, 'east')}/_magnetar/local/clusters/west/outage", timeout=10)
        assert off.status_code == 200
        time.sleep(1)
        with pytest.raises(httpx.TransportError):  # west refuses connections
            httpx.get(f"{_url(instance, 'west')}/admin/v2/tenants", timeout=3)
        for i in range(10):  # east goes on
            producer.send(f"during-{i}".encode())
        time.sleep(3)  # sealed in east; the replicator finds west unreachable
        stats = httpx.get(f"{_url(instance, 'east')}/admin/v2/{topic.replace('://', '/')}/stats", timeout=30).json()
        back = httpx.delete(f"{_url(instance, 'east')}/_magnetar/local/clusters/west/outage", timeout=10)
        assert back.status_code == 200
        time.sleep(1)
        _maintenance(instance, "east")  # the maintenance run sends the backlog
        got = [m.data().decode() for m in _receive_all(west_consumer, 10)]
        assert got == [f"during-{i}" for i in range(10)]
        with pytest.raises(magnetar.Timeout):
            west_consumer.receive(timeout_millis=3000)
        assert stats["publishers"] or stats["msgInCounter"] >= 11  # east kept taking messages meanwhile
    finally:
        east.close()
        west.close()
