"""`magnetar.Client`: the entry point, modeled on the official pulsar-client 3.x `pulsar.Client`."""

from __future__ import annotations

from magnetar.client.consumer import Consumer
from magnetar.client.producer import Producer
from magnetar.client.transport import Transport
from magnetar.client.types import ConsumerBatchReceivePolicy, ConsumerType, InitialPosition
from magnetar.core.naming import TopicName, check_subscription


def _topic(name: str) -> TopicName:
    from magnetar.client import exceptions
    from magnetar.core.errors import InvalidInput

    try:
        return TopicName.parse(name)
    except InvalidInput as exc:
        raise exceptions.InvalidConfiguration(exc.reason) from None


class Client:
    def __init__(self, service_url: str, operation_timeout_seconds: int = 30) -> None:
        self._transport = Transport(service_url, float(operation_timeout_seconds))
        self._producers: list[Producer] = []
        self._consumers: list[Consumer] = []

    def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        send_timeout_millis: int = 30_000,
        batching_enabled: bool = True,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10,
    ) -> Producer:
        producer = Producer(
            self._transport,
            _topic(topic),
            producer_name,
            batching_enabled,
            batching_max_messages,
            batching_max_allowed_size_in_bytes,
            batching_max_publish_delay_ms,
            send_timeout_millis,
        )
        self._producers.append(producer)
        return producer

    def subscribe(
        self,
        topic: str,
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        consumer_name: str | None = None,
        initial_position: InitialPosition = InitialPosition.Latest,
        unacked_messages_timeout_ms: int | None = None,
        receiver_queue_size: int = 1000,
        batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
    ) -> Consumer:
        from magnetar.client import exceptions
        from magnetar.core.errors import InvalidInput

        try:
            check_subscription(subscription_name)
        except InvalidInput as exc:
            raise exceptions.InvalidConfiguration(exc.reason) from None
        consumer = Consumer(
            self._transport,
            _topic(topic),
            subscription_name,
            consumer_type,
            consumer_name,
            initial_position,
            unacked_messages_timeout_ms,
            receiver_queue_size,
            batch_receive_policy,
        )
        self._consumers.append(consumer)
        return consumer

    def close(self) -> None:
        for producer in self._producers:
            producer.close()
        for consumer in self._consumers:
            consumer.close()
        self._transport.close()
