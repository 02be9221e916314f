"""Geo-replication between the clusters of a local instance (`local up --clusters east,west`):
through the SDK and the HTTP API of each cluster, an outage staged on the network."""

from __future__ import annotations

import contextlib
import socket
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

import magnetar
from http_helpers import HTTP
from magnetar.local.cluster import free_port, free_run
from magnetar.local.instance import LocalInstance


@pytest.fixture(scope="module")
def instance() -> Iterator[LocalInstance]:
    with LocalInstance(["east", "west"], port=free_run(2), pulsar_port=free_run(2), aws_port=free_port(),
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


def _wait_refused(url: str, pulsar_url: str | None = None, timeout_s: float = 20) -> None:
    """Until the cluster at `url` (and its binary protocol at `pulsar_url`) refuses connections:
    its doors close within a moment of the outage."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            HTTP.get(f"{url}/admin/v2/clusters", timeout=2)
        except httpx.TransportError:
            if pulsar_url is None or not _listening(pulsar_url):
                return
        time.sleep(0.1)
    raise AssertionError(f"{url} still answers")


def _listening(pulsar_url: str) -> bool:
    host, port = pulsar_url.removeprefix("pulsar://").rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def _wait_open(url: str, timeout_s: float = 20) -> None:
    """Until the cluster at `url` answers again (back on the network)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            HTTP.get(f"{url}/admin/v2/clusters", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"{url} does not answer")


def _home_back(instance: LocalInstance) -> None:
    """Until every cluster reaches the configuration store's home replica again after an outage of
    its cluster (east): a client leaves an unreachable home alone for a few seconds, reading its own
    region's replica meanwhile and refusing changes (503); a change that goes through says it is back."""
    for process in instance.processes:
        deadline = time.monotonic() + 30
        while HTTP.put(f"{process.url}/admin/v2/namespaces/public/back-{uuid.uuid4().hex[:8]}",
                        timeout=30).status_code == 503:
            if time.monotonic() > deadline:
                raise AssertionError(f"{process.name} does not reach the configuration store's home")
            time.sleep(0.2)


def _maintenance(instance: LocalInstance, name: str) -> None:
    response = HTTP.post(f"{_url(instance, name)}/_magnetar/local/schedules/maintenance", timeout=120)
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
        off = HTTP.post(f"{_url(instance, 'east')}/_magnetar/local/clusters/west/outage", timeout=10)
        assert off.status_code == 200
        _wait_refused(_url(instance, "west"))
        for i in range(10):  # east goes on
            producer.send(f"during-{i}".encode())
        time.sleep(3)  # sealed in east; the replicator finds west unreachable
        stats = HTTP.get(f"{_url(instance, 'east')}/admin/v2/{topic.replace('://', '/')}/stats", timeout=30).json()
        back = HTTP.delete(f"{_url(instance, 'east')}/_magnetar/local/clusters/west/outage", timeout=10)
        assert back.status_code == 200
        _wait_open(_url(instance, "west"))
        _maintenance(instance, "east")  # the maintenance run sends the backlog
        got = [m.data().decode() for m in _receive_all(west_consumer, 10)]
        assert got == [f"during-{i}" for i in range(10)]
        with pytest.raises(magnetar.Timeout):
            west_consumer.receive(timeout_millis=3000)
        assert stats["publishers"] or stats["msgInCounter"] >= 11  # east kept taking messages meanwhile
    finally:
        east.close()
        west.close()


def test_a_replicated_subscription_moved_to_the_other_cluster_skips_nothing(instance: LocalInstance) -> None:
    topic = f"persistent://{_replicated_namespace(instance)}/moves"
    east, west = magnetar.Client(_url(instance, "east")), magnetar.Client(_url(instance, "west"))
    try:
        first = east.subscribe(topic, "moving", consumer_type=magnetar.ConsumerType.Shared,
                               initial_position=magnetar.InitialPosition.Earliest,
                               replicate_subscription_state_enabled=True)
        producer = east.create_producer(topic, producer_name="p-east", batching_enabled=False)
        for i in range(10):
            producer.send(f"m{i}".encode())
        seen = [m.data().decode() for m in _receive_all(first, 6)]
        time.sleep(1.5)  # the acknowledgements are written (grouped, at most a second later)
        first.close()
        _maintenance(instance, "east")  # shares what the subscription acknowledged
        second = west.subscribe(topic, "moving", consumer_type=magnetar.ConsumerType.Shared,
                                initial_position=magnetar.InitialPosition.Earliest,
                                replicate_subscription_state_enabled=True)
        rest = [m.data().decode() for m in _receive_all(second, 4)]
        with pytest.raises(magnetar.Timeout):
            second.receive(timeout_millis=3000)
        assert sorted(seen + rest) == sorted(f"m{i}" for i in range(10))  # nothing skipped, nothing again
    finally:
        east.close()
        west.close()


def test_a_replicated_subscription_moved_within_seconds_gets_nothing_acknowledged_long_before(
        instance: LocalInstance) -> None:
    """No maintenance run: the acknowledgement path shares the subscription every few seconds."""
    topic = f"persistent://{_replicated_namespace(instance)}/moves-fast"
    east, west = magnetar.Client(_url(instance, "east")), magnetar.Client(_url(instance, "west"))
    try:
        first = east.subscribe(topic, "moving", consumer_type=magnetar.ConsumerType.Shared,
                               initial_position=magnetar.InitialPosition.Earliest,
                               replicate_subscription_state_enabled=True)
        producer = east.create_producer(topic, producer_name="p-east", batching_enabled=False)
        for i in range(50):
            producer.send(f"m{i}".encode())
        acked_at: dict[str, float] = {}
        for _ in range(40):  # 40 acknowledged over ~8 s
            message = first.receive(timeout_millis=30_000)
            first.acknowledge(message)
            acked_at[message.data().decode()] = time.monotonic()
            time.sleep(0.2)
        first.close()  # its last acknowledgements go with the close
        moved_at = time.monotonic()
        second = west.subscribe(topic, "moving", consumer_type=magnetar.ConsumerType.Shared,
                                initial_position=magnetar.InitialPosition.Earliest,
                                replicate_subscription_state_enabled=True)
        assert time.monotonic() - moved_at < 5
        again: list[str] = []
        while True:
            try:
                message = second.receive(timeout_millis=3000)
            except magnetar.Timeout:
                break
            again.append(message.data().decode())
            second.acknowledge(message)
        assert set(acked_at) | set(again) == {f"m{i}" for i in range(50)}  # nothing skipped
        redelivered = [m for m in again if m in acked_at]
        oldest = max((moved_at - acked_at[m] for m in redelivered), default=0.0)
        assert oldest < 4.0, (redelivered, oldest)  # only what was acknowledged in the last seconds
        assert len(redelivered) < 20
    finally:
        east.close()
        west.close()


def _aws_requests(instance: LocalInstance, name: str) -> dict[str, int]:
    requests: dict[str, int] = HTTP.get(f"{_url(instance, name)}/_magnetar/local/stats",
                                         timeout=30).json()["aws_requests"]
    return requests


@pytest.mark.parametrize("deleted_by", ["unsubscribe", "topic deletion"])
def test_a_replicated_subscription_deleted_in_east_leaves_no_position_for_a_new_one_in_west(
        instance: LocalInstance, deleted_by: str) -> None:
    """East's replicated subscription acknowledged some messages (its snapshot written by the
    acknowledgement path; every message has reached west), then is unsubscribed (the SDK) or its
    topic deleted in east (REST, forced): a subscription of the same name in west, from Earliest,
    gets every message."""
    name = f"gone-{deleted_by.split()[0]}"
    topic = f"persistent://{_replicated_namespace(instance)}/{name}"
    east, west = magnetar.Client(_url(instance, "east")), magnetar.Client(_url(instance, "west"))
    try:
        first = east.subscribe(topic, "sub", consumer_type=magnetar.ConsumerType.Shared,
                               initial_position=magnetar.InitialPosition.Earliest,
                               replicate_subscription_state_enabled=True)
        producer = east.create_producer(topic, producer_name=f"p-{name}", batching_enabled=False)
        for i in range(10):
            producer.send(f"m{i}".encode())
        producer.close()
        assert len(_receive_all(first, 6)) == 6
        reader = west.create_reader(topic, magnetar.MessageId.earliest)  # every message reached west
        deadline = time.monotonic() + 60
        copies: set[str] = set()
        while len(copies) < 10 and time.monotonic() < deadline:
            with contextlib.suppress(magnetar.Timeout):
                copies.add(reader.read_next(timeout_millis=2000).data().decode())
        reader.close()
        assert len(copies) == 10
        if deleted_by == "unsubscribe":
            before = _aws_requests(instance, "east")
            first.unsubscribe()  # (its grouped acknowledgements go first)
            after = _aws_requests(instance, "east")
            # the cursor's delete and the snapshot's: one request more than a subscription not replicated
            assert after.get("dynamodb.DeleteItem", 0) - before.get("dynamodb.DeleteItem", 0) == 2
        else:
            first.close()
            response = HTTP.delete(f"{_url(instance, 'east')}/admin/v2/{topic.replace('://', '/')}",
                                    params={"force": "true"}, timeout=60)
            assert response.status_code == 204, response.text
        time.sleep(1.5)  # past the configuration store's replication delay (1 s here)
        second = west.subscribe(topic, "sub", consumer_type=magnetar.ConsumerType.Shared,
                                initial_position=magnetar.InitialPosition.Earliest,
                                replicate_subscription_state_enabled=True)
        got = sorted(m.data().decode() for m in _receive_all(second, 10))
        assert got == sorted(f"m{i}" for i in range(10))  # none skipped: no position from the deleted one
        with pytest.raises(magnetar.Timeout):
            second.receive(timeout_millis=2000)
    finally:
        east.close()
        west.close()


def test_the_official_client_through_each_clusters_proxy_sees_the_replicated_messages(
        instance: LocalInstance) -> None:
    import pulsar

    topic = f"persistent://{_replicated_namespace(instance)}/official"
    urls = {p.name: p.pulsar_url for p in instance.processes}
    east, west = pulsar.Client(urls["east"]), pulsar.Client(urls["west"])
    try:
        consumer = west.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = east.create_producer(topic, producer_name="official-east")
        for i in range(10):
            producer.send(f"o{i}".encode())
        local_only = east.create_producer(topic, producer_name="official-local")
        local_only.send(b"stays-in-east", disable_replication=True)
        got = []
        for _ in range(10):
            message = consumer.receive(timeout_millis=30_000)
            got.append(message.data().decode())
            consumer.acknowledge(message)
        assert got == [f"o{i}" for i in range(10)]
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=3000)  # the message sent with disable_replication stayed in east
    finally:
        east.close()
        west.close()


def test_a_client_with_cluster_failover_keeps_going_through_an_outage(instance: LocalInstance) -> None:
    topic = f"persistent://{_replicated_namespace(instance)}/failover"
    east_url, west_url = _url(instance, "east"), _url(instance, "west")
    failover = magnetar.AutoClusterFailover(primary=magnetar.ServiceInfo(east_url),
                                            secondary=[magnetar.ServiceInfo(west_url)], check_interval_ms=200,
                                            failover_threshold=2, switch_back_threshold=2)
    client = magnetar.Client(failover)
    try:
        consumer = client.subscribe(topic, "follows", consumer_type=magnetar.ConsumerType.Shared,
                                    initial_position=magnetar.InitialPosition.Earliest,
                                    replicate_subscription_state_enabled=True)
        producer = client.create_producer(topic, producer_name="p-failover", batching_enabled=False)
        for i in range(6):
            producer.send(f"before-{i}".encode())
        seen = [m.data().decode() for m in _receive_all(consumer, 4)]
        time.sleep(1.5)  # the acknowledgements are written (grouped, at most a second later)
        _maintenance(instance, "east")  # east shares what the subscription acknowledged
        assert HTTP.post(f"{west_url}/_magnetar/local/clusters/east/outage", timeout=10).status_code == 200
        _wait_refused(east_url)
        for i in range(4):  # sent while east is off the network: the client moves to west
            producer.send(f"during-{i}".encode())
        assert client.get_service_info().service_url == west_url
        rest = [m.data().decode() for m in _receive_all(consumer, 6, timeout_s=90)]
        expected = {f"before-{i}" for i in range(6)} | {f"during-{i}" for i in range(4)}
        assert set(seen) | set(rest) == expected  # nothing skipped
        assert not set(seen) & set(rest)  # and what east had acknowledged does not come again
    finally:
        HTTP.delete(f"{west_url}/_magnetar/local/clusters/east/outage", timeout=10)
        _wait_open(east_url)
        _home_back(instance)
        client.close()


def test_a_partitioned_topic_replicates_partition_to_partition(instance: LocalInstance) -> None:
    namespace = _replicated_namespace(instance)
    topic = f"persistent://{namespace}/parted"
    east_admin = httpx.Client(base_url=_url(instance, "east"), timeout=30)
    assert east_admin.put(f"/admin/v2/persistent/{namespace}/parted/partitions", json=3).status_code == 204
    east, west = magnetar.Client(_url(instance, "east")), magnetar.Client(_url(instance, "west"))
    try:
        consumer = west.subscribe(topic, "sub", initial_position=magnetar.InitialPosition.Earliest)
        producer = east.create_producer(topic, producer_name="p-parted")
        sent = {}
        for i in range(12):
            message_id = producer.send(f"k{i}".encode(), partition_key=f"key-{i}")
            sent[f"k{i}"] = message_id.partition()
        received = {}
        for message in _receive_all(consumer, 12):
            received[message.data().decode()] = message.topic_name()
        assert set(received) == set(sent)
        for text, partition in sent.items():  # each in the partition it was published to
            assert received[text].endswith(f"-partition-{partition}")
    finally:
        east.close()
        west.close()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalInstance, bytes]]:
    from magnetar.security.tokens import new_secret_key

    key = new_secret_key()
    key_file = tmp_path_factory.mktemp("geo-auth") / "secret.key"
    key_file.write_bytes(key)
    with LocalInstance(["east", "west"], port=free_run(2), pulsar_port=0, aws_port=free_port(),
                       cluster_args=["--maintenance-interval", "0", "--auth", "--token-secret-key", str(key_file),
                                     "--superuser-role", "admin"]) as running:
        yield running, key


def test_with_authentication_replicators_come_in_as_superusers_and_nobody_else_may_publish_copies(
        secured: tuple[LocalInstance, bytes]) -> None:
    from magnetar.security.tokens import create_token

    instance, key = secured
    admin = {"Authorization": f"Bearer {create_token('admin', secret_key=key)}"}
    namespace = f"public/geo-{uuid.uuid4().hex[:8]}"
    east_http = httpx.Client(base_url=_url(instance, "east"), headers=admin, timeout=30)
    assert east_http.put(f"/admin/v2/namespaces/{namespace}").status_code == 204
    assert east_http.post(f"/admin/v2/namespaces/{namespace}/replication", json=["east", "west"]).status_code == 204
    assert east_http.post(f"/admin/v2/namespaces/{namespace}/permissions/app", json=["produce", "consume"]).status_code == 204
    app = magnetar.AuthenticationToken(create_token("app", secret_key=key))
    east = magnetar.Client(_url(instance, "east"), authentication=app)
    west = magnetar.Client(_url(instance, "west"), authentication=app)
    topic = f"persistent://{namespace}/secure"
    try:
        consumer = west.subscribe(topic, "sub", initial_position=magnetar.InitialPosition.Earliest)
        producer = east.create_producer(topic, producer_name="p-app")
        for i in range(5):
            producer.send(f"s{i}".encode())
        _maintenance(instance, "east")  # a first append refused while west was still starting is sent again
        messages = _receive_all(consumer, 5)
        assert [m.data() for m in messages] == [f"s{i}".encode() for i in range(5)]
        assert {m.replicated_from() for m in messages} == {"east"}
        # a copy (with an origin) from a role that is not a superuser: refused
        forged = {"producerName": "pulsar.repl.east", "batches": [{
            "payload": "", "numMessages": 1, "uncompressedSize": 0, "sequenceId": 99, "highestSequenceId": 99,
            "origin": {"cluster": "east", "ledgerId": 0, "entryId": 99, "publishTime": 1}}]}
        refused = HTTP.post(f"{_url(instance, 'west')}/topics/persistent/{namespace}/secure", json=forged,
                             headers={"Authorization": f"Bearer {create_token('app', secret_key=key)}"}, timeout=30)
        assert refused.status_code == 403, refused.text
    finally:
        east.close()
        west.close()


def test_the_official_clients_cluster_failover_moves_to_the_other_proxy(instance: LocalInstance) -> None:
    import pulsar

    topic = f"persistent://{_replicated_namespace(instance)}/official-failover"
    urls = {p.name: p.pulsar_url for p in instance.processes}
    assert urls["east"] and urls["west"]
    failover = pulsar.AutoClusterFailover(primary=pulsar.ServiceInfo(urls["east"]),
                                          secondary=[pulsar.ServiceInfo(urls["west"])], check_interval_ms=200,
                                          failover_threshold=2, switch_back_threshold=2)
    client = pulsar.Client(failover, operation_timeout_seconds=30)
    west = magnetar.Client(_url(instance, "west"))
    try:
        reader = west.subscribe(topic, "check", initial_position=magnetar.InitialPosition.Earliest)
        producer = client.create_producer(topic, producer_name="official-failover", batching_enabled=False)
        producer.send(b"via-east")
        assert HTTP.post(f"{_url(instance, 'west')}/_magnetar/local/clusters/east/outage", timeout=10).status_code == 200
        _wait_refused(_url(instance, "east"), urls["east"])
        producer.send(b"via-west")  # the client moved to west's proxy
        assert [m.data() for m in _receive_all(reader, 1)] == [b"via-west"]
        # what east stored before it left the network reaches west once it is back
        assert HTTP.delete(f"{_url(instance, 'west')}/_magnetar/local/clusters/east/outage", timeout=10).status_code == 200
        _wait_open(_url(instance, "east"))
        _maintenance(instance, "east")
        assert [m.data() for m in _receive_all(reader, 1)] == [b"via-east"]
    finally:
        HTTP.delete(f"{_url(instance, 'west')}/_magnetar/local/clusters/east/outage", timeout=10)
        _wait_open(_url(instance, "east"))
        _home_back(instance)
        client.close()
        west.close()
