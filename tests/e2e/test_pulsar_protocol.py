"""The official Pulsar client (pulsar-client from PyPI, unmodified) against Magnetar's binary protocol
proxy (magnetar.protocol), in front of the session cluster's core: the same topics, ids and
subscriptions as the Magnetar SDK sees through the HTTP API."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid

import pytest

import magnetar

pulsar = pytest.importorskip("pulsar")

# the `proxy` and `official` fixtures: imported, pytest defines them in this module (module scope: its own proxy)
from e2e.pulsar_protocol_fixtures import drain, official_fixture, proxy_fixture, quiet_logger  # noqa: E402, F401
from magnetar.local.cluster import free_port  # noqa: E402
from magnetar.protocol import ProxySettings, ProxyThread  # noqa: E402


def test_readme_example_produce_and_consume(official: pulsar.Client, topic: str) -> None:
    producer = official.create_producer(topic)
    sent = producer.send(b"hello", partition_key="k")
    consumer = official.subscribe(topic.rsplit("/", 1)[1] if topic.startswith("persistent://public/default/")
                                  else topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                  initial_position=pulsar.InitialPosition.Earliest)
    msg = consumer.receive(timeout_millis=10_000)
    consumer.acknowledge(msg)
    assert (msg.data(), msg.partition_key(), str(msg.message_id())) == (b"hello", "k", str(sent))
    assert msg.topic_name() == topic
    producer.close()
    consumer.close()


@pytest.mark.parametrize("codec", ["LZ4", "ZLib", "ZSTD", "SNAPPY"])
def test_batches_with_each_codec_keep_their_ids(official: pulsar.Client, topic: str, codec: str) -> None:
    producer = official.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                        batching_max_publish_delay_ms=50,
                                        compression_type=getattr(pulsar.CompressionType, codec))
    consumer = official.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    ids: dict[bytes, str] = {}
    lock = threading.Lock()

    def done(result, message_id, payload):  # type: ignore[no-untyped-def]
        assert result == pulsar.Result.Ok
        with lock:
            ids[payload] = str(message_id)

    payloads = [f"{codec}-{i}-".encode() * 20 for i in range(25)]
    for p in payloads:
        producer.send_async(p, lambda r, m, p=p: done(r, m, p), properties={"i": p[:12].decode()})
    producer.flush()
    got = drain(consumer, 25)
    assert [m.data() for m in got] == payloads
    assert {m.data(): str(m.message_id()) for m in got} == ids
    entries = {(m.message_id().ledger_id(), m.message_id().entry_id()) for m in got}
    assert len(entries) < 25  # several messages per entry: the client's batches are Magnetar's entries
    assert all(m.message_id().batch_index() >= 0 for m in got)


def test_official_message_reaches_the_sdk_with_the_same_id_and_fields(
        official: pulsar.Client, client: magnetar.Client, topic: str) -> None:
    sdk = client.subscribe(topic, "sdk", initial_position=magnetar.InitialPosition.Earliest)
    producer = official.create_producer(topic)
    sent = producer.send(b"from-official", partition_key="key-1", properties={"a": "1", "b": "two"},
                         event_timestamp=1_700_000_000_123)
    msg = sdk.receive(timeout_millis=10_000)
    sdk.acknowledge(msg)
    assert str(msg.message_id()) == str(sent)
    assert (msg.data(), msg.partition_key(), msg.properties(), msg.event_timestamp()) == (
        b"from-official", "key-1", {"a": "1", "b": "two"}, 1_700_000_000_123)
    assert msg.producer_name() == producer.producer_name()


def test_sdk_message_reaches_the_official_client_with_the_same_id_and_fields(
        official: pulsar.Client, client: magnetar.Client, topic: str) -> None:
    consumer = official.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    sent = producer.send(b"from-sdk", partition_key="key-2", properties={"x": "y"}, event_timestamp=1_700_000_000_456)
    batched = client.create_producer(topic, batching_enabled=True, batching_max_messages=3)
    for i in range(3):
        batched.send_async(f"b{i}".encode(), None, properties={"i": str(i)})
    batched.flush()
    got = drain(consumer, 4)
    first = got[0]
    assert str(first.message_id()) == str(sent)
    assert (first.data(), first.partition_key(), first.properties(), first.event_timestamp()) == (
        b"from-sdk", "key-2", {"x": "y"}, 1_700_000_000_456)
    assert [(m.data(), m.properties()) for m in got[1:]] == [(f"b{i}".encode(), {"i": str(i)}) for i in range(3)]
    assert [m.message_id().batch_index() for m in got[1:]] == [0, 1, 2]


def test_shared_subscription_split_between_official_and_sdk_consumers(
        official: pulsar.Client, client: magnetar.Client, topic: str) -> None:
    theirs = official.subscribe(topic, "shared", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=5,
                                consumer_name="official", initial_position=pulsar.InitialPosition.Earliest)
    ours = client.subscribe(topic, "shared", consumer_type=magnetar.ConsumerType.Shared, receiver_queue_size=5,
                            consumer_name="sdk", initial_position=magnetar.InitialPosition.Earliest)
    producer = official.create_producer(topic, batching_enabled=False)
    total = 60
    for i in range(total):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    received: dict[str, list[bytes]] = {"official": [], "sdk": []}
    done = threading.Event()

    def consume(name: str, consumer, timeout_error: type[Exception]) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + 20
        while not done.is_set() and time.monotonic() < deadline:
            try:
                msg = consumer.receive(timeout_millis=500)
            except timeout_error:
                continue
            received[name].append(msg.data())
            consumer.acknowledge(msg)
            time.sleep(0.02)  # a consumer doing some work: the other one gets its share meanwhile
            if sum(len(v) for v in received.values()) >= total:
                done.set()

    threads = [threading.Thread(target=consume, args=("official", theirs, pulsar.Timeout)),
               threading.Thread(target=consume, args=("sdk", ours, magnetar.Timeout))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = received["official"] + received["sdk"]
    assert sorted(everything) == sorted(f"m{i}".encode() for i in range(total))  # each exactly once
    assert received["official"] and received["sdk"]  # both got their share


def test_client_reconnects_after_proxy_restart_and_loses_no_acknowledged_message(
        admin, topic: str) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    first = ProxyThread(ProxySettings(port=port)).start()
    c = pulsar.Client(first.service_url, operation_timeout_seconds=20, logger=quiet_logger())
    try:
        producer = c.create_producer(topic, batching_enabled=False)
        consumer = c.subscribe(topic, "restart", initial_position=pulsar.InitialPosition.Earliest,
                               consumer_name="resilient")
        for i in range(10):
            producer.send(f"before-{i}".encode())
        before = drain(consumer, 5)
        assert len(before) == 5
        deadline = time.monotonic() + 10  # the client sends its acks grouped (every 100 ms): until they are applied
        while admin.topic_stats(topic)["subscriptions"]["restart"]["msgBacklog"] > 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        first.stop()  # killed mid-stream: nothing is cleaned up, the client only sees the connection drop
        second = ProxyThread(ProxySettings(port=port)).start()
        try:
            for i in range(10):
                producer.send(f"after-{i}".encode())  # waits while the client reconnects
            rest = drain(consumer, 15, timeout_s=30)
            c.close()  # while a proxy is there to answer (closing against none raises NotConnected)
        finally:
            second.stop()
    finally:
        with contextlib.suppress(pulsar.PulsarException):  # closed already, or no proxy left
            c.close()
    acked = {m.data() for m in before}
    later = [m.data() for m in rest]
    assert not acked & set(later)  # an acknowledged message is never delivered again
    expected = {f"before-{i}".encode() for i in range(10)} | {f"after-{i}".encode() for i in range(10)}
    assert acked | set(later) == expected  # nothing lost


def test_unserved_request_is_refused_not_left_hanging(official: pulsar.Client) -> None:
    """Consumers of non-persistent topics are not served by the proxy: a clear error, at once."""
    started = time.monotonic()
    with pytest.raises(pulsar.PulsarException):
        official.subscribe(f"non-persistent://public/default/np-{uuid.uuid4().hex[:6]}", "s")
    assert time.monotonic() - started < 10


def test_errors_carry_pulsar_server_error_codes(official: pulsar.Client) -> None:
    with pytest.raises(pulsar.PulsarException):  # no such namespace: TopicNotFound, not a hang
        official.create_producer(f"persistent://public/no-such-ns-{uuid.uuid4().hex[:6]}/t")
    topic = f"persistent://public/default/excl-{uuid.uuid4().hex[:8]}"
    official.subscribe(topic, "only", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        official.subscribe(topic, "only", consumer_type=pulsar.ConsumerType.Exclusive)


def test_partitioned_topic_through_its_partitions(official: pulsar.Client, admin, topic: str) -> None:  # type: ignore[no-untyped-def]
    admin.create_partitioned_topic(topic, 3)
    assert official.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
    consumer = official.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = official.create_producer(topic, batching_enabled=False,
                                        message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    sent = {str(producer.send(f"p{i}".encode())): f"p{i}".encode() for i in range(9)}
    got = drain(consumer, 9)
    assert {str(m.message_id()): m.data() for m in got} == sent
    assert {m.message_id().partition() for m in got} == {0, 1, 2}
    assert {m.topic_name() for m in got} == {f"{topic}-partition-{i}" for i in range(3)}


def test_failover_gives_everything_to_one_consumer(official: pulsar.Client, topic: str) -> None:
    consumers = [official.subscribe(topic, "fo", consumer_type=pulsar.ConsumerType.Failover, consumer_name=f"c{i}",
                                    initial_position=pulsar.InitialPosition.Earliest) for i in range(2)]
    producer = official.create_producer(topic, batching_enabled=False)
    for i in range(10):
        producer.send(f"f{i}".encode())
    active = next(c for c in consumers if c.consumer_name() == "c0")  # Pulsar's choice: the first name in order
    assert [m.data() for m in drain(active, 10)] == [f"f{i}".encode() for i in range(10)]
    standby = next(c for c in consumers if c is not active)
    with pytest.raises(pulsar.Timeout):
        standby.receive(timeout_millis=500)


def test_key_shared_keeps_each_key_on_one_consumer(official: pulsar.Client, topic: str) -> None:
    consumers = [official.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=f"k{i}",
                                    initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=10)
                 for i in range(2)]
    producer = official.create_producer(topic, batching_enabled=False)
    for i in range(40):
        producer.send_async(f"m{i}".encode(), None, partition_key=f"key-{i % 8}")
    producer.flush()
    owners: dict[str, set[int]] = {}
    total = 0
    deadline = time.monotonic() + 15
    while total < 40 and time.monotonic() < deadline:
        for n, c in enumerate(consumers):
            try:
                msg = c.receive(timeout_millis=100)
            except pulsar.Timeout:
                continue
            owners.setdefault(msg.partition_key(), set()).add(n)
            c.acknowledge(msg)
            total += 1
    assert total == 40
    assert all(len(o) == 1 for o in owners.values()) and len(owners) == 8


def test_negative_ack_is_redelivered_with_its_count(official: pulsar.Client, topic: str) -> None:
    consumer = official.subscribe(topic, "nack", consumer_type=pulsar.ConsumerType.Shared,
                                  negative_ack_redelivery_delay_ms=100,
                                  initial_position=pulsar.InitialPosition.Earliest)
    official.create_producer(topic).send(b"again")
    first = consumer.receive(timeout_millis=10_000)
    consumer.negative_acknowledge(first)
    second = consumer.receive(timeout_millis=10_000)
    consumer.acknowledge(second)
    assert (second.data(), str(second.message_id())) == (b"again", str(first.message_id()))
    assert (first.redelivery_count(), second.redelivery_count()) == (0, 1)


def test_seek_and_last_message_id(official: pulsar.Client, topic: str) -> None:
    producer = official.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"s{i}".encode()) for i in range(5)]
    consumer = official.subscribe(topic, "seek", initial_position=pulsar.InitialPosition.Earliest)
    assert [m.data() for m in drain(consumer, 5)] == [f"s{i}".encode() for i in range(5)]
    assert str(consumer.get_last_message_id()) == str(ids[-1])
    consumer.seek(ids[2])  # the subscription restarts at that message; pulsar-client hands out what follows it
    assert [m.data() for m in drain(consumer, 2)] == [b"s3", b"s4"]
    consumer.seek(pulsar.MessageId.earliest)
    assert drain(consumer, 1)[0].data() == b"s0"


def test_readers_start_where_asked_and_seek(official: pulsar.Client, topic: str) -> None:
    producer = official.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"r{i}".encode()) for i in range(5)]

    def read(reader, count: int) -> list[bytes]:  # type: ignore[no-untyped-def]
        return [reader.read_next(timeout_millis=10_000).data() for _ in range(count)]

    earliest = official.create_reader(topic, pulsar.MessageId.earliest)
    assert read(earliest, 5) == [f"r{i}".encode() for i in range(5)]
    assert not earliest.has_message_available()
    after = official.create_reader(topic, ids[1])  # pulsar-client: after the start message
    assert read(after, 3) == [b"r2", b"r3", b"r4"]
    inclusive = official.create_reader(topic, ids[1], start_message_id_inclusive=True)
    assert read(inclusive, 1) == [b"r1"]
    inclusive.seek(pulsar.MessageId.earliest)
    assert read(inclusive, 1) == [b"r0"]
    latest = official.create_reader(topic, pulsar.MessageId.latest)
    producer.send(b"new")
    assert read(latest, 1) == [b"new"]


def test_regex_subscription_reads_every_matching_topic(official: pulsar.Client) -> None:
    import re

    prefix = f"persistent://public/default/rx-{uuid.uuid4().hex[:8]}"
    for name in ("a", "b"):
        official.create_producer(f"{prefix}-{name}").send(name.encode())
    official.create_producer(f"{prefix}x-other").send(b"other")  # does not match
    consumer = official.subscribe(re.compile(f"{prefix}-.*"), "rx", initial_position=pulsar.InitialPosition.Earliest)
    assert sorted(m.data() for m in drain(consumer, 2)) == [b"a", b"b"]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=500)


def test_deduplication_answers_the_producers_last_sequence_id(official: pulsar.Client, admin) -> None:  # type: ignore[no-untyped-def]
    namespace = f"public/pp-{uuid.uuid4().hex[:8]}"
    admin.create_namespace(namespace)
    admin.set_deduplication(namespace, True)
    topic = f"persistent://{namespace}/dedup"
    producer = official.create_producer(topic, producer_name="dedup-p")
    for seq in range(3):
        producer.send(f"d{seq}".encode(), sequence_id=seq)
    producer.close()
    again = official.create_producer(topic, producer_name="dedup-p")
    assert again.last_sequence_id() == 2
    again.send(b"d2-again", sequence_id=2)  # a retry of a stored publish: not stored twice
    again.send(b"d3", sequence_id=3)
    consumer = official.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    assert [m.data() for m in drain(consumer, 4, timeout_s=5)] == [b"d0", b"d1", b"d2", b"d3"]


def test_exclusive_producer_keeps_others_out(official: pulsar.Client, topic: str) -> None:
    first = official.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    with pytest.raises((pulsar.ProducerFenced, pulsar.ProducerBusy)):
        official.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    first.send(b"mine")
    waiting: list[pulsar.Producer] = []
    waiter = threading.Thread(target=lambda: waiting.append(official.create_producer(
        topic, access_mode=pulsar.ProducerAccessMode.WaitForExclusive)))
    waiter.start()
    time.sleep(1.5)
    assert not waiting  # still waiting while the first one holds the topic
    first.close()
    waiter.join(timeout=10)
    assert waiting
    waiting[0].send(b"now mine")


def test_deliver_after_holds_a_message_on_a_shared_subscription(official: pulsar.Client, topic: str) -> None:
    from datetime import timedelta

    consumer = official.subscribe(topic, "later", consumer_type=pulsar.ConsumerType.Shared)
    producer = official.create_producer(topic)
    sent_at = time.monotonic()
    producer.send(b"later", deliver_after=timedelta(milliseconds=1500))
    producer.send(b"now")
    first = consumer.receive(timeout_millis=10_000)
    second = consumer.receive(timeout_millis=10_000)
    assert (first.data(), second.data()) == (b"now", b"later")
    assert time.monotonic() - sent_at >= 1.4


def test_dead_letter_topic_after_max_redeliveries(official: pulsar.Client, topic: str) -> None:
    dlq = f"{topic}-DLQ"
    dead = official.subscribe(dlq, "dlq", initial_position=pulsar.InitialPosition.Earliest)
    consumer = official.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                  negative_ack_redelivery_delay_ms=100,
                                  dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=1,
                                                                                     dead_letter_topic=dlq))
    official.create_producer(topic).send(b"poison", properties={"p": "1"})
    for _ in range(2):
        consumer.negative_acknowledge(consumer.receive(timeout_millis=10_000))
    msg = dead.receive(timeout_millis=15_000)
    assert (msg.data(), msg.properties().get("p")) == (b"poison", "1")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """`magnetar local up --auth` in its own process (its proxy on a free port), and a token maker."""
    from magnetar.local.cluster import LocalUpProcess
    from magnetar.security.tokens import create_token, new_secret_key

    key = new_secret_key()
    key_file = tmp_path_factory.mktemp("pulsar-auth") / "secret.key"
    key_file.write_bytes(key)
    with LocalUpProcess(maintenance_interval_s=0, extra_args=[
            "--auth", "--token-secret-key", str(key_file), "--superuser-role", "admin"]) as proc:
        yield proc, lambda role: create_token(role, secret_key=key)


def test_token_authentication_and_authorization(secured) -> None:  # type: ignore[no-untyped-def]
    from magnetar.client.admin import AdminClient

    proc, token = secured
    topic = f"persistent://public/default/auth-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(proc.url, authentication=magnetar.AuthenticationToken(token("admin")))
    admin.grant_permission_on_topic(topic, "reader", ["consume"])
    admin.close()
    superuser = pulsar.Client(proc.pulsar_url, authentication=pulsar.AuthenticationToken(token("admin")),
                              operation_timeout_seconds=15, logger=quiet_logger())
    superuser.create_producer(topic).send(b"secret")
    reader_role = pulsar.Client(proc.pulsar_url, authentication=pulsar.AuthenticationToken(token("reader")),
                                operation_timeout_seconds=15, logger=quiet_logger())
    anonymous = pulsar.Client(proc.pulsar_url, operation_timeout_seconds=3, logger=quiet_logger())
    try:
        deadline = time.monotonic() + 15  # the grant reaches the proxy's cache within 10 s
        while True:
            try:
                consumer = reader_role.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
                break
            except pulsar.AuthorizationError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        assert consumer.receive(timeout_millis=10_000).data() == b"secret"
        with pytest.raises(pulsar.AuthorizationError):
            reader_role.create_producer(topic)
        # no token: refused at the connect (pulsar-client 3.13 retries a refused handshake until its
        # operation timeout, then reports a timeout)
        with pytest.raises(pulsar.PulsarException):
            anonymous.create_producer(topic)
    finally:
        for c in (superuser, reader_role, anonymous):
            c.close()


def test_schemas_are_shared_with_the_sdk(official: pulsar.Client, client: magnetar.Client, topic: str) -> None:
    import pulsar.schema as ps

    import magnetar.schema as ms

    OfficialCity = type("City", (ps.Record,), {"name": ps.String(), "population": ps.Integer()})  # pulsar names it City

    class City(ms.Record):
        name = ms.String()
        population = ms.Integer()

    producer = official.create_producer(topic, schema=ps.AvroSchema(OfficialCity))  # registers version 0
    sdk = client.subscribe(topic, "sdk", schema=ms.AvroSchema(City), initial_position=magnetar.InitialPosition.Earliest)
    producer.send(OfficialCity(name="Lyon", population=522_000))
    msg = sdk.receive(timeout_millis=10_000)
    assert (msg.value().name, msg.value().population, msg.schema_version()) == ("Lyon", 522_000, "\x00" * 8)
    theirs = official.subscribe(topic, "official", schema=ps.AvroSchema(OfficialCity),
                                initial_position=pulsar.InitialPosition.Earliest)
    client.create_producer(topic, schema=ms.AvroSchema(City)).send(City(name="Porto", population=232_000))
    values = [theirs.receive(timeout_millis=10_000).value() for _ in range(2)]
    assert [(v.name, v.population) for v in values] == [("Lyon", 522_000), ("Porto", 232_000)]
    with pytest.raises(pulsar.IncompatibleSchema):  # the registry's rules, as for the SDK
        official.create_producer(topic, schema=ps.StringSchema())


def _batch_of(official: pulsar.Client, topic: str, count: int) -> None:
    producer = official.create_producer(topic, batching_enabled=True, batching_max_messages=count,
                                        batching_max_publish_delay_ms=1000)
    for i in range(count):
        producer.send_async(f"b{i}".encode(), None)
    producer.flush()
    producer.close()


def test_batch_index_acks_leave_the_rest_of_the_batch(official: pulsar.Client, topic: str) -> None:
    consumer = official.subscribe(topic, "bia", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True,
                                  initial_position=pulsar.InitialPosition.Earliest)
    _batch_of(official, topic, 5)
    got = [consumer.receive(timeout_millis=10_000) for _ in range(5)]
    assert len({(m.message_id().ledger_id(), m.message_id().entry_id()) for m in got}) == 1  # one entry
    for m in got:
        if m.data() in (b"b0", b"b1", b"b3"):
            consumer.acknowledge(m)
    time.sleep(0.5)  # the client's ack grouping
    consumer.close()
    again = official.subscribe(topic, "bia", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True)
    assert sorted(m.data() for m in drain(again, 2)) == [b"b2", b"b4"]
    with pytest.raises(pulsar.Timeout):
        again.receive(timeout_millis=500)


def test_cumulative_ack_and_redelivery_on_an_exclusive_subscription(official: pulsar.Client, topic: str) -> None:
    consumer = official.subscribe(topic, "cum", initial_position=pulsar.InitialPosition.Earliest)
    producer = official.create_producer(topic, batching_enabled=False)
    for i in range(6):
        producer.send(f"c{i}".encode())
    got = [consumer.receive(timeout_millis=10_000) for _ in range(6)]
    consumer.acknowledge_cumulative(got[2])  # c0..c2
    consumer.redeliver_unacknowledged_messages()
    assert [consumer.receive(timeout_millis=10_000).data() for _ in range(3)] == [b"c3", b"c4", b"c5"]
    time.sleep(0.5)
    consumer.close()
    again = official.subscribe(topic, "cum")
    assert [m.data() for m in drain(again, 3)] == [b"c3", b"c4", b"c5"]


def test_a_refused_message_fails_its_send_at_once(official: pulsar.Client, admin, topic: str) -> None:  # type: ignore[no-untyped-def]
    """A message over the topic's maxMessageSize policy (refused through every door): the send
    fails, the producer carries on. An empty payload is a message, as in Pulsar."""
    admin.create_topic(topic)
    admin.set_policy(topic, "maxMessageSize", 64)
    producer = official.create_producer(topic, send_timeout_millis=10_000, batching_enabled=False)
    started = time.monotonic()
    with pytest.raises(pulsar.PulsarException):
        producer.send(b"x" * 200)
    assert time.monotonic() - started < 5  # not resent until the send timeout
    producer.send(b"")
    producer.send(b"after")
    consumer = official.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    assert [m.data() for m in drain(consumer, 2)] == [b"", b"after"]


@pytest.mark.parametrize("mode", ["UseSinglePartition", "CustomPartition"])
def test_partitioned_topic_routing_modes(official: pulsar.Client, admin, topic: str, mode: str) -> None:  # type: ignore[no-untyped-def]
    admin.create_partitioned_topic(topic, 3)
    options: dict = {"message_routing_mode": getattr(pulsar.PartitionsRoutingMode, mode)}
    if mode == "CustomPartition":
        options["message_router"] = lambda msg, partitions: int(msg.partition_key()) % partitions
    producer = official.create_producer(topic, batching_enabled=False, **options)
    keyed = mode == "CustomPartition"  # (a key would route by its hash in the other modes)
    ids = [producer.send(f"m{i}".encode(), partition_key=str(i) if keyed else None) for i in range(6)]
    partitions = [m.partition() for m in ids]
    if mode == "UseSinglePartition":
        assert len(set(partitions)) == 1
    else:
        assert partitions == [i % 3 for i in range(6)]
    consumer = official.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    assert sorted(m.data() for m in drain(consumer, 6)) == sorted(f"m{i}".encode() for i in range(6))
