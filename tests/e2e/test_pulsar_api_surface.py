"""pulsar-client 3.x names and keyword arguments that carry behaviour, through the SDK against the
session cluster: what a program written for `pulsar` gets after changing only its import."""

from __future__ import annotations

import http.server
import re
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest

import magnetar
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
    with pytest.raises(ValueError, match="data"):
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
    assert reader.read_next(timeout_millis=5000).data() == b"m1"
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
    target = sorted(ids)[-1]  # back to one message of one partition: only that partition moves
    reader.seek(target)
    assert reader.read_next(timeout_millis=5000).data() == ids[target]
    reader.seek(float(time.time() * 1000 + 60_000))  # a timestamp as any number: after everything
    with pytest.raises(exceptions.Timeout):
        reader.read_next(timeout_millis=300)
    with pytest.raises(exceptions.InvalidConfiguration):
        client.create_reader(topic, target)


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
