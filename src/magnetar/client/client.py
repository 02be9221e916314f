"""`magnetar.Client`: the entry point, modeled on the official pulsar-client 3.x `pulsar.Client`."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any, cast

from magnetar.client import exceptions
from magnetar.client.auth import Authentication
from magnetar.client.consumer import Consumer
from magnetar.client.message import Message, MessageId
from magnetar.client.partitioned import MultiTopicsConsumer, PartitionedProducer, matching
from magnetar.client.producer import Producer
from magnetar.client.push import PushConsumer, websocket_base
from magnetar.client.reader import Reader
from magnetar.client.transport import Transport, topic_path
from magnetar.client.types import (
    BatchingType,
    CompressionType,
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
)
from magnetar.core.errors import InvalidInput
from magnetar.core.naming import NamespaceName, TopicName, check_subscription


def _topic(name: str) -> TopicName:
    try:
        return TopicName.parse(name)
    except InvalidInput as exc:
        raise exceptions.InvalidConfiguration(exc.reason) from None


DELIVERY_MODES = ("auto", "push", "poll")


def _delivery(mode: str) -> str:
    if mode not in DELIVERY_MODES:
        raise exceptions.InvalidConfiguration(f"delivery must be one of {', '.join(DELIVERY_MODES)}, not {mode!r}")
    return mode


class Client:
    """`websocket_url`: where push consumers connect (default: `service_url` with http -> ws,
    https -> wss, as the local stack serves both on one port; on AWS, the stack's `WebSocketUrl`).
    `delivery`: "auto" pushes non-persistent topics (the only way to consume them) and long-polls
    persistent ones; "push" pushes both; "poll" never pushes.
    `authentication` (second, as in pulsar-client): `AuthenticationToken(token)` or
    `AuthenticationAwsIam()`; every request, retry and WebSocket connect of every producer, consumer
    and reader of this client presents it. A 401 raises `AuthenticationError`, a 403
    `AuthorizationError`, with the broker's reason."""

    def __init__(self, service_url: str, authentication: Authentication | None = None,
                 operation_timeout_seconds: int = 30, websocket_url: str | None = None,
                 delivery: str = "auto") -> None:
        self._transport = Transport(service_url, float(operation_timeout_seconds), authentication)
        self._websocket_url = websocket_base(websocket_url or service_url)
        self._delivery = _delivery(delivery)
        self._closeables: list[Any] = []

    # --- topics ------------------------------------------------------------------------------
    def _partitions(self, topic: TopicName) -> int:
        if topic.partition_index >= 0:
            return 0
        result = self._transport.call("GET", f"/admin/v2/{topic_path(topic)}/partitions")
        return int(result.get("partitions", 0))

    def get_topic_partitions(self, topic: str) -> list[str]:
        name = _topic(topic)
        n = self._partitions(name)
        return [str(name.partition(i)) for i in range(n)] if n else [str(name)]

    # --- producers -----------------------------------------------------------------------------
    def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        send_timeout_millis: int = 30_000,
        compression_type: CompressionType = CompressionType.NONE,
        batching_enabled: bool = True,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10,
        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
        message_router: Callable[[Message, int], int] | None = None,
        chunking_enabled: bool = False,
        access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
        batching_type: BatchingType = BatchingType.Default,
        max_pending_messages: int = 1000,
    ) -> Producer | PartitionedProducer:
        name = _topic(topic)
        options: dict[str, Any] = {
            "batching_enabled": batching_enabled, "batching_max_messages": batching_max_messages,
            "batching_max_allowed_size_in_bytes": batching_max_allowed_size_in_bytes,
            "batching_max_publish_delay_ms": batching_max_publish_delay_ms,
            "send_timeout_millis": send_timeout_millis, "compression_type": compression_type,
            "chunking_enabled": chunking_enabled, "access_mode": access_mode, "batching_type": batching_type,
            "max_pending_messages": max_pending_messages,
            "attach": True,  # registers the producer (limits, quotas, stats); a named one resumes its sequence
        }
        partitions = self._partitions(name)
        producer: Producer | PartitionedProducer
        if partitions:
            base = producer_name
            producers = [Producer(self._transport, name.partition(i), f"{base}-p{i}" if base else None, **options)
                         for i in range(partitions)]
            producer = PartitionedProducer(str(name), producers, message_routing_mode, message_router,
                                           batching_max_messages if batching_enabled else 1)
        else:
            producer = Producer(self._transport, name, producer_name, **options)
        self._closeables.append(producer)
        return producer

    # --- consumers -----------------------------------------------------------------------------
    def subscribe(
        self,
        topic: str | list[str] | re.Pattern[str] | None,
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        consumer_name: str | None = None,
        initial_position: InitialPosition = InitialPosition.Latest,
        unacked_messages_timeout_ms: int | None = None,
        receiver_queue_size: int = 1000,
        batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
        negative_ack_redelivery_delay_ms: int = 60_000,
        dead_letter_policy: ConsumerDeadLetterPolicy | None = None,
        message_listener: Callable[[Any, Message], None] | None = None,
        pattern: str | re.Pattern[str] | None = None,
        pattern_auto_discovery_period: int = 60,
        retry_enable: bool = False,
        expire_time_of_incomplete_chunked_message_ms: int = 60_000,
        delivery: str | None = None,
    ) -> Consumer | MultiTopicsConsumer | PushConsumer:
        """`delivery` overrides the client's ("auto", "push" or "poll") for this consumer."""
        try:
            check_subscription(subscription_name)
        except InvalidInput as exc:
            raise exceptions.InvalidConfiguration(exc.reason) from None
        mode = _delivery(delivery) if delivery is not None else self._delivery
        if pattern is not None:
            topic = re.compile(pattern) if isinstance(pattern, str) else pattern
        discover: Callable[[], list[str]] | None = None
        if isinstance(topic, re.Pattern):
            regex: re.Pattern[str] = topic
            namespace = self._pattern_namespace(regex)

            def discover_topics() -> list[str]:
                return self._expand(matching(regex, self._namespace_topics(namespace)))

            discover = discover_topics
            topics = discover_topics()
        elif isinstance(topic, list):
            topics = self._expand(topic)
        elif isinstance(topic, str):
            topics = self._expand([topic])
        else:
            raise exceptions.InvalidConfiguration("Give a topic, a list of topics or a pattern")
        retry_topic = dead_letter_topic = None
        if retry_enable:
            if isinstance(topic, re.Pattern) or (isinstance(topic, list) and len(topic) != 1):
                raise exceptions.InvalidConfiguration("retry_enable needs a single topic")
            first = topic[0] if isinstance(topic, list) else topic
            retry_topic = (dead_letter_policy.retry_letter_topic if dead_letter_policy else None) or (
                f"{_topic(first)}-{subscription_name}-RETRY")
            dead_letter_topic = (dead_letter_policy.dead_letter_topic if dead_letter_policy else None) or (
                f"{_topic(first)}-{subscription_name}-DLQ")  # one for the topic and its retry topic
            topics = topics + self._expand([retry_topic])

        def push(partition_topic: str) -> bool:
            persistent = _topic(partition_topic).is_persistent
            if not persistent and mode == "poll":
                raise exceptions.InvalidConfiguration(
                    f"{partition_topic} is non-persistent: it is consumed by push only (WebSocket), "
                    "not with delivery='poll'")
            return mode == "push" or not persistent

        pushed = [t for t in topics if push(t)]
        if consumer_name is None and (len(topics) > 1 or discover is not None):
            consumer_name = MultiTopicsConsumer.new_name()  # one name on every partition: one shared poll
        if pushed and (retry_enable or dead_letter_policy is not None):
            raise exceptions.InvalidConfiguration(
                "retry_enable and dead_letter_policy need long polling (delivery='poll', persistent topics)")

        def make(partition_topic: str) -> Consumer:
            if partition_topic in pushed:
                return cast(Consumer, PushConsumer(  # the same methods, duck-typed for MultiTopicsConsumer
                    self._transport, self._websocket_url, _topic(partition_topic), subscription_name, consumer_type,
                    consumer_name, initial_position, unacked_messages_timeout_ms, receiver_queue_size,
                    batch_receive_policy, negative_ack_redelivery_delay_ms,
                    None if len(topics) > 1 or discover is not None else message_listener))
            return Consumer(
                self._transport, _topic(partition_topic), subscription_name, consumer_type, consumer_name,
                initial_position, unacked_messages_timeout_ms, receiver_queue_size, batch_receive_policy,
                negative_ack_redelivery_delay_ms, dead_letter_policy, None if len(topics) > 1 or discover is not None else message_listener,
                lambda t: self.create_producer(t, batching_enabled=False), retry_topic,
                expire_time_of_incomplete_chunked_message_ms, dead_letter_topic,
            )

        consumer: Consumer | MultiTopicsConsumer
        if len(topics) == 1 and discover is None:
            consumer = make(topics[0])
        else:
            consumer = MultiTopicsConsumer(subscription_name, make, topics, receiver_queue_size,
                                           batch_receive_policy, message_listener, discover,
                                           float(pattern_auto_discovery_period), consumer_name)
        self._closeables.append(consumer)
        return consumer

    def _expand(self, topics: list[str]) -> list[str]:
        out: list[str] = []
        for t in topics:
            out.extend(self.get_topic_partitions(t))
        return out

    @staticmethod
    def _pattern_namespace(regex: re.Pattern[str]) -> NamespaceName:
        text = regex.pattern.split("://", 1)[-1]
        parts = text.split("/")
        if len(parts) < 3:
            return NamespaceName("public", "default")
        return NamespaceName.parse("/".join(parts[:2]))

    def _namespace_topics(self, namespace: NamespaceName) -> list[str]:
        plain: list[str] = self._transport.call("GET", f"/admin/v2/persistent/{namespace}")
        partitioned: list[str] = self._transport.call("GET", f"/admin/v2/persistent/{namespace}/partitioned")
        bases = set(partitioned)
        return sorted(bases | {t for t in plain if TopicName.parse(t).partitioned_topic.__str__() not in bases})

    # --- readers -------------------------------------------------------------------------------
    def create_reader(self, topic: str, start_message_id: MessageId, receiver_queue_size: int = 1000,
                      start_message_id_inclusive: bool = False) -> Reader:
        name = _topic(topic)
        if self._partitions(name):
            raise exceptions.InvalidConfiguration("Create one reader per partition of a partitioned topic")
        reader = Reader(self._transport, name, start_message_id, start_message_id_inclusive, receiver_queue_size)
        self._closeables.append(reader)
        return reader

    def close(self) -> None:
        for item in reversed(self._closeables):
            with contextlib.suppress(exceptions.PulsarException):
                item.close()
        self._transport.close()
