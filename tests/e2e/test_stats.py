"""Topic stats through the HTTP API, the SDK's AdminClient and the CLI, on a known workload.

Producers publish with batching off, so entries are messages: msgBacklog and unackedMessages
(counted in entries) are then message counts.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

import magnetar
from http_helpers import HTTP
from magnetar.cli.main import app
from magnetar.client.admin import AdminClient
from magnetar.core.entry import Message, encode_messages

PAYLOAD = b"x" * 100
ENTRY_BYTES = len(encode_messages([Message(PAYLOAD)]))  # the stored batch payload of one message
runner = CliRunner()


def eventually(read: Callable[[], Any], ok: Callable[[Any], bool], timeout_s: float = 20.0) -> Any:
    """Poll `read` until `ok` holds (grouped acks and the sealer land a moment later)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def sealed(internal: dict[str, Any]) -> int:
    """How many entries the topic's segments hold (internal stats)."""
    return sum(seg["lastEntry"] - seg["firstEntry"] + 1 for le in internal["ledgers"] for seg in le["segments"])


def path(topic: str) -> str:
    return topic.replace("://", "/", 1)


@pytest.fixture
def workload(cluster: Any, client: magnetar.Client, admin: AdminClient, topic: str) -> Iterator[dict[str, Any]]:
    """2 producers x 50 messages of 100 bytes; Shared `shared`: c1 and c2 each take 15 and ack them
    (20 each were handed out: the receive queue holds 10); Exclusive `excl`: e1 takes nothing. c1
    and c2 are in clients of their own, so each polls only for itself (consumers of one client poll
    together: a poll of one would fill the other's queue too) and the counts are exact."""
    other = magnetar.Client(cluster.url)
    shared = [c.subscribe(topic, "shared", consumer_type=magnetar.ConsumerType.Shared, consumer_name=name,
                          initial_position=magnetar.InitialPosition.Earliest, receiver_queue_size=10)
              for c, name in ((client, "c1"), (other, "c2"))]
    excl = client.subscribe(topic, "excl", consumer_type=magnetar.ConsumerType.Exclusive, consumer_name="e1",
                            initial_position=magnetar.InitialPosition.Earliest, receiver_queue_size=10)
    for name in ("prod-a", "prod-b"):
        producer = client.create_producer(topic, producer_name=name, batching_enabled=False)
        for _ in range(50):
            producer.send_async(PAYLOAD, None)
        producer.flush()
    # consumers read sealed entries: wait until all 100 are, so each poll hands out a full queue
    # (a poll that finds part of a queue sealed hands out fewer, and the counts below would vary)
    eventually(lambda: admin.topic_internal_stats(topic), lambda s: sealed(s) == 100)
    for consumer in shared:
        for _ in range(15):
            consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    yield {"topic": topic, "excl": excl}
    other.close()


def test_topic_stats_of_a_known_workload(cluster, admin: AdminClient, workload: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    topic = workload["topic"]
    # the acks and the consumers' last prefetches land a moment after the receives: wait on both
    stats = eventually(lambda: admin.topic_stats(topic), lambda s: (s["subscriptions"]["shared"]["msgBacklog"] == 70
                                                                   and s["subscriptions"]["shared"]["unackedMessages"] == 10))
    assert stats["msgInCounter"] == 100 and stats["bytesInCounter"] == 100 * ENTRY_BYTES
    assert stats["averageMsgSize"] == ENTRY_BYTES
    assert sorted(p["producerName"] for p in stats["publishers"]) == ["prod-a", "prod-b"]
    assert all(p["msgInCounter"] == 50 and p["connectedSince"] for p in stats["publishers"])
    shared, excl = stats["subscriptions"]["shared"], stats["subscriptions"]["excl"]
    assert shared["type"] == "Shared" and excl["type"] == "Exclusive"
    assert shared["msgBacklog"] == 70 and excl["msgBacklog"] == 100
    assert shared["unackedMessages"] == 10 and excl["unackedMessages"] == 0
    assert {c["consumerName"]: c["unackedMessages"] for c in shared["consumers"]} == {"c1": 5, "c2": 5}
    assert [c["consumerName"] for c in excl["consumers"]] == ["e1"]
    assert shared["msgOutCounter"] == 40 and stats["msgOutCounter"] == 40
    assert shared["bytesOutCounter"] == 40 * ENTRY_BYTES and shared["msgRateOut"] > 0
    assert shared["isDurable"] is True and stats["replication"] == {}
    assert stats["deduplicationStatus"] == "Disabled"
    assert shared["nonContiguousDeletedMessagesRanges"] == 1, "c2 acked 20..34 while 15..19 wait on c1"

    # everything is sealed (the fixture waited for it): sizes come from the segments
    internal = eventually(lambda: admin.topic_internal_stats(topic), lambda s: sealed(s) == 100)
    assert sealed(internal) == 100
    assert internal["entriesAddedCounter"] == 100 and internal["numberOfEntries"] == 100
    stats = admin.topic_stats(topic)
    assert stats["storageSize"] == internal["totalSize"] > 100 * ENTRY_BYTES
    assert stats["backlogSize"] == stats["storageSize"], "excl acknowledged nothing: everything is backlog"
    assert stats["msgRateIn"] > 0 and stats["msgThroughputIn"] > 0

    # the same document over plain HTTP
    response = HTTP.get(f"{cluster.url}/admin/v2/{path(topic)}/stats")
    assert response.status_code == 200 and response.json()["msgInCounter"] == 100


def test_internal_stats_after_a_cumulative_ack(admin: AdminClient, workload: dict[str, Any]) -> None:
    topic, excl = workload["topic"], workload["excl"]
    received = [excl.receive(timeout_millis=10_000) for _ in range(10)]
    excl.acknowledge_cumulative(received[-1])
    last = received[-1].message_id()
    expected = f"{last.ledger_id()}:{last.entry_id()}"
    internal = eventually(lambda: admin.topic_internal_stats(topic),
                          lambda s: s["cursors"]["excl"]["markDeletePosition"] == expected
                          and s["cursors"]["shared"]["markDeletePosition"].endswith(":14"))
    cursor = internal["cursors"]["excl"]
    assert cursor["markDeletePosition"] == expected and cursor["individuallyDeletedMessages"] == "[]"
    assert cursor["readPosition"].endswith(":10") and cursor["state"] == "Open"
    assert internal["cursors"]["shared"]["markDeletePosition"].endswith(":14")  # c1 acked 0..14
    assert internal["lastConfirmedEntry"].endswith(":99") and internal["state"] == "LedgerOpened"
    assert admin.topic_stats(topic)["subscriptions"]["excl"]["msgBacklog"] == 90


def test_partitioned_stats_sum_partitions(cluster, client: magnetar.Client, admin: AdminClient) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://public/default/stats-parts-{uuid.uuid4().hex[:8]}"
    admin.create_partitioned_topic(topic, 3)
    client.subscribe(topic, "s", consumer_type=magnetar.ConsumerType.Shared,
                     initial_position=magnetar.InitialPosition.Earliest)
    producer = client.create_producer(topic, producer_name="pp", batching_enabled=False)
    for _ in range(30):
        producer.send_async(PAYLOAD, None)
    producer.flush()
    stats = admin.partitioned_topic_stats(topic)
    names = [f"{topic}-partition-{i}" for i in range(3)]
    assert stats["metadata"] == {"partitions": 3} and sorted(stats["partitions"]) == names
    assert stats["msgInCounter"] == 30 == sum(stats["partitions"][n]["msgInCounter"] for n in names)
    assert [stats["partitions"][n]["msgInCounter"] for n in names] == [10, 10, 10]
    assert stats["bytesInCounter"] == 30 * ENTRY_BYTES
    assert stats["subscriptions"]["s"]["msgBacklog"] == 30 and len(stats["subscriptions"]["s"]["consumers"]) == 3
    assert sorted(p["producerName"] for p in stats["publishers"]) == [f"pp-p{i}" for i in range(3)]
    assert admin.partitioned_topic_stats(topic, per_partition=False)["partitions"] == {}
    response = HTTP.get(f"{cluster.url}/admin/v2/{path(topic)}/partitioned-stats?perPartition=false")
    assert response.status_code == 200 and response.json()["msgInCounter"] == 30
    internal = HTTP.get(f"{cluster.url}/admin/v2/{path(topic)}/partitioned-internalStats").json()
    assert sum(p["entriesAddedCounter"] for p in internal["partitions"].values()) == 30

    # a partition's own stats; the partitioned topic's base name points to partitioned-stats (404)
    assert admin.topic_stats(names[0])["msgInCounter"] == 10
    response = HTTP.get(f"{cluster.url}/admin/v2/{path(topic)}/stats")
    assert response.status_code == 404 and "partitioned-stats" in response.json()["reason"]


def test_stats_of_unknown_topics_are_404(cluster, topic: str) -> None:  # type: ignore[no-untyped-def]
    for suffix in ("stats", "internalStats", "partitioned-stats"):
        response = HTTP.get(f"{cluster.url}/admin/v2/{path(topic)}/{suffix}")
        assert response.status_code == 404 and response.json()["reason"], suffix
    response = HTTP.get(f"{cluster.url}/admin/v2/{path(topic)}/partitioned-stats?perPartition=maybe")
    assert response.status_code == 400


def test_non_persistent_topic_stats_answer_zeros(cluster, admin: AdminClient) -> None:  # type: ignore[no-untyped-def]
    topic = f"non-persistent://public/default/stats-np-{uuid.uuid4().hex[:8]}"
    admin.create_topic(topic)
    stats = admin.topic_stats(topic)
    assert stats["msgInCounter"] == 0 and stats["storageSize"] == 0 and stats["backlogSize"] == 0


def test_cli_stats_commands(cluster, admin: AdminClient, client: magnetar.Client, topic: str) -> None:  # type: ignore[no-untyped-def]
    producer = client.create_producer(topic, producer_name="cli-p", batching_enabled=False)
    producer.send(PAYLOAD)
    parted = f"persistent://public/default/stats-cli-{uuid.uuid4().hex[:8]}"
    admin.create_partitioned_topic(parted, 2)

    def run(*args: str) -> str:
        result = runner.invoke(app, ["admin", "topics", *args, "--service-url", cluster.url])
        assert result.exit_code == 0, result.output
        return result.output

    out = run("stats", topic)
    assert '"msgInCounter": 1' in out and '"producerName": "cli-p"' in out
    assert '"entriesAddedCounter": 1' in run("stats-internal", topic)
    out = run("partitioned-stats", parted)
    assert '"partitions": 2' in out and f"{parted}-partition-1" in out
    assert f"{parted}-partition-1" not in run("partitioned-stats", parted, "--no-per-partition")
    result = runner.invoke(app, ["admin", "topics", "stats", parted, "--service-url", cluster.url])
    assert result.exit_code == 1 and "partitioned-stats" in result.output
