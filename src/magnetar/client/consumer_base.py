"""What every SDK consumer shares, however its messages arrive (long polls in client/consumer.py,
WebSocket pushes in client/push.py): the pulsar-client accessors, the message-listener loop, the
batch-receive policy over the prefetch queue, and the Key_Shared policy's wire form."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from magnetar.client import exceptions
from magnetar.client.message import Message, MessageId
from magnetar.client.transport import Transport, topic_path
from magnetar.client.types import ConsumerBatchReceivePolicy, ConsumerKeySharedPolicy, KeySharedMode
from magnetar.core.naming import TopicName

log = logging.getLogger(__name__)


def key_shared_meta(policy: ConsumerKeySharedPolicy) -> dict[str, Any]:
    """A subscribe's `keySharedPolicy` (Pulsar's KeySharedMeta) for pulsar-client's policy."""
    sticky = policy.key_shared_mode == KeySharedMode.Sticky
    return {"keySharedMode": "STICKY" if sticky else "AUTO_SPLIT",
            "hashRanges": [{"start": s, "end": e} for s, e in policy.sticky_ranges] if sticky else [],
            "allowOutOfOrderDelivery": policy.allow_out_of_order_delivery}

LISTENER_RETRY_S = 1.0  # a listener's pause after a receive the SDK gave up on


class MessageListening:
    """pulsar-client's message listener, for any consumer with a `receive` and a `_closed` event (a
    single-topic consumer, a multi-topics one): `_listen(listener)` is the listener thread's loop,
    handing each message to `listener(consumer, message)` in order until the consumer closes, and
    holding them back while paused (`pause_message_listener`)."""

    _closed: threading.Event
    _listener_paused = False  # pulsar-client's pause_message_listener

    def receive(self, timeout_millis: int | None = None) -> Message:
        raise NotImplementedError

    def pause_message_listener(self) -> None:
        """pulsar-client: the listener gets no message until `resume_message_listener`; what
        arrives meanwhile waits in the prefetch queue."""
        self._listener_paused = True

    def resume_message_listener(self) -> None:
        self._listener_paused = False

    def _listen(self, listener: Callable[[Any, Message], None]) -> None:
        while not self._closed.is_set():
            if self._listener_paused:
                time.sleep(0.05)
                continue
            try:
                message = self.receive(timeout_millis=1000)
            except exceptions.Timeout:
                continue
            except exceptions.AlreadyClosed:
                return
            except exceptions.PulsarException as exc:  # the SDK gave up on a request (a timeout, a broker
                # down): the listener keeps listening, as pulsar-client's does after a reconnect
                log.warning("message listener: receive failed; retrying: %r", exc)
                self._closed.wait(LISTENER_RETRY_S)
                continue
            while self._listener_paused and not self._closed.is_set():  # paused while this one arrived
                time.sleep(0.05)
            try:
                listener(self, message)
            except Exception:  # the application's listener must not kill the consumer
                log.exception("message listener raised")


class ConsumerBase(MessageListening):
    """What every SDK consumer shares, however its messages arrive (long polls or WebSocket pushes):
    the pulsar-client accessors, the closed check, the message-listener loop (`MessageListening`),
    and taking a batch off the prefetch queue under the batch-receive policy. Subclasses set the
    attributes below."""

    _topic: TopicName
    _subscription: str
    _name: str
    _closed: threading.Event
    _queue: collections.deque[Message]
    _queue_size: int
    _batch_policy: ConsumerBatchReceivePolicy
    _transport: Transport

    def topic(self) -> str:
        return str(self._topic)

    def subscription_name(self) -> str:
        return self._subscription

    def consumer_name(self) -> str:
        return self._name

    def get_last_message_id(self) -> MessageId:
        """pulsar-client: the id of the topic partition's last message."""
        last = self._transport.call("GET", f"/admin/v2/{topic_path(self._topic)}/lastMessageId")
        return MessageId(self._topic.partition_index, int(last["ledgerId"]), int(last["entryId"]), -1,
                         str(self._topic))

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise exceptions.AlreadyClosed("Consumer already closed")

    def _batch_limit(self) -> int:
        policy = self._batch_policy
        return policy.max_num_message if policy.max_num_message > 0 else self._queue_size

    def _take_batch(self, limit: int) -> list[Message]:
        """Up to `limit` queued messages, within the policy's byte bound (at least one message)."""
        max_bytes = self._batch_policy.max_num_bytes
        out: list[Message] = []
        size = 0
        while self._queue and len(out) < limit:
            if out and max_bytes > 0 and size + len(self._queue[0].data()) > max_bytes:
                break
            message = self._queue.popleft()
            size += len(message.data())
            out.append(message)
        return out
