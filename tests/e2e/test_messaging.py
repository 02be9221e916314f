"""Produce and consume end to end: SDK -> HTTP API -> broker Lambda -> Kinesis/DynamoDB/S3."""

from __future__ import annotations

import threading
import time

import pytest

import magnetar
from http_helpers import HTTP
from magnetar.client import exceptions
from sdk_helpers import producing


def test_health_and_default_tenant_and_namespace(cluster) -> None:  # type: ignore[no-untyped-def]

    response = HTTP.get(f"{cluster.url}/admin/v2/brokers/health")
    assert response.status_code == 200 and response.text == "ok"
    assert "public" in HTTP.get(f"{cluster.url}/admin/v2/tenants").json()
    assert "public/default" in HTTP.get(f"{cluster.url}/admin/v2/namespaces/public").json()


def test_short_topic_name_means_public_default(client: magnetar.Client) -> None:
    producer = client.create_producer("short-name-topic")
    assert producer.topic() == "persistent://public/default/short-name-topic"
    producer.send(b"x")
    consumer = client.subscribe("persistent://public/default/short-name-topic", "s", initial_position=magnetar.InitialPosition.Earliest)
    assert consumer.receive(timeout_millis=5000).data() == b"x"


def test_10k_messages_from_2_producers_reach_2_shared_consumers_exactly_once(
    client: magnetar.Client, topic: str
) -> None:
    consumers = [
        # a poll claims up to the receiver queue's size: 100 (not 1,000) so that one consumer's
        # polls cannot take the whole backlog while the other's are in flight (both get work)
        client.subscribe(topic, "shared", consumer_type=magnetar.ConsumerType.Shared, consumer_name=f"c{i}",
                         initial_position=magnetar.InitialPosition.Earliest, receiver_queue_size=100)
        for i in range(2)
    ]
    sent: dict[str, bytes] = {}
    lock = threading.Lock()

    def produce(p: int) -> None:
        producer = client.create_producer(topic, producer_name=f"p{p}", batching_max_messages=100)
        for i in range(5000):
            payload = f"p{p}-{i}".encode()

            def done(result, message_id, payload=payload):  # type: ignore[no-untyped-def]
                assert result == magnetar.Result.Ok
                with lock:
                    sent[str(message_id)] = payload

            producer.send_async(payload, done)
        producer.flush()

    received: list[tuple[str, bytes, str]] = []

    def consume(consumer) -> None:  # type: ignore[no-untyped-def]
        while True:
            try:
                msg = consumer.receive(timeout_millis=8000)
            except exceptions.Timeout:
                return
            with lock:
                received.append((str(msg.message_id()), msg.data(), consumer.consumer_name()))
            consumer.acknowledge(msg)

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(2)]
    threads += [threading.Thread(target=consume, args=(c,)) for c in consumers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert len(sent) == 10_000
    ids = [r[0] for r in received]
    assert len(ids) == len(set(ids)) == 10_000, "every message exactly once"
    assert {r[0]: r[1] for r in received} == sent, "consumers see the ids the producers got back"
    assert {r[2] for r in received} == {"c0", "c1"}, "both shared consumers got work"


def test_exclusive_order_and_ids_match_producer(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_max_messages=7)
    ids = []
    for i in range(50):
        producer.send_async(f"{i}".encode(), lambda r, m: ids.append(m))
    producer.flush()
    consumer = client.subscribe(topic, "ex", initial_position=magnetar.InitialPosition.Earliest)
    got = [consumer.receive(timeout_millis=5000) for _ in range(50)]
    assert [m.data() for m in got] == [f"{i}".encode() for i in range(50)]
    assert [m.message_id() for m in got] == ids
    assert [m.message_id() for m in got] == sorted(m.message_id() for m in got)
    for m in got:
        consumer.acknowledge_cumulative(m)


def test_exclusive_subscription_refuses_a_second_consumer(client: magnetar.Client, topic: str) -> None:
    client.subscribe(topic, "only-one", consumer_type=magnetar.ConsumerType.Exclusive)
    with pytest.raises(exceptions.ConsumerBusy) as info:
        client.subscribe(topic, "only-one", consumer_type=magnetar.ConsumerType.Exclusive)
    assert "Exclusive consumer is already connected" in info.value.reason


def test_unacked_messages_come_back_after_the_ack_timeout(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "redeliver", consumer_type=magnetar.ConsumerType.Shared,
                                unacked_messages_timeout_ms=1000, receiver_queue_size=1)
    producer.send(b"first")
    msg = consumer.receive(timeout_millis=5000)
    assert msg.data() == b"first" and msg.redelivery_count() == 0
    started = time.monotonic()
    again = consumer.receive(timeout_millis=10_000)
    assert again.data() == b"first" and again.message_id() == msg.message_id()
    assert again.redelivery_count() == 1
    assert time.monotonic() - started >= 0.5
    consumer.acknowledge(again)
    with pytest.raises(exceptions.Timeout):
        consumer.receive(timeout_millis=2000)


def test_a_closed_consumers_unacked_messages_go_to_another(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    first = client.subscribe(topic, "handover", consumer_type=magnetar.ConsumerType.Shared, consumer_name="a")
    second = client.subscribe(topic, "handover", consumer_type=magnetar.ConsumerType.Shared, consumer_name="b",
                              receiver_queue_size=10)
    producer.send(b"m")
    msg = first.receive(timeout_millis=5000)
    first.close()
    again = second.receive(timeout_millis=5000)
    assert again.message_id() == msg.message_id() and again.redelivery_count() == 1


def test_message_fields_round_trip(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "fields")
    before = int(time.time() * 1000)
    producer.send(b"\x00\xffbinary", partition_key="key-1", properties={"a": "1", "b": "2"}, event_timestamp=1234)
    msg = consumer.receive(timeout_millis=5000)
    assert msg.data() == b"\x00\xffbinary"
    assert msg.partition_key() == "key-1"
    assert msg.properties() == {"a": "1", "b": "2"}
    assert msg.event_timestamp() == 1234
    assert msg.topic_name() == topic
    assert before - 5000 <= msg.publish_timestamp() <= int(time.time() * 1000) + 5000
    mid = msg.message_id()
    assert magnetar.MessageId.deserialize(mid.serialize()) == mid
    assert (mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index()) == (0, 0, -1, 0)


def test_concurrent_invocations_never_share_a_request(cluster) -> None:  # type: ignore[no-untyped-def]
    """Lambda gives each concurrent invocation its own execution environment; the local runtime
    must too (a shared module would let one request read another's body)."""
    import base64
    import concurrent.futures
    import uuid

    import httpx

    topics = [f"race-{uuid.uuid4().hex[:8]}-{i}" for i in range(16)]

    def produce_and_read(name: str) -> tuple[str, list[str]]:
        with httpx.Client(base_url=cluster.url, timeout=30) as http:
            for i in range(5):
                body = {"messages": [{"payload": base64.b64encode(f"{name}/{i}".encode()).decode()}]}
                assert http.post(f"/topics/persistent/public/default/{name}", json=body).status_code == 200
            # an entry is readable once sealed (tail reads off, as deployed): read on until all five
            payloads: list[str] = []
            deadline = time.monotonic() + 20
            while len(payloads) < 5 and time.monotonic() < deadline:
                read = http.post(f"/magnetar/v1/reader/persistent/public/default/{name}/read",
                                 json={"startEntryId": len(payloads), "maxEntries": 100}).json()
                payloads += [base64.b64decode(m["payload"]).decode() for m in read["messages"]]
                if len(payloads) < 5:
                    time.sleep(0.1)
            return name, payloads

    with concurrent.futures.ThreadPoolExecutor(len(topics)) as pool:
        results = list(pool.map(produce_and_read, topics))
    for name, payloads in results:
        assert payloads == [f"{name}/{i}" for i in range(5)], f"{name} holds another request's messages"


def test_a_batch_receive_short_last_time_waits_in_the_client_and_looks_once(cluster, client, topic) -> None:  # type: ignore[no-untyped-def]
    """A batch receive short of its count the previous time waits its timeout in the SDK and then
    polls without a wait: a broker function holding the wait would bill its memory for it."""

    consumer = client.subscribe(topic, "batch", initial_position=magnetar.InitialPosition.Earliest,
                                batch_receive_policy=magnetar.ConsumerBatchReceivePolicy(100, -1, 400))
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"first")
    deadline = time.monotonic() + 10
    first: list[magnetar.Message] = []
    while not first and time.monotonic() < deadline:
        first = consumer.batch_receive()  # one message of the hundred asked: short
    assert [m.data() for m in first] == [b"first"]
    producer.send(b"second")
    time.sleep(1.5)  # sealed by now
    broker = HTTP.get(f"{cluster.url}/_magnetar/local/stats", timeout=30).json()["lambda"]["magnetar-broker"]
    started = time.monotonic()
    second = consumer.batch_receive()
    took = time.monotonic() - started
    after = HTTP.get(f"{cluster.url}/_magnetar/local/stats", timeout=30).json()["lambda"]["magnetar-broker"]
    assert [m.data() for m in second] == [b"second"]
    assert took >= 0.4  # it waited its timeout for a count it would not get
    # one poll, answered without waiting in the function (the stats call itself adds none)
    assert after["invocations"] - broker["invocations"] <= 2  # (a lease heartbeat may fall in the window)
    assert after["duration_ms_total"] - broker["duration_ms_total"] < 300
    consumer.close()


def test_a_busy_topics_poll_says_when_its_next_seal_is_due(cluster, client, topic) -> None:  # type: ignore[no-untyped-def]
    """While a producer keeps a topic busy, a poll's answer says when the next seal is due
    (`nextSealInMs`), and the SDK's batch receive, which looks no earlier, still gets every message."""
    import httpx

    from magnetar.client.transport import topic_path
    from magnetar.core.naming import TopicName

    consumer = client.subscribe(topic, "paced", initial_position=magnetar.InitialPosition.Earliest,
                                batch_receive_policy=magnetar.ConsumerBatchReceivePolicy(1000, -1, 100))
    http = httpx.Client(base_url=cluster.url, timeout=30)
    path = f"/magnetar/v1/consumer/{topic_path(TopicName.parse(topic))}/probe/probe"
    assert http.put(path, json={"subscriptionType": "Shared", "initialPosition": "Earliest"}).status_code in (200, 204)
    producer = client.create_producer(topic, batching_max_publish_delay_ms=20)
    hints: list[int] = []
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    with producing(producer) as sent:
        while time.monotonic() < deadline and not hints:
            answer = http.post(f"{path}/receive", json={"maxMessages": 1000, "waitMs": 0}).json()
            if answer.get("nextSealInMs") is not None:
                hints.append(answer["nextSealInMs"])
            got += [m.data() for m in consumer.batch_receive()]
            time.sleep(0.05)
    assert hints and 0 < hints[0] <= 1_000
    while len(got) < len(sent) and time.monotonic() < deadline + 20:
        batch = consumer.batch_receive()
        for message in batch:
            consumer.acknowledge(message)
        got += [m.data() for m in batch]
    assert sorted(got) == sorted(sent)
    consumer.close()
    http.close()


def test_a_look_just_before_a_busy_topics_seal_leaves_its_acks_for_the_next_poll(cluster, client, topic) -> None:  # type: ignore[no-untyped-def]
    """Over HTTP: a poll with `deferAcks` that finds nothing while the topic's next seal is
    expected answers its acks in `unappliedAcks` and writes nothing; sent again with the next
    poll, they are applied, and every message is acknowledged in the end."""
    import httpx

    from magnetar.client.admin import AdminClient
    from magnetar.client.transport import topic_path
    from magnetar.core.naming import TopicName

    http = httpx.Client(base_url=cluster.url, timeout=30)
    path = f"/magnetar/v1/consumer/{topic_path(TopicName.parse(topic))}/probe/probe"
    assert http.put(path, json={"subscriptionType": "Shared", "initialPosition": "Earliest"}).status_code in (200, 204)
    bad = http.post(f"{path}/receive", json={"maxMessages": 10, "deferAcks": "sometimes"})
    assert bad.status_code == 400 and "deferAcks" in bad.json()["reason"]
    producer = client.create_producer(topic, batching_max_publish_delay_ms=20)
    received: list[str] = []
    pending: list[str] = []
    deferred: list[dict[str, object]] = []
    deadline = time.monotonic() + 30
    with producing(producer) as sent:
        while time.monotonic() < deadline and not deferred:
            body: dict[str, object] = {"maxMessages": 1000, "waitMs": 0}
            if pending:
                body["acks"] = {"messageIds": pending}
                body["deferAcks"] = True
            answer = http.post(f"{path}/receive", json=body).json()
            if answer.get("unappliedAcks"):
                assert answer["entries"] == []  # left only by a look that handed out nothing
                deferred.append(answer)
            else:
                pending = []
            for e in answer["entries"]:
                received.append(f"{e['ledgerId']}:{e['entryId']}")
                pending.append(received[-1])
            time.sleep(0.05 if answer["entries"] else 0.01)  # just before the next seal, now and then
    assert deferred, "no look found nothing just before a seal in 30 s"
    while time.monotonic() < deadline + 30:
        body = {"maxMessages": 1000, "waitMs": 500}
        if pending:
            body["acks"] = {"messageIds": pending}  # sent again (not deferred again)
        answer = http.post(f"{path}/receive", json=body).json()
        assert not answer.get("unappliedAcks")
        pending = [f"{e['ledgerId']}:{e['entryId']}" for e in answer["entries"]]
        received += pending
        if not answer["entries"] and not body.get("acks"):
            break
    assert len(received) == len(set(received))  # nothing handed out twice
    admin = AdminClient(cluster.url)
    try:
        stats = admin.topic_stats(topic)["subscriptions"]["probe"]
    finally:
        admin.close()
    assert stats["msgBacklog"] == 0 and len(sent) > 0, f"an acknowledgement was dropped: {stats}"
    http.close()
