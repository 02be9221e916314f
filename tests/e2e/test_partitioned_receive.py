"""One receive for all the partitions of a partitioned topic (issue #9), through the HTTP API and the SDK.

The route is the single-partition receive on the partitioned topic's own name with `partitions`
in the body; entries name their partition, acks ride along by partition. The SDK's consumer of a
partitioned topic polls with it: one long poll per consumer, not one per partition.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from typing import Any

import httpx
import pytest

import magnetar
from http_helpers import HTTP
from magnetar.client import exceptions
from magnetar.client.partitioned import key_partition
from sdk_helpers import producing, receive_until_quiet

Earliest = magnetar.InitialPosition.Earliest
Routing = magnetar.PartitionsRoutingMode


def create_partitioned(cluster: Any, topic: str, n: int) -> None:
    response = HTTP.put(f"{cluster.url}/admin/v2/{topic.replace('://', '/')}/partitions", json=n)
    assert response.status_code == 204, response.text


def consumer_base(cluster: Any, topic: str, sub: str) -> str:
    return f"{cluster.url}/magnetar/v1/consumer/{topic.replace('://', '/')}/{sub}"


def subscribe_partitions(cluster: Any, topic: str, sub: str, consumer: str, n: int, sub_type: str = "Shared") -> None:
    for p in range(n):
        response = HTTP.put(f"{consumer_base(cluster, f'{topic}-partition-{p}', sub)}/{consumer}",
                             json={"subscriptionType": sub_type, "initialPosition": "Earliest"})
        assert response.status_code == 200, response.text


def send_to(client: magnetar.Client, topic: str, partition: int, payloads: list[bytes], key: str | None = None) -> None:
    producer = client.create_producer(topic, batching_enabled=False, message_routing_mode=Routing.CustomPartition,
                                      message_router=lambda msg, n: partition)
    for payload in payloads:
        producer.send(payload, partition_key=key)
    producer.close()


def receive(cluster: Any, topic: str, sub: str, consumer: str, body: dict[str, Any]) -> httpx.Response:
    return HTTP.post(f"{consumer_base(cluster, topic, sub)}/{consumer}/receive", json=body, timeout=40)


def wait_entries(cluster: Any, topic: str, sub: str, consumer: str, partitions: list[int], want: int,
                 max_messages: int = 100) -> list[dict[str, Any]]:
    """Receive (acking what came) until `want` entries arrived (sealing takes a moment)."""
    got: list[dict[str, Any]] = []
    acks: dict[str, Any] = {}
    deadline = time.monotonic() + 30
    while len(got) < want and time.monotonic() < deadline:
        body: dict[str, Any] = {"partitions": partitions, "maxMessages": max_messages, "waitMs": 2000}
        if acks:
            body["acks"] = {"partitions": acks}
        response = receive(cluster, topic, sub, consumer, body)
        assert response.status_code == 200, response.text
        entries = response.json()["entries"]
        got.extend(entries)
        acks = defaultdict(lambda: {"messageIds": []})
        for e in entries:
            acks[str(e["partition"])]["messageIds"].append(f"{e['ledgerId']}:{e['entryId']}:{e['partition']}:-1")
        acks = dict(acks)
    if acks:  # the last ones too
        response = HTTP.post(f"{consumer_base(cluster, topic, sub)}/{consumer}/ack", json={"partitions": acks})
        assert response.status_code == 200, response.text
    return got


def wait_sealed(cluster: Any, topic: str, entries: dict[int, int], timeout_s: float = 60) -> None:
    """Until each partition's sealed segments hold its `entries` (the journal consumer seals
    partition by partition, and on a slow emulator a batch may be retried)."""
    deadline = time.monotonic() + timeout_s
    for p, want in entries.items():
        url = f"{cluster.url}/admin/v2/{topic.replace('://', '/')}-partition-{p}/internalStats"
        while True:
            ledgers = HTTP.get(url, timeout=30).json()["ledgers"]
            sealed = sum(s["lastEntry"] - s["firstEntry"] + 1 for ledger in ledgers for s in ledger["segments"])
            if sealed >= want:
                break
            assert time.monotonic() < deadline, f"partition {p}: {sealed} of {want} entries sealed"
            time.sleep(0.3)


# --- HTTP API --------------------------------------------------------------------------------------
def test_one_receive_serves_every_partition_and_entries_name_their_partition(
    client: magnetar.Client, cluster: Any, topic: str
) -> None:
    create_partitioned(cluster, topic, 3)
    subscribe_partitions(cluster, topic, "s", "c", 3)
    for p in range(3):
        send_to(client, topic, p, [f"p{p}-{i}".encode() for i in range(4)])
    got = wait_entries(cluster, topic, "s", "c", [0, 1, 2], 12)
    assert sorted((e["partition"], e["entryId"]) for e in got) == [(p, i) for p in range(3) for i in range(4)]
    # acknowledged by partition (riding on the polls and the multi-partition ack): nothing comes again
    response = receive(cluster, topic, "s", "c", {"partitions": [0, 1, 2], "waitMs": 0})
    assert response.status_code == 200 and response.json()["entries"] == []
    assert response.json()["epochs"] == {"0": 0, "1": 0, "2": 0}
    backlog = HTTP.get(f"{cluster.url}/admin/v2/{topic.replace('://', '/')}/partitioned-stats").json()
    assert backlog["subscriptions"]["s"]["msgBacklog"] == 0


def test_max_messages_is_split_fairly_so_no_partition_starves(
    client: magnetar.Client, cluster: Any, topic: str
) -> None:
    create_partitioned(cluster, topic, 4)
    subscribe_partitions(cluster, topic, "s", "c", 4)
    send_to(client, topic, 0, [b"busy"] * 60)
    for p in (1, 2, 3):
        send_to(client, topic, p, [b"quiet"] * 3)
    wait_sealed(cluster, topic, {0: 60, 1: 3, 2: 3, 3: 3})  # receives serve sealed entries only
    response = receive(cluster, topic, "s", "c", {"partitions": [0, 1, 2, 3], "maxMessages": 8, "waitMs": 5000})
    entries = response.json()["entries"]
    per_partition: dict[int, int] = defaultdict(int)
    for e in entries:
        per_partition[e["partition"]] += 1
    assert len(entries) == 8
    assert set(per_partition) == {0, 1, 2, 3}, per_partition  # the busy partition did not take it all
    # what the quiet partitions leave (one entry each) goes to the busy one, past its share of 10
    response = receive(cluster, topic, "s", "c", {"partitions": [0, 1, 2, 3], "maxMessages": 40, "waitMs": 5000})
    partitions = [e["partition"] for e in response.json()["entries"]]
    assert sorted(set(partitions)) == [0, 1, 2, 3] and partitions.count(0) > 10, partitions


def test_acks_and_nacks_ride_on_the_receive_by_partition(client: magnetar.Client, cluster: Any, topic: str) -> None:
    create_partitioned(cluster, topic, 2)
    subscribe_partitions(cluster, topic, "s", "c", 2)
    send_to(client, topic, 0, [b"a"])
    send_to(client, topic, 1, [b"b"])
    first = wait_entries_unacked(cluster, topic, "s", "c", [0, 1], 2)
    by_p = {e["partition"]: e for e in first}
    acks = {"partitions": {
        "0": {"messageIds": [f"{by_p[0]['ledgerId']}:{by_p[0]['entryId']}:0:-1"]},
        "1": {"nacks": [f"{by_p[1]['ledgerId']}:{by_p[1]['entryId']}:1:-1"], "nackDelayMs": 0},
    }}
    response = receive(cluster, topic, "s", "c", {"partitions": [0, 1], "waitMs": 5000, "acks": acks})
    again = response.json()["entries"]
    assert [(e["partition"], e["entryId"], e["redeliveryCount"]) for e in again] == [(1, by_p[1]["entryId"], 1)]


def wait_entries_unacked(cluster: Any, topic: str, sub: str, consumer: str, partitions: list[int],
                         want: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while len(got) < want and time.monotonic() < deadline:
        response = receive(cluster, topic, sub, consumer, {"partitions": partitions, "waitMs": 2000})
        assert response.status_code == 200, response.text
        got.extend(response.json()["entries"])
    assert len(got) == want
    return got


def test_retried_receive_gets_the_same_entries_of_every_partition(
    client: magnetar.Client, cluster: Any, topic: str
) -> None:
    create_partitioned(cluster, topic, 2)
    subscribe_partitions(cluster, topic, "s", "c", 2)
    send_to(client, topic, 0, [b"a"])
    send_to(client, topic, 1, [b"b"])
    time.sleep(2)
    body = {"partitions": [0, 1], "waitMs": 5000, "minMessages": 2, "requestId": "r-1"}
    first = receive(cluster, topic, "s", "c", body).json()["entries"]
    second = receive(cluster, topic, "s", "c", body).json()["entries"]  # a client retry, response lost
    assert len(first) == 2
    assert sorted((e["partition"], e["entryId"]) for e in second) == sorted((e["partition"], e["entryId"]) for e in first)


def test_a_refused_receive_changes_nothing(client: magnetar.Client, cluster: Any, topic: str) -> None:
    create_partitioned(cluster, topic, 2)
    subscribe_partitions(cluster, topic, "s", "c", 2)
    send_to(client, topic, 0, [b"a"])
    time.sleep(2)
    # a cumulative ack on a Shared subscription is refused: no partition hands anything out meanwhile
    acks = {"partitions": {"1": {"cumulative": "0:0:1:-1"}}}
    response = receive(cluster, topic, "s", "c", {"partitions": [0, 1], "acks": acks})
    assert response.status_code == 405, response.text
    got = wait_entries_unacked(cluster, topic, "s", "c", [0, 1], 1)
    assert got[0]["redeliveryCount"] == 0


@pytest.mark.parametrize("body, status", [
    ({"partitions": []}, 400),
    ({"partitions": [0, 0]}, 400),
    ({"partitions": [-1]}, 400),
    ({"partitions": [0], "acks": {"partitions": {"x": {"messageIds": []}}}}, 400),
    ({"partitions": [0], "acks": {"partitions": {"1": {"messageIds": []}}}}, 400),  # not received from
    ({"partitions": [0], "acks": {"messageIds": ["1:0:0:-1"], "partitions": {}}}, 400),
    ({"acks": {"partitions": {"0": {}}}}, 400),  # by partition, but no partitions to receive from
    ({"partitions": [0, 5]}, 404),  # not subscribed on partition 5
])
def test_bad_multi_partition_receives_are_refused_with_a_reason(
    cluster: Any, topic: str, body: dict[str, Any], status: int
) -> None:
    create_partitioned(cluster, topic, 2)
    subscribe_partitions(cluster, topic, "s", "c", 2)
    response = receive(cluster, topic, "s", "c", body)
    assert response.status_code == status, response.text
    assert response.json()["reason"]


def test_partitions_of_a_partition_are_refused(cluster: Any, topic: str) -> None:
    create_partitioned(cluster, topic, 2)
    subscribe_partitions(cluster, topic, "s", "c", 2)
    response = receive(cluster, f"{topic}-partition-0", "s", "c", {"partitions": [0]})
    assert response.status_code == 400 and "partition" in response.json()["reason"]


# --- SDK -------------------------------------------------------------------------------------------
def record_paths(client: magnetar.Client) -> list[str]:
    paths: list[str] = []
    client._transport.http.event_hooks["request"].append(lambda request: paths.append(request.url.path))
    return paths


def covering_keys(count: int, partitions: int) -> list[str]:
    """`count` keys that the key-hash routing spreads over every partition (round robin)."""
    by_partition: dict[int, list[str]] = defaultdict(list)
    j = 0
    while any(len(by_partition[p]) < count for p in range(partitions)):
        by_partition[key_partition(f"key-{j}", partitions)].append(f"key-{j}")
        j += 1
    return [by_partition[k % partitions][k // partitions] for k in range(count)]


def produce_keys(client: magnetar.Client, topic: str, keys: int, per_key: int, partitions: int) -> None:
    names = covering_keys(keys, partitions)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(per_key):  # asynchronously (in order per partition), then flushed: fewer requests
        for k in range(keys):
            producer.send_async(f"{k}:{i}".encode(), None, partition_key=names[k])
    producer.flush()
    producer.close()


def test_sdk_consumer_of_a_partitioned_topic_polls_once_for_all_partitions(
    client: magnetar.Client, cluster: Any, topic: str
) -> None:
    create_partitioned(cluster, topic, 4)
    consumer = client.subscribe(topic, "s", initial_position=Earliest)
    paths = record_paths(client)
    produce_keys(client, topic, 8, 3, 4)
    got = receive_until_quiet(consumer, 3000)
    assert sorted(m.data() for m in got) == sorted(f"{k}:{i}".encode() for k in range(8) for i in range(3))
    assert {m.message_id().partition() for m in got} == {0, 1, 2, 3}
    receives = [p for p in paths if p.endswith("/receive")]
    assert receives and all(f"/{topic.split('/')[-1]}/s/" in p for p in receives), receives[:3]  # the parent's route
    consumer.close()


@pytest.mark.parametrize("sub_type", [magnetar.ConsumerType.Shared, magnetar.ConsumerType.KeyShared])
def test_several_sdk_consumers_get_every_message_exactly_once(
    client: magnetar.Client, cluster: Any, topic: str, sub_type: magnetar.ConsumerType
) -> None:
    create_partitioned(cluster, topic, 4)
    consumers = [client.subscribe(topic, "s", consumer_type=sub_type, consumer_name=f"c{i}", initial_position=Earliest)
                 for i in range(3)]
    produce_keys(client, topic, 12, 10, 4)
    seen: dict[str, list[tuple[str, int, int]]] = defaultdict(list)  # key -> (consumer, value index, partition)
    lock = threading.Lock()

    def drain(i: int) -> None:
        for m in receive_until_quiet(consumers[i], 4000):
            k, n = m.data().decode().split(":")
            with lock:
                seen[k].append((f"c{i}", int(n), m.message_id().partition()))

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(len(v) for v in seen.values()) == 120
    for k, got in seen.items():
        assert sorted(n for _, n, _ in got) == list(range(10)), k  # each exactly once
        if sub_type is magnetar.ConsumerType.KeyShared:
            assert len({c for c, _, _ in got}) == 1, (k, got)  # one consumer per key
            assert [n for _, n, _ in got] == list(range(10)), (k, got)  # in order
    for c in consumers:
        c.close()


def test_failover_gives_each_partition_to_one_active_consumer(
    client: magnetar.Client, cluster: Any, topic: str
) -> None:
    create_partitioned(cluster, topic, 4)
    consumers = [client.subscribe(topic, "s", consumer_type=magnetar.ConsumerType.Failover, consumer_name=f"c{i}",
                                  initial_position=Earliest) for i in range(2)]
    produce_keys(client, topic, 8, 3, 4)
    owners: dict[int, set[int]] = defaultdict(set)
    for i, c in enumerate(consumers):
        for m in receive_until_quiet(c, 3000):
            owners[m.message_id().partition()].add(i)
    assert set(owners) == {0, 1, 2, 3}
    assert all(len(v) == 1 for v in owners.values()), owners  # partition i -> consumer i mod 2 (Pulsar's rule)
    assert owners[0] == owners[2] == {0} and owners[1] == owners[3] == {1}
    for c in consumers:
        c.close()


def test_exclusive_refuses_a_second_consumer_on_a_partitioned_topic(
    client: magnetar.Client, cluster: Any, topic: str
) -> None:
    create_partitioned(cluster, topic, 2)
    first = client.subscribe(topic, "s", consumer_name="a", initial_position=Earliest)
    with pytest.raises(exceptions.PulsarException):
        client.subscribe(topic, "s", consumer_name="b")
    produce_keys(client, topic, 4, 2, 2)
    assert len(receive_until_quiet(first, 3000)) == 8
    first.close()


def test_sdk_nack_redelivers_and_dead_letters_over_partitions(
    client: magnetar.Client, cluster: Any, topic: str
) -> None:
    create_partitioned(cluster, topic, 2)
    dlq = f"{topic}-dlq"
    consumer = client.subscribe(topic, "s", consumer_type=magnetar.ConsumerType.Shared, initial_position=Earliest,
                                negative_ack_redelivery_delay_ms=100,
                                dead_letter_policy=magnetar.ConsumerDeadLetterPolicy(max_redeliver_count=1,
                                                                                      dead_letter_topic=dlq))
    dead = client.subscribe(dlq, "d", initial_position=Earliest)
    produce_keys(client, topic, 4, 1, 2)  # 4 keys over 2 partitions
    deliveries: dict[bytes, list[int]] = defaultdict(list)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            m = consumer.receive(timeout_millis=3000)
        except exceptions.Timeout:
            break
        deliveries[m.data()].append(m.redelivery_count())
        consumer.negative_acknowledge(m)
    assert all(v == [0, 1] for v in deliveries.values()) and len(deliveries) == 4, deliveries
    assert sorted(m.data() for m in receive_until_quiet(dead, 5000)) == sorted(deliveries)
    consumer.close()


def test_sdk_ack_timeout_redelivers_over_partitions(client: magnetar.Client, cluster: Any, topic: str) -> None:
    create_partitioned(cluster, topic, 2)
    consumer = client.subscribe(topic, "s", consumer_type=magnetar.ConsumerType.Shared, initial_position=Earliest,
                                unacked_messages_timeout_ms=1500)
    produce_keys(client, topic, 4, 1, 2)
    first = [consumer.receive(timeout_millis=20_000) for _ in range(4)]  # not acknowledged: back after 1.5 s
    assert {m.redelivery_count() for m in first} == {0}
    again = [consumer.receive(timeout_millis=20_000) for _ in range(4)]
    for m in again:
        consumer.acknowledge(m)
    assert sorted(m.data() for m in again) == sorted(m.data() for m in first)
    assert all(m.redelivery_count() == 1 for m in again)
    assert {m.message_id().partition() for m in again} == {0, 1}
    consumer.close()


def test_sdk_listener_and_batch_receive_over_partitions(client: magnetar.Client, cluster: Any, topic: str) -> None:
    create_partitioned(cluster, topic, 3)
    got: list[bytes] = []
    done = threading.Event()

    def listener(consumer: Any, message: magnetar.Message) -> None:
        got.append(message.data())
        consumer.acknowledge(message)
        if len(got) == 9:
            done.set()

    listening = client.subscribe(topic, "l", initial_position=Earliest, message_listener=listener)
    batching = client.subscribe(topic, "b", initial_position=Earliest,
                                batch_receive_policy=magnetar.ConsumerBatchReceivePolicy(5, -1, 2000))
    produce_keys(client, topic, 3, 3, 3)
    assert done.wait(30)
    batches: list[list[magnetar.Message]] = []
    deadline = time.monotonic() + 30
    while sum(len(b) for b in batches) < 9 and time.monotonic() < deadline:
        batch = batching.batch_receive()
        for m in batch:
            batching.acknowledge(m)
        batches.append(batch)
    assert all(len(b) <= 5 for b in batches) and sum(len(b) for b in batches) == 9
    listening.close()
    batching.close()


def test_a_poll_over_busy_partitions_says_when_their_next_seal_is_due(
    client: magnetar.Client, cluster: Any, topic: str
) -> None:
    """While both partitions are busy, a receive over them says when the first of their next seals
    is due (`nextSealInMs`); the SDK's partitioned consumer, which then polls no earlier, still
    gets every message once."""
    create_partitioned(cluster, topic, 2)
    subscribe_partitions(cluster, topic, "probe", "probe", 2)
    consumer = client.subscribe(topic, "s", initial_position=Earliest)
    producer = client.create_producer(topic, batching_max_publish_delay_ms=20,
                                      message_routing_mode=Routing.RoundRobinDistribution)
    hints: list[int] = []
    got: list[bytes] = []
    deadline = time.monotonic() + 60  # on a loaded machine most seals come late: a hint is then withheld
    with producing(producer) as sent:
        while time.monotonic() < deadline and not hints:
            answer = receive(cluster, topic, "probe", "probe", {"partitions": [0, 1], "maxMessages": 1000, "waitMs": 0})
            assert answer.status_code == 200, answer.text
            if answer.json().get("nextSealInMs") is not None:
                hints.append(answer.json()["nextSealInMs"])
            time.sleep(0.05)
    assert hints and 0 < hints[0] <= 1_000, hints
    while len(got) < len(sent) and time.monotonic() < deadline + 30:
        try:
            message = consumer.receive(timeout_millis=2000)
        except exceptions.Timeout:
            continue
        consumer.acknowledge(message)
        got.append(message.data())
    assert sorted(got) == sorted(sent)
    consumer.close()


# --- consumers polling together ------------------------------------------------------------------
def test_one_receive_serves_joined_consumers_each_with_its_own_entries_and_acks(
    client: magnetar.Client, cluster: Any, topic: str
) -> None:
    """Failover on 2 partitions: c0 is active on partition 0, c1 on partition 1. One receive for c0
    with c1 joined hands each its own partition's entries; c1's acks ride on the next one."""
    create_partitioned(cluster, topic, 2)
    for consumer in ("c0", "c1"):
        subscribe_partitions(cluster, topic, "s", consumer, 2, "Failover")
    send_to(client, topic, 0, [b"a0", b"a1"])
    send_to(client, topic, 1, [b"b0"])
    wait_sealed(cluster, topic, {0: 2, 1: 1})
    body = {"partitions": [0, 1], "maxMessages": 100, "waitMs": 0,
            "joined": [{"consumer": "c1", "maxMessages": 100}]}
    answer = receive(cluster, topic, "s", "c0", body)
    assert answer.status_code == 200, answer.text
    own, joined = answer.json(), answer.json()["joined"]["c1"]
    assert [(e["partition"], e["entryId"]) for e in own["entries"]] == [(0, 0), (0, 1)]
    assert [(e["partition"], e["entryId"]) for e in joined["entries"]] == [(1, 0)]
    assert set(joined["epochs"]) == {"0", "1"}
    e = joined["entries"][0]
    acks = {"partitions": {"1": {"messageIds": [f"{e['ledgerId']}:{e['entryId']}:1:-1"]}}}
    again = receive(cluster, topic, "s", "c0", body | {"joined": [{"consumer": "c1", "maxMessages": 100, "acks": acks}]})
    assert again.status_code == 200, again.text
    stats = HTTP.get(f"{cluster.url}/admin/v2/{topic.replace('://', '/')}-partition-1/stats", timeout=30).json()
    assert stats["subscriptions"]["s"]["msgBacklog"] == 0  # c1's ack was applied
    stats = HTTP.get(f"{cluster.url}/admin/v2/{topic.replace('://', '/')}-partition-0/stats", timeout=30).json()
    assert stats["subscriptions"]["s"]["msgBacklog"] == 2  # c0's not acknowledged


@pytest.mark.parametrize("extra, status", [
    ({"joined": [{"consumer": "c0"}]}, 400),  # the receive's own consumer again
    ({"joined": [{"consumer": "c1"}, {"consumer": "c1"}]}, 400),
    ({"joined": [{"consumer": ""}]}, 400),
    ({"joined": [{"consumer": "c1", "maxMessages": 0}]}, 400),
    ({"joined": [{"consumer": "c1", "acks": {"partitions": {"3": {"messageIds": []}}}}]}, 400),
    ({"joined": [{"consumer": "nobody"}]}, 404),  # not attached
])
def test_bad_joined_receives_are_refused_with_a_reason_and_change_nothing(
    client: magnetar.Client, cluster: Any, topic: str, extra: dict[str, Any], status: int
) -> None:
    create_partitioned(cluster, topic, 2)
    for consumer in ("c0", "c1"):
        subscribe_partitions(cluster, topic, "s", consumer, 2)
    send_to(client, topic, 0, [b"a"])
    wait_sealed(cluster, topic, {0: 1})
    response = receive(cluster, topic, "s", "c0", {"partitions": [0, 1], **extra})
    assert response.status_code == status, response.text
    assert response.json()["reason"]
    got = wait_entries_unacked(cluster, topic, "s", "c0", [0, 1], 1)
    assert got[0]["redeliveryCount"] == 0  # nothing was handed out by the refused receive


def test_joined_acks_by_partition_need_partitions(cluster: Any, topic: str) -> None:
    body = {"joined": [{"consumer": "c1", "acks": {"partitions": {"0": {"messageIds": []}}}}]}
    response = receive(cluster, topic, "s", "c0", body)
    assert response.status_code == 400 and "partition" in response.json()["reason"]


def test_a_clients_consumers_of_one_subscription_poll_together(
    client: magnetar.Client, cluster: Any, topic: str
) -> None:
    """Four Key_Shared consumers of one client on a 4-partition topic: their polls carry the others
    (`joined`), so the receives are about a quarter of what four lone pollers make, and every
    message still arrives once, each key at one consumer, in order."""
    create_partitioned(cluster, topic, 4)
    bodies: list[dict[str, Any]] = []

    def record(request: httpx.Request) -> None:
        if request.url.path.endswith("/receive"):
            bodies.append(json.loads(request.content))

    client._transport.http.event_hooks["request"].append(record)
    consumers = [client.subscribe(topic, "s", consumer_type=magnetar.ConsumerType.KeyShared, consumer_name=f"c{i}",
                                  initial_position=Earliest) for i in range(4)]
    produce_keys(client, topic, 16, 5, 4)
    seen: dict[str, list[tuple[str, int]]] = defaultdict(list)
    lock = threading.Lock()

    def drain(i: int) -> None:
        for m in receive_until_quiet(consumers[i], 4000):
            k, n = m.data().decode().split(":")
            with lock:
                seen[k].append((f"c{i}", int(n)))

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(len(v) for v in seen.values()) == 80
    for k, got in seen.items():
        assert len({c for c, _ in got}) == 1 and [n for _, n in got] == list(range(5)), (k, got)
    together = [b for b in bodies if len(b.get("joined") or ()) == 3]
    assert together and len(together) >= len(bodies) // 2, [len(b.get("joined") or ()) for b in bodies]
    for c in consumers:
        c.close()


def test_two_consumers_of_one_name_in_one_client_still_get_every_message(
    client: magnetar.Client, cluster: Any, topic: str
) -> None:
    """Two consumers sharing a name are one consumer to the broker: they never go in one receive
    (it would be refused), they take turns, and every message arrives once."""
    create_partitioned(cluster, topic, 2)
    consumers = [client.subscribe(topic, "s", consumer_type=magnetar.ConsumerType.Shared, consumer_name="same",
                                  initial_position=Earliest) for _ in range(2)]
    produce_keys(client, topic, 4, 5, 2)
    got: list[bytes] = []
    lock = threading.Lock()

    def drain(i: int) -> None:
        for m in receive_until_quiet(consumers[i], 3000):
            with lock:
                got.append(m.data())

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(f"{k}:{i}".encode() for k in range(4) for i in range(5))
    for c in consumers:
        c.close()
