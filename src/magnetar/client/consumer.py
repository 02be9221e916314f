"""Consumer: long-poll receive with a prefetch queue, grouped acknowledgements, a lease heartbeat.

- `receive()` serves from the local queue (`receiver_queue_size`), refilled by long polls that
  carry a request id: a poll retried after a lost response gets the same messages back.
- Acknowledgements are grouped (Pulsar's acknowledgmentGroupTime, 100 ms) and sent per entry:
  a batch entry is acknowledged once every message in it is.
- A heartbeat renews the consumer's lease while the application is busy between receives; a
  consumer that stops renewing is detached and its unacknowledged messages are redelivered.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
import uuid
from typing import Any

from magnetar.client import exceptions
from magnetar.client.message import Message, MessageId
from magnetar.client.transport import Transport, topic_path
from magnetar.client.types import ConsumerBatchReceivePolicy, ConsumerType, InitialPosition
from magnetar.core.naming import TopicName

ACK_GROUP_S = 0.1
ACK_MAX_DELAY_S = 1.0
HEARTBEAT_S = 10.0
MAX_POLL_MS = 20_000


class Consumer:
    def __init__(
        self,
        transport: Transport,
        topic: TopicName,
        subscription_name: str,
        consumer_type: ConsumerType,
        consumer_name: str | None,
        initial_position: InitialPosition,
        unacked_messages_timeout_ms: int | None,
        receiver_queue_size: int,
        batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
    ) -> None:
        self._transport = transport
        self._topic = topic
        self._subscription = subscription_name
        self._name = consumer_name or f"consumer-{uuid.uuid4().hex[:12]}"
        self._type = consumer_type
        self._queue_size = max(1, receiver_queue_size)
        self._batch_policy = batch_receive_policy or ConsumerBatchReceivePolicy()
        base = f"/magnetar/v1/consumer/{topic_path(topic)}/{subscription_name}"
        self._consumer_path = f"{base}/{self._name}"
        self._ack_path = f"{base}/ack"
        self._subscribe_body = {
            "subscriptionType": consumer_type.value,
            "initialPosition": initial_position.value,
            "ackTimeoutMs": int(unacked_messages_timeout_ms or 0),
        }
        self._queue: collections.deque[Message] = collections.deque()
        self._receive_lock = threading.Lock()
        self._pending_batch: dict[int, set[int]] = {}  # entry id -> batch indexes not yet acked
        self._acks: set[int] = set()
        self._cumulative: MessageId | None = None
        self._acks_since = 0.0  # when the oldest grouped ack was made (0: none pending)
        self._ack_lock = threading.Lock()
        self._closed = threading.Event()
        self._transport.call("PUT", self._consumer_path, self._subscribe_body)
        self._background = threading.Thread(target=self._run, name=f"consumer-{self._name}", daemon=True)
        self._background.start()

    # --- pulsar-client API -----------------------------------------------------------------
    def topic(self) -> str:
        return str(self._topic)

    def subscription_name(self) -> str:
        return self._subscription

    def consumer_name(self) -> str:
        return self._name

    def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; raises `Timeout` if none arrives within `timeout_millis`."""
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        with self._receive_lock:
            while True:
                self._check_open()
                if self._queue:
                    return self._queue.popleft()
                remaining_ms = MAX_POLL_MS if deadline is None else int((deadline - time.monotonic()) * 1000)
                if remaining_ms <= 0 and deadline is not None:
                    raise exceptions.Timeout("No message received within the timeout")
                self._poll(max(0, min(remaining_ms, MAX_POLL_MS)))
                if not self._queue and deadline is not None and time.monotonic() >= deadline:
                    raise exceptions.Timeout("No message received within the timeout")

    def batch_receive(self) -> list[Message]:
        """Up to the batch-receive policy's count and bytes, waiting at most its timeout.

        The broker holds the poll until that many messages are ready or the timeout passes,
        so a busy consumer makes few, full requests.
        """
        policy = self._batch_policy
        limit = policy.max_num_message if policy.max_num_message > 0 else self._queue_size
        with self._receive_lock:
            self._check_open()
            if len(self._queue) < limit:
                want = limit - len(self._queue)
                self._poll(max(0, policy.timeout_ms), min_messages=want, max_messages=max(want, 1))
            out: list[Message] = []
            size = 0
            while self._queue and len(out) < limit:
                if out and policy.max_num_bytes > 0 and size + len(self._queue[0].data()) > policy.max_num_bytes:
                    break
                message = self._queue.popleft()
                size += len(message.data())
                out.append(message)
            return out

    def acknowledge(self, message: Message | MessageId) -> None:
        message_id = message.message_id() if isinstance(message, Message) else message
        entry = message_id.entry_id()
        with self._ack_lock:
            left = self._pending_batch.get(entry)
            if left is not None and message_id.batch_index() >= 0:
                left.discard(message_id.batch_index())
                if left:
                    return
            self._pending_batch.pop(entry, None)
            self._acks.add(entry)
            self._acks_since = self._acks_since or time.monotonic()

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        if self._type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise exceptions.InvalidConfiguration("Cumulative acknowledgement is not allowed on a Shared subscription")
        message_id = message.message_id() if isinstance(message, Message) else message
        entry = message_id.entry_id()
        with self._ack_lock:
            left = self._pending_batch.get(entry)
            if left is not None and message_id.batch_index() >= 0:
                left.difference_update(range(message_id.batch_index() + 1))
            if left:  # part of the last batch is still unacknowledged: ack up to the entry before
                target = MessageId(message_id.ledger_id(), entry - 1, message_id.partition(), -1)
            else:
                self._pending_batch.pop(entry, None)
                target = message_id
            for e in [e for e in self._pending_batch if e < entry]:
                del self._pending_batch[e]
            if target.entry_id() >= 0 and (self._cumulative is None or self._cumulative < target):
                self._cumulative = target
        self._flush_acks()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._flush_acks()
        self._closed.set()
        self._background.join(timeout=2)
        with contextlib.suppress(exceptions.PulsarException):  # if it fails, the lease expires on its own
            self._transport.call("DELETE", self._consumer_path, deadline_s=5)

    def is_connected(self) -> bool:
        return not self._closed.is_set()

    # --- internals -------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed.is_set():
            raise exceptions.AlreadyClosed("Consumer already closed")

    def _poll(self, wait_ms: int, min_messages: int = 1, max_messages: int | None = None) -> None:
        body: dict[str, Any] = {
            "maxMessages": max_messages or self._queue_size,
            "minMessages": min_messages,
            "waitMs": wait_ms,
            "requestId": uuid.uuid4().hex,
        }
        acks = self._take_acks()
        if acks:
            body["acks"] = acks
        try:
            response = self._transport.call("POST", f"{self._consumer_path}/receive", body, deadline_s=30 + wait_ms / 1000)
        except exceptions.SubscriptionNotFound:
            # our lease lapsed (e.g. a long pause): attach again, as a reconnecting Pulsar client does
            self._transport.call("PUT", self._consumer_path, self._subscribe_body)
            if acks:
                self._transport.call("POST", self._ack_path, acks)
            return
        except exceptions.PulsarException:
            self._restore_acks(acks)
            raise
        messages = [Message.from_wire(m) for m in response["messages"]]
        with self._ack_lock:
            for m in messages:
                mid = m.message_id()
                if mid.batch_index() >= 0:
                    self._pending_batch.setdefault(mid.entry_id(), set()).add(mid.batch_index())
        self._queue.extend(messages)

    def _take_acks(self) -> dict[str, Any] | None:
        """The grouped acknowledgements as an ack body (entry ids only matter to the broker)."""
        with self._ack_lock:
            acks, self._acks = sorted(self._acks), set()
            cumulative, self._cumulative = self._cumulative, None
            self._acks_since = 0.0
        if not acks and cumulative is None:
            return None
        body: dict[str, Any] = {"messageIds": [f"0:{e}" for e in acks]}
        if cumulative is not None:
            body["cumulative"] = cumulative.wire()
        return body

    def _restore_acks(self, body: dict[str, Any] | None) -> None:
        if not body:
            return
        with self._ack_lock:
            self._acks_since = self._acks_since or time.monotonic()
            self._acks.update(MessageId.from_text(m).entry_id() for m in body["messageIds"])
            if "cumulative" in body:
                cumulative = MessageId.from_text(body["cumulative"])
                if self._cumulative is None or self._cumulative < cumulative:
                    self._cumulative = cumulative

    def _flush_acks(self) -> None:
        body = self._take_acks()
        if body is None:
            return
        try:
            self._transport.call("POST", self._ack_path, body)
        except exceptions.PulsarException:
            self._restore_acks(body)
            raise

    def _run(self) -> None:
        last_beat = time.monotonic()
        while not self._closed.wait(ACK_GROUP_S):
            try:
                # acks ride on the next poll; flush them alone when no poll is coming soon
                waited = time.monotonic() - self._acks_since if self._acks_since else 0.0
                if waited and (not self._receive_lock.locked() or waited >= ACK_MAX_DELAY_S):
                    self._flush_acks()
                if time.monotonic() - last_beat >= HEARTBEAT_S:
                    self._transport.call("PUT", self._consumer_path, self._subscribe_body)
                    last_beat = time.monotonic()
            except exceptions.PulsarException:
                import logging

                logging.getLogger(__name__).warning("consumer background call failed", exc_info=True)
