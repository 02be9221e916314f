"""The functions runtime: a Pulsar Function's code loaded and run over batches of input
messages, by the processing guarantee's rules. Plain Python, no AWS: it talks to the world
through two ports, `Outputs` (publish) and `Acks` (acknowledge, negatively acknowledge), which
the SDK implements for `magnetar functions localrun` (functions/instance.py) and a memory
implementation for tests.

Per message (`process_batch`):

- past `maxMessageRetries` redeliveries (`redelivery_count() > maxMessageRetries`, when that is
  0 or more) it is sent to the dead-letter topic unprocessed and acknowledged once stored;
- the input is decoded by the topic's schema when it has one (records of an Avro or JSON topic
  arrive as dicts), else by Pulsar's IdentitySerDe;
- the function runs: a class (Pulsar's `Function`: `process(input, context)`, instantiated once)
  or a plain function (`process(input)`);
- a result other than None is published to the output topic (if any) with the input's key, event
  time and properties, plus Pulsar's `__pfn_input_topic__` and `__pfn_input_msg_id__`;
- ack order by the guarantee:
  - ATMOST_ONCE: acknowledged before the function is called (a crash or a failure loses it);
  - ATLEAST_ONCE: acknowledged once the output is stored (or at once when there is none); a
    failure (the function raised, or the publish failed) negatively acknowledges it: redelivered;
    after `maxMessageRetries` redeliveries a failing message goes to the dead-letter topic
    (`deadLetterTopic`, default `<input>-<subscription>-DLQ`, Pulsar's; see `subscription_name`) and is acknowledged;
  - EFFECTIVELY_ONCE: the output is published by a producer named after the function and the
    input's partition (`producer_name`) with a sequence id derived from the input's position
    (`sequence_id`), so the broker's deduplication drops a republished output (the input
    redelivered after a crash between publish and ack); acknowledged once stored. A failing
    message is retried in place (not redelivered after later ones) because deduplication drops
    any sequence id below the producer's last: up to `maxMessageRetries` times (forever with -1),
    then dead-lettered. A publish that fails ends the batch with `InstanceFailure` (Pulsar restarts
    the instance: the unacknowledged inputs come back in order).
- `autoAck` false: the runtime never acknowledges a processed message (the function calls
  `context.ack`); failures are still negatively acknowledged.

Stats (`stats()`): Pulsar's per-instance counters receivedTotal, processedSuccessfullyTotal,
systemExceptionsTotal, userExceptionsTotal, avgProcessLatency (ms), lastInvocation (epoch ms),
the latest user and system exceptions, and the user metrics (`context.record_metric`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import logging
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.functions.config import FunctionConfig, ProcessingGuarantees
from magnetar.functions.context import InstanceContext
from magnetar.functions.serde import IdentitySerDe, SerDe

if TYPE_CHECKING:
    from magnetar.client.message import Message, MessageId
    from magnetar.functions.state import FunctionState
    from magnetar.schema import Schema

log = logging.getLogger(__name__)
INPUT_TOPIC_PROPERTY = "__pfn_input_topic__"
INPUT_MSG_ID_PROPERTY = "__pfn_input_msg_id__"
BATCH_INDEX_BITS = 20  # sequence id = entry id << 20 | batch index + 1 (batches under 2^20 - 1 messages)
LATEST_EXCEPTIONS = 10
EFFECTIVELY_ONCE_RETRY_DELAY_S = 1.0


# --- the ports ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OutputMessage:
    """One message to publish. `producer_name` and `sequence_id` only for EFFECTIVELY_ONCE outputs."""

    topic: str
    payload: bytes
    properties: dict[str, str] = field(default_factory=dict)
    partition_key: str | None = None
    ordering_key: str | None = None
    event_timestamp: int | None = None
    sequence_id: int | None = None
    producer_name: str | None = None
    compression_type: Any = None  # magnetar.CompressionType
    options: dict[str, Any] = field(default_factory=dict)  # the rest of pulsar-client's send arguments


# done(None, message id) once stored; done(error, None) when it will not be
Done = Callable[[BaseException | None, "MessageId | None"], None]


class Outputs(Protocol):
    """Where outputs go: `send` stores a message asynchronously and calls `done` once it is
    stored (or failed); `flush` returns when every message sent so far is done."""

    def send(self, message: OutputMessage, done: Done) -> None: ...

    def flush(self) -> None: ...


class Acks(Protocol):
    """The input subscription: acknowledge, or negatively acknowledge (redeliver)."""

    def ack(self, message_id: MessageId) -> None: ...

    def nack(self, message_id: MessageId) -> None: ...


SchemaLookup = Callable[[str], "Schema | None"]


def _no_schema(topic: str) -> Schema | None:
    return None


class InstanceFailure(RuntimeError):
    """The instance cannot go on (EFFECTIVELY_ONCE: an output could not be stored); restart it."""


# --- loading the code ------------------------------------------------------------------------------
def load_function(code: str | Path | None, class_name: str) -> Any:
    """The function `class_name` names ("module.Class" or "module.function") in `code`: a .py
    file, a .zip (Pulsar's layout: `<name>/src` and `<name>/deps` on the import path, or modules
    at its root) or None (already importable). A class is instantiated once (its `process(input,
    context)` is called per message); a function is called as `process(input)`."""
    if not class_name:
        raise ValueError("className is required: module.Class or module.function")
    module_name, _, attr = class_name.rpartition(".")
    path = Path(code) if code else None
    if path is not None and path.suffix == ".py":
        sys.path.insert(0, str(path.parent.resolve()))
        name = module_name or path.stem
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        if path is not None and path.suffix == ".zip":
            _add_zip(path)
        if not module_name:
            raise ValueError(f"className {class_name!r}: give module.Class or module.function")
        importlib.invalidate_caches()
        sys.modules.pop(module_name, None)
        module = importlib.import_module(module_name)
    found = getattr(module, attr)
    return found() if inspect.isclass(found) else found


def _add_zip(path: Path) -> None:
    target = Path(tempfile.mkdtemp(prefix="magnetar-function-"))
    with zipfile.ZipFile(path) as archive:
        archive.extractall(target)
    base = target / path.stem
    for directory in (base / "deps", base / "src", base, target):
        if directory.is_dir():
            sys.path.insert(0, str(directory))


def subscription_name(config: FunctionConfig) -> str:
    """The function's subscription (`FunctionConfig.subscription`: subName, else
    `tenant.namespace.name`)."""
    return config.subscription


# --- EFFECTIVELY_ONCE's deduplication keys ----------------------------------------------------------
def producer_name(config: FunctionConfig, input_topic: str) -> str:
    """The output producer of one input partition: `<tenant>.<namespace>.<name>-<12 hex digits of
    the SHA-256 of the input partition's full name>` (stable across restarts and hosts)."""
    digest = hashlib.sha256(input_topic.encode()).hexdigest()[:12]
    return f"{config.tenant}.{config.namespace}.{config.name}-{digest}"


def sequence_id(message_id: MessageId) -> int:
    """The output's sequence id: the input's entry id * 2^20 + its batch index + 1 (0 for an
    unbatched message). Entry ids grow along a topic partition (across ledgers), so sequence ids
    grow with the input's position, as deduplication needs."""
    return (message_id.entry_id() << BATCH_INDEX_BITS) + max(message_id.batch_index(), -1) + 1


# --- the runtime ------------------------------------------------------------------------------------
@dataclass
class Outcome:
    """What `process_batch` did, by message id text."""

    acked: list[str] = field(default_factory=list)
    nacked: list[str] = field(default_factory=list)
    dead_lettered: list[str] = field(default_factory=list)
    published: int = 0
    user_exceptions: int = 0
    system_exceptions: int = 0

    @property
    def failed(self) -> list[str]:
        """Messages to be delivered again (Lambda's batchItemFailures)."""
        return list(self.nacked)


@dataclass
class _Stats:
    received: int = 0
    succeeded: int = 0
    system_exceptions: int = 0
    user_exceptions: int = 0
    latency_total_ms: float = 0.0
    latency_count: int = 0
    last_invocation: int = 0
    latest_user: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=LATEST_EXCEPTIONS))
    latest_system: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=LATEST_EXCEPTIONS))


class FunctionRuntime:
    def __init__(self, config: FunctionConfig, function: Any, outputs: Outputs, acks: Acks,
                 state: FunctionState | None = None, input_schema: SchemaLookup = _no_schema,
                 output_schema: SchemaLookup = _no_schema, instance_id: int = 0, function_id: str | None = None,
                 function_version: str = "0", logger: logging.Logger | None = None,
                 retry_delay_s: float = EFFECTIVELY_ONCE_RETRY_DELAY_S, stopping: threading.Event | None = None) -> None:
        self.config = config
        self.function = function
        self.outputs = outputs
        self.acks = acks
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.instance_id = instance_id
        self.function_id = function_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"magnetar-function:{config.fqfn}"))
        self.function_version = function_version
        self.input_topics = list(config.inputs) + ([config.topicsPattern] if config.topicsPattern else [])
        self.retry_delay_s = retry_delay_s
        self.stopping = stopping or threading.Event()
        self._plain = not hasattr(function, "process")
        self._serde = IdentitySerDe()
        self._stats = _Stats()
        self._lock = threading.Lock()
        logger = logger or logging.getLogger(f"magnetar.functions.{config.fqfn}")
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)  # the function's INFO lines are kept (Pulsar's level), whatever the root's
        self.context = InstanceContext(self, state, logger)

    @classmethod
    def load(cls, config: FunctionConfig, code: str | Path | None, outputs: Outputs, acks: Acks,
             **kwargs: Any) -> FunctionRuntime:
        return cls(config, load_function(code, config.className), outputs, acks, **kwargs)

    @property
    def guarantee(self) -> ProcessingGuarantees:
        return self.config.processingGuarantees

    # --- a batch ------------------------------------------------------------------------------------
    def process_batch(self, messages: Sequence[Message]) -> Outcome:
        """Process `messages` in order; returns when every output of the batch is stored (or
        failed) and every acknowledgement decided. Raises InstanceFailure (EFFECTIVELY_ONCE)."""
        outcome = Outcome()
        failure: list[BaseException] = []
        for message in messages:
            if self.stopping.is_set() or failure:
                break  # neither acknowledged nor not: redelivered to whoever comes next
            self._process_one(message, outcome, failure)
        self.outputs.flush()
        if failure:
            raise InstanceFailure(f"an output could not be stored: {failure[0]}") from failure[0]
        return outcome

    def _process_one(self, message: Message, outcome: Outcome, failure: list[BaseException]) -> None:
        with self._lock:
            self._stats.received += 1
        retries = self.config.maxMessageRetries
        if 0 <= retries < message.redelivery_count():
            self._dead_letter(message, outcome)
            return
        auto_ack = self.config.autoAck
        if self.guarantee is ProcessingGuarantees.ATMOST_ONCE and auto_ack:
            self._ack(message.message_id(), outcome)
        attempt = 0
        while True:
            result = self._call(message, outcome)
            if not isinstance(result, _Failed):
                break
            if self.guarantee is ProcessingGuarantees.ATMOST_ONCE:
                return  # acknowledged already: lost, as Pulsar's at-most-once
            if self.guarantee is ProcessingGuarantees.ATLEAST_ONCE:
                self._fail(message, outcome)
                return
            attempt += 1  # EFFECTIVELY_ONCE: again, in place
            if 0 <= retries < attempt + message.redelivery_count():
                self._dead_letter(message, outcome)
                return
            if self.stopping.wait(self.retry_delay_s):
                return
        with self._lock:
            self._stats.succeeded += 1
        value = result.value
        if value is None or not self.config.output:
            if auto_ack and self.guarantee is not ProcessingGuarantees.ATMOST_ONCE:
                self._ack(message.message_id(), outcome)
            return
        try:
            output = self._output(message, value)
        except Exception as exc:  # the result cannot be serialized: the function's output is wrong
            self._system_exception(exc, outcome)
            if self.guarantee is not ProcessingGuarantees.ATMOST_ONCE:
                self._fail(message, outcome)
            return
        self.outputs.send(output, self._stored_callback(message, outcome, failure))

    def _stored_callback(self, message: Message, outcome: Outcome, failure: list[BaseException]) -> Done:
        guarantee, auto_ack = self.guarantee, self.config.autoAck

        def done(error: BaseException | None, _: MessageId | None) -> None:
            if error is None:
                with self._lock:
                    outcome.published += 1
                if auto_ack and guarantee is not ProcessingGuarantees.ATMOST_ONCE:
                    self._ack(message.message_id(), outcome)
                return
            self._system_exception(error, outcome)
            if guarantee is ProcessingGuarantees.ATLEAST_ONCE:
                self._nack(message.message_id(), outcome)
            elif guarantee is ProcessingGuarantees.EFFECTIVELY_ONCE:
                failure.append(error)

        return done

    def _call(self, message: Message, outcome: Outcome) -> Any:
        try:
            value = self._input(message)
        except Exception as exc:
            self._system_exception(exc, outcome)
            return _Failed()
        started = time.monotonic()
        with self._lock:
            self._stats.last_invocation = int(time.time() * 1000)
        self.context.set_message(message)
        try:
            result = self.function(value) if self._plain else self.function.process(value, self.context)
        except Exception as exc:
            log.warning("%s: the function raised on %s: %r", self.config.fqfn, message.message_id(), exc)
            with self._lock:
                self._stats.user_exceptions += 1
                outcome.user_exceptions += 1
                self._stats.latest_user.append(_exception(exc))
            return _Failed()
        finally:
            self.context.set_message(None)
            elapsed_ms = (time.monotonic() - started) * 1000
            with self._lock:
                self._stats.latency_total_ms += elapsed_ms
                self._stats.latency_count += 1
        return _Ok(result)

    # --- inputs and outputs -------------------------------------------------------------------------
    def _input(self, message: Message) -> Any:
        schema = self.input_schema(message.topic_name())
        if schema is not None:
            return schema.decode_message(message)
        return self._serde.deserialize(message.data())

    def _encode(self, topic: str, value: Any, serde: SerDe) -> bytes:
        schema = self.output_schema(topic)
        if schema is not None and not isinstance(value, bytes):
            return schema.encode(value)
        return serde.serialize(value)

    def _output(self, message: Message, value: Any) -> OutputMessage:
        topic = self.config.output
        assert topic is not None
        properties = message.properties() | {INPUT_TOPIC_PROPERTY: message.topic_name(),
                                             INPUT_MSG_ID_PROPERTY: str(message.message_id())}
        exactly = self.guarantee is ProcessingGuarantees.EFFECTIVELY_ONCE
        return OutputMessage(
            topic, self._encode(topic, value, self._serde), properties,
            partition_key=message.partition_key() or None,
            ordering_key=message._ordering_key or None,
            event_timestamp=message.event_timestamp() or None,
            sequence_id=sequence_id(message.message_id()) if exactly else None,
            producer_name=producer_name(self.config, message.topic_name()) if exactly else None)

    def publish_from_context(self, topic: str, value: Any, serde: SerDe, properties: dict[str, str] | None,
                             compression_type: Any, callback: Callable[[Any, Any], None] | None,
                             conf: dict[str, Any]) -> None:
        """`context.publish`: not tied to the current message's acknowledgement (as Pulsar's Python
        runtime); `callback(result, message_id)` as pulsar-client's send_async."""
        from magnetar.client.types import Result

        props = dict(conf.pop("properties", None) or {}) | dict(properties or {})
        output = OutputMessage(
            topic, self._encode(topic, value, serde), props, partition_key=conf.pop("partition_key", None),
            ordering_key=conf.pop("ordering_key", None), event_timestamp=conf.pop("event_timestamp", None),
            sequence_id=conf.pop("sequence_id", None), compression_type=compression_type, options=conf)

        def done(error: BaseException | None, message_id: MessageId | None) -> None:
            if error is not None:
                self._system_exception(error, None)
            if callback is not None:
                callback(Result.Ok if error is None else _result_of(error), message_id)

        self.outputs.send(output, done)

    # --- acknowledgements ---------------------------------------------------------------------------
    def _ack(self, message_id: MessageId, outcome: Outcome) -> None:
        self.acks.ack(message_id)
        with self._lock:
            outcome.acked.append(str(message_id))

    def _nack(self, message_id: MessageId, outcome: Outcome) -> None:
        self.acks.nack(message_id)
        with self._lock:
            outcome.nacked.append(str(message_id))

    def _fail(self, message: Message, outcome: Outcome) -> None:
        """A failed message: redelivered, or dead-lettered when that was its last retry."""
        retries = self.config.maxMessageRetries
        if 0 <= retries <= message.redelivery_count():
            self._dead_letter(message, outcome)
        else:
            self._nack(message.message_id(), outcome)

    def dead_letter_topic(self, message: Message) -> str:
        from magnetar.core.naming import TopicName

        if self.config.deadLetterTopic:
            return self.config.deadLetterTopic
        return f"{TopicName.parse(message.topic_name()).partitioned_topic}-{subscription_name(self.config)}-DLQ"

    def _dead_letter(self, message: Message, outcome: Outcome) -> None:
        """The message as it came (payload, key, properties plus Pulsar's REAL_TOPIC and
        ORIGIN_MESSAGE_ID) to the dead-letter topic; acknowledged once stored."""
        properties = message.properties() | {"REAL_TOPIC": message.topic_name(),
                                             "ORIGIN_MESSAGE_ID": str(message.message_id())}
        output = OutputMessage(self.dead_letter_topic(message), message.data(), properties,
                               partition_key=message.partition_key() or None,
                               event_timestamp=message.event_timestamp() or None)

        def done(error: BaseException | None, _: MessageId | None) -> None:
            if error is None:
                with self._lock:
                    outcome.dead_lettered.append(str(message.message_id()))
                self._ack(message.message_id(), outcome)
            else:
                self._system_exception(error, outcome)
                self._nack(message.message_id(), outcome)

        self.outputs.send(output, done)

    # --- stats ---------------------------------------------------------------------------------------
    def _system_exception(self, exc: BaseException, outcome: Outcome | None) -> None:
        log.warning("%s: system exception: %r", self.config.fqfn, exc)
        with self._lock:
            self._stats.system_exceptions += 1
            self._stats.latest_system.append(_exception(exc))
            if outcome is not None:
                outcome.system_exceptions += 1

    def stats(self) -> dict[str, Any]:
        """Pulsar's function instance stats (FunctionInstanceStatsData's names)."""
        with self._lock:
            s = self._stats
            return {
                "receivedTotal": s.received,
                "processedSuccessfullyTotal": s.succeeded,
                "systemExceptionsTotal": s.system_exceptions,
                "userExceptionsTotal": s.user_exceptions,
                "avgProcessLatency": s.latency_total_ms / s.latency_count if s.latency_count else None,
                "lastInvocation": s.last_invocation or None,
                "latestUserExceptions": list(s.latest_user),
                "latestSystemExceptions": list(s.latest_system),
                "userMetrics": {k: m.as_dict() for k, m in self.context.metrics.items()},
            }


@dataclass
class _Ok:
    value: Any


class _Failed:
    pass


def _exception(exc: BaseException) -> dict[str, Any]:
    return {"exceptionString": repr(exc), "timestampMs": int(time.time() * 1000)}


def _result_of(error: BaseException) -> Any:
    from magnetar.client.types import Result

    name = type(error).__name__
    return getattr(Result, name, Result.UnknownError)
