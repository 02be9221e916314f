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
from typing import Any

import mmh3

from magnetar.client import exceptions
from magnetar.client.consumer import ACK_GROUP_S, HEARTBEAT_S, SEAL_VISIBLE_S, Consumer, ack_flush_due
from magnetar.client.consumer_base import MessageListening
from magnetar.client.message import Message, MessageId, acknowledged_id
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



POLL_WAIT_MS = 5_000  # a shared poll's long-poll wait (it returns as soon as any partition has messages)
MAX_SEAL_WAIT_S = 1.0  # the longest a poll that took everything ready waits for the next seal


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


class PartitionsPoller:
    """One long-poll loop for every partition of one partitioned topic a consumer holds.

    Pulsar multiplexes a consumer's partitions over one connection; here one request
    (`POST .../<partitioned topic>/<subscription>/<consumer>/receive` with `partitions`) serves
    them all, carrying each partition's grouped acks, so a consumer of an 8-partition topic is one
    poller, not eight. Each partition keeps its `Consumer` for its own state (acks, epoch, chunks,
    dead letters); this loop feeds their messages to the multi-topics consumer's queue, asks for
    no more than the queue has room for (flow control), flushes acks alone (one request for all
    partitions) when no poll carries them soon, and renews the leases while nothing polls.
    """

    def __init__(self, parent: TopicName, name: str, queue_: queue.Queue[Message], closed: threading.Event) -> None:
        self.parent = parent
        self.name = name
        self.children: dict[int, Consumer] = {}
        self.lock = _Turns()  # held by a poll: seek and redeliver wait for it (their turn comes between polls)
        self._queue = queue_
        self._closed = closed
        self._last_poll = time.monotonic()
        self._polling = False
        self._next_seal_at: float | None = None  # when the partitions' first next seal is due (monotonic), if told
        self._started = False
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
            self.workers.start(self._run, name=f"poll-{self.parent}")
            self.workers.start(self._background, name=f"acks-{self.parent}")

    def _path(self, action: str) -> str:
        """The consumer's routes on the partitioned topic's own name (as a partition's, its path)."""
        subscription = next(iter(self.children.values()))._subscription
        return f"/magnetar/v1/consumer/{topic_path(self.parent)}/{subscription}/{self.name}/{action}"

    def _take_acks(self, children: dict[int, Consumer]) -> dict[int, dict[str, Any]]:
        return {p: a for p, c in children.items() if (a := c._take_acks()) is not None}

    def _restore(self, children: dict[int, Consumer], acks: dict[int, dict[str, Any]]) -> None:
        for p, body in acks.items():
            children[p]._restore_acks(body)

    def _run(self) -> None:
        while not self._closed.is_set():
            room = self._queue.maxsize - self._queue.qsize()
            if room <= 0:
                time.sleep(0.02)
                continue
            out: list[Message] = []
            with self.lock.poll():
                self._polling = True
                try:
                    self._poll_once(room, out)
                except exceptions.AlreadyClosed:
                    return  # the client was closed under us
                finally:
                    self._polling = False
            for message in out:
                while not self._closed.is_set():
                    try:
                        self._queue.put(message, timeout=0.5)
                        break
                    except queue.Full:
                        continue
            if out and len(out) < room:
                self._until_next_seal()

    def _until_next_seal(self) -> None:
        """The poll took everything ready (fewer messages than it had room for): nothing more is
        readable before the partitions' next seal, so the next poll waits until then instead of
        a look that would find nothing. Acks ride on it meanwhile (a poll is coming), and the
        wait is never longer than a busy topic's seal interval (`next_seal_in_ms` predicts no
        longer one)."""
        due = self._next_seal_at
        if due is None:
            return
        wait = min(due + SEAL_VISIBLE_S - time.monotonic(), MAX_SEAL_WAIT_S)
        if wait > 0:
            self._polling = True  # the acks wait for the poll to come
            try:
                self._closed.wait(wait)
            finally:
                self._polling = False

    def _poll_once(self, room: int, out: list[Message]) -> None:
        children = dict(self.children)
        transport = next(iter(children.values()))._transport
        generation = transport.generation  # the poll and its acks stay on this service (client failover)
        acks = self._take_acks(children)
        body: dict[str, Any] = {"partitions": sorted(children), "maxMessages": max(1, room), "minMessages": 1,
                                "waitMs": POLL_WAIT_MS, "requestId": uuid.uuid4().hex}
        if acks:
            body["acks"] = {"partitions": {str(p): a for p, a in acks.items()}}
        try:
            response = transport.call("POST", self._path("receive"), body, deadline_s=30 + POLL_WAIT_MS / 1000,
                                      generation=generation)
        except ServiceSwitched:
            return  # the client switched cluster: these acks belong to the former one
        except exceptions.SubscriptionNotFound:
            if self._closed.is_set():
                return
            # a lease lapsed (a long pause): attach every partition again, as a reconnecting client
            # does, then send the acks (nothing of the refused poll was written)
            try:
                for child in children.values():
                    transport.call("PUT", child._consumer_path, child._subscribe_body)
                if acks:
                    self._ack(transport, acks, generation)
            except ServiceSwitched:
                return
            except exceptions.PulsarException as exc:
                self._restore(children, acks)
                log.warning("re-attaching the partitions failed; retrying: %r", exc)
                time.sleep(0.5)
            return
        except exceptions.AlreadyClosed:
            raise
        except exceptions.PulsarException as exc:
            self._restore(children, acks)
            if not self._closed.is_set():
                log.warning("partitioned poll failed; retrying: %r", exc)
                time.sleep(0.5)
            return
        self._last_poll = time.monotonic()
        next_seal_in_ms = response.get("nextSealInMs")
        self._next_seal_at = None if next_seal_in_ms is None else self._last_poll + int(next_seal_in_ms) / 1000
        for p in response.get("unappliedAcks") or ():
            if p in acks:
                children[p]._restore_acks(acks[p])
        wires: dict[int, list[dict[str, Any]]] = {p: [] for p in children}
        for wire in response["entries"]:
            wires.setdefault(int(wire["partition"]), []).append(wire)
        epochs = response.get("epochs") or {}
        for p, child in children.items():
            child._sink = out.append
            child._accept(wires[p], int(epochs.get(str(p), child._epoch)), generation)

    def _ack(self, transport: Any, acks: dict[int, dict[str, Any]], generation: int | None = None) -> None:
        transport.call("POST", self._path("ack"), {"partitions": {str(p): a for p, a in acks.items()}},
                       generation=generation)

    def _background(self) -> None:
        """Acks ride on the next poll; flush them alone (one request) when none comes soon, and
        renew the partitions' leases while nothing polls (the application is not receiving)."""
        while not self._closed.wait(ACK_GROUP_S):
            children = dict(self.children)
            if not children:
                continue
            transport = next(iter(children.values()))._transport
            try:
                oldest = min((c._pending.since for c in children.values() if c._pending.since), default=0.0)
                waited = time.monotonic() - oldest if oldest else 0.0
                if waited and ack_flush_due(waited, self._polling):
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
                if not self._closed.is_set():
                    log.warning("partitioned consumer background call failed: %r", exc)

class MultiTopicsConsumer(MessageListening):
    """One consumer over several topic partitions (a partitioned topic, a list, a pattern).

    The long-polled partitions of a partitioned topic share one `PartitionsPoller` (one request
    for all of them); other topics (a plain topic, a pushed one) each run their own pump.
    """

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
                                                                      self._queue, self._closed)
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
            poller.workers.join()
        self._workers.join()

    def is_connected(self) -> bool:
        return not self._closed.is_set()


def matching(pattern: re.Pattern[str], topics: list[str]) -> list[str]:
    return sorted(t for t in topics if pattern.fullmatch(t) or pattern.fullmatch(t.split("://", 1)[-1]))
