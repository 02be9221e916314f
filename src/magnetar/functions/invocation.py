"""One invocation of a registered function: the event the dispatcher sends, the result it gets
back, and the function's side (`FunctionHost.handle`), which runs the user code with the runtime
(functions/runtime.py) over the event's messages. Plain Python: the Lambda handler
(functions/function_runtime/handler.py) and the tests' in-process invoker both use it.

The event: `{"fqfn", "version", "messages": [{"messageId", "topic", "key", "properties",
"eventTime", "publishTime", "payload" (base64), "redeliveryCount"}]}`.

The result: `{"fqfn", "version", "results": [{"messageId", "action": "ack"|"nack"|"deadLetter"|
"none"}], "outputs": [{"topic", "payload" (base64), "properties", "key", "orderingKey",
"eventTime", "producerName", "sequenceId"}], "stats": {...}}`. The function does not publish or
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

if TYPE_CHECKING:
    from magnetar.client.message import Message, MessageId
    from magnetar.core.functions.registry import FunctionRegistry

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
            "producerName": message.producer_name()}


def message_of(data: dict[str, Any]) -> Message:
    from magnetar.client.message import Message, MessageId

    topic = str(data["topic"])
    return Message(base64.b64decode(data.get("payload") or ""), MessageId.from_text(str(data["messageId"]), topic),
                   topic, dict(data.get("properties") or {}), data.get("key") or "", int(data.get("publishTime") or 0),
                   int(data.get("eventTime") or 0), int(data.get("redeliveryCount") or 0),
                   str(data.get("producerName") or ""), data.get("orderingKey") or "")


def output_json(message: OutputMessage) -> dict[str, Any]:
    return {"topic": message.topic, "payload": base64.b64encode(message.payload).decode(),
            "properties": dict(message.properties), "key": message.partition_key,
            "orderingKey": message.ordering_key, "eventTime": message.event_timestamp,
            "producerName": message.producer_name, "sequenceId": message.sequence_id}


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
    as Pulsar's instance); state and counters go through the registry's store."""

    def __init__(self, registry: FunctionRegistry, workdir: Path | None = None) -> None:
        self.registry = registry
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="magnetar-functions-"))
        self._loaded: dict[tuple[str, str], Any] = {}  # (fqfn, code sha256) -> the loaded function
        self._lock = threading.Lock()

    def _function(self, fqfn: str, config: FunctionConfig, sha256: str, code: Callable[[], bytes]) -> Any:
        key = (fqfn, sha256)
        with self._lock:
            if key not in self._loaded:
                filename = PurePosixPath(config.py or "function.py").name
                directory = self.workdir / hashlib.sha256(f"{fqfn}:{sha256}".encode()).hexdigest()[:16]
                directory.mkdir(parents=True, exist_ok=True)
                path = directory / filename
                path.write_bytes(code())
                self._loaded = {k: v for k, v in self._loaded.items() if k[0] != fqfn}  # the former version's
                self._loaded[key] = load_function(path, config.className)
            return self._loaded[key]

    def handle(self, event: dict[str, Any]) -> dict[str, Any]:
        fqfn = str(event["fqfn"])
        tenant, namespace, name = fqfn.split("/", 2)
        record = self.registry.record(tenant, namespace, name)
        config = FunctionConfig.model_validate_json(record.config)
        function = self._function(fqfn, config, record.code_sha256, lambda: self.registry.code(record))
        outputs, acks = _RecordedOutputs(), _RecordedAcks()
        stopping = threading.Event()  # EFFECTIVELY_ONCE retries in place: not past the invocation's time
        timer = threading.Timer(float(event.get("timeoutMs") or DEFAULT_TIMEOUT_MS) / 1000, stopping.set)
        timer.daemon = True
        timer.start()
        runtime = FunctionRuntime(config, function, outputs, acks, state=self.registry.state_of(fqfn),
                                  function_version=str(record.version), retry_delay_s=RETRY_DELAY_S,
                                  stopping=stopping)
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
        return {"fqfn": fqfn, "version": record.version, "results": results,
                "outputs": [output_json(m) for m in outputs.sent],
                "stats": {"received": stats["receivedTotal"], "processed": stats["processedSuccessfullyTotal"],
                          "userExceptions": stats["userExceptionsTotal"],
                          "systemExceptions": stats["systemExceptionsTotal"],
                          "latencyMsTotal": runtime._stats.latency_total_ms,
                          "latencyCount": runtime._stats.latency_count,
                          "lastInvocation": stats["lastInvocation"] or 0,
                          "latestUserExceptions": stats["latestUserExceptions"],
                          "latestSystemExceptions": stats["latestSystemExceptions"]}}


class InProcessInvoker:
    """`FunctionInvoker` (core/functions/dispatch.py) running the code in this process, the event
    and the result through JSON as a Lambda invocation carries them (tests, local experiments)."""

    def __init__(self, host: FunctionHost) -> None:
        self.host = host
        self.invocations = 0

    def invoke(self, fqfn: str, event: dict[str, Any]) -> dict[str, Any]:
        self.invocations += 1
        result: dict[str, Any] = json.loads(json.dumps(self.host.handle(json.loads(json.dumps(event)))))
        return result
