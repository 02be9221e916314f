"""`magnetar.Client`: the entry point, modeled on the official pulsar-client 3.x `pulsar.Client`."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable
from typing import Any, cast

from magnetar.client import crypto, exceptions
from magnetar.client.auth import Authentication
from magnetar.client.call_checks import check_producer_arguments, check_subscribe_arguments
from magnetar.client.consumer import Consumer
from magnetar.client.crypto import CryptoKeyReader
from magnetar.client.failover import (
    AutoClusterFailover,
    AutoClusterFailoverProvider,
    ServiceInfo,
    ServiceInfoProvider,
)
from magnetar.client.logger import log_handler
from magnetar.client.message import Message, MessageId
from magnetar.client.partitioned import MultiTopicsConsumer, PartitionedProducer, matching
from magnetar.client.patterns import namespace_topics, pattern_namespace, without_domain
from magnetar.client.poll_group import PollGroups
from magnetar.client.producer import DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS, Producer
from magnetar.client.publish_together import PublishGroups
from magnetar.client.push import PushConsumer, websocket_base
from magnetar.client.reader import PartitionedReader, Reader
from magnetar.client.receive_together import ReceiveTogether
from magnetar.client.schema import (
    DEFAULT_SCHEMA,
    check_consumer_schema,
    typed_consumer,
    typed_listener,
    typed_producer,
    typed_reader,
)
from magnetar.client.table_view import TableView
from magnetar.client.transport import Transport, topic_path
from magnetar.client.types import (
    BatchingType,
    CompressionType,
    ConsumerBatchReceivePolicy,
    ConsumerCryptoFailureAction,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    KeySharedMode,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    check_type,
    check_type_or_none,
)
from magnetar.core.errors import InvalidInput
from magnetar.core.naming import TopicName
from magnetar.core.publish_pacing import ShardPacers
from magnetar.schema import Schema


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
    `authentication` (second, as in pulsar-client): `AuthenticationToken(token)`,
    `AuthenticationBasic(username, password)` or `AuthenticationAwsIam()`; every request, retry and
    WebSocket connect of every producer, consumer and reader of this client presents it. A 401
    raises `AuthenticationError` (a `ConnectError` too, as pulsar-client reports refused
    credentials), a 403 `AuthorizationError`, with the broker's reason.

    pulsar-client's other settings are accepted and validated as it validates them (a wrong type
    is a ValueError); `logger` (a `logging.Logger`, `ConsoleLogger` or `FileLogger`) receives the
    SDK's log. The rest describe a binary connection to a broker and have no effect over HTTPS:
    `io_threads`, `message_listener_threads`, `concurrent_lookup_requests`, `log_conf_file_path`,
    `stats_interval_in_seconds`, `use_tls` (the URL's scheme decides), the `tls_*` files and
    flags, `connection_timeout_ms` and `listener_name` (docs/semantics.md).

    `service_url` may be an `AutoClusterFailover` or a `ServiceInfoProvider` instead (client
    failover across clusters, client/failover.py): then each `ServiceInfo` carries its cluster's
    authentication (and WebSocket URL): `authentication` and `tls_trust_certs_file_path` must not
    be given, as pulsar-client requires, nor `websocket_url` (docs/semantics.md, "Client failover")."""

    def __init__(self, service_url: str | AutoClusterFailover | ServiceInfoProvider, authentication: Authentication | None = None,
                 operation_timeout_seconds: int = 30, io_threads: int = 1, message_listener_threads: int = 1,
                 concurrent_lookup_requests: int = 50000, log_conf_file_path: str | None = None,
                 stats_interval_in_seconds: int = 600, use_tls: bool = False,
                 tls_trust_certs_file_path: str | None = None, tls_allow_insecure_connection: bool = False,
                 tls_validate_hostname: bool = False, logger: Any = None, connection_timeout_ms: int = 10000,
                 listener_name: str | None = None, tls_private_key_file_path: str | None = None,
                 tls_certificate_file_path: str | None = None, websocket_url: str | None = None,
                 delivery: str = "auto") -> None:
        if not isinstance(service_url, str | AutoClusterFailover | ServiceInfoProvider):
            raise ValueError(
                "Argument service_url is expected to be of type 'str', 'AutoClusterFailover' or "
                "'ServiceInfoProvider'"
            )
        check_type_or_none(Authentication, authentication, "authentication")  # pulsar-client's ValueError
        failover = not isinstance(service_url, str)
        if failover and authentication is not None:
            raise ValueError(
                "Argument authentication is not supported when service_url is an AutoClusterFailover or "
                "ServiceInfoProvider; set authentication on each ServiceInfo instead"
            )
        if failover and tls_trust_certs_file_path is not None:
            raise ValueError(
                "Argument tls_trust_certs_file_path is not supported when service_url is an "
                "AutoClusterFailover or ServiceInfoProvider; set tls_trust_certs_file_path on each "
                "ServiceInfo instead"
            )
        if failover and websocket_url is not None:
            raise ValueError(
                "Argument websocket_url is not supported when service_url is an AutoClusterFailover or "
                "ServiceInfoProvider; set websocket_url on each ServiceInfo instead"
            )
        check_type(int, operation_timeout_seconds, "operation_timeout_seconds")
        for name, value in (("connection_timeout_ms", connection_timeout_ms), ("io_threads", io_threads),
                            ("message_listener_threads", message_listener_threads),
                            ("concurrent_lookup_requests", concurrent_lookup_requests),
                            ("stats_interval_in_seconds", stats_interval_in_seconds)):
            check_type(int, value, name)
        for name, value in (("use_tls", use_tls), ("tls_allow_insecure_connection", tls_allow_insecure_connection),
                            ("tls_validate_hostname", tls_validate_hostname)):
            check_type(bool, value, name)
        for name, optional in (("log_conf_file_path", log_conf_file_path),
                               ("tls_trust_certs_file_path", tls_trust_certs_file_path),
                               ("listener_name", listener_name),
                               ("tls_private_key_file_path", tls_private_key_file_path),
                               ("tls_certificate_file_path", tls_certificate_file_path)):
            check_type_or_none(str, optional, name)
        self._delivery = _delivery(delivery)
        self._provider: ServiceInfoProvider | None = None
        self._service_info: ServiceInfo | None = None  # the current cluster's, under a client failover
        if isinstance(service_url, str):
            url = service_url
        else:
            self._provider = (AutoClusterFailoverProvider(service_url) if isinstance(service_url, AutoClusterFailover)
                              else service_url)
            initial = self._provider.initial_service_info()
            if not isinstance(initial, ServiceInfo):
                raise ValueError("Expected a magnetar.ServiceInfo instance")
            url, authentication, websocket_url = initial.service_url, initial.authentication, initial.websocket_url
            self._service_info = initial
        self._log_handler = log_handler(logger)
        self._transport = Transport(url, float(operation_timeout_seconds), authentication, websocket_url)
        self._closeables: list[Any] = []
        self._pacers = ShardPacers()  # its producers' pace per journal shard (core/publish_pacing.py)
        self._publish_groups = PublishGroups()  # its producers of one topic publish together (client/publish_together.py)
        self._poll_groups = PollGroups()  # its consumers of one subscription poll together (client/poll_group.py)
        self._receive_together = ReceiveTogether()  # the same on a topic that is not partitioned (client/receive_together.py)
        self._closed = False
        if self._provider is not None:
            self._provider.initialize(self._on_service_info_update)

    def get_service_info(self) -> ServiceInfo:
        """The service this client uses now (the current cluster, under a client failover)."""
        return self._service_info or ServiceInfo(self._transport.base, self._transport.authentication)

    @property
    def _websocket_url(self) -> str:
        """Where push consumers connect: the current cluster's WebSocket endpoint."""
        return websocket_base(self._transport.websocket_url or self._transport.base)

    def _on_service_info_update(self, service_info: ServiceInfo) -> None:
        """A `ServiceInfoProvider`'s callback: from now on, every producer, consumer and reader of
        this client talks to that cluster, with its authentication (client/failover.py)."""
        if not isinstance(service_info, ServiceInfo):
            raise ValueError("Expected a magnetar.ServiceInfo instance")
        if self._closed:
            return
        self._service_info = service_info
        self._transport.switch(service_info.service_url, service_info.authentication, service_info.websocket_url)

    # --- topics ------------------------------------------------------------------------------
    def _partitions(self, topic: TopicName) -> int:
        if topic.partition_index >= 0:
            return 0
        result = self._transport.call("GET", f"/admin/v2/{topic_path(topic)}/partitions")
        return int(result.get("partitions", 0))

    def get_topic_partitions(self, topic: str) -> list[str]:
        check_type(str, topic, "topic")
        name = _topic(topic)
        n = self._partitions(name)
        return [str(name.partition(i)) for i in range(n)] if n else [str(name)]

    # --- producers -----------------------------------------------------------------------------
    def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        schema: Schema = DEFAULT_SCHEMA,
        initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30_000,
        compression_type: CompressionType = CompressionType.NONE,
        max_pending_messages: int = 1000,
        max_pending_messages_across_partitions: int = 50000,
        block_if_queue_full: bool = False,
        batching_enabled: bool | None = None,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS,
        chunking_enabled: bool = False,
        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
        lazy_start_partitioned_producers: bool = False,
        properties: dict[str, str] | None = None,
        batching_type: BatchingType = BatchingType.Default,
        encryption_key: str | list[str] | None = None,
        crypto_key_reader: CryptoKeyReader | None = None,
        access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
        message_router: Callable[[Message, int], int] | None = None,
    ) -> Producer | PartitionedProducer:
        """pulsar-client's `create_producer` (its order of parameters; `schema` is not there yet).
        `batching_enabled`: on by default (pulsar-client's is off: here each request is an AWS
        call), unless `chunking_enabled`; both True is pulsar-client's ValueError.
        `encryption_key` (a key name, or Magnetar's list of names) with `crypto_key_reader`
        encrypts every message end to end (docs/semantics.md). `initial_sequence_id`: the first message gets
        the next one. Accepted without effect: `max_pending_messages_across_partitions`,
        `block_if_queue_full` (a full queue always blocks `send`), `lazy_start_partitioned_producers`
        (partition producers cost nothing until they send) and `properties`."""
        batching_enabled = check_producer_arguments(**{k: v for k, v in locals().items() if k != "self"})
        name = _topic(topic)
        options: dict[str, Any] = {
            "batching_enabled": batching_enabled, "batching_max_messages": batching_max_messages,
            "batching_max_allowed_size_in_bytes": batching_max_allowed_size_in_bytes,
            "batching_max_publish_delay_ms": batching_max_publish_delay_ms,
            "send_timeout_millis": send_timeout_millis, "compression_type": compression_type,
            "chunking_enabled": chunking_enabled, "access_mode": access_mode, "batching_type": batching_type,
            "max_pending_messages": max_pending_messages, "initial_sequence_id": initial_sequence_id,
            "encryptor": crypto.encryptor(encryption_key, crypto_key_reader, compression_type),
            "attach": True,  # registers the producer (limits, quotas, stats); a named one resumes its sequence
            "pacers": self._pacers, "publish_groups": self._publish_groups,
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
        return cast(Producer, typed_producer(self._transport, name, producer, schema))  # `schema=`: client/schema.py

    # --- consumers -----------------------------------------------------------------------------
    def subscribe(
        self,
        topic: str | list[str] | re.Pattern[str] | None,
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        schema: Schema = DEFAULT_SCHEMA,
        message_listener: Callable[[Any, Message], None] | None = None,
        receiver_queue_size: int = 1000,
        max_total_receiver_queue_size_across_partitions: int = 50000,
        consumer_name: str | None = None,
        unacked_messages_timeout_ms: int | None = None,
        broker_consumer_stats_cache_time_ms: int = 30000,
        negative_ack_redelivery_delay_ms: int = 60_000,
        is_read_compacted: bool = False,
        properties: dict[str, str] | None = None,
        pattern_auto_discovery_period: int = 60,
        initial_position: InitialPosition = InitialPosition.Latest,
        crypto_key_reader: CryptoKeyReader | None = None,
        replicate_subscription_state_enabled: bool = False,
        max_pending_chunked_message: int = 10,
        auto_ack_oldest_chunked_message_on_queue_full: bool = False,
        start_message_id_inclusive: bool = False,
        batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
        key_shared_policy: ConsumerKeySharedPolicy | None = None,
        batch_index_ack_enabled: bool = False,
        regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly,
        dead_letter_policy: ConsumerDeadLetterPolicy | None = None,
        crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL,
        pattern: str | re.Pattern[str] | None = None,
        retry_enable: bool = False,
        expire_time_of_incomplete_chunked_message_ms: int = 60_000,
        delivery: str | None = None,
        priority_level: int = 0,
    ) -> Consumer | MultiTopicsConsumer | PushConsumer:
        """pulsar-client's `subscribe` (its order of parameters; `schema` is not there yet;
        `crypto_key_reader` and `crypto_failure_action` for encrypted messages), then Magnetar's:
        `pattern` (a regex, as `topic` may be), `retry_enable`, `expire_time_of_incomplete_chunked_message_ms`,
        `delivery` overriding the client's ("auto", "push" or "poll") for this consumer, and
        `priority_level` (Pulsar's consumer priorityLevel, 0 the highest, which the Java client and
        the C++ configuration have: a Failover subscription's active consumers are those of the
        highest level attached).

        `regex_subscription_mode` picks the domains a pattern lists (persistent, non-persistent or
        both; the pattern's own `persistent://` prefix is not a filter, as in Pulsar).
        `is_read_compacted`: below the compaction horizon (as it is at subscribe) the consumer gets
        only what the compacted view holds, the rest is acknowledged for it (client/compacted.py),
        long-polling and pushed consumers alike.
        `key_shared_policy` (Key_Shared): AutoSplit or Sticky hash ranges and
        `allow_out_of_order_delivery`, as Pulsar; overlapping Sticky ranges raise
        `ConsumerAssignError`, a mode mismatch with the subscription's consumers `ConsumerBusy`;
        long-polling consumers only for Sticky or out-of-order (Pulsar's WebSocket API has no
        such parameter). `start_message_id_inclusive`: a subscription created at Latest starts
        at the last message (its whole entry), long-polling and pushed consumers. Accepted without
        effect yet (docs/semantics.md): `max_pending_chunked_message`,
        `auto_ack_oldest_chunked_message_on_queue_full`, `batch_index_ack_enabled` (batch-index
        acknowledgement is always on), `max_total_receiver_queue_size_across_partitions`,
        `broker_consumer_stats_cache_time_ms`, `replicate_subscription_state_enabled`, `properties`."""
        topic, replicate_subscription_state_enabled = check_subscribe_arguments(
            **{k: v for k, v in locals().items() if k != "self"})
        decryptor = crypto.decryptor(crypto_key_reader, crypto_failure_action)
        mode = _delivery(delivery) if delivery is not None else self._delivery
        if pattern is not None:
            topic = re.compile(pattern) if isinstance(pattern, str) else pattern
        discover: Callable[[], list[str]] | None = None
        if isinstance(topic, re.Pattern):
            regex: re.Pattern[str] = topic
            namespace = pattern_namespace(regex)
            unscoped = without_domain(regex)

            def discover_topics() -> list[str]:
                return self._expand(matching(unscoped, namespace_topics(self._transport, namespace, regex_subscription_mode)))

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
        if pushed and consumer_type == ConsumerType.KeyShared and key_shared_policy is not None and (
                key_shared_policy.key_shared_mode == KeySharedMode.Sticky
                or key_shared_policy.allow_out_of_order_delivery):  # Pulsar's WebSocket API has no such parameter
            raise exceptions.InvalidConfiguration(
                "A Sticky or out-of-order key_shared_policy needs long polling (delivery='poll', persistent topics)")

        def make(partition_topic: str) -> Consumer:
            if partition_topic in pushed:
                return cast(Consumer, PushConsumer(  # the same methods, duck-typed for MultiTopicsConsumer
                    self._transport, self._websocket_url, _topic(partition_topic), subscription_name, consumer_type,
                    consumer_name, initial_position, unacked_messages_timeout_ms, receiver_queue_size,
                    batch_receive_policy, negative_ack_redelivery_delay_ms,
                    None if len(topics) > 1 or discover is not None else message_listener, decryptor=decryptor,
                    read_compacted=is_read_compacted, start_message_id_inclusive=start_message_id_inclusive,
                    priority_level=priority_level))
            return Consumer(
                self._transport, _topic(partition_topic), subscription_name, consumer_type, consumer_name,
                initial_position, unacked_messages_timeout_ms, receiver_queue_size, batch_receive_policy,
                negative_ack_redelivery_delay_ms, dead_letter_policy, None if len(topics) > 1 or discover is not None else message_listener,
                lambda t: self.create_producer(t, batching_enabled=False), retry_topic,
                expire_time_of_incomplete_chunked_message_ms, dead_letter_topic, decryptor=decryptor,
                read_compacted=is_read_compacted, key_shared_policy=key_shared_policy,
                start_message_id_inclusive=start_message_id_inclusive, priority_level=priority_level,
                replicate_subscription_state=replicate_subscription_state_enabled,
                receive_together=self._receive_together, idle_watch=mode == "auto",
            )

        check_consumer_schema(self._transport, topics, schema)  # IncompatibleSchema before subscribing
        message_listener = typed_listener(message_listener, schema)
        consumer: Consumer | MultiTopicsConsumer
        if len(topics) == 1 and discover is None:
            consumer = make(topics[0])
        else:
            consumer = MultiTopicsConsumer(subscription_name, make, topics, receiver_queue_size,
                                           batch_receive_policy, message_listener, discover,
                                           float(pattern_auto_discovery_period), consumer_name, self._poll_groups)
        self._closeables.append(consumer)
        return cast(Consumer, typed_consumer(consumer, schema))

    def _expand(self, topics: list[str]) -> list[str]:
        out: list[str] = []
        for t in topics:
            out.extend(self.get_topic_partitions(t))
        return out

    # --- readers -------------------------------------------------------------------------------
    def create_reader(self, topic: str, start_message_id: MessageId, schema: Schema = DEFAULT_SCHEMA,
                      reader_listener: Callable[[Any, Message], None] | None = None,
                      receiver_queue_size: int = 1000, reader_name: str | None = None,
                      subscription_role_prefix: str | None = None, is_read_compacted: bool = False,
                      crypto_key_reader: CryptoKeyReader | None = None, start_message_id_inclusive: bool = False,
                      crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL,
                      ) -> Reader | PartitionedReader:
        """pulsar-client's `create_reader` (its order; `schema` not there yet; `crypto_key_reader`
        and `crypto_failure_action` for encrypted messages: FAIL and DISCARD skip one it cannot
        decrypt). `reader_listener(reader, message)` is called for each message, in order, on the reader's thread. A reader holds no subscription here, so
        `reader_name` and `subscription_role_prefix` have no effect; `is_read_compacted` reads the
        compacted view (the latest value of each key up to the compaction horizon), then the topic."""
        check_type(str, topic, "topic")
        check_type(MessageId, start_message_id, "start_message_id")
        check_type(int, receiver_queue_size, "receiver_queue_size")
        check_type_or_none(str, reader_name, "reader_name")
        check_type_or_none(str, subscription_role_prefix, "subscription_role_prefix")
        check_type(bool, is_read_compacted, "is_read_compacted")
        check_type(bool, start_message_id_inclusive, "start_message_id_inclusive")
        check_type_or_none(CryptoKeyReader, crypto_key_reader, "crypto_key_reader")
        decryptor = crypto.decryptor(crypto_key_reader, crypto_failure_action)
        name = _topic(topic)
        check_type(Schema, schema, "schema")
        check_consumer_schema(self._transport, [str(name)], schema)
        reader_listener = typed_listener(reader_listener, schema)
        reader: Reader | PartitionedReader
        partitions = self._partitions(name)
        if partitions:
            if start_message_id not in (MessageId.earliest, MessageId.latest):
                raise exceptions.InvalidConfiguration(
                    "A reader of a partitioned topic starts at MessageId.earliest or MessageId.latest (then seek "
                    "to a message id), or read one partition")
            reader = PartitionedReader(str(name), [
                Reader(self._transport, name.partition(i), start_message_id, start_message_id_inclusive,
                       receiver_queue_size, decryptor=decryptor, read_compacted=is_read_compacted)
                for i in range(partitions)], reader_listener)
        else:
            reader = Reader(self._transport, name, start_message_id, start_message_id_inclusive,
                            receiver_queue_size, reader_listener, decryptor, read_compacted=is_read_compacted)
        self._closeables.append(reader)
        return cast(Reader, typed_reader(reader, schema))

    def create_table_view(self, topic: str, subscription_name: str | None = None,
                          schema: Schema = DEFAULT_SCHEMA) -> TableView:
        """pulsar-client's `create_table_view`: a key -> latest value map of the topic, kept up to
        date (client/table_view.py), built on a compacted read; it returns once the map holds what
        the topic held. `subscription_name` only names it (the read holds no subscription); values
        are decoded with `schema` (bytes by default)."""
        check_type(str, topic, "topic")
        check_type_or_none(str, subscription_name, "subscription_name")
        check_type(Schema, schema, "schema")
        name = _topic(topic)
        partitions = self._partitions(name)
        reader: Reader | PartitionedReader
        if partitions:
            reader = PartitionedReader(str(name), [Reader(self._transport, name.partition(i), MessageId.earliest,
                                                          read_compacted=True) for i in range(partitions)])
        else:
            reader = Reader(self._transport, name, MessageId.earliest, read_compacted=True)
        view = TableView(reader, topic, subscription_name, schema)
        self._closeables.append(view)
        return view

    def close(self) -> None:
        """Close every producer (after sending what they hold), consumer and reader, then the client
        (and its failover prober, or `ServiceInfoProvider`)."""
        self._close_provider()
        for item in reversed(self._closeables):
            with contextlib.suppress(exceptions.PulsarException):
                item.close()
        self._transport.close()
        self._drop_log_handler()

    def shutdown(self) -> None:
        """pulsar-client's immediate shutdown: the connection closes first, so nothing waits for
        ongoing operations; messages not yet acknowledged by the broker fail (`AlreadyClosed`)."""
        self._close_provider()
        self._transport.close()
        for item in reversed(self._closeables):
            with contextlib.suppress(exceptions.PulsarException):
                item.close()
        self._drop_log_handler()

    def _close_provider(self) -> None:
        self._closed = True
        provider, self._provider = self._provider, None
        if provider is not None:
            try:
                provider.close()
            except Exception:  # a user's provider failing to close must not keep the client open
                logging.getLogger(__name__).exception("closing the ServiceInfoProvider failed")

    def _drop_log_handler(self) -> None:
        if self._log_handler is not None:
            logging.getLogger("magnetar").removeHandler(self._log_handler)
            self._log_handler.close()
            self._log_handler = None
