"""One invocation of a registered function: the event the dispatcher sends, the result it gets
back, and the function's side (`FunctionHost.handle`), which runs the user code with the runtime
(functions/runtime.py) over the event's messages. Plain Python: the Lambda handler
(functions/function_runtime/handler.py) and the tests' in-process invoker both use it.

The event: `{"fqfn", "version", "config" (the FunctionConfig's JSON), "code": {"key", "size",
"sha256"} (the code's object in the cluster's bucket; absent for a function whose Lambda function
holds its code), "timeoutMs" (how long to process), "messages": [{"messageId", "topic", "key",
"properties", "eventTime", "publishTime", "payload" (base64), "redeliveryCount", "schemaVersion"}]}`:
the function's side reads nothing from the registry (its Lambda function's role needs no access to
it), only the code, its state and the topics' schemas.

The result: `{"fqfn", "version", "results": [{"messageId", "action": "ack"|"nack"|"deadLetter"|
"none"}], "outputs": [{"topic", "payload" (base64), "properties", "key", "orderingKey",
"eventTime", "producerName", "sequenceId", "schemaVersion"}], "stats": {...}}`. The function does not publish or
acknowledge itself: the outputs (the output topic's, `context.publish`'s, the log topic's lines,
dead letters) are stored by the dispatcher, in order, before it applies the acknowledgements.
Within the invocation an output counts as stored when it is recorded (the runtime's callbacks run
at once), so the runtime's decisions (ack after output) hold once the dispatcher stores them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from magnetar.functions.config import FunctionConfig
from magnetar.functions.runtime import Done, FunctionRuntime, InstanceFailure, OutputMessage, load_function
from magnetar.functions.schemas import RegistrySchemaSource, TopicSchemas

if TYPE_CHECKING:
    from magnetar.client.message import Message, MessageId
    from magnetar.core.functions.registry import FunctionRegistry
    from magnetar.core.ports.functions import FunctionRecord

log = logging.getLogger(__name__)
ACK, NACK, DEAD_LETTER, NONE = "ack", "nack", "deadLetter", "none"
DEFAULT_TIMEOUT_MS = 20_000  # a batch's processing stops after this (EFFECTIVELY_ONCE's retries in place)
RETRY_DELAY_S = 0.2


# --- the event's messages ----------------------------------------------------------------------
def message_json(message: Message) -> dict[str, Any]:
    mid = message.message_id()
    return {"messageId": f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}:{mid.batch_index()}",
            "topic": message.topic_name(), "key": message.partition_key() or None,
            "orderingKey": message._ordering_key or None, "properties": message.properties(),
            "eventTime": message.event_timestamp(), "publishTime": message.publish_timestamp(),
            "payload": base64.b64encode(message.data()).decode(), "redeliveryCount": message.redelivery_count(),
            "producerName": message.producer_name(), "schemaVersion": _version(message)}


def _version(message: Message) -> int | None:
    version = message.int_schema_version()
    return None if version < 0 else version


def invocation_event(record: FunctionRecord, config: FunctionConfig, messages: list[Message],
                     timeout_ms: int) -> dict[str, Any]:
    """The event of one invocation (the module's docstring)."""
    event: dict[str, Any] = {"fqfn": record.fqfn, "version": record.version, "config": record.config,
                             "timeoutMs": timeout_ms, "messages": [message_json(m) for m in messages]}
    if record.code_key:
        event["code"] = {"key": record.code_key, "size": record.code_size, "sha256": record.code_sha256}
    return event


def message_of(data: dict[str, Any]) -> Message:
    from magnetar.client.message import Message, MessageId

    topic = str(data["topic"])
    version = data.get("schemaVersion")
    return Message(base64.b64decode(data.get("payload") or ""), MessageId.from_text(str(data["messageId"]), topic),
                   topic, dict(data.get("properties") or {}), data.get("key") or "", int(data.get("publishTime") or 0),
                   int(data.get("eventTime") or 0), int(data.get("redeliveryCount") or 0),
                   str(data.get("producerName") or ""), data.get("orderingKey") or "",
                   _schema_version=version if isinstance(version, int) else None)


def output_json(message: OutputMessage, schema_version: int | None = None) -> dict[str, Any]:
    return {"topic": message.topic, "payload": base64.b64encode(message.payload).decode(),
            "properties": dict(message.properties), "key": message.partition_key,
            "orderingKey": message.ordering_key, "eventTime": message.event_timestamp,
            "producerName": message.producer_name, "sequenceId": message.sequence_id,
            "schemaVersion": schema_version}


# --- the function's side -------------------------------------------------------------------------
class _RecordedOutputs:
    """`Outputs` that record: the dispatcher stores them after the invocation."""

    def __init__(self) -> None:
        self.sent: list[OutputMessage] = []
        self._lock = threading.Lock()

    def send(self, message: OutputMessage, done: Done) -> None:
        with self._lock:
            self.sent.append(message)
        done(None, None)

    def flush(self) -> None:
        return None


class _RecordedAcks:
    def __init__(self) -> None:
        self.actions: dict[str, str] = {}

    def ack(self, message_id: MessageId) -> None:
        self.actions[_id_text(message_id)] = ACK

    def nack(self, message_id: MessageId) -> None:
        self.actions.setdefault(_id_text(message_id), NACK)


def _id_text(message_id: MessageId) -> str:
    return f"{message_id.ledger_id()}:{message_id.entry_id()}:{message_id.partition()}:{message_id.batch_index()}"


class _LogLines(logging.Handler):
    """The function's log lines (`context.get_logger()`) as outputs to its log topic."""

    def __init__(self, outputs: _RecordedOutputs, topic: str, fqfn: str) -> None:
        super().__init__(logging.INFO)
        self._outputs, self._topic, self._fqfn = outputs, topic, fqfn
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record).encode("utf-8")
            self._outputs.send(OutputMessage(self._topic, text, {"fqn": self._fqfn, "loglevel": record.levelname}),
                               lambda error, _: None)
        except Exception:
            self.handleError(record)


class FunctionHost:
    """Runs invocations of registered functions in one execution environment: the code is read
    from the registry's code store once per code hash and loaded once (a class instantiated once,
    as Pulsar's instance), or taken from the Lambda function's own package (`packaged`: a
    MagnetarFunction's); state and counters go through the registry's store, the topics' schemas
    come from the schema registry (looked up once per topic, as `localrun` does)."""

    def __init__(self, registry: FunctionRegistry, workdir: Path | None = None, packaged: Path | None = None) -> None:
        from magnetar.core.schema import SchemaRegistry

        self.registry = registry
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="magnetar-functions-"))
        self.packaged = packaged
        self._packaged_sha: str | None = None
        self.schemas = TopicSchemas(RegistrySchemaSource(SchemaRegistry(registry.metadata, registry.clock)))
        self._loaded: dict[tuple[str, str], Any] = {}  # (fqfn, code sha256) -> the loaded function
        self._lock = threading.Lock()

    def _code(self, event: dict[str, Any], fqfn: str) -> tuple[str, str | None, Callable[[], bytes]]:
        """(code sha256, its file name, a reader of its bytes): the event's code object, else the
        package's, else the registry record's (an event from before events named the code)."""
        code = event.get("code")
        if isinstance(code, dict) and code.get("key"):
            key, size = str(code["key"]), int(code.get("size") or 0)
            return (str(code.get("sha256") or key), PurePosixPath(key).name,
                    lambda: self.registry.segments.get_range(key, 0, size))
        if self.packaged is not None:
            if self._packaged_sha is None:
                self._packaged_sha = hashlib.sha256(self.packaged.read_bytes()).hexdigest()
            return self._packaged_sha, self.packaged.name, self.packaged.read_bytes
        tenant, namespace, name = fqfn.split("/", 2)
        record = self.registry.record(tenant, namespace, name)
        return record.code_sha256, None, lambda: self.registry.code(record)

    def _function(self, fqfn: str, config: FunctionConfig, sha256: str, code: Callable[[], bytes],
                  filename: str | None = None) -> Any:
        key = (fqfn, sha256)
        with self._lock:
            if key not in self._loaded:
                filename = PurePosixPath(filename or config.py or "function.py").name
                directory = self.workdir / hashlib.sha256(f"{fqfn}:{sha256}".encode()).hexdigest()[:16]
                directory.mkdir(parents=True, exist_ok=True)
                path = directory / filename
                path.write_bytes(code())
                self._loaded = {k: v for k, v in self._loaded.items() if k[0] != fqfn}  # the former version's
                self._loaded[key] = load_function(path, config.className)
            return self._loaded[key]

    def handle(self, event: dict[str, Any]) -> dict[str, Any]:
        fqfn = str(event["fqfn"])
        if isinstance(event.get("config"), str):
            config, version = FunctionConfig.model_validate_json(event["config"]), int(event.get("version") or 1)
        else:  # an event from before events carried the configuration
            tenant, namespace, name = fqfn.split("/", 2)
            record = self.registry.record(tenant, namespace, name)
            config, version = FunctionConfig.model_validate_json(record.config), record.version
        sha256, filename, code = self._code(event, fqfn)
        function = self._function(fqfn, config, sha256, code, filename)
        outputs, acks = _RecordedOutputs(), _RecordedAcks()
        stopping = threading.Event()  # EFFECTIVELY_ONCE retries in place: not past the invocation's time
        timer = threading.Timer(float(event.get("timeoutMs") or DEFAULT_TIMEOUT_MS) / 1000, stopping.set)
        timer.daemon = True
        timer.start()
        runtime = FunctionRuntime(config, function, outputs, acks, state=self.registry.state_of(fqfn),
                                  input_schema=self.schemas, output_schema=self.schemas,
                                  function_version=str(version), retry_delay_s=RETRY_DELAY_S, stopping=stopping)
        handler = _LogLines(outputs, config.logTopic, fqfn) if config.logTopic else None
        if handler is not None:
            runtime.context.logger.addHandler(handler)
        messages = [message_of(m) for m in event.get("messages") or []]
        try:
            outcome = runtime.process_batch(messages)
        except InstanceFailure as exc:  # cannot happen with recorded outputs; nothing is acknowledged then
            log.error("%s: %s", fqfn, exc)
            acks.actions.clear()
            outcome = None
        finally:
            timer.cancel()
            if handler is not None:
                runtime.context.logger.removeHandler(handler)
        dead = set(outcome.dead_lettered) if outcome is not None else set()
        results = []
        for message in messages:
            mid = _id_text(message.message_id())
            action = DEAD_LETTER if str(message.message_id()) in dead else acks.actions.get(mid, NONE)
            results.append({"messageId": mid, "action": action})
        stats = runtime.stats()
        return {"fqfn": fqfn, "version": version, "results": results,
                "outputs": [output_json(m, self._schema_version(m.topic)) for m in outputs.sent],
                "stats": {"received": stats["receivedTotal"], "processed": stats["processedSuccessfullyTotal"],
                          "userExceptions": stats["userExceptionsTotal"],
                          "systemExceptions": stats["systemExceptionsTotal"],
                          "latencyMsTotal": runtime._stats.latency_total_ms,
                          "latencyCount": runtime._stats.latency_count,
                          "lastInvocation": stats["lastInvocation"] or 0,
                          "latestUserExceptions": stats["latestUserExceptions"],
                          "latestSystemExceptions": stats["latestSystemExceptions"]}}


    def _schema_version(self, topic: str) -> int | None:
        try:
            return self.schemas.version(topic)
        except Exception as exc:  # stored without a version, as a value of bytes would be
            log.warning("the schema of %s could not be read: %r", topic, exc)
            return None


class InProcessInvoker:
    """`FunctionInvoker` (core/functions/dispatch.py) running the code in this process, the event
    and the result through JSON as a Lambda invocation carries them (tests, local experiments)."""

    def __init__(self, host: FunctionHost) -> None:
        self.host = host
        self.invocations = 0

    def invoke(self, fqfn: str, event: dict[str, Any], function_arn: str | None = None) -> dict[str, Any]:
        self.invocations += 1
        result: dict[str, Any] = json.loads(json.dumps(self.host.handle(json.loads(json.dumps(event)))))
        return result
