"""Pulsar's function trigger: publish a value to the function's input and return what the
function publishes on its output next.

Before publishing, the output's end is noted (a reader from latest); the value is then published
to the first input (or the input named) and the output is read from that end until a message
arrives or the wait ends (408, Pulsar's "Request Timed Out"). A function without an output: the
value is published and nothing is awaited. The answer comes from the function itself, run by the
dispatcher (core/functions/dispatch.py) once the value is sealed, or from anything else that
consumes the input and publishes to the output.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from magnetar.core.entry import Batch, Message
from magnetar.core.errors import InvalidInput, RequestTimeout, TopicNotFound
from magnetar.core.naming import TopicName
from magnetar.functions.config import FunctionConfig

if TYPE_CHECKING:
    from magnetar.core.broker import Broker

DEFAULT_TRIGGER_TIMEOUT_MS = 10_000  # under API Gateway's 30 s integration timeout
POLL_S = 0.1


def _partitions(broker: Broker, topic: TopicName) -> list[TopicName]:
    count = broker.metadata.get_partitions(topic)
    return [topic.partition(i) for i in range(count)] if count else [topic]


def trigger(broker: Broker, config: FunctionConfig, value: bytes, topic: str | None = None,
            timeout_ms: int = DEFAULT_TRIGGER_TIMEOUT_MS) -> bytes | None:
    """Publish `value` to the input; the output's next message's value (None: no output topic)."""
    if topic:
        target = TopicName.parse(topic)
        if str(target) not in config.inputs:
            raise InvalidInput(f"Function {config.fqfn} doesn't consume topic {target}")
    elif config.inputs:
        target = TopicName.parse(config.inputs[0])
    else:
        raise InvalidInput(f"Function {config.fqfn} has no input topic to trigger (topicsPattern only): name one")
    outputs = _partitions(broker, TopicName.parse(config.output)) if config.output else []
    next_entry: dict[TopicName, int] = {}
    for output in outputs:
        try:
            next_entry[output] = broker.last_entry(output)[1] + 1
        except TopicNotFound:
            next_entry[output] = 0
    broker.writer.append(_partitions(broker, target)[0], Batch.of([Message(value)]),
                         f"trigger-{config.fqfn}-{uuid.uuid4().hex[:8]}")
    if not outputs:
        return None
    deadline = broker.clock.now_ms() + timeout_ms
    while True:
        for output, start in next_entry.items():
            try:
                entries = broker.read_entries(output, start, 16)
            except TopicNotFound:
                continue
            for entry in entries:
                next_entry[output] = entry.entry_id + 1
                if not entry.hole and entry.chunk is None and entry.messages:
                    return entry.messages[0].payload
        if broker.clock.now_ms() >= deadline:
            raise RequestTimeout(f"Request Timed Out: no message on {config.output} within {timeout_ms} ms")
        broker.clock.sleep(POLL_S)
