"""pulsar-client's argument checks of `Client.create_producer` and `Client.subscribe`: a wrong type
is what pulsar-client raises for it (a ValueError from its own checks, a TypeError where it passes
the value on to its C++ configuration unchecked). Each takes the call's arguments by name."""

from __future__ import annotations

import re
from typing import Any

from magnetar.client import exceptions
from magnetar.client.crypto import CryptoKeyReader
from magnetar.client.types import (
    BatchingType,
    CompressionType,
    ConsumerBatchReceivePolicy,
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    check_native,
    check_properties,
    check_type,
    check_type_or_none,
    native_flag,
)
from magnetar.core.errors import InvalidInput
from magnetar.core.naming import check_subscription
from magnetar.schema import Schema


def check_producer_arguments(
    *,
    topic: Any, producer_name: Any, schema: Any, initial_sequence_id: Any, send_timeout_millis: Any,
    compression_type: Any, max_pending_messages: Any, max_pending_messages_across_partitions: Any,
    block_if_queue_full: Any, batching_enabled: Any, batching_max_messages: Any, batching_max_allowed_size_in_bytes: Any,
    batching_max_publish_delay_ms: Any, chunking_enabled: Any, message_routing_mode: Any,
    lazy_start_partitioned_producers: Any, properties: Any, batching_type: Any, encryption_key: Any,
    crypto_key_reader: Any, access_mode: Any, message_router: Any,
) -> bool:
    """The producer's arguments checked; returns `batching_enabled` with the SDK's default applied
    (batches, unless large messages go in chunks)."""
    check_type(str, topic, "topic")
    check_type_or_none(str, producer_name, "producer_name")
    check_type(Schema, schema, "schema")
    check_type_or_none(int, initial_sequence_id, "initial_sequence_id")
    for arg, number in (("send_timeout_millis", send_timeout_millis), ("max_pending_messages", max_pending_messages),
                         ("max_pending_messages_across_partitions", max_pending_messages_across_partitions),
                         ("batching_max_messages", batching_max_messages),
                         ("batching_max_allowed_size_in_bytes", batching_max_allowed_size_in_bytes),
                         ("batching_max_publish_delay_ms", batching_max_publish_delay_ms)):
        check_type(int, number, arg)
    check_type(CompressionType, compression_type, "compression_type")
    if batching_enabled is None:  # the SDK's default: batches, unless large messages go in chunks
        batching_enabled = not chunking_enabled
    for arg, flag in (("block_if_queue_full", block_if_queue_full), ("batching_enabled", batching_enabled),
                       ("chunking_enabled", chunking_enabled),
                       ("lazy_start_partitioned_producers", lazy_start_partitioned_producers)):
        check_type(bool, flag, arg)
    check_type_or_none(dict, properties, "properties")
    check_type(BatchingType, batching_type, "batching_type")
    check_type_or_none((str, list), encryption_key, "encryption_key")  # Magnetar: a list names several keys
    check_type_or_none(CryptoKeyReader, crypto_key_reader, "crypto_key_reader")
    check_type(ProducerAccessMode, access_mode, "access_mode")
    # what pulsar-client passes on to its C++ configuration unchecked (a TypeError there)
    check_native(PartitionsRoutingMode, message_routing_mode, "message_routing_mode")
    check_properties(properties)
    if batching_enabled and chunking_enabled:
        raise ValueError("Batching and chunking of messages can't be enabled together.")
    return bool(batching_enabled)


def check_subscribe_arguments(
    *,
    topic: Any, subscription_name: Any, consumer_type: Any, schema: Any, message_listener: Any,
    receiver_queue_size: Any, max_total_receiver_queue_size_across_partitions: Any, consumer_name: Any,
    unacked_messages_timeout_ms: Any, broker_consumer_stats_cache_time_ms: Any,
    negative_ack_redelivery_delay_ms: Any, is_read_compacted: Any, properties: Any,
    pattern_auto_discovery_period: Any, initial_position: Any, crypto_key_reader: Any,
    replicate_subscription_state_enabled: Any, max_pending_chunked_message: Any,
    auto_ack_oldest_chunked_message_on_queue_full: Any, start_message_id_inclusive: Any,
    batch_receive_policy: Any, key_shared_policy: Any, batch_index_ack_enabled: Any,
    regex_subscription_mode: Any, dead_letter_policy: Any, crypto_failure_action: Any, pattern: Any,
    retry_enable: Any, expire_time_of_incomplete_chunked_message_ms: Any, delivery: Any, priority_level: Any,
) -> tuple[Any, bool]:
    """The consumer's arguments checked; returns the topic argument (a pattern of bytes as text) and
    `replicate_subscription_state_enabled` as a bool."""
    check_type(str, subscription_name, "subscription_name")
    check_type(ConsumerType, consumer_type, "consumer_type")
    check_type(Schema, schema, "schema")
    for name, number in (("receiver_queue_size", receiver_queue_size),
                         ("max_total_receiver_queue_size_across_partitions",
                          max_total_receiver_queue_size_across_partitions),
                         ("broker_consumer_stats_cache_time_ms", broker_consumer_stats_cache_time_ms),
                         ("negative_ack_redelivery_delay_ms", negative_ack_redelivery_delay_ms),
                         ("pattern_auto_discovery_period", pattern_auto_discovery_period),
                         ("max_pending_chunked_message", max_pending_chunked_message),
                         ("priority_level", priority_level)):
        check_type(int, number, name)
    if priority_level < 0:
        raise ValueError("priority_level must be 0 (the highest) or more")
    check_type_or_none(str, consumer_name, "consumer_name")
    check_type_or_none(int, unacked_messages_timeout_ms, "unacked_messages_timeout_ms")
    for name, flag in (("is_read_compacted", is_read_compacted),
                       ("auto_ack_oldest_chunked_message_on_queue_full",
                        auto_ack_oldest_chunked_message_on_queue_full),
                       ("start_message_id_inclusive", start_message_id_inclusive),
                       ("batch_index_ack_enabled", batch_index_ack_enabled)):
        check_type(bool, flag, name)
    check_type_or_none(dict, properties, "properties")
    check_type(InitialPosition, initial_position, "initial_position")
    check_type_or_none(ConsumerBatchReceivePolicy, batch_receive_policy, "batch_receive_policy")
    check_type_or_none(ConsumerKeySharedPolicy, key_shared_policy, "key_shared_policy")
    check_type(RegexSubscriptionMode, regex_subscription_mode, "regex_subscription_mode")
    check_type_or_none(CryptoKeyReader, crypto_key_reader, "crypto_key_reader")
    # what pulsar-client passes on to its C++ configuration unchecked (a TypeError there)
    check_properties(properties)
    replicate_subscription_state_enabled = native_flag(replicate_subscription_state_enabled,
                                                       "replicate_subscription_state_enabled")
    if pattern is None and not isinstance(topic, str | list | re.Pattern):
        raise ValueError("Argument 'topic' is expected to be of a type between (str, list, re.pattern)")
    if isinstance(topic, list) and not all(isinstance(t, str) for t in topic):
        raise TypeError("subscribe_topics(): incompatible function arguments: the topics must be str")
    if isinstance(topic, re.Pattern) and isinstance(topic.pattern, bytes):  # pulsar-client takes its text
        topic = re.compile(topic.pattern.decode())
    try:
        check_subscription(subscription_name)
    except InvalidInput as exc:
        raise exceptions.InvalidConfiguration(exc.reason) from None
    return topic, replicate_subscription_state_enabled
