"""A long-polling consumer's dead-letter and retry-letter topics (Pulsar's client-side
DeadLetterPolicy and `reconsume_later`): the producers it publishes to, made when first needed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from magnetar.client import exceptions
from magnetar.client.message import Message
from magnetar.client.types import ConsumerDeadLetterPolicy


class LetterTopics:
    def __init__(self, policy: ConsumerDeadLetterPolicy | None, dead_letter_topic: str,
                 retry_topic: str | None, producer_factory: Callable[[str], Any] | None) -> None:
        """`producer_factory(topic)`: a producer of the client (None: the consumer has no letters)."""
        self._policy = policy
        self._dead_letter_topic = dead_letter_topic
        self._retry_topic = retry_topic
        self._factory = producer_factory
        self._producers: dict[str, Any] = {}

    def _send(self, topic: str, message: Message, properties: dict[str, str], **options: Any) -> None:
        assert self._factory is not None
        if topic not in self._producers:
            self._producers[topic] = self._factory(topic)
        self._producers[topic].send(message.data(), properties=properties,
                                    partition_key=message.partition_key() or None, **options)

    def dead_lettered(self, message: Message) -> bool:
        """Whether a delivered message went to the dead-letter topic instead (redelivered more than
        `max_redeliver_count` times): the consumer acknowledges it and does not hand it out."""
        if self._policy is None or self._factory is None or message.redelivery_count() <= self._policy.max_redeliver_count:
            return False
        self._send(self._dead_letter_topic, message, message.properties() | {
            "REAL_TOPIC": message.topic_name(), "ORIGIN_MESSAGE_ID": str(message.message_id())})
        return True

    def reconsume_later(self, message: Message, delay_ms: int, properties: dict[str, str] | None) -> None:
        """Publish the message again to the retry topic, delivered after `delay_ms`; after
        `max_redeliver_count` retries to the dead-letter topic instead (the caller acknowledges it)."""
        if self._retry_topic is None or self._factory is None:
            raise exceptions.InvalidConfiguration("reconsume_later needs subscribe(..., retry_enable=True)")
        times = int(message.properties().get("RECONSUMETIMES", "0")) + 1
        props = message.properties() | (properties or {}) | {
            "RECONSUMETIMES": str(times), "DELAY_TIME": str(delay_ms),
            "REAL_TOPIC": message.properties().get("REAL_TOPIC", message.topic_name()),
            "ORIGIN_MESSAGE_ID": message.properties().get("ORIGIN_MESSAGE_ID", str(message.message_id())),
        }
        if self._policy is not None and times > self._policy.max_redeliver_count:
            self._send(self._dead_letter_topic, message, props)
        else:
            self._send(self._retry_topic, message, props, deliver_after=delay_ms)

    def close(self) -> None:
        for producer in self._producers.values():
            producer.close()
