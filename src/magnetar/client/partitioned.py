"""Partitioned topics on the client, as Pulsar does it: a producer routes each message to one
partition (`<topic>-partition-<i>`); a consumer (or a multi-topic / pattern consumer) merges
several single-partition consumers."""

from __future__ import annotations

import logging
import queue
import random
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import mmh3

from magnetar.client import exceptions
from magnetar.client.consumer import Consumer
from magnetar.client.message import Message, MessageId
from magnetar.client.producer import Producer, SendCallback
from magnetar.client.types import ConsumerBatchReceivePolicy, PartitionsRoutingMode

log = logging.getLogger(__name__)


def key_partition(key: str, partitions: int) -> int:
    """Pulsar's default: Murmur3 32-bit hash of the key, positive, modulo the partitions."""
    return (mmh3.hash(key, signed=False) & 0x7FFFFFFF) % partitions


class PartitionedProducer:
    def __init__(self, topic: str, producers: list[Producer], mode: PartitionsRoutingMode,
                 router: Callable[[Message, int], int] | None, batch_messages: int) -> None:
        self._topic = topic
        self._producers = producers
        self._mode = mode
        self._router = router
        self._n = len(producers)
        self._single = random.randrange(self._n)  # UseSinglePartition: chosen once per producer
        self._rr = random.randrange(self._n)
        self._rr_count = 0
        self._batch_messages = max(1, batch_messages)
        self._lock = threading.Lock()
        if mode is PartitionsRoutingMode.CustomPartition and router is None:
            raise exceptions.InvalidConfiguration("CustomPartition routing needs a message_router")

    def _choose(self, content: bytes, partition_key: str | None, ordering_key: str | None) -> Producer:
        key = ordering_key or partition_key
        if self._mode is PartitionsRoutingMode.CustomPartition:
            assert self._router is not None
            index = self._router(Message(content, MessageId(), self._topic, {}, key or ""), self._n)
            if not 0 <= index < self._n:
                raise exceptions.InvalidConfiguration(f"message_router returned {index} for {self._n} partitions")
        elif key:
            index = key_partition(key, self._n)
        elif self._mode is PartitionsRoutingMode.UseSinglePartition:
            index = self._single
        else:  # round robin: a whole batch goes to one partition, the next batch to the next
            with self._lock:
                index = self._rr
                self._rr_count += 1
                if self._rr_count >= self._batch_messages:
                    self._rr, self._rr_count = (self._rr + 1) % self._n, 0
        return self._producers[index]

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._producers[0].producer_name().rsplit("-p", 1)[0] if self._producers else ""

    def last_sequence_id(self) -> int:
        return max(p.last_sequence_id() for p in self._producers)

    def send(self, content: bytes, **kwargs: Any) -> MessageId:
        return self._choose(content, kwargs.get("partition_key"), kwargs.get("ordering_key")).send(content, **kwargs)

    def send_async(self, content: bytes, callback: SendCallback | None, **kwargs: Any) -> None:
        producer = self._choose(content, kwargs.get("partition_key"), kwargs.get("ordering_key"))
        producer.send_async(content, callback, **kwargs)

    def flush(self) -> None:
        for p in self._producers:
            p.flush()

    def close(self) -> None:
        for p in self._producers:
            p.close()

    def is_connected(self) -> bool:
        return all(p.is_connected() for p in self._producers)


class MultiTopicsConsumer:
    """One consumer over several topic partitions (a partitioned topic, a list, a pattern)."""

    def __init__(self, subscription: str, make: Callable[[str], Consumer], topics: list[str],
                 receiver_queue_size: int, batch_receive_policy: ConsumerBatchReceivePolicy | None,
                 message_listener: Callable[[Any, Message], None] | None = None,
                 discover: Callable[[], list[str]] | None = None, discovery_period_s: float = 60.0,
                 consumer_name: str | None = None) -> None:
        self._subscription = subscription
        self._name = consumer_name or ""
        self._make = make
        self._queue: queue.Queue[Message] = queue.Queue(maxsize=max(1, receiver_queue_size))
        self._children: dict[str, Consumer] = {}
        self._policy = batch_receive_policy or ConsumerBatchReceivePolicy()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        for topic in topics:
            self._add(topic)
        if discover is not None:
            threading.Thread(target=self._rediscover, args=(discover, discovery_period_s), daemon=True).start()
        if message_listener is not None:
            threading.Thread(target=self._listen, args=(message_listener,), daemon=True).start()

    def _add(self, topic: str) -> None:
        with self._lock:
            if topic in self._children:
                return
            child = self._make(topic)
            self._children[topic] = child
        threading.Thread(target=self._pump, args=(child,), name=f"pump-{topic}", daemon=True).start()

    def _pump(self, child: Consumer) -> None:
        while not self._closed.is_set():
            try:
                message = child.receive(timeout_millis=1000)
            except exceptions.Timeout:
                continue
            except exceptions.AlreadyClosed:
                return
            except exceptions.PulsarException:
                if self._closed.is_set():
                    return  # closing: the request was cut short
                log.warning("partition consumer failed; retrying", exc_info=True)
                time.sleep(0.5)
                continue
            while not self._closed.is_set():
                try:
                    self._queue.put(message, timeout=0.5)
                    break
                except queue.Full:
                    continue

    def _rediscover(self, discover: Callable[[], list[str]], period_s: float) -> None:
        while not self._closed.wait(period_s):
            try:
                for topic in discover():
                    self._add(topic)
            except exceptions.PulsarException:
                log.warning("pattern rediscovery failed", exc_info=True)

    def _listen(self, listener: Callable[[Any, Message], None]) -> None:
        while not self._closed.is_set():
            try:
                message = self.receive(timeout_millis=1000)
            except (exceptions.Timeout, exceptions.AlreadyClosed):
                continue
            try:
                listener(self, message)
            except Exception:
                log.exception("message listener raised")

    def _child(self, message: Message | MessageId) -> Consumer:
        topic = message.topic_name()
        child = self._children.get(topic)
        if child is None:
            raise exceptions.InvalidConfiguration(f"Message of {topic!r} does not belong to this consumer")
        return child

    # --- pulsar-client API -----------------------------------------------------------------
    def topic(self) -> str:
        return ",".join(sorted(self._children))

    def subscription_name(self) -> str:
        return self._subscription

    def consumer_name(self) -> str:
        return self._name

    def receive(self, timeout_millis: int | None = None) -> Message:
        if self._closed.is_set():
            raise exceptions.AlreadyClosed("Consumer already closed")
        try:
            return self._queue.get(timeout=None if timeout_millis is None else timeout_millis / 1000)
        except queue.Empty:
            raise exceptions.Timeout("No message received within the timeout") from None

    def batch_receive(self) -> list[Message]:
        limit = self._policy.max_num_message if self._policy.max_num_message > 0 else 1000
        deadline = time.monotonic() + self._policy.timeout_ms / 1000
        out: list[Message] = []
        while len(out) < limit:
            try:
                out.append(self._queue.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                break
        return out

    def acknowledge(self, message: Message | MessageId) -> None:
        self._child(message).acknowledge(message)

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        self._child(message).acknowledge_cumulative(message)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        self._child(message).negative_acknowledge(message)

    def reconsume_later(self, message: Message, delay_ms: int, properties: dict[str, str] | None = None) -> None:
        self._child(message).reconsume_later(message, delay_ms, properties)

    def redeliver_unacknowledged_messages(self) -> None:
        self._drain()
        for child in list(self._children.values()):
            child.redeliver_unacknowledged_messages()

    def seek(self, target: MessageId | int) -> None:
        self._drain()
        if isinstance(target, int):
            for child in list(self._children.values()):
                child.seek(target)
        else:
            self._child(target).seek(target)

    def _drain(self) -> None:
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                return

    def unsubscribe(self) -> None:
        self._closed.set()
        for child in list(self._children.values()):
            child.unsubscribe()

    def close(self) -> None:
        self._closed.set()
        for child in list(self._children.values()):
            child.close()

    def is_connected(self) -> bool:
        return not self._closed.is_set()


def matching(pattern: re.Pattern[str], topics: list[str]) -> list[str]:
    return sorted(t for t in topics if pattern.fullmatch(t) or pattern.fullmatch(t.split("://", 1)[-1]))
