"""A function instance on the SDK (`magnetar functions localrun`): subscribes to the inputs with
the function's subscription, runs the runtime (functions/runtime.py) over what it receives,
publishes with the SDK's producers, acknowledges through the consumer, until stopped.

- subscription: `subscription_name(config)` (subName, else the fqfn as tenant.namespace.name), type `config.subscription_type`
  (Shared; Failover with retainOrdering; Key_Shared with retainKeyOrdering) — Failover always
  under EFFECTIVELY_ONCE, as Pulsar (one consumer per partition at a time, in order); initial
  position `subscriptionPosition`; `timeoutMs` is the consumer's ack timeout; a negatively
  acknowledged message comes back after `NACK_DELAY_MS`;
- EFFECTIVELY_ONCE: the output topic's deduplication is enabled as a topic policy when it is not
  on already (the broker deduplicates only where `deduplicationEnabled` holds; a topic policy
  needs a tenant admin's rights, so a role without them gets an error saying so), and the output
  producers send unbatched entries, each with its own sequence id;
- an `InstanceFailure` restarts the instance (a new client, consumer and producers), as Pulsar
  restarts a failed instance.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from magnetar.functions.config import FunctionConfig, ProcessingGuarantees
from magnetar.functions.runtime import (
    Done,
    FunctionRuntime,
    InstanceFailure,
    OutputMessage,
    load_function,
    subscription_name,
)
from magnetar.functions.schemas import HttpSchemaSource, TopicSchemas

if TYPE_CHECKING:
    from magnetar.client.auth import Authentication
    from magnetar.client.client import Client
    from magnetar.client.message import MessageId
    from magnetar.client.transport import Transport
    from magnetar.functions.state import FunctionState

log = logging.getLogger(__name__)
NACK_DELAY_MS = 1000
BATCH_MESSAGES = 100
BATCH_WAIT_MS = 200
RESTART_DELAY_S = 1.0


class SdkOutputs:
    """`Outputs` on the SDK: one producer per (topic, producer name, compression), created on
    first use (registering the topic's schema when it has one)."""

    def __init__(self, client: Client, schemas: Callable[[str], Any], batching: bool = True) -> None:
        self._client = client
        self._schemas = schemas
        self._batching = batching
        self._producers: dict[tuple[str, str | None, Any], Any] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition()
        self._pending = 0

    def _producer(self, message: OutputMessage) -> Any:
        from magnetar.client.schema import DEFAULT_SCHEMA
        from magnetar.client.types import CompressionType

        key = (message.topic, message.producer_name, message.compression_type)
        with self._lock:
            if key not in self._producers:
                schema = self._schemas(message.topic)
                producer = self._client.create_producer(
                    message.topic, producer_name=message.producer_name, schema=schema or DEFAULT_SCHEMA,
                    compression_type=message.compression_type or CompressionType.NONE,
                    batching_enabled=self._batching and message.sequence_id is None)
                # the runtime encodes with the topic's schema: bytes go through the untyped producer
                self._producers[key] = getattr(producer, "_producer", producer)
            return self._producers[key]

    def send(self, message: OutputMessage, done: Done) -> None:
        from magnetar.client.types import Result

        def callback(result: Any, message_id: MessageId | None) -> None:
            try:
                done(None if result == Result.Ok else RuntimeError(f"publish to {message.topic}: {result}"), message_id)
            finally:
                self._finish()

        with self._idle:
            self._pending += 1
        try:
            self._producer(message).send_async(
                message.payload, callback, properties=message.properties, partition_key=message.partition_key,
                ordering_key=message.ordering_key, sequence_id=message.sequence_id,
                event_timestamp=message.event_timestamp, **message.options)
        except Exception as exc:
            try:
                done(exc, None)
            finally:
                self._finish()

    def _finish(self) -> None:
        with self._idle:
            self._pending -= 1
            self._idle.notify_all()

    def flush(self) -> None:
        with self._lock:
            producers = list(self._producers.values())
        for producer in producers:
            producer.flush()
        with self._idle:
            while self._pending > 0:
                self._idle.wait(0.05)

    def close(self) -> None:
        with self._lock:
            producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            try:
                producer.close()
            except Exception as exc:  # closing: what failed is logged, the rest still closes
                log.warning("closing a producer: %r", exc)


class SdkAcks:
    """`Acks` on an SDK consumer."""

    def __init__(self, consumer: Any) -> None:
        self._consumer = consumer

    def ack(self, message_id: MessageId) -> None:
        self._consumer.acknowledge(message_id)

    def nack(self, message_id: MessageId) -> None:
        self._consumer.negative_acknowledge(message_id)


def ensure_deduplication(transport: Transport, topic: str) -> bool:
    """Deduplication on for `topic` (its topic policy set when neither it nor its namespace's
    has it; the topic created first if it does not exist); True when this call enabled it."""
    from magnetar.client import exceptions
    from magnetar.client.transport import topic_path
    from magnetar.core.naming import TopicName

    name = TopicName.parse(topic).partitioned_topic
    path = f"/admin/v2/{topic_path(name)}/deduplicationEnabled"
    namespace = f"/admin/v2/namespaces/{name.tenant}/{name.namespace}/deduplication"
    try:
        try:
            current = transport.call("GET", path)
        except exceptions.TopicNotFound:  # not created yet: created now, as its first producer would
            with contextlib.suppress(exceptions.ConsumerBusy):  # 409: created meanwhile
                transport.call("PUT", f"/admin/v2/{topic_path(name)}")
            current = None
        if current is True or (current is None and transport.call("GET", namespace) is True):
            return False
        transport.call("POST", path, True)
    except exceptions.AuthorizationError as exc:
        raise exceptions.AuthorizationError(
            f"EFFECTIVELY_ONCE needs deduplication on the output topic {name}; this role may not enable it "
            f"({exc.reason}): ask a tenant admin to enable it on the topic or its namespace", exc.status) from None
    return True


@dataclass
class InstanceOptions:
    service_url: str
    authentication: Authentication | None = None
    state: FunctionState | None = None
    instance_id: int = 0
    nack_delay_ms: int = NACK_DELAY_MS
    retry_delay_s: float = 1.0
    dedup_settle_s: float | None = None  # how long a newly enabled deduplication takes (the policy cache)


class LocalInstance:
    """One function instance in this process; `run()` until `stop()` (Ctrl-C: `stop` from the
    signal)."""

    def __init__(self, config: FunctionConfig, code: str | Path | None, options: InstanceOptions) -> None:
        self.config = config
        self.code = code
        self.options = options
        self.stopping = threading.Event()
        self.function = load_function(code, config.className)
        self.runtime: FunctionRuntime | None = None
        self.ready = threading.Event()  # subscribed: inputs published from now on are processed
        self.restarts = 0

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self._run_once()
            except InstanceFailure as exc:
                self.restarts += 1
                log.error("%s: restarting the instance: %s", self.config.fqfn, exc)
                self.stopping.wait(RESTART_DELAY_S)

    def _subscribe(self, client: Client) -> Any:
        import re

        import magnetar

        config = self.config
        kind = "Failover" if config.processingGuarantees is ProcessingGuarantees.EFFECTIVELY_ONCE \
            else config.subscription_type
        consumer_type = {t.value: t for t in magnetar.ConsumerType}[kind]
        topics: list[str] | re.Pattern[str] = re.compile(config.topicsPattern) if config.topicsPattern \
            else list(config.inputs)
        return client.subscribe(
            topics, subscription_name(config), consumer_type=consumer_type,
            initial_position=magnetar.InitialPosition[config.subscriptionPosition.value],
            unacked_messages_timeout_ms=config.timeoutMs, negative_ack_redelivery_delay_ms=self.options.nack_delay_ms,
            consumer_name=f"{config.name}-{self.options.instance_id}",
            batch_receive_policy=magnetar.ConsumerBatchReceivePolicy(BATCH_MESSAGES, timeout_ms=BATCH_WAIT_MS),
            delivery="poll", pattern_auto_discovery_period=10)

    def _run_once(self) -> None:
        import magnetar
        from magnetar.client.transport import Transport
        from magnetar.core.ledger.policy_cache import POLICY_CACHE_MS
        from magnetar.functions.runtime import FunctionRuntime

        config, options = self.config, self.options
        if not config.inputs and not config.topicsPattern:
            raise ValueError("a function needs --inputs or --topics-pattern")
        client = magnetar.Client(options.service_url, authentication=options.authentication)
        transport = Transport(options.service_url, authentication=options.authentication)
        outputs: SdkOutputs | None = None
        consumer: Any = None
        try:
            schemas = TopicSchemas(HttpSchemaSource(transport))
            exactly = config.processingGuarantees is ProcessingGuarantees.EFFECTIVELY_ONCE
            if exactly and config.output and ensure_deduplication(transport, config.output):
                settle = options.dedup_settle_s if options.dedup_settle_s is not None else POLICY_CACHE_MS / 1000
                log.info("%s: deduplication enabled on %s; in effect within %.0f s", config.fqfn, config.output, settle)
                self.stopping.wait(settle)
            outputs = SdkOutputs(client, schemas)
            consumer = self._subscribe(client)
            self.runtime = FunctionRuntime(
                config, self.function, outputs, SdkAcks(consumer), state=options.state, input_schema=schemas,
                output_schema=schemas, instance_id=options.instance_id, retry_delay_s=options.retry_delay_s,
                stopping=self.stopping)
            self._log_topic(outputs)
            self.ready.set()
            while not self.stopping.is_set():
                messages = consumer.batch_receive()
                if messages:
                    self.runtime.process_batch(messages)
        finally:
            self.ready.clear()
            for closing in (consumer, outputs, client, transport):
                if closing is not None:
                    try:
                        closing.close()
                    except Exception as exc:  # closing: the rest still closes
                        log.warning("closing %r: %r", closing, exc)
            _remove_log_handler(self.runtime)

    def _log_topic(self, outputs: SdkOutputs) -> None:
        if self.config.logTopic and self.runtime is not None:
            handler = LogTopicHandler(outputs, self.config.logTopic, self.config.fqfn)
            self.runtime.context.logger.addHandler(handler)


class LogTopicHandler(logging.Handler):
    """The function's log lines (`context.get_logger()`) published to its log topic, as Pulsar's
    `--log-topic` (the text; properties: fqfn, loglevel)."""

    def __init__(self, outputs: SdkOutputs, topic: str, fqfn: str) -> None:
        super().__init__(logging.INFO)
        self._outputs = outputs
        self._topic = topic
        self._fqfn = fqfn
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record).encode("utf-8")
            self._outputs.send(OutputMessage(self._topic, text, {"fqn": self._fqfn, "loglevel": record.levelname}),
                               lambda error, _: None)
        except Exception:
            self.handleError(record)


def _remove_log_handler(runtime: FunctionRuntime | None) -> None:
    if runtime is None:
        return
    for handler in list(runtime.context.logger.handlers):
        if isinstance(handler, LogTopicHandler):
            runtime.context.logger.removeHandler(handler)


def wait_ready(instance: LocalInstance, timeout_s: float = 30.0) -> None:
    """Block until `instance` has subscribed (tests, scripts)."""
    deadline = time.monotonic() + timeout_s
    while not instance.ready.wait(0.1):
        if time.monotonic() > deadline:
            raise TimeoutError("the function instance did not start")
