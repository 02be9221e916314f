"""The message-listener loop (client/consumer_base.py `MessageListening`), which single-topic and
multi-topics consumers share: order, pause/resume, a raising listener, the close."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from magnetar.client import exceptions
from magnetar.client.consumer_base import MessageListening
from magnetar.client.message import Message, MessageId
from magnetar.client.partitioned import MultiTopicsConsumer


def _message(i: int, topic: str = "persistent://public/default/t") -> Message:
    return Message(f"m{i}".encode(), MessageId(-1, 1, i, -1, topic), topic, {}, "")


class _Queued(MessageListening):
    """A consumer whose `receive` serves a queue; `AlreadyClosed` once closed."""

    def __init__(self) -> None:
        self._closed = threading.Event()
        self.queue: queue.Queue[Message] = queue.Queue()

    def receive(self, timeout_millis: int | None = None) -> Message:
        if self._closed.is_set():
            raise exceptions.AlreadyClosed("closed")
        try:
            return self.queue.get(timeout=0.05)
        except queue.Empty:
            raise exceptions.Timeout("none") from None


def _wait(condition: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_listener_gets_each_message_in_order_and_survives_its_own_exceptions() -> None:
    consumer = _Queued()
    got: list[tuple[Any, bytes]] = []

    def listener(c: Any, m: Message) -> None:
        got.append((c, m.data()))
        if m.data() == b"m1":
            raise RuntimeError("the application's bug")

    thread = threading.Thread(target=consumer._listen, args=(listener,), daemon=True)
    thread.start()
    for i in range(4):
        consumer.queue.put(_message(i))
    _wait(lambda: len(got) == 4)
    assert got == [(consumer, b"m0"), (consumer, b"m1"), (consumer, b"m2"), (consumer, b"m3")]
    consumer._closed.set()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_a_paused_listener_gets_nothing_until_resumed() -> None:
    consumer = _Queued()
    got: list[bytes] = []
    thread = threading.Thread(target=consumer._listen, args=(lambda c, m: got.append(m.data()),), daemon=True)
    thread.start()
    consumer.pause_message_listener()
    consumer.queue.put(_message(0))
    time.sleep(0.3)
    assert got == []
    consumer.resume_message_listener()
    _wait(lambda: got == [b"m0"])
    consumer._closed.set()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_the_loop_ends_when_receive_says_closed() -> None:
    consumer = _Queued()
    consumer._closed.set()
    consumer._listen(lambda c, m: None)  # returns at once


class _Child:
    """A topic's consumer inside a multi-topics consumer (not a long-polled partition: pumped)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.queue: queue.Queue[Message] = queue.Queue()

    def receive(self, timeout_millis: int | None = None) -> Message:
        try:
            return self.queue.get(timeout=0.05)
        except queue.Empty:
            raise exceptions.Timeout("none") from None

    def close(self) -> None:
        pass


def test_a_multi_topics_consumer_hands_its_messages_to_the_same_loop() -> None:
    children: dict[str, _Child] = {}

    def make(topic: str) -> Any:
        children[topic] = _Child(topic)
        return children[topic]

    got: list[tuple[Any, bytes]] = []
    consumer = MultiTopicsConsumer("s", make, ["persistent://public/default/a"], 10, None,
                                   message_listener=lambda c, m: got.append((c, m.data())))
    assert isinstance(consumer, MessageListening)
    consumer.pause_message_listener()
    children["persistent://public/default/a"].queue.put(_message(0, "persistent://public/default/a"))
    time.sleep(0.3)
    assert got == []
    consumer.resume_message_listener()
    _wait(lambda: got == [(consumer, b"m0")])
    consumer.close()


def test_the_listener_keeps_listening_after_a_receive_the_sdk_gave_up_on(monkeypatch: Any) -> None:
    from magnetar.client import consumer_base

    monkeypatch.setattr(consumer_base, "LISTENER_RETRY_S", 0.01)
    consumer = _Queued()
    real = consumer.receive
    failures = [exceptions.ConnectError("POST .../receive: timed out")]

    def receive(timeout_millis: int | None = None) -> Message:
        if failures:
            raise failures.pop()
        return real(timeout_millis)

    consumer.receive = receive  # type: ignore[method-assign]
    got: list[bytes] = []
    thread = threading.Thread(target=consumer._listen, args=(lambda c, m: got.append(m.data()),), daemon=True)
    thread.start()
    consumer.queue.put(_message(0))
    _wait(lambda: got == [b"m0"])
    assert thread.is_alive(), "the listener thread survived the failed receive"
    consumer._closed.set()
    thread.join(timeout=5)
    assert not thread.is_alive()
