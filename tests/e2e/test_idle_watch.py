"""An idle SDK consumer waits for its topic's next seal on a WebSocket (client/idle_watch.py): no
broker function held in a poll while nothing comes, the message delivered as soon as it is sealed,
what another consumer released found by the next look, and long polling when the WebSocket API
cannot be reached."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

import magnetar
from magnetar.client import consumer as consumer_module
from magnetar.client import idle_watch
from magnetar.local.cluster import free_port

Shared = magnetar.ConsumerType.Shared
Earliest = magnetar.InitialPosition.Earliest


def broker(cluster: Any) -> dict[str, float]:
    stats = httpx.get(f"{cluster.url}/_magnetar/local/stats", timeout=10).json()
    fn = stats["lambda"]["magnetar-broker"]
    return {"invocations": fn["invocations"], "ms": fn["duration_ms_total"]}


def until(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def receive_in_background(consumer: Any, timeout_millis: int | None = None) -> tuple[threading.Thread, list[Any]]:
    got: list[Any] = []

    def run() -> None:
        try:
            got.append(consumer.receive(timeout_millis))
        except Exception as exc:  # the test asserts what came
            got.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, got


def test_an_idle_consumer_holds_no_poll_and_gets_the_next_message_as_soon_as_it_is_sealed(
    cluster: Any, client: magnetar.Client, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumer_module, "IDLE_S", 1.0)
    monkeypatch.setattr(consumer_module, "MAX_POLL_MS", 2_000)  # long polls of 2 s: idle after the first
    monkeypatch.setattr(idle_watch, "LOOK_S", 60.0)  # no look in the test's window: a delivery is the ring's
    consumer = client.subscribe(topic, "idle", consumer_type=Shared, initial_position=Earliest)
    thread, got = receive_in_background(consumer)
    watch = consumer._watch
    until(lambda: watch.connected and not watch.settling_ms(), 15, "an idle receive() opens its watch")
    time.sleep(1.0)  # its last poll of the connect's settling time
    before = broker(cluster)
    time.sleep(3)
    after = broker(cluster)
    assert after["invocations"] == before["invocations"], "no request while the consumer waits on its watch"
    assert not got and thread.is_alive()

    sent_at = time.monotonic()
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"wake up")
    thread.join(timeout=10)
    assert got and isinstance(got[0], magnetar.Message), got
    assert got[0].data() == b"wake up"
    assert time.monotonic() - sent_at < 10, "delivered on the ring, not at the next look"
    until(lambda: not watch.connected, 5, "the watch that rang is closed (the topic is busy)")
    consumer.acknowledge(got[0])
    producer.close()
    consumer.close()


def test_an_idle_batch_receive_makes_no_request_per_call_and_gets_the_next_message_on_the_ring(
    cluster: Any, client: magnetar.Client, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """batch_receive() with a 100 ms timeout, called in a loop: a look per call while busy, none while
    it waits on its idle watch."""
    monkeypatch.setattr(consumer_module, "IDLE_S", 1.0)
    monkeypatch.setattr(idle_watch, "LOOK_S", 60.0)
    consumer = client.subscribe(topic, "batches", consumer_type=Shared, initial_position=Earliest,
                                batch_receive_policy=magnetar.ConsumerBatchReceivePolicy(100, 10 * 1024 * 1024, 100))
    watch = consumer._watch
    deadline = time.monotonic() + 20
    while not (watch.connected and not watch.settling_ms()):  # polls until the connect has settled
        assert consumer.batch_receive() == []
        assert time.monotonic() < deadline, "an idle batch_receive() opens its watch"
    before = broker(cluster)
    for _ in range(20):  # 2 s of calls
        assert consumer.batch_receive() == []
    assert broker(cluster)["invocations"] == before["invocations"], "no look per call while watching"

    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"batched")
    got: list[Any] = []
    deadline = time.monotonic() + 10
    while not got:
        got = consumer.batch_receive()
        assert time.monotonic() < deadline, "delivered on the ring"
    assert [m.data() for m in got] == [b"batched"]
    consumer.acknowledge(got[0])
    producer.close()
    consumer.close()


def test_an_idle_consumer_finds_what_another_consumer_released_at_its_next_look(
    cluster: Any, client: magnetar.Client, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumer_module, "IDLE_S", 1.0)
    monkeypatch.setattr(consumer_module, "MAX_POLL_MS", 2_000)  # long polls of 2 s: idle after the first
    monkeypatch.setattr(idle_watch, "LOOK_S", 2.0)
    holder_client = magnetar.Client(cluster.url)
    holder = holder_client.subscribe(topic, "released", consumer_type=Shared, initial_position=Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"held")
    held = holder.receive(timeout_millis=15_000)  # not acknowledged
    assert held.data() == b"held"

    idle = client.subscribe(topic, "released", consumer_type=Shared, initial_position=Earliest)
    thread, got = receive_in_background(idle)
    until(lambda: idle._watch.connected, 15, "the idle consumer watches")
    holder.close()  # its unacknowledged message goes back to the subscription: no seal announces it
    thread.join(timeout=15)
    assert got and isinstance(got[0], magnetar.Message), got
    assert got[0].data() == b"held" and got[0].redelivery_count() >= 0
    idle.acknowledge(got[0])
    producer.close()
    idle.close()
    holder_client.close()


def test_without_the_websocket_api_an_idle_consumer_long_polls_as_before(
    cluster: Any, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumer_module, "IDLE_S", 1.0)
    monkeypatch.setattr(consumer_module, "MAX_POLL_MS", 2_000)  # long polls of 2 s: idle after the first
    unreachable = magnetar.Client(cluster.url, websocket_url=f"ws://127.0.0.1:{free_port()}")
    consumer = unreachable.subscribe(topic, "nows", consumer_type=Shared, initial_position=Earliest)
    with pytest.raises(magnetar.Timeout):
        consumer.receive(timeout_millis=2_500)  # idle past IDLE_S: it tries the watch, long polling meanwhile
    until(lambda: not consumer._watch.available(), 10, "the failed connect is remembered (RETRY_S)")
    assert not consumer._watch.connected
    thread, got = receive_in_background(consumer, timeout_millis=20_000)
    time.sleep(0.5)
    producer = unreachable.create_producer(topic, batching_enabled=False)
    producer.send(b"polled")
    thread.join(timeout=25)
    assert got and isinstance(got[0], magnetar.Message), got
    assert got[0].data() == b"polled"
    producer.close()
    unreachable.close()


def test_delivery_poll_opens_no_watch(client: magnetar.Client, topic: str) -> None:
    """delivery='poll' long-polls only (no WebSocket at all); the default, 'auto', watches when idle."""
    polled = client.subscribe(topic, "p", delivery="poll")
    auto = client.subscribe(topic, "a")
    assert polled._watch is None and auto._watch is not None
    polled.close()
    auto.close()
