"""Partitioned topics, routing modes, multi-topic and pattern subscriptions (Pulsar's documented behaviours)."""

from __future__ import annotations

import re
import uuid
from collections import defaultdict

import pytest

import magnetar
from http_helpers import HTTP
from magnetar.client import exceptions
from sdk_helpers import receive_until_quiet

Earliest = magnetar.InitialPosition.Earliest
Routing = magnetar.PartitionsRoutingMode


def admin_url(cluster, topic: str) -> str:  # type: ignore[no-untyped-def]
    return f"{cluster.url}/admin/v2/{topic.replace('://', '/')}"


def create_partitioned(cluster, topic: str, n: int) -> None:  # type: ignore[no-untyped-def]
    response = HTTP.put(f"{admin_url(cluster, topic)}/partitions", json=n)
    assert response.status_code == 204, response.text




# --- admin ---------------------------------------------------------------------------------------
def test_partitioned_topic_created_with_n_partitions_reports_them(
    client: magnetar.Client, topic: str, cluster
) -> None:  # type: ignore[no-untyped-def]
    create_partitioned(cluster, topic, 3)
    assert HTTP.get(f"{admin_url(cluster, topic)}/partitions").json() == {"partitions": 3}
    assert client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]


def test_partitioned_topic_partitions_can_be_increased(client: magnetar.Client, topic: str, cluster) -> None:  # type: ignore[no-untyped-def]
    create_partitioned(cluster, topic, 2)
    response = HTTP.post(f"{admin_url(cluster, topic)}/partitions", json=4)
    assert response.status_code == 204, response.text
    assert HTTP.get(f"{admin_url(cluster, topic)}/partitions").json() == {"partitions": 4}
    producer = client.create_producer(topic, batching_enabled=False,
                                      message_routing_mode=Routing.CustomPartition,
                                      message_router=lambda msg, n: n - 1)
    assert producer.send(b"on the new partition").partition() == 3


def test_partitioned_topic_partitions_cannot_be_decreased(topic: str, cluster) -> None:  # type: ignore[no-untyped-def]
    create_partitioned(cluster, topic, 3)
    response = HTTP.post(f"{admin_url(cluster, topic)}/partitions", json=2)
    assert response.status_code == 400
    assert "can only grow" in response.json()["reason"]
    assert HTTP.get(f"{admin_url(cluster, topic)}/partitions").json() == {"partitions": 3}


def test_partitioned_topic_refuses_zero_partitions(topic: str, cluster) -> None:  # type: ignore[no-untyped-def]
    response = HTTP.put(f"{admin_url(cluster, topic)}/partitions", json=0)
    assert response.status_code == 400
    assert "Number of partitions" in response.json()["reason"]


def test_partitions_are_internal_topics_named_topic_partition_i(
    client: magnetar.Client, topic: str, cluster
) -> None:  # type: ignore[no-untyped-def]
    create_partitioned(cluster, topic, 2)
    client.create_producer(topic, batching_enabled=False, message_routing_mode=Routing.CustomPartition,
                           message_router=lambda msg, n: int(msg.data()) % n).send(b"1")
    # the partition is a topic of its own: it can be consumed directly
    direct = client.subscribe(f"{topic}-partition-1", "direct", initial_position=Earliest)
    msg = direct.receive(timeout_millis=5000)
    assert msg.data() == b"1" and msg.topic_name() == f"{topic}-partition-1"


# --- routing modes -------------------------------------------------------------------------------
def test_round_robin_routing_rotates_batches_over_the_partitions(
    client: magnetar.Client, topic: str, cluster
) -> None:  # type: ignore[no-untyped-def]
    create_partitioned(cluster, topic, 3)
    producer = client.create_producer(topic, batching_max_messages=5, batching_max_publish_delay_ms=10_000)
    ids: list[magnetar.MessageId] = []
    for i in range(15):
        producer.send_async(f"m{i}".encode(), lambda result, mid: ids.append(mid))
    producer.flush()
    assert len(ids) == 15
    by_partition: dict[int, set[int]] = defaultdict(set)
    for mid in ids:
        by_partition[mid.partition()].add(mid.entry_id())
    assert set(by_partition) == {0, 1, 2}, "unkeyed messages end up on several partitions"
    assert all(len(entries) == 1 for entries in by_partition.values()), "a batch stays on one partition"


def test_round_robin_routing_without_batching_spreads_messages(
    client: magnetar.Client, topic: str, cluster
) -> None:  # type: ignore[no-untyped-def]
    create_partitioned(cluster, topic, 3)
    producer = client.create_producer(topic, batching_enabled=False)
    partitions = [producer.send(f"m{i}".encode()).partition() for i in range(6)]
    assert sorted(partitions) == [0, 0, 1, 1, 2, 2]


def test_single_partition_routing_puts_all_unkeyed_messages_on_one_partition(
    client: magnetar.Client, topic: str, cluster
) -> None:  # type: ignore[no-untyped-def]
    create_partitioned(cluster, topic, 4)
    producer = client.create_producer(topic, batching_enabled=False,
                                      message_routing_mode=Routing.UseSinglePartition)
    partitions = {producer.send(f"m{i}".encode()).partition() for i in range(8)}
    assert len(partitions) == 1 and partitions <= {0, 1, 2, 3}


def test_key_hash_routing_puts_a_key_always_on_the_same_partition(
    client: magnetar.Client, topic: str, cluster
) -> None:  # type: ignore[no-untyped-def]
    create_partitioned(cluster, topic, 3)
    for mode in (Routing.RoundRobinDistribution, Routing.UseSinglePartition):  # a key overrides both
        producer = client.create_producer(topic, batching_enabled=False, message_routing_mode=mode)
        by_key: dict[str, set[int]] = defaultdict(set)
        for i in range(30):
            key = f"key-{i % 10}"
            by_key[key].add(producer.send(f"m{i}".encode(), partition_key=key).partition())
        assert all(len(p) == 1 for p in by_key.values()), dict(by_key)
        assert len({p for ps in by_key.values() for p in ps}) > 1, "keys spread over partitions"
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    seen: dict[str, set[int]] = defaultdict(set)
    # a new consumer of three partitions: its first poll may take seconds on a loaded machine
    for msg in receive_until_quiet(consumer, timeout_ms=5_000):
        seen[msg.partition_key()].add(msg.message_id().partition())
    assert len(seen) == 10 and all(len(p) == 1 for p in seen.values())


def test_custom_router_chooses_the_partition(client: magnetar.Client, topic: str, cluster) -> None:  # type: ignore[no-untyped-def]
    create_partitioned(cluster, topic, 3)
    producer = client.create_producer(topic, message_routing_mode=Routing.CustomPartition,
                                      message_router=lambda msg, n: 1)
    ids = [producer.send(f"m{i}".encode(), partition_key=f"k{i}") for i in range(5)]
    assert {mid.partition() for mid in ids} == {1}
    consumer = client.subscribe(f"{topic}-partition-1", "sub", initial_position=Earliest)
    assert len(receive_until_quiet(consumer)) == 5


def test_custom_routing_without_a_router_is_refused(client: magnetar.Client, topic: str, cluster) -> None:  # type: ignore[no-untyped-def]
    create_partitioned(cluster, topic, 2)
    with pytest.raises(exceptions.InvalidConfiguration) as refused:
        client.create_producer(topic, message_routing_mode=Routing.CustomPartition)
    assert "message_router" in refused.value.reason


# --- consuming -----------------------------------------------------------------------------------
def test_consumer_of_a_partitioned_topic_receives_from_all_partitions(
    client: magnetar.Client, topic: str, cluster
) -> None:  # type: ignore[no-untyped-def]
    create_partitioned(cluster, topic, 3)
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=False, message_routing_mode=Routing.CustomPartition,
                                      message_router=lambda msg, n: int(msg.data()) % n)
    sent = {producer.send(str(i).encode()): i for i in range(9)}
    received = receive_until_quiet(consumer)
    assert sorted(int(m.data()) for m in received) == list(range(9))
    for msg in received:
        partition = msg.message_id().partition()
        assert partition == int(msg.data()) % 3, "MessageId.partition() tells which partition"
        assert msg.topic_name() == f"{topic}-partition-{partition}"
        assert sent[msg.message_id()] == int(msg.data())


def test_subscribe_to_a_list_of_topics_receives_from_all_of_them(client: magnetar.Client, topic: str) -> None:
    topics = [f"{topic}-a", f"{topic}-b", f"{topic}-c"]
    consumer = client.subscribe(topics, "sub")
    for t in topics:
        client.create_producer(t, batching_enabled=False).send(t.encode())
    received = receive_until_quiet(consumer)
    assert sorted(m.data().decode() for m in received) == topics
    assert all(m.topic_name() == m.data().decode() for m in received)


def test_subscribe_by_regex_pattern_receives_from_all_matching_topics(
    client: magnetar.Client, cluster
) -> None:  # type: ignore[no-untyped-def]
    prefix = f"prefix{uuid.uuid4().hex[:8]}"
    base = "persistent://public/default"
    matching = [f"{base}/{prefix}-one", f"{base}/{prefix}-two"]
    partitioned = f"{base}/{prefix}-parts"
    other = f"{base}/other{prefix}-three"
    create_partitioned(cluster, partitioned, 2)
    for t in [*matching, other]:
        client.create_producer(t, batching_enabled=False).send(b"before")  # the topics exist
    consumer = client.subscribe(re.compile(rf"persistent://public/default/{prefix}-.*"), "sub")
    for t in [*matching, other]:
        client.create_producer(t, batching_enabled=False).send(t.encode())
    client.create_producer(partitioned, batching_enabled=False).send(partitioned.encode())
    received = receive_until_quiet(consumer)
    assert sorted(m.data().decode() for m in received) == sorted([*matching, partitioned])
    assert all(not m.topic_name().startswith(other) for m in received)


def test_a_custom_router_sees_the_message_as_pulsar_client_gives_it(
    client: magnetar.Client, topic: str, cluster
) -> None:  # type: ignore[no-untyped-def]
    create_partitioned(cluster, topic, 3)
    seen: list[tuple[str, str, dict[str, str], int]] = []

    def route(msg: magnetar.Message, partitions: int) -> int:
        seen.append((msg.partition_key(), msg.ordering_key().decode() if isinstance(msg.ordering_key(), bytes)
                     else msg.ordering_key(), msg.properties(), msg.event_timestamp()))
        return int(msg.properties()["to"])

    producer = client.create_producer(topic, batching_enabled=False, message_routing_mode=Routing.CustomPartition,
                                      message_router=route)
    producer.send(b"x", partition_key="pk", ordering_key="ok", properties={"to": "2"}, event_timestamp=1234)
    assert seen == [("pk", "ok", {"to": "2"}, 1234)]
    direct = client.subscribe(f"{topic}-partition-2", "direct", initial_position=Earliest)
    assert direct.receive(timeout_millis=5000).data() == b"x"
