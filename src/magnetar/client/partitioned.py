"""Partitioned topics on the client, as Pulsar does it: a producer routes each message to one
partition (`<topic>-partition-<i>`); a consumer (or a multi-topic / pattern consumer) merges
several single-partition consumers, and polls the partitions of one partitioned topic with one
request (`PartitionsPoller`), as Pulsar multiplexes them over one connection."""

from __future__ import annotations

import contextlib
import logging
import queue
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import mmh3

from magnetar.client import exceptions
from magnetar.client.acks import ACK_GROUP_S, ack_flush_due
from magnetar.client.consumer import HEARTBEAT_S, Consumer
from magnetar.client.consumer_base import MessageListening
from magnetar.client.message import Message, MessageId, acknowledged_id
from magnetar.client.poll_group import PollGroup, PollGroups
from magnetar.client.producer import Producer, send_arguments
from magnetar.client.producer_entries import SendCallback
from magnetar.client.threads import Workers
from magnetar.client.transport import ServiceSwitched, topic_path
from magnetar.client.types import ConsumerBatchReceivePolicy, PartitionsRoutingMode, check_type
from magnetar.core.naming import TopicName

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

    def _choose(self, content: bytes, partition_key: str | None, ordering_key: str | None,
                properties: dict[str, str] | None = None, event_timestamp: int | None = None) -> Producer:
        key = ordering_key or partition_key
        if self._mode is PartitionsRoutingMode.CustomPartition:
            assert self._router is not None
            # the message as pulsar-client hands it to the router: its own partition key, ordering
            # key, properties and event time
            message = Message(content or b"", MessageId(), self._topic, dict(properties or {}), partition_key or "",
                              _event_timestamp=event_timestamp or 0)
            message._ordering_key = ordering_key or ""
            index = self._router(message, self._n)
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

    def send(self, content: bytes | None, *args: Any, **kwargs: Any) -> MessageId:
        """`Producer.send`'s arguments, checked before the message is routed."""
        arguments = send_arguments(content, args, kwargs)
        return self._route(content, arguments).send(content, **arguments)

    def send_async(self, content: bytes | None, callback: SendCallback | None, *args: Any, **kwargs: Any) -> None:
        arguments = send_arguments(content, args, kwargs)
        self._route(content, arguments).send_async(content, callback, **arguments)

    def _route(self, content: bytes | None, arguments: dict[str, Any]) -> Producer:
        return self._choose(content or b"", arguments["partition_key"], arguments["ordering_key"],
                            arguments["properties"], arguments["event_timestamp"])

    def flush(self) -> None:
        for p in self._producers:
            p.flush()

    def close(self) -> None:
        for p in self._producers:
            p.close()

    def is_connected(self) -> bool:
        return all(p.is_connected() for p in self._producers)



def put_until_closed(queue_: queue.Queue[Message], message: Message, closed: threading.Event) -> None:
    """Queue `message` for the application, waiting for room, unless the consumer closes meanwhile."""
    while not closed.is_set():
        try:
            queue_.put(message, timeout=0.5)
            return
        except queue.Full:
            continue


class _Turns:
    """The shared poll's lock, fair to the others: the poll loop holds it for each long poll and,
    between two polls, lets in whoever waits for it (seek, redeliver). A plain `Lock` is not fair:
    the loop, taking it again at once, would starve them for as long as it runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = threading.Lock()
        self._waiting = 0

    def __enter__(self) -> None:
        with self._count:
            self._waiting += 1
        try:
            self._lock.acquire()
        finally:
            with self._count:
                self._waiting -= 1

    def __exit__(self, *_: object) -> None:
        self._lock.release()

    @contextlib.contextmanager
    def poll(self) -> Iterator[None]:
        """The poll loop's turn: after whoever is waiting."""
        while self._waiting:
            time.sleep(0.005)
        with self._lock:
            yield


@dataclass
class PollAsk:
    """A consumer's part of one poll: its partitions then, the acks that ride on it, its body."""

    children: dict[int, Consumer]
    acks: dict[int, dict[str, Any]]
    body: dict[str, Any]


class PartitionsPoller:
    """Every partition of one partitioned topic a consumer holds, polled with one request.

    Pulsar multiplexes a consumer's partitions over one connection; here one request
    (`POST .../<partitioned topic>/<subscription>/<consumer>/receive` with `partitions`) serves
    them all, carrying each partition's grouped acks, so a consumer of an 8-partition topic is one
    poller, not eight — and the consumers of one client on one subscription poll together, one
    request for all of them (client/poll_group.py). Each partition keeps its `Consumer` for its own
    state (acks, epoch, chunks, dead letters); the poller feeds their messages to the multi-topics
    consumer's queue, asks for no more than the queue has room for (flow control), flushes acks
    alone (one request for all partitions) when no poll carries them soon, and renews the leases
    while nothing polls.
    """

    def __init__(self, parent: TopicName, name: str, queue_: queue.Queue[Message], closed: threading.Event,
                 groups: PollGroups | None = None) -> None:
        self.parent = parent
        self.name = name
        self.children: dict[int, Consumer] = {}
        self.lock = _Turns()  # held by a poll: seek and redeliver wait for it (their turn comes between polls)
        self.closed = closed
        self.polling = False  # a poll is in flight or coming: acks ride on it
        self.next_seal_at: float | None = None  # when its partitions' first next seal is due (monotonic), if told
        self._queue = queue_
        self._groups = groups or PollGroups()
        self._last_poll = time.monotonic()
        self._started = False
        self._group: PollGroup | None = None
        self.workers = Workers()

    def add(self, child: Consumer) -> None:
        """A partition joins the next poll (one dict store: no need to wait for the poll in flight)."""
        child._grouped = True
        self.children[child._topic.partition_index] = child

    def start(self) -> None:
        """Start polling (once): after the consumer's first partitions are added, so that the
        first poll asks for all of them."""
        if not self._started:
            self._started = True
            self._group = self._groups.join(self, next(iter(self.children.values()))._subscription)
            self.workers.start(self._background, name=f"acks-{self.parent}")

    def join(self) -> None:
        """Its consumer closed: wait for its threads (and its group's loop, if it was the last)."""
        self.workers.join()
        if self._group is not None:
            self._group.left()

    def transport(self) -> Any:
        return next(iter(self.children.values()))._transport

    def path(self, action: str) -> str:
        """The consumer's routes on the partitioned topic's own name (as a partition's, its path)."""
        subscription = next(iter(self.children.values()))._subscription
        return f"/magnetar/v1/consumer/{topic_path(self.parent)}/{subscription}/{self.name}/{action}"

    def room(self) -> int:
        return self._queue.maxsize - self._queue.qsize()

    def _take_acks(self, children: dict[int, Consumer]) -> dict[int, dict[str, Any]]:
        return {p: a for p, c in children.items() if (a := c._take_acks()) is not None}

    def _restore(self, children: dict[int, Consumer], acks: dict[int, dict[str, Any]]) -> None:
        for p, body in acks.items():
            children[p]._restore_acks(body)

    # --- one poll, as a member of its group -------------------------------------------------
    def ask(self, room: int) -> PollAsk:
        children = dict(self.children)
        acks = self._take_acks(children)
        body: dict[str, Any] = {"maxMessages": max(1, room)}
        if acks:
            body["acks"] = {"partitions": {str(p): a for p, a in acks.items()}}
        return PollAsk(children, acks, body)

    def restore(self, ask: PollAsk) -> None:
        """The poll failed: its acks go with the next one."""
        self._restore(ask.children, ask.acks)

    def attach_again(self, ask: PollAsk, transport: Any, generation: int | None) -> None:
        for child in ask.children.values():
            transport.call("PUT", child._consumer_path, child._subscribe_body)
        if ask.acks:
            self._ack(transport, ask.acks, generation)

    def accept(self, part: dict[str, Any], ask: PollAsk, generation: int | None) -> list[Message]:
        """This consumer's part of a poll's answer: its messages, by way of each partition's consumer."""
        self._last_poll = time.monotonic()
        next_seal_in_ms = part.get("nextSealInMs")
        self.next_seal_at = None if next_seal_in_ms is None else self._last_poll + int(next_seal_in_ms) / 1000
        for p in part.get("unappliedAcks") or ():
            if p in ask.acks:
                ask.children[p]._restore_acks(ask.acks[p])
        wires: dict[int, list[dict[str, Any]]] = {p: [] for p in ask.children}
        for wire in part.get("entries") or ():
            wires.setdefault(int(wire["partition"]), []).append(wire)
        epochs = part.get("epochs") or {}
        out: list[Message] = []
        for p, child in ask.children.items():
            child._sink = out.append
            child._accept(wires[p], int(epochs.get(str(p), child._epoch)), generation)
        return out

    def deliver(self, messages: list[Message]) -> None:
        for message in messages:
            put_until_closed(self._queue, message, self.closed)

    def _ack(self, transport: Any, acks: dict[int, dict[str, Any]], generation: int | None = None) -> None:
        transport.call("POST", self.path("ack"), {"partitions": {str(p): a for p, a in acks.items()}},
                       generation=generation)

    def _background(self) -> None:
        """Acks ride on the next poll; flush them alone (one request) when none comes soon, and
        renew the partitions' leases while nothing polls (the application is not receiving)."""
        while not self.closed.wait(ACK_GROUP_S):
            children = dict(self.children)
            if not children:
                continue
            transport = next(iter(children.values()))._transport
            try:
                oldest = min((c._pending.since for c in children.values() if c._pending.since), default=0.0)
                waited = time.monotonic() - oldest if oldest else 0.0
                if waited and ack_flush_due(waited, self.polling):
                    generation = transport.generation
                    acks = self._take_acks(children)
                    if acks:
                        try:
                            self._ack(transport, acks, generation)
                        except ServiceSwitched:
                            pass  # acknowledgements of the former cluster: it redelivers those messages
                        except exceptions.PulsarException:
                            self._restore(children, acks)
                            raise
                if time.monotonic() - self._last_poll >= HEARTBEAT_S:
                    for child in children.values():
                        transport.call("PUT", child._consumer_path, child._subscribe_body)
                    self._last_poll = time.monotonic()
            except exceptions.AlreadyClosed:
                return  # the client was closed under us
            except exceptions.PulsarException as exc:
                if not self.closed.is_set():
                    log.warning("partitioned consumer background call failed: %r", exc)


class MultiTopicsConsumer(MessageListening):
    """One consumer over several topic partitions (a partitioned topic, a list, a pattern).

    The long-polled partitions of a partitioned topic share one `PartitionsPoller` (one request
    for all of them, and for the client's other consumers of the subscription); other topics (a
    plain topic, a pushed one) each run their own pump.
    """

    def __init__(self, subscription: str, make: Callable[[str], Consumer], topics: list[str],
                 receiver_queue_size: int, batch_receive_policy: ConsumerBatchReceivePolicy | None,
                 message_listener: Callable[[Any, Message], None] | None = None,
                 discover: Callable[[], list[str]] | None = None, discovery_period_s: float = 60.0,
                 consumer_name: str | None = None, poll_groups: PollGroups | None = None) -> None:
        self._subscription = subscription
        self._poll_groups = poll_groups  # the client's: its consumers of one subscription poll together
        self._name = consumer_name or ""
        self._make = make
        self._queue: queue.Queue[Message] = queue.Queue(maxsize=max(1, receiver_queue_size))
        self._children: dict[str, Consumer] = {}
        self._policy = batch_receive_policy or ConsumerBatchReceivePolicy()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._pollers: dict[str, PartitionsPoller] = {}  # partitioned topic -> its shared poll
        self._workers = Workers()  # pumps, the pattern's rediscovery, the listener
        for topic in topics:
            self._add(topic)
        self._start_pollers()
        if discover is not None:
            self._workers.start(self._rediscover, discover, discovery_period_s, name=f"rediscover-{self._name}")
        if message_listener is not None:
            self._workers.start(self._listen, message_listener, name=f"listener-{self._name}")

    @staticmethod
    def new_name() -> str:
        """A consumer name for all the topics of a multi-topics consumer (Pulsar has one too)."""
        return f"consumer-{uuid.uuid4().hex[:12]}"

    def _add(self, topic: str) -> None:
        with self._lock:
            if topic in self._children:
                return
            child = self._make(topic)
            self._children[topic] = child
            name = child._topic if isinstance(child, Consumer) else None
            if type(child) is Consumer and name is not None and name.partition_index >= 0 and name.is_persistent:
                parent = str(name.partitioned_topic)
                poller = self._pollers.get(parent)
                if poller is None:
                    poller = self._pollers[parent] = PartitionsPoller(name.partitioned_topic, child.consumer_name(),
                                                                      self._queue, self._closed, self._poll_groups)
                if poller.name == child.consumer_name():  # one consumer name for all of them
                    poller.add(child)
                    return
        self._workers.start(self._pump, child, name=f"pump-{topic}")

    def _start_pollers(self) -> None:
        with self._lock:
            pollers = list(self._pollers.values())
        for poller in pollers:
            poller.start()

    def _pump(self, child: Consumer) -> None:
        while not self._closed.is_set():
            try:
                message = child.receive(timeout_millis=1000)
            except exceptions.Timeout:
                continue
            except exceptions.AlreadyClosed:
                return
            except exceptions.PulsarException as exc:
                if self._closed.is_set():
                    return  # closing: the request was cut short
                log.warning("partition consumer failed; retrying: %r", exc)
                time.sleep(0.5)
                continue
            put_until_closed(self._queue, message, self._closed)

    def _rediscover(self, discover: Callable[[], list[str]], period_s: float) -> None:
        while not self._closed.wait(period_s):
            try:
                for topic in discover():
                    self._add(topic)
                self._start_pollers()
            except exceptions.PulsarException as exc:
                log.warning("pattern rediscovery failed: %r", exc)

    def get_last_message_id(self) -> MessageId:
        """pulsar-client refuses it on a multi-topic consumer (OperationNotSupported); so does Magnetar."""
        raise exceptions.OperationNotSupported("get_last_message_id is not supported on a multi-topic consumer")

    def _child(self, message: Message | MessageId, method: str = "seek") -> Consumer:
        topic = acknowledged_id(message, method).topic_name()
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
        if timeout_millis is not None:
            check_type(int, timeout_millis, "timeout_millis")
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
        self._child(message, "acknowledge").acknowledge(message)

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        self._child(message, "acknowledge_cumulative").acknowledge_cumulative(message)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        self._child(message, "negative_acknowledge").negative_acknowledge(message)

    def reconsume_later(self, message: Message, delay_ms: int, properties: dict[str, str] | None = None) -> None:
        self._child(message).reconsume_later(message, delay_ms, properties)

    def _quiet(self, child: Consumer) -> contextlib.AbstractContextManager[Any]:
        """No shared poll in flight for `child` meanwhile (it would bring back stale messages)."""
        name = child._topic if isinstance(child, Consumer) else None
        poller = self._pollers.get(str(name.partitioned_topic)) if name is not None else None
        return poller.lock if poller is not None else contextlib.nullcontext()

    def redeliver_unacknowledged_messages(self) -> None:
        self._drain()
        for child in list(self._children.values()):
            with self._quiet(child):
                child.redeliver_unacknowledged_messages()

    def seek(self, messageid: MessageId | int | float) -> None:
        target = messageid
        self._drain()
        children = [self._child(target)] if isinstance(target, MessageId) else list(self._children.values())
        for child in children:
            with self._quiet(child):
                child.seek(target)

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
        for poller in list(self._pollers.values()):
            poller.join()
        self._workers.join()

    def is_connected(self) -> bool:
        return not self._closed.is_set()


def matching(pattern: re.Pattern[str], topics: list[str]) -> list[str]:
    return sorted(t for t in topics if pattern.fullmatch(t) or pattern.fullmatch(t.split("://", 1)[-1]))
