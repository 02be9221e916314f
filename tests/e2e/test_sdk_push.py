"""The SDK consuming over push (Pulsar's WebSocket API): `delivery=` of `Client` and `subscribe`."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import uuid
from types import SimpleNamespace
from typing import Any, cast

import pytest

import magnetar
from magnetar import exceptions
from magnetar.client.push import PushConsumer
from magnetar.core.naming import TopicName


def new_topic(domain: str) -> str:
    return f"{domain}://public/default/sdk-push-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def client(cluster):  # type: ignore[no-untyped-def]
    c = magnetar.Client(cluster.url)
    yield c
    c.close()


def producer_of(client: magnetar.Client, topic: str):  # type: ignore[no-untyped-def]
    return client.create_producer(topic, batching_enabled=False)


def test_non_persistent_message_reaches_the_sdk_consumer(client) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("non-persistent")
    consumer = client.subscribe(topic, "live")
    assert isinstance(consumer, PushConsumer) and consumer.is_connected()
    assert (consumer.topic(), consumer.subscription_name()) == (topic, "live") and consumer.consumer_name()
    producer = producer_of(client, topic)
    mid = producer.send(b"hello", properties={"a": "1"}, partition_key="k1")
    assert mid.entry_id() >= 0
    message = consumer.receive(timeout_millis=5000)
    assert message.data() == b"hello" and message.properties() == {"a": "1"} and message.partition_key() == "k1"
    assert message.message_id() == mid and message.topic_name() == topic
    assert message.publish_timestamp() > 0 and message.redelivery_count() == 0
    consumer.acknowledge(message)
    with pytest.raises(exceptions.Timeout):
        consumer.receive(timeout_millis=300)
    consumer.close()
    assert not consumer.is_connected()


def test_non_persistent_without_a_consumer_send_returns_minus_one(client) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("non-persistent")
    mid = producer_of(client, topic).send(b"nobody listens")
    assert (mid.ledger_id(), mid.entry_id()) == (-1, -1)


@pytest.mark.parametrize("kind", list(magnetar.ConsumerType))
def test_every_subscription_type_accepts_a_non_persistent_consumer(client, kind) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("non-persistent")
    consumer = client.subscribe(topic, f"sub-{kind.name}", consumer_type=kind)
    producer_of(client, topic).send(b"x", partition_key="k")
    assert consumer.receive(timeout_millis=5000).data() == b"x"
    consumer.close()


def test_poll_delivery_refuses_non_persistent_topics(cluster, client) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("non-persistent")
    with pytest.raises(exceptions.InvalidConfiguration, match="push"):
        client.subscribe(topic, "sub", delivery="poll")
    polling = magnetar.Client(cluster.url, delivery="poll")
    try:
        with pytest.raises(exceptions.InvalidConfiguration):
            polling.subscribe(topic, "sub")
    finally:
        polling.close()
    with pytest.raises(exceptions.InvalidConfiguration):
        client.subscribe(topic, "sub", delivery="sometimes")


def test_persistent_push_in_order_and_acknowledged(client) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("persistent")
    consumer = client.subscribe(topic, "ordered", delivery="push")
    assert isinstance(consumer, PushConsumer)
    producer = producer_of(client, topic)
    for i in range(50):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    got = [consumer.receive(timeout_millis=10_000) for _ in range(50)]
    assert [m.data().decode() for m in got] == [f"m{i}" for i in range(50)]
    for m in got:
        consumer.acknowledge(m)
    with pytest.raises(exceptions.NotAllowedError, match="umulative"):
        consumer.acknowledge_cumulative(got[-1])
    consumer.close()  # flushes the acknowledgements
    again = client.subscribe(topic, "ordered", delivery="push")
    with pytest.raises(exceptions.Timeout):
        again.receive(timeout_millis=1500)
    again.close()


def test_persistent_push_with_the_client_default(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("persistent")
    c = magnetar.Client(cluster.url, delivery="push", websocket_url=cluster.url)
    try:
        consumer = c.subscribe(topic, "sub")
        assert isinstance(consumer, PushConsumer)
        assert not isinstance(c.subscribe(topic, "polled", delivery="poll"), PushConsumer)
        producer_of(c, topic).send(b"one")
        assert consumer.receive(timeout_millis=10_000).data() == b"one"
    finally:
        c.close()


def test_negative_ack_is_redelivered(client) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("persistent")
    consumer = client.subscribe(topic, "nack", delivery="push", negative_ack_redelivery_delay_ms=0)
    producer_of(client, topic).send(b"again")
    first = consumer.receive(timeout_millis=10_000)
    consumer.negative_acknowledge(first)
    redelivered = consumer.receive(timeout_millis=10_000)
    assert redelivered.data() == b"again" and redelivered.message_id() == first.message_id()
    assert redelivered.redelivery_count() == 1
    consumer.acknowledge(redelivered)
    consumer.close()


def test_refused_connects_raise_with_the_reason(cluster, client) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("persistent")
    first = client.subscribe(topic, "excl", delivery="push")
    with pytest.raises(exceptions.ConsumerBusy) as busy:
        client.subscribe(topic, "excl", delivery="push")
    assert "Exclusive" in busy.value.reason
    first.close()
    with pytest.raises(exceptions.PulsarException) as missing:
        client.subscribe("persistent://public/no-such-ns/t", "sub", delivery="push")
    assert missing.value.status == 404 and "no-such-ns" in missing.value.reason
    with pytest.raises(exceptions.InvalidConfiguration) as bad:  # the enum cannot say it: the wire can
        PushConsumer(client._transport, cluster.url, TopicName.parse(topic), "sub",
                     cast(Any, SimpleNamespace(value="Bogus")))
    assert bad.value.status == 400 and "subscriptionType" in bad.value.reason


def test_reconnects_after_an_unexpected_close_and_redelivers(client) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic("persistent")
    consumer = client.subscribe(topic, "resilient", delivery="push", consumer_name="steady",
                                consumer_type=magnetar.ConsumerType.Shared)
    producer = producer_of(client, topic)
    producer.send(b"before")
    assert consumer.receive(timeout_millis=10_000).data() == b"before"  # not acknowledged
    consumer._ws.close()  # as if the network (or API Gateway's 2 h limit) dropped it
    again = consumer.receive(timeout_millis=10_000)  # redelivered to the reconnected consumer
    assert again.data() == b"before" and again.redelivery_count() == 1
    assert consumer.is_connected() and consumer.consumer_name() == "steady"
    consumer.acknowledge(again)
    producer.send(b"after")
    assert consumer.receive(timeout_millis=10_000).data() == b"after"
    consumer.redeliver_unacknowledged_messages()  # "after" is not acknowledged: it comes back at once
    assert consumer.receive(timeout_millis=10_000).data() == b"after"
    consumer.close()


class _Relay:
    """A TCP relay in front of the cluster's port; the next `resets` connections are cut with a TCP
    reset as soon as they are accepted (as a cluster going down mid-connect does): the client's
    handshake fails on a reset socket or on a connection closed under it, whichever comes first."""

    def __init__(self, port: int) -> None:
        self.target, self.resets, self.cut = port, 0, 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.links: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            if self.resets > 0:
                self.resets -= 1
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
                self.cut += 1
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self.links += [conn, upstream]
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def drop_links(self) -> None:
        for link in self.links:
            with contextlib.suppress(OSError):
                link.close()
        self.links.clear()

    def close(self) -> None:
        self.server.close()
        self.drop_links()


def test_a_reconnect_whose_handshake_is_reset_is_tried_again(cluster) -> None:  # type: ignore[no-untyped-def]
    """The connection drops and the next handshakes are reset mid-way (a cluster going down as the
    consumer reconnects): the consumer keeps trying, and gets what is published once it is back."""
    relay = _Relay(int(cluster.url.rsplit(":", 1)[1]))
    c = magnetar.Client(cluster.url, websocket_url=f"http://127.0.0.1:{relay.port}")
    try:
        topic = new_topic("persistent")
        consumer = c.subscribe(topic, "reset", delivery="push")
        producer = producer_of(c, topic)
        producer.send(b"before")
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))
        relay.resets = 5
        relay.drop_links()
        producer.send(b"after")
        got = consumer.receive(timeout_millis=20_000)
        if got.data() == b"before":  # its acknowledgement went down with the connection: at least once
            consumer.acknowledge(got)
            got = consumer.receive(timeout_millis=20_000)
        assert got.data() == b"after"
        assert relay.cut == 5 and consumer.is_connected()
    finally:
        c.close()
        relay.close()
