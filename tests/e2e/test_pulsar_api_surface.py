"""pulsar-client 3.x names and keyword arguments that carry behaviour, through the SDK against the
session cluster: what a program written for `pulsar` gets after changing only its import."""

from __future__ import annotations

import http.server
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

import magnetar
from e2e.pulsar_protocol_fixtures import proxy_fixture, quiet_logger  # noqa: F401 - the proxy fixture
from magnetar.client import exceptions
from magnetar.client.auth import BASIC_PLUGIN, from_params
from sdk_helpers import receive_until_quiet

Earliest = magnetar.InitialPosition.Earliest


def test_deliver_after_takes_a_timedelta_as_pulsar_client(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=magnetar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    started = time.monotonic()
    producer.send(b"later", deliver_after=timedelta(milliseconds=1500))
    producer.send(b"now")
    assert consumer.receive(timeout_millis=5000).data() == b"now"
    assert consumer.receive(timeout_millis=5000).data() == b"later"
    assert time.monotonic() - started >= 1.4
    with pytest.raises(ValueError, match="deliver_after"):
        producer.send(b"x", deliver_after="1s")  # type: ignore[arg-type]


def test_send_arguments_are_checked_as_pulsar_client_checks_them(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    with pytest.raises(ValueError, match="properties"):
        producer.send(b"x", properties=[("a", "b")])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str to str"):
        producer.send(b"x", properties={"n": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="partition_key"):
        producer.send(b"x", partition_key=7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Invalid record obj of type <class 'str'>"):
        producer.send("text")  # type: ignore[arg-type]
    # replication arguments are accepted (no geo-replication here) and the message goes through
    assert producer.send(b"y", replication_clusters=["a"], disable_replication=True).entry_id() >= 0


def test_message_id_round_trips_with_its_topic_and_positions_a_reader(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(3)]
    restored = magnetar.MessageId.deserialize(ids[1].serialize(), topic=topic)
    assert restored == ids[1] and restored.topic_name() == topic
    assert magnetar.MessageId.wrap(restored) == ids[1]
    reader = client.create_reader(topic, restored, start_message_id_inclusive=True)
    message = reader.read_next(timeout_millis=5000)
    assert message.data() == b"m1"
    assert (message.schema_version(), message.int_schema_version()) == ("", -1)  # no schema: pulsar-client's
    earliest = client.create_reader(topic, magnetar.MessageId.earliest)
    assert earliest.read_next(timeout_millis=5000).data() == b"m0"
    latest = client.create_reader(topic, magnetar.MessageId.latest)
    producer.send(b"after")
    assert latest.read_next(timeout_millis=5000).data() == b"after"


def test_reader_listener_gets_every_message_in_order(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"m{i}".encode())
    got: list[bytes] = []
    done = threading.Event()

    def listener(reader: magnetar.Reader, message: magnetar.Message) -> None:
        got.append(message.data())
        if len(got) == 5:
            done.set()

    reader = client.create_reader(topic, magnetar.MessageId.earliest, reader_listener=listener,
                                  is_read_compacted=True)  # never compacted: the whole topic
    assert done.wait(10), got
    assert got == [f"m{i}".encode() for i in range(5)]
    with pytest.raises(exceptions.InvalidConfiguration):
        reader.read_next(timeout_millis=100)


def test_a_reader_reads_a_partitioned_topic(client: magnetar.Client, admin: Any, topic: str) -> None:
    admin.create_partitioned_topic(topic, 3)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = {producer.send(f"m{i}".encode(), partition_key=f"k{i}"): f"m{i}".encode() for i in range(9)}
    assert len({mid.partition() for mid in ids}) > 1
    reader = client.create_reader(topic, magnetar.MessageId.earliest)
    assert reader.topic() == topic and reader.has_message_available()
    got = [reader.read_next(timeout_millis=5000) for _ in range(9)]
    assert sorted(m.data() for m in got) == sorted(ids.values())
    with pytest.raises(exceptions.Timeout):
        reader.read_next(timeout_millis=300)
    # back to one message of one partition: only that partition moves, to what came after it there
    by_partition = sorted(mid for mid in ids if mid.partition() == sorted(ids)[-1].partition())
    assert len(by_partition) > 1
    reader.seek(by_partition[-2])
    assert reader.read_next(timeout_millis=5000).data() == ids[by_partition[-1]]
    reader.seek(float(time.time() * 1000 + 60_000))  # a timestamp as any number: after everything
    with pytest.raises(exceptions.Timeout):
        reader.read_next(timeout_millis=300)
    with pytest.raises(exceptions.InvalidConfiguration):
        client.create_reader(topic, by_partition[-1])


def test_initial_sequence_id_sets_the_first_sequence_id(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic, initial_sequence_id=100, batching_enabled=False)
    assert producer.last_sequence_id() == 100
    producer.send(b"a")
    assert producer.last_sequence_id() == 101


def test_shutdown_closes_without_waiting(cluster: Any, topic: str) -> None:
    c = magnetar.Client(cluster.url)
    producer = c.create_producer(topic)
    consumer = c.subscribe(topic, "sub")
    started = time.monotonic()
    c.shutdown()
    assert time.monotonic() - started < 5
    with pytest.raises(exceptions.AlreadyClosed):
        producer.send(b"late")
    assert not consumer.is_connected()


def test_exclusive_with_fencing_takes_the_topic_from_the_holder(client: magnetar.Client, topic: str) -> None:
    modes = magnetar.ProducerAccessMode
    first = client.create_producer(topic, producer_name="first", access_mode=modes.Exclusive, batching_enabled=False)
    first.send(b"first's")
    with pytest.raises(exceptions.ProducerFenced):  # plain Exclusive still waits its turn
        client.create_producer(topic, producer_name="other", access_mode=modes.Exclusive)
    second = client.create_producer(topic, producer_name="second", access_mode=modes.ExclusiveWithFencing,
                                    batching_enabled=False)
    second.send(b"second's")
    with pytest.raises(exceptions.PulsarException):  # fenced: its writes are refused
        first.send(b"too late")
    consumer = client.subscribe(topic, "s", initial_position=Earliest)
    assert [consumer.receive(10_000).data() for _ in range(2)] == [b"first's", b"second's"]
    with pytest.raises(exceptions.Timeout):
        consumer.receive(1_000)
    second.close()


def test_key_shared_policy_is_accepted_and_validated(client: magnetar.Client, topic: str) -> None:
    policy = magnetar.ConsumerKeySharedPolicy(magnetar.KeySharedMode.AutoSplit, allow_out_of_order_delivery=True)
    consumer = client.subscribe(topic, "ks", consumer_type=magnetar.ConsumerType.KeyShared,
                                key_shared_policy=policy, initial_position=Earliest, batch_index_ack_enabled=True,
                                max_pending_chunked_message=5, properties={"team": "a"})
    client.create_producer(topic).send(b"k", partition_key="key")
    assert [m.data() for m in receive_until_quiet(consumer)] == [b"k"]
    with pytest.raises(ValueError, match="sticky_ranges"):
        magnetar.ConsumerKeySharedPolicy(magnetar.KeySharedMode.Sticky)
    with pytest.raises(ValueError, match="key_shared_policy"):
        client.subscribe(topic, "ks2", key_shared_policy="AutoSplit")  # type: ignore[arg-type]


@pytest.mark.parametrize("ranges", [[(0, 70_000)], [(-1, 10)], [(0, 100), (50, 200)]])
def test_invalid_sticky_ranges_are_refused_as_pulsar_client_refuses_them(ranges: list[tuple[int, int]]) -> None:
    import pulsar

    with pytest.raises(ValueError) as official:
        pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=ranges)
    with pytest.raises(ValueError) as ours:
        magnetar.ConsumerKeySharedPolicy(magnetar.KeySharedMode.Sticky, sticky_ranges=ranges)
    assert str(ours.value) == str(official.value)


def test_regex_subscription_mode_picks_the_domains(client: magnetar.Client, admin: Any) -> None:
    base = f"rx-{uuid.uuid4().hex[:8]}"
    persistent, live = f"persistent://public/default/{base}-p", f"non-persistent://public/default/{base}-n"
    admin.create_topic(persistent)
    admin.create_topic(live)
    pattern = re.compile(f"persistent://public/default/{base}-.*")  # pulsar-client: a compiled pattern
    only_persistent = client.subscribe(pattern, "po", initial_position=Earliest)
    every = client.subscribe(pattern, "all", initial_position=Earliest,
                             regex_subscription_mode=magnetar.RegexSubscriptionMode.AllTopics)
    only_live = client.subscribe(pattern, "np", regex_subscription_mode=magnetar.RegexSubscriptionMode.NonPersistentOnly)
    client.create_producer(persistent, batching_enabled=False).send(b"stored")
    client.create_producer(live, batching_enabled=False).send(b"live")
    assert sorted(m.data() for m in receive_until_quiet(only_persistent)) == [b"stored"]
    assert sorted(m.data() for m in receive_until_quiet(every)) == [b"live", b"stored"]
    assert sorted(m.data() for m in receive_until_quiet(only_live)) == [b"live"]


def test_client_settings_without_meaning_here_are_accepted_and_type_checked(cluster: Any, topic: str) -> None:
    c = magnetar.Client(cluster.url, io_threads=4, message_listener_threads=2, connection_timeout_ms=2000,
                        listener_name="external", use_tls=False, tls_validate_hostname=True,
                        logger=magnetar.ConsoleLogger(magnetar.LoggerLevel.Warn))
    try:
        assert c.create_producer(topic).send(b"ok").entry_id() >= 0
    finally:
        c.close()
    with pytest.raises(ValueError, match="io_threads"):
        magnetar.Client(cluster.url, io_threads="4")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Logger"):
        magnetar.Client(cluster.url, logger="debug")
    with pytest.raises(ValueError, match="send_timeout_millis"):
        magnetar.Client(cluster.url).create_producer(topic, send_timeout_millis=1.5)  # type: ignore[arg-type]


class _Headers(http.server.BaseHTTPRequestHandler):
    seen: list[str | None] = []

    def do_GET(self) -> None:
        _Headers.seen.append(self.headers.get("Authorization"))
        body = b'{"partitions": 0}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_authentication_basic_sends_http_basic_as_pulsar_client() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Headers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        for auth in (magnetar.AuthenticationBasic("my-user", "my-pass"),
                     magnetar.AuthenticationBasic(auth_params_string='{"username": "my-user", "password": "my-pass"}'),
                     from_params(BASIC_PLUGIN, '{"userId": "my-user", "password": "my-pass"}')):  # the CLI's form
            c = magnetar.Client(url, auth)
            c.get_topic_partitions("t")
            c.close()
    finally:
        server.shutdown()
    assert _Headers.seen == ["Basic bXktdXNlcjpteS1wYXNz"] * 3  # base64("my-user:my-pass")
    with pytest.raises(ValueError, match="password"):
        magnetar.AuthenticationBasic("my-user", None)


def test_tls_and_library_plugins_are_accepted_and_refused_clearly_on_use(cluster: Any) -> None:
    import pulsar

    for official, ours in ((pulsar.AuthenticationTLS, magnetar.AuthenticationTLS),
                           (pulsar.Authentication, magnetar.Authentication)):
        with pytest.raises(ValueError) as official_error:
            official(1, "x")  # type: ignore[arg-type]
        with pytest.raises(ValueError) as our_error:
            ours(1, "x")  # type: ignore[arg-type]
        assert str(our_error.value) == str(official_error.value)
    for auth in (magnetar.AuthenticationTLS("/certs/client.pem", "/certs/client.key"),
                 magnetar.Authentication("/usr/lib/libauth.so", "key:value")):
        client = magnetar.Client(cluster.url, authentication=auth)  # accepted, as pulsar-client accepts it
        try:
            with pytest.raises(magnetar.AuthenticationError, match="not supported"):
                client.create_producer("persistent://public/default/tls-plugin").send(b"x")
        finally:
            client.close()


def test_a_wrong_authentication_type_is_the_value_error_pulsar_client_raises(cluster: Any) -> None:
    import pulsar

    with pytest.raises(ValueError) as official:
        pulsar.Client("pulsar://127.0.0.1:1", authentication="token")  # type: ignore[arg-type]
    with pytest.raises(ValueError) as ours:
        magnetar.Client(cluster.url, authentication="token")  # type: ignore[arg-type]
    assert str(ours.value) == str(official.value)


# --- wrong argument types: the exception pulsar-client raises ----------------------------------
# Each call below passes one argument of a wrong type (or value) to pulsar-client 3.x and to the
# SDK: both raise the same exception type (pulsar-client's own checks raise ValueError, what it
# hands to its C++ library unchecked a TypeError). The official client talks to the binary proxy
# of the session cluster, the SDK to its HTTP API.
@dataclass
class Side:
    """One client library with a producer, a consumer and a reader of the same topic."""

    api: Any
    url: str
    client: Any
    producer: Any
    partitioned: Any  # a producer of a partitioned topic: the SDK checks before routing
    consumer: Any
    reader: Any
    message_id: Any


@pytest.fixture(scope="module", name="sides")
def sides_fixture(cluster: Any, proxy: Any) -> Iterator[dict[str, Side]]:
    import pulsar

    from magnetar.client.admin import AdminClient

    topic = f"persistent://public/default/types-{uuid.uuid4().hex[:8]}"
    partitioned = f"{topic}-partitioned"
    admin = AdminClient(cluster.url)
    admin.create_partitioned_topic(partitioned, 2)
    admin.close()
    made: dict[str, Side] = {}
    for api, url, client in ((pulsar, proxy.service_url, pulsar.Client(proxy.service_url, operation_timeout_seconds=15,
                                                                      logger=quiet_logger())),
                             (magnetar, cluster.url, magnetar.Client(cluster.url))):
        producer = client.create_producer(topic)
        made[api.__name__] = Side(api, url, client, producer, client.create_producer(partitioned),
                                  client.subscribe(topic, f"types-{api.__name__}"),
                                  client.create_reader(topic, api.MessageId.earliest), producer.send(b"x"))
    yield made
    for side in made.values():
        side.client.close()


def _calls() -> dict[str, Callable[[Side], object]]:
    calls: dict[str, Callable[[Side], object]] = {
        "Client(service_url=1)": lambda s: s.api.Client(1),
        "Client('no-scheme')": lambda s: s.api.Client("no-scheme"),
        "Client('ftp://host')": lambda s: s.api.Client("ftp://host"),
        "Client('http://')": lambda s: s.api.Client("http://"),
        "Client(authentication='token')": lambda s: s.api.Client(s.url, authentication="token"),
        "Client(logger='debug')": lambda s: s.api.Client(s.url, logger="debug"),
        "create_producer(topic=1)": lambda s: s.client.create_producer(1),
        "create_producer(properties={'a': 1})": lambda s: s.client.create_producer(s.producer.topic(),
                                                                                  properties={"a": 1}),
        "subscribe(topic=1)": lambda s: s.client.subscribe(1, "sub"),
        "subscribe(topic=('a',))": lambda s: s.client.subscribe(("a",), "sub"),
        "subscribe(topic=['a', 1])": lambda s: s.client.subscribe([s.producer.topic(), 1], "sub"),
        "subscribe(subscription_name=1)": lambda s: s.client.subscribe(s.producer.topic(), 1),
        "subscribe(properties={'a': 1})": lambda s: s.client.subscribe(s.producer.topic(), "sub", properties={"a": 1}),
        "create_reader(topic=1)": lambda s: s.client.create_reader(1, s.api.MessageId.earliest),
        "create_reader(start_message_id='earliest')": lambda s: s.client.create_reader(s.producer.topic(), "earliest"),
        "create_reader(start_message_id=0)": lambda s: s.client.create_reader(s.producer.topic(), 0),
        "create_producer(batching_enabled=True, chunking_enabled=True)": lambda s: s.client.create_producer(
            s.producer.topic(), batching_enabled=True, chunking_enabled=True),
        "create_table_view(topic=1)": lambda s: s.client.create_table_view(1),
        "create_table_view(subscription_name=1)": lambda s: s.client.create_table_view(s.producer.topic(),
                                                                                      subscription_name=1),
        "create_table_view(schema='s')": lambda s: s.client.create_table_view(s.producer.topic(), schema="s"),
        "get_topic_partitions(1)": lambda s: s.client.get_topic_partitions(1),
        "send('text')": lambda s: s.producer.send("text"),
        "send(1)": lambda s: s.producer.send(1),
        "send(bytearray)": lambda s: s.producer.send(bytearray(b"x")),
        "send(properties={'a': 1})": lambda s: s.producer.send(b"x", properties={"a": 1}),
        "send(properties={1: 'a'})": lambda s: s.producer.send(b"x", properties={1: "a"}),
        "send_async('text')": lambda s: s.producer.send_async("text", None),
        "send_async(callback='f')": lambda s: s.producer.send_async(b"x", "f"),
        "send_async(partition_key=1)": lambda s: s.producer.send_async(b"x", None, partition_key=1),
        "partitioned send('text')": lambda s: s.partitioned.send("text"),
        "partitioned send(partition_key=1)": lambda s: s.partitioned.send(b"x", partition_key=1),
        "partitioned send(properties={'a': 1})": lambda s: s.partitioned.send(b"x", properties={"a": 1}),
        "receive(timeout_millis=1.5)": lambda s: s.consumer.receive(timeout_millis=1.5),
        "receive(timeout_millis='1')": lambda s: s.consumer.receive(timeout_millis="1"),
        "read_next(timeout_millis=1.5)": lambda s: s.reader.read_next(timeout_millis=1.5),
        "consumer.seek('x')": lambda s: s.consumer.seek("x"),
        "consumer.seek(None)": lambda s: s.consumer.seek(None),
        "reader.seek('x')": lambda s: s.reader.seek("x"),
        "acknowledge('x')": lambda s: s.consumer.acknowledge("x"),
        "acknowledge(None)": lambda s: s.consumer.acknowledge(None),
        "acknowledge_cumulative('x')": lambda s: s.consumer.acknowledge_cumulative("x"),
        "negative_acknowledge('x')": lambda s: s.consumer.negative_acknowledge("x"),
        "MessageId('1')": lambda s: s.api.MessageId("1"),
        "MessageId(1.5)": lambda s: s.api.MessageId(1.5),
        "MessageId.deserialize('x')": lambda s: s.api.MessageId.deserialize("x"),
        "MessageId.deserialize(b'garbage')": lambda s: s.api.MessageId.deserialize(b"garbage"),
        "message_id < 'x'": lambda s: s.message_id < "x",
        "AuthenticationToken(1)": lambda s: s.api.AuthenticationToken(1),
        "AuthenticationBasic(1, 'p')": lambda s: s.api.AuthenticationBasic(1, "p"),
        "AuthenticationBasic('u', 'p', method=1)": lambda s: s.api.AuthenticationBasic("u", "p", method=1),
        "AuthenticationTLS(1, 'k')": lambda s: s.api.AuthenticationTLS(1, "k"),
        "ConsoleLogger('x')": lambda s: s.api.ConsoleLogger("x"),
        "FileLogger(Info, 1)": lambda s: s.api.FileLogger(s.api.LoggerLevel.Info, 1),
        "CryptoKeyReader(1, 'p')": lambda s: s.api.CryptoKeyReader(1, "p"),
        "ConsumerDeadLetterPolicy(0)": lambda s: s.api.ConsumerDeadLetterPolicy(0),
        "ConsumerDeadLetterPolicy(None)": lambda s: s.api.ConsumerDeadLetterPolicy(None),
        "ConsumerDeadLetterPolicy('3')": lambda s: s.api.ConsumerDeadLetterPolicy("3"),
        "ConsumerDeadLetterPolicy(2.5)": lambda s: s.api.ConsumerDeadLetterPolicy(2.5),
        "ConsumerDeadLetterPolicy(3, dead_letter_topic=1)": lambda s: s.api.ConsumerDeadLetterPolicy(
            3, dead_letter_topic=1),
        "ConsumerBatchReceivePolicy('1', 1, 1)": lambda s: s.api.ConsumerBatchReceivePolicy("1", 1, 1),
        "ConsumerBatchReceivePolicy(1, 1, 1.5)": lambda s: s.api.ConsumerBatchReceivePolicy(1, 1, 1.5),
        "ConsumerKeySharedPolicy('Sticky')": lambda s: s.api.ConsumerKeySharedPolicy("Sticky"),
        "ConsumerKeySharedPolicy(allow_out_of_order_delivery='y')": lambda s: s.api.ConsumerKeySharedPolicy(
            allow_out_of_order_delivery="y"),
        "ConsumerKeySharedPolicy(sticky_ranges='x')": lambda s: s.api.ConsumerKeySharedPolicy(
            s.api.KeySharedMode.Sticky, sticky_ranges="x"),
        "ServiceInfo(1)": lambda s: s.api.ServiceInfo(1),
        "ServiceInfo(authentication='t')": lambda s: s.api.ServiceInfo(s.url, authentication="t"),
        "AutoClusterFailover(1, [])": lambda s: s.api.AutoClusterFailover(1, []),
        "AutoClusterFailover(info, [])": lambda s: s.api.AutoClusterFailover(s.api.ServiceInfo(s.url), []),
    }
    ints = {"operation_timeout_seconds": 1.5, "connection_timeout_ms": "1", "io_threads": 1.5,
            "message_listener_threads": "1", "concurrent_lookup_requests": 1.5, "stats_interval_in_seconds": "1"}
    optional_strs = ("log_conf_file_path", "tls_trust_certs_file_path", "listener_name", "tls_private_key_file_path",
                     "tls_certificate_file_path")
    flags = ("use_tls", "tls_allow_insecure_connection", "tls_validate_hostname")
    for name, value in [*ints.items(), *((n, 1) for n in optional_strs), *((n, 1) for n in flags)]:
        calls[f"Client({name}={value!r})"] = lambda s, name=name, value=value: s.api.Client(s.url, **{name: value})
    producer_arguments = {
        "producer_name": 1, "schema": "s", "initial_sequence_id": "1", "send_timeout_millis": 1.5,
        "compression_type": "LZ4", "max_pending_messages": "1", "max_pending_messages_across_partitions": 1.5,
        "block_if_queue_full": 1, "batching_enabled": 1, "batching_max_messages": "1",
        "batching_max_allowed_size_in_bytes": 1.5, "batching_max_publish_delay_ms": "1", "chunking_enabled": "y",
        "message_routing_mode": "RoundRobin", "lazy_start_partitioned_producers": 0, "properties": [("a", "b")],
        "batching_type": 0, "encryption_key": 1, "crypto_key_reader": "r", "access_mode": "Shared",
    }
    for name, value in producer_arguments.items():
        calls[f"create_producer({name}={value!r})"] = (
            lambda s, name=name, value=value: s.client.create_producer(s.producer.topic(), **{name: value}))
    consumer_arguments = {
        "consumer_type": "Shared", "schema": "s", "receiver_queue_size": "1",
        "max_total_receiver_queue_size_across_partitions": 1.5, "consumer_name": 1,
        "unacked_messages_timeout_ms": "1", "broker_consumer_stats_cache_time_ms": 1.5,
        "negative_ack_redelivery_delay_ms": "1", "pattern_auto_discovery_period": 1.5, "is_read_compacted": 1,
        "properties": [("a", "b")], "initial_position": "Earliest", "crypto_key_reader": "r",
        "replicate_subscription_state_enabled": "y", "max_pending_chunked_message": "1",
        "auto_ack_oldest_chunked_message_on_queue_full": 1, "start_message_id_inclusive": 1,
        "batch_receive_policy": "p", "key_shared_policy": "p", "batch_index_ack_enabled": 1,
        "regex_subscription_mode": "AllTopics", "crypto_failure_action": "FAIL",
    }
    for name, value in consumer_arguments.items():
        calls[f"subscribe({name}={value!r})"] = (
            lambda s, name=name, value=value: s.client.subscribe(s.producer.topic(), "sub", **{name: value}))
    reader_arguments = {
        "schema": "s", "receiver_queue_size": "1", "reader_name": 1, "subscription_role_prefix": 1,
        "is_read_compacted": 1, "crypto_key_reader": "r", "start_message_id_inclusive": 1,
        "crypto_failure_action": "FAIL",
    }
    for name, value in reader_arguments.items():
        calls[f"create_reader({name}={value!r})"] = (
            lambda s, name=name, value=value: s.client.create_reader(s.producer.topic(), s.api.MessageId.earliest,
                                                                     **{name: value}))
    send_arguments = {"properties": [("a", "b")], "partition_key": 1, "ordering_key": 1, "sequence_id": "1",
                      "replication_clusters": "a", "disable_replication": 1, "event_timestamp": 1.5,
                      "deliver_at": 1.5, "deliver_after": 1.5}
    for name, value in send_arguments.items():
        calls[f"send({name}={value!r})"] = lambda s, name=name, value=value: s.producer.send(b"x", **{name: value})
    return calls


def _raised(call: Callable[[Side], object], side: Side) -> tuple[str, str]:
    """(ValueError, TypeError, another exception's class name, or "no error"; the message)."""
    try:
        call(side)
    except ValueError as exc:
        return "ValueError", str(exc)
    except TypeError as exc:
        return "TypeError", str(exc)
    except Exception as exc:  # the names of pulsar-client's exceptions are the SDK's
        return type(exc).__name__, str(exc)
    return "no error", ""


def test_wrong_argument_types_raise_what_pulsar_client_raises(sides: dict[str, Side]) -> None:
    mismatches = []
    for name, call in _calls().items():
        official, ours = _raised(call, sides["pulsar"]), _raised(call, sides["magnetar"])
        if official[0] != ours[0] or ours[0] == "no error":
            mismatches.append(f"{name}: pulsar-client {official}, the SDK {ours}")
        elif official[1].startswith("Argument ") and official[1].split()[1] not in ours[1]:
            mismatches.append(f"{name}: the SDK's message does not name the argument: {ours[1]!r}")
    assert not mismatches, "\n".join(mismatches)


def test_where_the_sdk_takes_other_types_than_pulsar_client_on_purpose(sides: dict[str, Side]) -> None:
    """docs/semantics.md ("The pulsar-client API") says each one."""
    ours, official = sides["magnetar"], sides["pulsar"]
    future = int(time.time() * 1000) + 3_600_000
    # seek takes a timestamp as any number (time.time() * 1000 is a float); pulsar-client an int only
    with pytest.raises(ValueError, match="invalid seek_arg type"):
        official.consumer.seek(float(future))
    ours.consumer.seek(float(future))
    ours.reader.seek(float(future))
    # MessageId.wrap checks what it wraps; == with another type is False, as for any Python value
    with pytest.raises(ValueError, match="msg_id"):
        magnetar.MessageId.wrap("x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        official.message_id == "x"  # noqa: B015 - pulsar-client raises on the comparison itself
    assert (ours.message_id == "x") is False
    # batching is the SDK's default, but not with chunking: a chunking producer without batching_enabled
    # gets none (pulsar-client's default is off anyway)
    ours.client.create_producer(ours.producer.topic(), chunking_enabled=True).close()
