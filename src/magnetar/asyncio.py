"""pulsar-client's asynchronous API (`pulsar.asyncio`): `Client`, `Producer`, `Consumer`, `Reader`
and `PulsarException`, with its names, parameters and defaults, over the SDK.

    import magnetar.asyncio   # was: import pulsar.asyncio
    client = magnetar.asyncio.Client("http://127.0.0.1:8080")
    producer = await client.create_producer("orders")
    await producer.send(b"hello")
    consumer = await client.subscribe("orders", "sub")
    message = await consumer.receive()
    await consumer.acknowledge(message)

pulsar.asyncio awaits the C++ client's callbacks; the SDK is synchronous (its HTTP requests and
long polls block), so this module awaits it without blocking the event loop: a send is the
producer's `send_async`, whose callback resolves the awaited future (batching goes on as usual);
every other call runs on the loop's default executor (a worker thread per call in flight, as a
receive is a long poll). That is the whole of it, so it is written here rather than pulled in.
A failure is raised as this module's `PulsarException` with pulsar-client's `Result`, as
pulsar.asyncio raises it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import magnetar
from magnetar.client import exceptions
from magnetar.client.failover import AutoClusterFailover, ServiceInfoProvider
from magnetar.client.message import Message, MessageId
from magnetar.client.producer import DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS
from magnetar.client.types import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    Result,
)

T = TypeVar("T")

__all__ = ["Client", "Consumer", "Producer", "PulsarException", "Reader"]


class PulsarException(Exception):
    """The exception that wraps the Pulsar error code (pulsar.asyncio's)."""

    def __init__(self, result: Result, msg: str | None = None) -> None:
        super().__init__(result, msg)
        self._result = result
        self._msg = msg

    def error(self) -> Result:
        """The Pulsar error code."""
        return self._result

    def __str__(self) -> str:
        if self._msg:
            return f"{self._result.value} {self._result.name}: {self._msg}"
        return f"{self._result.value} {self._result.name}"


def _result_of(exc: BaseException) -> Result:
    name = type(exc).__name__
    return Result[name] if name in Result.__members__ else Result.UnknownError


def _wrapped(exc: BaseException) -> PulsarException:
    reason = exc.reason if isinstance(exc, exceptions.PulsarException) else str(exc)
    return PulsarException(_result_of(exc), reason)


async def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """A blocking SDK call on the loop's executor; its SDK error as a PulsarException."""
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))
    except exceptions.PulsarException as exc:
        raise _wrapped(exc) from exc


class Producer:
    """The asynchronous version of `magnetar.Producer`."""

    def __init__(self, producer: Any, schema: Any = None) -> None:
        self._producer = producer
        self._schema = schema

    async def send(self, content: Any, properties: dict[str, str] | None = None, partition_key: str | None = None,
                   ordering_key: str | None = None, sequence_id: int | None = None,
                   replication_clusters: list[str] | None = None, disable_replication: bool | None = None,
                   event_timestamp: int | None = None, deliver_at: int | None = None,
                   deliver_after: timedelta | None = None) -> MessageId:
        """Send a message; the id once it is stored."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[MessageId] = loop.create_future()

        def settle(result: Result, message_id: MessageId | None) -> None:
            if future.done():
                return
            if result == Result.Ok and message_id is not None:
                future.set_result(message_id)
            else:
                future.set_exception(PulsarException(result, "the message was not stored"))

        def done(result: Result, message_id: MessageId | None) -> None:  # on the producer's sender thread
            loop.call_soon_threadsafe(settle, result, message_id)

        try:
            self._producer.send_async(content, done, properties=properties, partition_key=partition_key,
                                      ordering_key=ordering_key, sequence_id=sequence_id,
                                      replication_clusters=replication_clusters,
                                      disable_replication=bool(disable_replication), event_timestamp=event_timestamp,
                                      deliver_at=deliver_at, deliver_after=deliver_after)
        except exceptions.PulsarException as exc:
            raise _wrapped(exc) from exc
        return await future

    async def flush(self) -> None:
        await _call(self._producer.flush)

    async def close(self) -> None:
        await _call(self._producer.close)

    def topic(self) -> str:
        return str(self._producer.topic())

    def producer_name(self) -> str:
        return str(self._producer.producer_name())

    def last_sequence_id(self) -> int:
        return int(self._producer.last_sequence_id())

    def is_connected(self) -> bool:
        return bool(self._producer.is_connected())


class Consumer:
    """The asynchronous version of `magnetar.Consumer`."""

    def __init__(self, consumer: Any, schema: Any = None) -> None:
        self._consumer = consumer
        self._schema = schema

    async def receive(self) -> Message:
        """The next message (waits until one comes)."""
        return await _call(self._consumer.receive)

    async def acknowledge(self, message: Message | MessageId) -> None:
        await _call(self._consumer.acknowledge, message)

    async def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        await _call(self._consumer.acknowledge_cumulative, message)

    async def negative_acknowledge(self, message: Message | MessageId) -> None:
        await _call(self._consumer.negative_acknowledge, message)

    async def seek(self, messageid: MessageId | int) -> None:
        await _call(self._consumer.seek, messageid)

    async def get_last_message_id(self) -> MessageId:
        return await _call(self._consumer.get_last_message_id)

    async def unsubscribe(self) -> None:
        await _call(self._consumer.unsubscribe)

    async def close(self) -> None:
        await _call(self._consumer.close)

    def redeliver_unacknowledged_messages(self) -> None:
        self._consumer.redeliver_unacknowledged_messages()

    def topic(self) -> str:
        return str(self._consumer.topic())

    def subscription_name(self) -> str:
        return str(self._consumer.subscription_name())

    def consumer_name(self) -> str:
        return str(self._consumer.consumer_name())


class Reader:
    """The asynchronous version of `magnetar.Reader`."""

    def __init__(self, reader: Any, schema: Any = None) -> None:
        self._reader = reader
        self._schema = schema

    async def read_next(self) -> Message:
        return await _call(self._reader.read_next)

    async def has_message_available(self) -> bool:
        return bool(await _call(self._reader.has_message_available))

    async def seek(self, messageid: MessageId | int) -> None:
        await _call(self._reader.seek, messageid)

    async def close(self) -> None:
        await _call(self._reader.close)

    def topic(self) -> str:
        return str(self._reader.topic())

    def is_connected(self) -> bool:
        return bool(self._reader.is_connected())


class Client:
    """The asynchronous version of `magnetar.Client` (the same settings: `**kwargs`; `service_url`
    may be a `magnetar.AutoClusterFailover` or `magnetar.ServiceInfoProvider`, as there)."""

    def __init__(self, service_url: str | AutoClusterFailover | ServiceInfoProvider, **kwargs: Any) -> None:
        self._client = magnetar.Client(service_url, **kwargs)

    async def create_producer(self, topic: str, producer_name: str | None = None, schema: Any = None,
                              initial_sequence_id: int | None = None, send_timeout_millis: int = 30000,
                              compression_type: CompressionType = CompressionType.NONE,
                              max_pending_messages: int = 1000, max_pending_messages_across_partitions: int = 50000,
                              block_if_queue_full: bool = False, batching_enabled: bool = True,
                              batching_max_messages: int = 1000,
                              batching_max_allowed_size_in_bytes: int = 128 * 1024,
                              batching_max_publish_delay_ms: int = DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS, chunking_enabled: bool = False,
                              message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
                              lazy_start_partitioned_producers: bool = False, properties: dict[str, str] | None = None,
                              batching_type: BatchingType = BatchingType.Default, encryption_key: str | None = None,
                              crypto_key_reader: Any = None,
                              access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
                              message_router: Callable[[Message, int], int] | None = None) -> Producer:
        options: dict[str, Any] = dict(
            producer_name=producer_name, initial_sequence_id=initial_sequence_id,
            send_timeout_millis=send_timeout_millis, compression_type=compression_type,
            max_pending_messages=max_pending_messages,
            max_pending_messages_across_partitions=max_pending_messages_across_partitions,
            block_if_queue_full=block_if_queue_full, batching_enabled=batching_enabled,
            batching_max_messages=batching_max_messages,
            batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
            batching_max_publish_delay_ms=batching_max_publish_delay_ms, chunking_enabled=chunking_enabled,
            message_routing_mode=message_routing_mode,
            lazy_start_partitioned_producers=lazy_start_partitioned_producers, properties=properties,
            batching_type=batching_type, encryption_key=encryption_key, crypto_key_reader=crypto_key_reader,
            access_mode=access_mode, message_router=message_router)
        if schema is not None:
            options["schema"] = schema
        return Producer(await _call(self._client.create_producer, topic, **options), schema)

    async def subscribe(self, topic: str | list[str], subscription_name: str,
                        consumer_type: ConsumerType = ConsumerType.Exclusive, schema: Any = None,
                        receiver_queue_size: int = 1000, max_total_receiver_queue_size_across_partitions: int = 50000,
                        consumer_name: str | None = None, unacked_messages_timeout_ms: int | None = None,
                        broker_consumer_stats_cache_time_ms: int = 30000,
                        negative_ack_redelivery_delay_ms: int = 60000, is_read_compacted: bool = False,
                        properties: dict[str, str] | None = None,
                        initial_position: InitialPosition = InitialPosition.Latest, crypto_key_reader: Any = None,
                        replicate_subscription_state_enabled: bool = False, max_pending_chunked_message: int = 10,
                        auto_ack_oldest_chunked_message_on_queue_full: bool = False,
                        start_message_id_inclusive: bool = False, batch_receive_policy: Any = None,
                        key_shared_policy: Any = None, batch_index_ack_enabled: bool = False,
                        regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly,
                        dead_letter_policy: Any = None,
                        crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL,
                        is_pattern_topic: bool = False) -> Consumer:
        """pulsar.asyncio's `subscribe`; `is_pattern_topic` reads `topic` as a regular expression."""
        options: dict[str, Any] = dict(
            consumer_type=consumer_type, receiver_queue_size=receiver_queue_size,
            max_total_receiver_queue_size_across_partitions=max_total_receiver_queue_size_across_partitions,
            consumer_name=consumer_name, unacked_messages_timeout_ms=unacked_messages_timeout_ms,
            broker_consumer_stats_cache_time_ms=broker_consumer_stats_cache_time_ms,
            negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms, is_read_compacted=is_read_compacted,
            properties=properties, initial_position=initial_position, crypto_key_reader=crypto_key_reader,
            replicate_subscription_state_enabled=replicate_subscription_state_enabled,
            max_pending_chunked_message=max_pending_chunked_message,
            auto_ack_oldest_chunked_message_on_queue_full=auto_ack_oldest_chunked_message_on_queue_full,
            start_message_id_inclusive=start_message_id_inclusive, batch_receive_policy=batch_receive_policy,
            key_shared_policy=key_shared_policy, batch_index_ack_enabled=batch_index_ack_enabled,
            regex_subscription_mode=regex_subscription_mode, dead_letter_policy=dead_letter_policy,
            crypto_failure_action=crypto_failure_action)
        if schema is not None:
            options["schema"] = schema
        if is_pattern_topic:
            if not isinstance(topic, str):
                raise ValueError("A pattern topic is one string (a regular expression)")
            options["pattern"] = topic
            topic = []
        return Consumer(await _call(self._client.subscribe, topic, subscription_name, **options), schema)

    async def create_reader(self, topic: str, start_message_id: MessageId, schema: Any = None,
                            receiver_queue_size: int = 1000, reader_name: str | None = None,
                            subscription_role_prefix: str | None = None, is_read_compacted: bool = False,
                            crypto_key_reader: Any = None, start_message_id_inclusive: bool = False,
                            crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL
                            ) -> Reader:
        options: dict[str, Any] = dict(
            receiver_queue_size=receiver_queue_size, reader_name=reader_name,
            subscription_role_prefix=subscription_role_prefix, is_read_compacted=is_read_compacted,
            crypto_key_reader=crypto_key_reader, start_message_id_inclusive=start_message_id_inclusive,
            crypto_failure_action=crypto_failure_action)
        if schema is not None:
            options["schema"] = schema
        return Reader(await _call(self._client.create_reader, topic, start_message_id, **options), schema)

    async def get_topic_partitions(self, topic: str) -> list[str]:
        return await _call(self._client.get_topic_partitions, topic)

    async def close(self) -> None:
        await _call(self._client.close)

    def shutdown(self) -> None:
        self._client.shutdown()
