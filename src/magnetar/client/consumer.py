"""Consumer of one topic partition: long-poll receive with a prefetch queue, grouped
acknowledgements, negative acks, seek, dead letters, chunk reassembly, a lease heartbeat.

- `receive()` serves from the local queue (`receiver_queue_size`), refilled by long polls that
  carry a request id: a poll retried after a lost response gets the same messages back.
- Acknowledgements are grouped (Pulsar's acknowledgmentGroupTime) and ride on the next poll;
  messages of a batch entry are acknowledged one by one (batch-index acknowledgement: the
  broker remembers them, a redelivered batch comes back without them).
- A heartbeat renews the consumer's lease while the application is busy between receives; a
  consumer that stops renewing is detached and its unacknowledged messages are redelivered.
- A receive (`receive()`, `batch_receive()`) that has found nothing for a while waits for the
  topic's next seal on a WebSocket instead of in a poll, looking now and then (client/idle_watch.py;
  delivery "auto" only).
- A consumer of a partitioned topic keeps one `Consumer` per partition for its state (acks,
  epoch, chunks, dead letters) but polls them all with one request (`_grouped`; client/partitioned.py).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from magnetar.api.wire import entry_from_wire
from magnetar.client import exceptions
from magnetar.client.acks import ACK_GROUP_S, AckGroup, ack_flush_due, http_acks, taken_of_http_acks
from magnetar.client.chunks import ChunkAssembler
from magnetar.client.compacted import CompactedFilter
from magnetar.client.consumer_base import ConsumerBase, key_shared_meta
from magnetar.client.crypto import MessageDecryptor
from magnetar.client.idle_watch import IDLE_S, IdleWatch, receive_poll, watch_ready
from magnetar.client.letters import LetterTopics
from magnetar.client.message import Message, MessageId, acknowledged_id
from magnetar.client.receive_together import ReceiveTogether, poll_together
from magnetar.client.threads import Workers
from magnetar.client.transport import ServiceSwitched, Transport, topic_path
from magnetar.client.types import (
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    check_type,
)
from magnetar.core.dispatch import LOOK_ONCE_MAX_WAIT_MS
from magnetar.core.entry import Entry
from magnetar.core.naming import TopicName

log = logging.getLogger(__name__)
HEARTBEAT_S = 10.0
MAX_POLL_MS = 20_000
CARRIED_LOOK_WAIT_S = 1.0  # how long a look (a poll with no wait) waits for another consumer's look carrying it
# a seal is readable this long after the time the broker predicts for it (its segment's write,
# then the S3 put and the commit): a look this much after it finds it
SEAL_VISIBLE_S = 0.05


class Consumer(ConsumerBase):
    def __init__(
        self,
        transport: Transport,
        topic: TopicName,
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        consumer_name: str | None = None,
        initial_position: InitialPosition = InitialPosition.Latest,
        unacked_messages_timeout_ms: int | None = None,
        receiver_queue_size: int = 1000,
        batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
        negative_ack_redelivery_delay_ms: int = 60_000,
        dead_letter_policy: ConsumerDeadLetterPolicy | None = None,
        message_listener: Callable[[Consumer, Message], None] | None = None,
        dead_letter_producer: Callable[[str], Any] | None = None,
        retry_letter_topic: str | None = None,
        expire_time_of_incomplete_chunked_message_ms: int = 60_000,
        dead_letter_topic: str | None = None,
        decryptor: MessageDecryptor | None = None,
        read_compacted: bool = False,
        key_shared_policy: ConsumerKeySharedPolicy | None = None,
        start_message_id_inclusive: bool = False,
        priority_level: int = 0,
        replicate_subscription_state: bool = False,
        receive_together: ReceiveTogether | None = None,
        idle_watch: bool = False,
    ) -> None:
        self._transport = transport
        self._topic = topic
        self._subscription = subscription_name
        self._name = consumer_name or f"consumer-{uuid.uuid4().hex[:12]}"
        self._type = consumer_type
        self._queue_size = max(1, receiver_queue_size)
        self._batch_policy = batch_receive_policy or ConsumerBatchReceivePolicy()
        self._nack_delay_ms = max(0, negative_ack_redelivery_delay_ms)
        self._letters = LetterTopics(
            dead_letter_policy, dead_letter_topic or (dead_letter_policy.dead_letter_topic if dead_letter_policy else None)
            or f"{topic.partitioned_topic}-{subscription_name}-DLQ", retry_letter_topic, dead_letter_producer)
        self._decryptor = decryptor or MessageDecryptor()  # end-to-end encryption: keys, failure action
        base = f"/magnetar/v1/consumer/{topic_path(topic)}/{subscription_name}"
        self._consumer_path = f"{base}/{self._name}"
        self._seek_path = f"{base}/seek"
        self._subscribe_body: dict[str, Any] = {
            "subscriptionType": consumer_type.value,
            "initialPosition": initial_position.value,
            "ackTimeoutMs": int(unacked_messages_timeout_ms or 0),
        }
        if key_shared_policy is not None and consumer_type == ConsumerType.KeyShared:
            self._subscribe_body["keySharedPolicy"] = key_shared_meta(key_shared_policy)
        if start_message_id_inclusive:
            self._subscribe_body["startMessageIdInclusive"] = True
        if priority_level:
            self._subscribe_body["priorityLevel"] = priority_level
        if replicate_subscription_state:
            self._subscribe_body["replicateSubscriptionState"] = True
        self._queue: collections.deque[Message] = collections.deque()
        self._chunks = ChunkAssembler(expire_time_of_incomplete_chunked_message_ms / 1000)
        self._seek_through: MessageId | None = None  # after a seek to a message id: skipped up to it
        self._seek_inclusive = start_message_id_inclusive  # pulsar-client: a seek then lands on the message
        self._receive_lock = threading.Lock()
        # grouped acks, by message id text; its event wakes the background thread (acks to send, or the close)
        self._pending = AckGroup()
        # the service whose messages the pending acks are of (Transport.generation): a switch
        # drops them unless they are already the new service's (its listener may run late)
        self._pending_generation = transport.generation
        self._closed = threading.Event()
        self._batch_short = False  # the previous batch receive's poll ended short of its count
        self._next_seal_at: float | None = None  # when the topic's next seal is due (monotonic), if known
        self._answered_at = 0.0  # when a poll last answered for it (its own, or one that carried it)
        # its last poll left the acks it carried for the next (`deferAcks`): that one writes them
        self._acks_deferred = False
        # polled by a partitioned consumer's shared poll (client/partitioned.py), which then
        # takes its messages (`_sink`), its acks and its heartbeats: this one polls nothing itself
        self._grouped = False
        self._sink: Callable[[Message], None] | None = None
        # the client's consumers of this topic and subscription poll together (client/receive_together.py):
        # held for each request that reads or resets what is prefetched (poll, seek, redelivery); another
        # consumer's poll carries this one only while it can take it
        self._poll_lock = threading.Lock()
        self._together = receive_together if topic.is_persistent else None
        self._together_key = (str(topic), subscription_name)
        # an idle receive() waits for the topic's next seal on a WebSocket, not in a poll (client/idle_watch.py)
        self._watch = IdleWatch(transport, topic, self._name) if idle_watch and topic.is_persistent else None
        self._active_at = time.monotonic()  # when a message last came (or the watch last rang)
        response = self._transport.call("PUT", self._consumer_path, self._subscribe_body)
        self._epoch = int(response.get("epoch", 0)) if isinstance(response, dict) else 0
        self._transport.add_switch_listener(self._on_switch)  # client failover (client/failover.py)
        # is_read_compacted: entries below the compaction horizon are filtered through the view (client/compacted.py)
        self._compacted = CompactedFilter.load(transport, topic) if read_compacted and topic.is_persistent else None
        self._workers = Workers()
        self._background = self._workers.start(self._run, name=f"consumer-{self._name}")
        if message_listener is not None:
            self._workers.start(self._listen, message_listener, name=f"listener-{self._name}")

    # --- pulsar-client API -----------------------------------------------------------------
    def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; raises `Timeout` if none arrives within `timeout_millis`. As in
        pulsar-client, a message that arrives after the timeout (a poll's last look, at the
        deadline, found it) is not this call's: it waits in the queue for the next receive."""
        if timeout_millis is not None:
            check_type(int, timeout_millis, "timeout_millis")
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        with self._receive_lock:
            while True:
                self._check_open()
                if self._queue:
                    return self._queue.popleft()
                remaining_ms = MAX_POLL_MS if deadline is None else int((deadline - time.monotonic()) * 1000)
                if remaining_ms <= 0 and deadline is not None:
                    raise exceptions.Timeout("No message received within the timeout")
                receive_poll(self, max(0, min(remaining_ms, MAX_POLL_MS)), deadline)
                if deadline is not None and time.monotonic() >= deadline:
                    raise exceptions.Timeout("No message received within the timeout")

    def batch_receive(self) -> list[Message]:
        """Up to the batch-receive policy's count and bytes, waiting at most its timeout.

        The broker holds the poll until that many messages are ready or the timeout passes,
        so a busy consumer makes few, full requests.
        """
        limit = self._batch_limit()
        with self._receive_lock:
            self._check_open()
            if len(self._queue) < limit:
                want = limit - len(self._queue)
                wait_ms = max(0, self._batch_policy.timeout_ms)
                if watch_ready(self, wait_ms):  # nothing for a while: the idle watch, no look per call
                    receive_poll(self, wait_ms, time.monotonic() + wait_ms / 1000, want, max(want, 1))
                    self._batch_short = len(self._queue) < limit
                    return self._take_batch(limit)
                if self._batch_short and 0 < wait_ms <= LOOK_ONCE_MAX_WAIT_MS:
                    # short of its count last time: this one would be too, so wait here and look once
                    # at the end (a broker function waiting bills its memory for the whole wait), or
                    # as soon as the topic's next seal is due; not at all when it is due after the wait,
                    # nor when another consumer's look carried this one meanwhile (its answer is here)
                    began = time.monotonic()
                    wait_s = wait_ms / 1000
                    due = self._next_seal_at
                    if due is not None:
                        readable_in = due + SEAL_VISIBLE_S - time.monotonic()
                        if readable_in > wait_s:
                            self._closed.wait(wait_s)
                            self._check_open()
                            return self._take_batch(limit)
                        wait_s = max(0.0, readable_in)
                    self._closed.wait(wait_s)
                    self._check_open()
                    if self._answered_at > began:
                        return self._take_batch(limit)
                    wait_ms = 0
                self._poll(wait_ms, min_messages=want, max_messages=max(want, 1))
                self._batch_short = len(self._queue) < limit
            return self._take_batch(limit)

    def acknowledge(self, message: Message | MessageId) -> None:
        message_id = acknowledged_id(message, "acknowledge")
        if not self._admit_ack(message_id):
            return
        self._pending.ack((mid.wire(), mid._batch_size) for mid in message_id._chunks or (message_id,))

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        message_id = acknowledged_id(message, "acknowledge_cumulative")
        if self._type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise exceptions.CumulativeAcknowledgementNotAllowedError(
                "Cumulative acknowledgement is not allowed on a Shared subscription")
        if not self._admit_ack(message_id):
            return
        self._pending.ack_cumulative(message_id)
        self._flush_acks()

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Redeliver this message after `negative_ack_redelivery_delay_ms` (its whole batch, minus
        the messages already acknowledged)."""
        message_id = acknowledged_id(message, "negative_acknowledge")
        if not self._admit_ack(message_id):
            return
        self._pending.nack(mid.wire() for mid in (message_id._chunks or (message_id,)))

    def reconsume_later(self, message: Message, delay_ms: int, properties: dict[str, str] | None = None) -> None:
        """Pulsar's retry-letter topic: publish the message again to the retry topic, delivered
        after `delay_ms`, and acknowledge this copy; after `max_redeliver_count` retries it goes
        to the dead-letter topic instead. Needs `retry_enable=True` at subscribe."""
        self._letters.reconsume_later(message, delay_ms, properties)
        self.acknowledge(message)

    def redeliver_unacknowledged_messages(self) -> None:
        with self._receive_lock, self._poll_lock:
            self._flush_acks()
            self._queue.clear()
            self._transport.call("POST", f"{self._consumer_path}/redeliver", {})

    def seek(self, messageid: MessageId | int | float) -> None:
        """Reset the subscription to a message id, or to a publish time (ms, any number), for all its consumers."""
        if not isinstance(messageid, MessageId | int | float) or isinstance(messageid, bool):
            raise ValueError(f"seek takes a MessageId or a timestamp in ms, not {type(messageid).__name__}")
        body: dict[str, Any] = {"messageId": messageid.wire()} if isinstance(messageid, MessageId) else {
            "timestamp": int(messageid)}
        with self._receive_lock, self._poll_lock:
            self._pending.clear()
            response = self._transport.call("POST", self._seek_path, body)
            self._epoch = int(response.get("epoch", self._epoch + 1))
            self._queue.clear()
            self._chunks.clear()
            # pulsar-client's seek to a message id goes on after it (on it with start_message_id_inclusive):
            # the server puts the cursor on its entry, and this consumer acknowledges what it gets up
            # to the id itself
            concrete = isinstance(messageid, MessageId) and messageid not in (MessageId.earliest, MessageId.latest)
            exclusive = concrete and not self._seek_inclusive
            self._seek_through = messageid if isinstance(messageid, MessageId) and exclusive else None

    def unsubscribe(self) -> None:
        self._flush_acks()
        self._transport.call("DELETE", f"{self._consumer_path}/subscription")
        self._closed.set()
        self._pending.wake.set()
        if self._watch is not None:
            self._watch.close()

    def close(self) -> None:
        if self._closed.is_set():  # closed already, or unsubscribed: its threads may still be ending
            self._workers.join()
            return
        self._transport.remove_switch_listener(self._on_switch)
        if self._together is not None:
            self._together.leave(self)
        with contextlib.suppress(exceptions.PulsarException):
            self._flush_acks()
        self._closed.set()
        self._pending.wake.set()
        if self._watch is not None:
            self._watch.close()  # a receive waiting on it ends
        if self._background is not threading.current_thread():
            self._background.join(timeout=2)  # no heartbeat attaches it again after the detach
        with contextlib.suppress(exceptions.PulsarException):  # if it fails, the lease expires on its own
            self._transport.call("DELETE", self._consumer_path, deadline_s=5)
        self._letters.close()
        self._workers.join()  # the acknowledgements' thread, and a listener's once its receive returns

    def is_connected(self) -> bool:
        return not self._closed.is_set()

    # --- internals -------------------------------------------------------------------------
    def _admit_ack(self, message_id: MessageId) -> bool:
        """Whether an acknowledgement of `message_id` goes to the pending ones. Not for a message
        delivered by another cluster than the current one (before a client failover switched away
        from it): its id means nothing here, and the cluster that delivered it redelivers it
        (at-least-once). The first acknowledgement admitted after a switch drops what was still
        pending from the former cluster, moot here too."""
        generation = message_id._generation
        current = self._transport.generation
        if generation is None or generation == current:
            if self._pending_generation != current:
                self._pending.clear()
                self._pending_generation = current
            return True
        log.debug("consumer %s: acknowledgement of a message from a former service dropped", self._name)
        return False

    def _on_switch(self) -> None:
        """The client switched to another cluster: what was prefetched and not acknowledged stays
        with the former one (redelivered there); the next poll attaches to the new cluster. This
        runs on the thread that switched, after the switch: the poll may have reached the new
        cluster already, so what came from it (and the acks of it) is kept."""
        current = self._transport.generation
        if self._watch is not None:
            self._watch.drop()  # the former cluster's: the next idle wait opens one on the new cluster
            self._watch.wake()
        if self._pending_generation != current:
            self._pending.clear()
            self._pending_generation = current
        kept = [m for m in self._queue if m.message_id()._generation in (None, current)]
        self._queue.clear()
        self._queue.extend(kept)
        self._chunks.clear()

    def _room(self) -> int:
        return self._queue_size - len(self._queue)

    def _idle(self, wait_ms: int) -> bool:
        """Whether a receive waiting `wait_ms` goes by the idle watch: nothing has come for IDLE_S."""
        return self._watch is not None and wait_ms > 0 and time.monotonic() - self._active_at >= IDLE_S

    def _poll(self, wait_ms: int, min_messages: int = 1, max_messages: int | None = None) -> None:
        """One poll: with the client's other consumers of this subscription that it can carry
        (client/receive_together.py), or alone. While another's poll carries this one, it waits
        for that poll (at most its own wait; a look, which has none, up to CARRIED_LOOK_WAIT_S) and takes
        what it brought."""
        if self._together is None:
            with self._poll_lock:
                self._poll_alone(wait_ms, min_messages, max_messages)
            return
        self._together.join(self)
        started = time.monotonic()
        if not self._poll_lock.acquire(blocking=False):
            # a long poll waits for the carrying one no longer than its own wait; a look (no wait)
            # waits for the carrying look, which brings its answer
            if not self._poll_lock.acquire(timeout=wait_ms / 1000 if wait_ms > 0 else CARRIED_LOOK_WAIT_S):
                return
            if self._answered_at > started:  # the poll that carried it answered for it
                self._poll_lock.release()
                return
        try:
            riders = self._together.riders(self)
            try:
                if riders:
                    poll_together(self, riders, wait_ms, min_messages, max_messages)
                else:
                    self._poll_alone(wait_ms, min_messages, max_messages)
            finally:
                for rider in riders:
                    rider._poll_lock.release()
        finally:
            self._poll_lock.release()

    def _poll_alone(self, wait_ms: int, min_messages: int = 1, max_messages: int | None = None) -> None:
        body: dict[str, Any] = {
            "maxMessages": max_messages or self._queue_size,
            "minMessages": min_messages,
            "waitMs": wait_ms,
            "requestId": uuid.uuid4().hex,
        }
        generation = self._transport.generation  # the poll (and its acks) stays on this service
        acks = self._take_acks()
        if acks:
            body["acks"] = acks
            # a poll that finds nothing may leave them for the next, once: they go with its claim
            body["deferAcks"] = not self._acks_deferred and "nacks" not in acks
        try:
            response = self._transport.call("POST", f"{self._consumer_path}/receive", body,
                                            deadline_s=30 + wait_ms / 1000, generation=generation)
        except ServiceSwitched:
            return  # the client switched cluster: poll the new one (these acks belong to the former)
        except exceptions.SubscriptionNotFound:
            if self._closed.is_set():  # closed while this poll was in flight: stay closed
                raise exceptions.AlreadyClosed("Consumer already closed") from None
            # our lease lapsed (e.g. a long pause), or the client switched to a cluster where this
            # consumer is not attached yet: attach, as a reconnecting Pulsar client does
            self._transport.call("PUT", self._consumer_path, self._subscribe_body)
            if acks:
                with contextlib.suppress(ServiceSwitched):
                    self._transport.call("POST", f"{self._consumer_path}/ack", acks, generation=generation)
            return
        except exceptions.PulsarException:
            self._restore_acks(acks)
            raise
        self._acks_deferred = bool(acks and response.get("unappliedAcks"))
        self._take_part(response, acks, generation)

    def _take_part(self, part: dict[str, Any], acks: dict[str, Any] | None, generation: int | None) -> None:
        """Its answer to a poll (its own, or its part of one that carried it): the next seal's
        time, the messages; acknowledgements a lost race or a deferring poll left unwritten are
        sent again."""
        if part.get("unappliedAcks"):
            self._restore_acks(acks)
        self._answered_at = time.monotonic()
        if self._watch is not None:
            self._watch.wake()  # a receive waiting on the watch takes what came (a poll carried it)
        next_seal_in_ms = part.get("nextSealInMs")
        self._next_seal_at = None if next_seal_in_ms is None else self._answered_at + int(next_seal_in_ms) / 1000
        self._accept(part.get("entries") or [], int(part.get("epoch", self._epoch)), generation)

    def _accept(self, wires: list[dict[str, Any]], epoch: int, generation: int | None = None) -> None:
        """Entries a poll returned (this consumer's own, or a partitioned consumer's shared poll),
        from the service of `generation` (the transport's; None: the current one)."""
        if generation is None:
            generation = self._transport.generation
        elif generation != self._transport.generation:
            return  # the client switched cluster since: they stay unacknowledged there, redelivered
        if epoch != self._epoch:  # another consumer sought: what we prefetched is stale
            self._epoch = epoch
            self._queue.clear()
            self._chunks.clear()
        partition = self._topic.partition_index
        for wire in wires:
            entry = entry_from_wire(wire, str(self._topic))
            redelivery = int(wire.get("redeliveryCount", 0))
            if entry.chunk is not None:
                if (whole := self._chunks.add(entry, partition, redelivery)) is not None:
                    self._deliver(_tagged(whole, generation))
                continue
            skip = set(wire.get("ackedIndexes", ()))
            if self._compacted is not None and not self._filter_compacted(entry, partition, skip):
                continue
            for message in Message.from_entry(entry, partition, redelivery, skip):
                self._deliver(_tagged(message, generation))
        self._expire_chunks()

    def _filter_compacted(self, entry: Entry, partition: int, skip: set[int]) -> bool:
        """A compacted read: acknowledge what the view does not hold (adding it to `skip`); False
        when nothing of the entry is left to deliver."""
        assert self._compacted is not None
        masked = self._compacted.masked(entry.entry_id, entry.num_messages)
        if not masked:
            return True
        if entry.chunk is not None or not entry.batched or masked | skip >= set(range(entry.num_messages)):
            self.acknowledge(MessageId(partition, entry.ledger_id, entry.entry_id, -1, entry.topic))
            return False
        for index in masked - skip:
            self.acknowledge(MessageId(partition, entry.ledger_id, entry.entry_id, index, entry.topic,
                                       entry.num_messages))
        skip |= masked
        return True

    def _deliver(self, message: Message) -> None:
        through = self._seek_through
        if through is not None:
            if message.message_id() <= through:
                self.acknowledge(message)
                return
            self._seek_through = None
        if message._encryption is not None:  # decrypted, or what crypto_failure_action says
            opened = self._decryptor.open(message, self.acknowledge)
            if opened is None:
                return
            message = opened
        if self._letters.dead_lettered(message):
            self.acknowledge(message)
            return
        if self._sink is not None:
            self._sink(message)
            return
        self._active_at = time.monotonic()
        self._queue.append(message)

    def _expire_chunks(self) -> None:
        for mid in self._chunks.expired():
            self.acknowledge(mid)

    def _take_acks(self) -> dict[str, Any] | None:
        """The pending acks as a request's `acks` body (None: none pending)."""
        return http_acks(self._pending.take(), self._epoch, self._nack_delay_ms)

    def _restore_acks(self, body: dict[str, Any] | None) -> None:
        if body:
            self._pending.restore(taken_of_http_acks(body))

    def _flush_acks(self) -> None:
        generation = self._transport.generation
        body = self._take_acks()
        if body is None:
            return
        try:
            self._transport.call("POST", f"{self._consumer_path}/ack", body, generation=generation)
        except ServiceSwitched:
            return  # acknowledgements of the former cluster: it redelivers those messages
        except exceptions.PulsarException:
            self._restore_acks(body)
            raise

    def _run(self) -> None:
        """Grouped acknowledgements (checked every ACK_GROUP_S while some wait) and the lease's
        heartbeat. Asleep between heartbeats while there is nothing to acknowledge. A poll that
        answered for the consumer (its own, or one that carried it) renewed its lease as a
        heartbeat does (when half spent): the heartbeat only comes HEARTBEAT_S after the last of
        them, so a consumer that keeps polling sends none."""
        last_beat = time.monotonic()
        while True:
            last_beat = max(last_beat, self._answered_at)
            acks_waiting = bool(self._pending.since) and not self._grouped
            wake = self._pending.wake
            wake.wait(ACK_GROUP_S if acks_waiting else max(0.0, last_beat + HEARTBEAT_S - time.monotonic()))
            last_beat = max(last_beat, self._answered_at)
            wake.clear()
            if self._closed.is_set():
                return
            if self._grouped:
                last_beat = time.monotonic()  # the partitioned consumer's shared poll beats for it
                continue
            try:
                # acks ride on the next poll; flush them alone when no poll is coming soon
                since = self._pending.since
                waited = time.monotonic() - since if since else 0.0
                if since and ack_flush_due(waited, self._receive_lock.locked()):
                    self._flush_acks()
                if time.monotonic() - last_beat >= HEARTBEAT_S and not self._closed.is_set():
                    self._transport.call("PUT", self._consumer_path, self._subscribe_body)
                    last_beat = time.monotonic()
            except exceptions.PulsarException as exc:
                log.warning("consumer background call failed: %r", exc)


def _tagged(message: Message, generation: int) -> Message:
    """The message, marked as delivered by the service of `generation` (Transport.generation)."""
    message_id = message.message_id()
    message_id._generation = generation
    for chunk in message_id._chunks:
        chunk._generation = generation
    return message
