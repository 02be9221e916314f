"""A client's consumers of one subscription of a topic that is not partitioned poll together: one
receive (`joined`) serves them all, through the HTTP API and the SDK."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

import magnetar
from http_helpers import HTTP
from sdk_helpers import receive_until_quiet

Earliest = magnetar.InitialPosition.Earliest


def base(cluster: Any, topic: str, sub: str) -> str:
    return f"{cluster.url}/magnetar/v1/consumer/{topic.replace('://', '/')}/{sub}"


def attach(cluster: Any, topic: str, sub: str, consumer: str, sub_type: str = "Shared") -> None:
    response = HTTP.put(f"{base(cluster, topic, sub)}/{consumer}",
                        json={"subscriptionType": sub_type, "initialPosition": "Earliest"})
    assert response.status_code == 200, response.text


def receive(cluster: Any, topic: str, sub: str, consumer: str, body: dict[str, Any]) -> httpx.Response:
    return HTTP.post(f"{base(cluster, topic, sub)}/{consumer}/receive", json=body, timeout=40)


def publish(client: magnetar.Client, topic: str, n: int) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(n):
        producer.send(f"m{i}".encode())
    producer.close()


def test_one_receive_serves_joined_consumers_of_a_topic_each_with_its_own_entries_and_acks(
    client: magnetar.Client, cluster: Any, topic: str
) -> None:
    for consumer in ("c0", "c1"):
        attach(cluster, topic, "s", consumer)
    publish(client, topic, 4)
    got: dict[str, list[dict[str, Any]]] = {"c0": [], "c1": []}
    deadline = time.monotonic() + 30
    while sum(map(len, got.values())) < 4 and time.monotonic() < deadline:
        answer = receive(cluster, topic, "s", "c0", {"maxMessages": 2, "waitMs": 1000,
                                                     "joined": [{"consumer": "c1", "maxMessages": 2}]})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        got["c0"] += body["entries"]
        got["c1"] += body["joined"]["c1"]["entries"]
        assert isinstance(body["epoch"], int) and isinstance(body["joined"]["c1"]["epoch"], int)
    assert sorted(e["entryId"] for e in got["c0"] + got["c1"]) == [0, 1, 2, 3], "each entry once"
    assert all(e["partition"] == -1 for e in got["c0"] + got["c1"])
    assert got["c1"], "the joined consumer got its share"
    acks = {"messageIds": [f"{e['ledgerId']}:{e['entryId']}:-1:-1" for e in got["c1"]]}
    answer = receive(cluster, topic, "s", "c0", {"waitMs": 0, "joined": [{"consumer": "c1", "acks": acks}]})
    assert answer.status_code == 200, answer.text
    stats = HTTP.get(f"{cluster.url}/admin/v2/{topic.replace('://', '/')}/stats", timeout=30).json()
    assert stats["subscriptions"]["s"]["msgBacklog"] == len(got["c0"]), "c1's acks were applied, c0's not sent"


@pytest.mark.parametrize("joined, status", [
    ([{"consumer": "c0"}], 400),  # the receive's own consumer again
    ([{"consumer": "c1"}, {"consumer": "c1"}], 400),
    ([{"consumer": "c1", "acks": {"partitions": {"0": {"messageIds": []}}}}], 400),
    ([{"consumer": "nobody"}], 404),  # not attached
])
def test_bad_joined_receives_of_a_topic_are_refused_and_change_nothing(
    client: magnetar.Client, cluster: Any, topic: str, joined: list[dict[str, Any]], status: int
) -> None:
    for consumer in ("c0", "c1"):
        attach(cluster, topic, "s", consumer)
    publish(client, topic, 1)
    response = receive(cluster, topic, "s", "c0", {"waitMs": 0, "joined": joined})
    assert response.status_code == status, response.text
    assert response.json()["reason"]
    deadline = time.monotonic() + 30
    entries: list[dict[str, Any]] = []
    while not entries and time.monotonic() < deadline:
        entries = receive(cluster, topic, "s", "c0", {"waitMs": 1000}).json()["entries"]
    assert entries and entries[0]["redeliveryCount"] == 0, "the refused receive handed out nothing"


def test_a_clients_consumers_of_a_topic_poll_together_and_get_every_message_once(
    client: magnetar.Client, topic: str
) -> None:
    """Two Shared consumers in one client receiving in batches (each looks once a seal is due):
    a look carries the other consumer when it has no poll of its own out (`joined`), every message
    arrives once, and each consumer gets a share."""
    bodies: list[dict[str, Any]] = []

    def record(request: httpx.Request) -> None:
        if request.url.path.endswith("/receive"):
            bodies.append(json.loads(request.content))

    client._transport.http.event_hooks["request"].append(record)
    policy = magnetar.ConsumerBatchReceivePolicy(100, 10 * 1024 * 1024, 100)
    consumers = [client.subscribe(topic, "s", consumer_type=magnetar.ConsumerType.Shared, consumer_name=f"c{i}",
                                  initial_position=Earliest, batch_receive_policy=policy) for i in range(2)]
    producer = client.create_producer(topic, batching_max_messages=5)
    got: dict[int, list[bytes]] = {0: [], 1: []}
    stop = threading.Event()

    def drain(i: int) -> None:
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 3 or not stop.is_set():
            batch = consumers[i].batch_receive()
            for m in batch:
                consumers[i].acknowledge(m)
            got[i] += [m.data() for m in batch]
            if batch:
                quiet_since = time.monotonic()

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for i in range(200):  # 100 msg/s for 2 s
        producer.send_async(f"m{i}".encode(), None)
        time.sleep(0.01)
    producer.flush()
    stop.set()
    for t in threads:
        t.join()
    assert sorted(got[0] + got[1]) == sorted(f"m{i}".encode() for i in range(200))
    assert got[0] and got[1], "both consumers got a share"
    together = [b for b in bodies if b.get("joined")]
    assert len(together) >= len(bodies) // 2, f"{len(together)} of {len(bodies)} polls carried the other consumer"
    for c in consumers:
        c.close()


def test_a_consumer_carried_by_another_still_seeks_and_redelivers(client: magnetar.Client, topic: str) -> None:
    a = client.subscribe(topic, "s", consumer_type=magnetar.ConsumerType.Shared, consumer_name="a",
                         initial_position=Earliest)
    b = client.subscribe(topic, "s", consumer_type=magnetar.ConsumerType.Shared, consumer_name="b",
                         initial_position=Earliest)
    publish(client, topic, 6)
    seen = [m.data() for c in (a, b) for m in receive_until_quiet(c, 2000)]
    assert sorted(seen) == sorted(f"m{i}".encode() for i in range(6))
    b.seek(magnetar.MessageId.earliest)  # for the whole subscription: everything comes again
    again = [m.data() for c in (b, a) for m in receive_until_quiet(c, 2000)]
    assert sorted(again) == sorted(seen)
    a.close()
    b.close()
