"""Pulsar's `Context` (`pulsar.Context`): what a function sees of its current message and of
itself, and what it can do besides returning a result (publish, ack, metrics, state).

`Context` is the interface, method for method Pulsar's; `InstanceContext` is the runtime's
implementation (functions/runtime.py creates one per function instance and points it at each
message in turn).

Secrets (`get_secret`): the function's `secrets` map (FunctionConfig.secrets) names each secret's
value. A value `{"env": "NAME"}` or the text `"env:NAME"` reads the environment variable NAME
when asked (None if unset); any other value is the secret itself, literally (Pulsar's
ClearTextSecretsProvider). A name the map lacks is None.
"""

from __future__ import annotations

import logging
import numbers
import os
import threading
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from magnetar.functions.serde import serde_class

if TYPE_CHECKING:
    from magnetar.client.message import Message, MessageId
    from magnetar.functions.runtime import FunctionRuntime
    from magnetar.functions.state import FunctionState

IDENTITY_SERDE = "serde.IdentitySerDe"


class Context:
    """Interface defining information available at process time (Pulsar's)."""

    @abstractmethod
    def get_message_id(self) -> Any:
        """The message id of the message being processed."""

    @abstractmethod
    def get_message_key(self) -> Any:
        """The key of the message being processed."""

    @abstractmethod
    def get_message_eventtime(self) -> Any:
        """The event time of the message being processed."""

    @abstractmethod
    def get_message_properties(self) -> Any:
        """The properties of the message being processed."""

    @abstractmethod
    def get_current_message_topic_name(self) -> Any:
        """The topic of the message being processed."""

    @abstractmethod
    def get_function_tenant(self) -> Any:
        """The function's tenant."""

    @abstractmethod
    def get_function_namespace(self) -> Any:
        """The function's namespace."""

    @abstractmethod
    def get_function_name(self) -> Any:
        """The function's name."""

    @abstractmethod
    def get_function_id(self) -> Any:
        """The function's id."""

    @abstractmethod
    def get_instance_id(self) -> Any:
        """The id of the instance executing the function."""

    @abstractmethod
    def get_function_version(self) -> Any:
        """The version of the function."""

    @abstractmethod
    def get_logger(self) -> Any:
        """The function's logger."""

    @abstractmethod
    def get_user_config_value(self, key: str) -> Any:
        """A user config value; None if the key is not there."""

    @abstractmethod
    def get_user_config_map(self) -> Any:
        """The whole user config (empty when none was given)."""

    @abstractmethod
    def get_secret(self, secret_name: str) -> Any:
        """A secret's value; None if there is none."""

    @abstractmethod
    def get_partition_key(self) -> Any:
        """The partition key of the input message, if any."""

    @abstractmethod
    def get_ordering_key(self) -> Any:
        """The ordering key of the input message, if any."""

    @abstractmethod
    def record_metric(self, metric_name: str, metric_value: Any) -> Any:
        """Record a value of a metric (a number)."""

    @abstractmethod
    def publish(self, topic_name: str, message: Any, serde_class_name: str = IDENTITY_SERDE,
                properties: dict[str, str] | None = None, compression_type: Any = None,
                callback: Callable[[Any, Any], None] | None = None,
                message_conf: dict[str, Any] | None = None) -> Any:
        """Publish `message` to `topic_name`, serialized by `serde_class_name`."""

    @abstractmethod
    def get_input_topics(self) -> Any:
        """The function's input topics."""

    @abstractmethod
    def get_output_topic(self) -> Any:
        """The function's output topic."""

    @abstractmethod
    def get_output_serde_class_name(self) -> Any:
        """The output's SerDe class."""

    @abstractmethod
    def ack(self, msgid: Any, topic: Any) -> Any:
        """Acknowledge a message id."""

    @abstractmethod
    def incr_counter(self, key: str, amount: int) -> Any:
        """Add `amount` to a counter of the function's state."""

    @abstractmethod
    def get_counter(self, key: str) -> Any:
        """A counter of the function's state."""

    @abstractmethod
    def del_counter(self, key: str) -> Any:
        """Delete a counter of the function's state."""

    @abstractmethod
    def put_state(self, key: str, value: Any) -> Any:
        """Set a value of the function's state."""

    @abstractmethod
    def get_state(self, key: str) -> Any:
        """A value of the function's state (bytes; None when unset)."""


class StateUnavailable(RuntimeError):
    """The function has no state store."""


@dataclass
class Metric:
    """A user metric's observations (`record_metric`)."""

    count: int = 0
    sum: float = 0.0
    min: float = float("inf")
    max: float = float("-inf")

    def observe(self, value: float) -> None:
        self.count += 1
        self.sum += value
        self.min = min(self.min, value)
        self.max = max(self.max, value)

    def as_dict(self) -> dict[str, float]:
        return {"count": self.count, "sum": self.sum, "min": self.min, "max": self.max}


def secret_value(secrets: dict[str, Any], name: str) -> Any:
    """A secret as the module docstring says: from the environment, or the value itself."""
    if name not in secrets:
        return None
    value = secrets[name]
    if isinstance(value, dict) and set(value) == {"env"}:
        return os.environ.get(str(value["env"]))
    if isinstance(value, str) and value.startswith("env:"):
        return os.environ.get(value[4:])
    return value


@dataclass
class InstanceContext(Context):
    """The runtime's Context: one per function instance, `message` the one being processed (per
    thread: a function may be driven by several threads)."""

    runtime: FunctionRuntime
    state: FunctionState | None = None
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("magnetar.functions"))
    metrics: dict[str, Metric] = field(default_factory=dict)
    _local: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- the current message ------------------------------------------------------------------
    def _message(self) -> Message:
        message: Message | None = getattr(self._local, "message", None)
        if message is None:
            raise RuntimeError("no message is being processed")
        return message

    def set_message(self, message: Message | None) -> None:
        self._local.message = message

    def get_message_id(self) -> MessageId:
        return self._message().message_id()

    def get_message_key(self) -> str:
        return self._message().partition_key()

    def get_message_eventtime(self) -> int:
        return self._message().event_timestamp()

    def get_message_properties(self) -> dict[str, str]:
        return self._message().properties()

    def get_current_message_topic_name(self) -> str:
        return self._message().topic_name()

    def get_partition_key(self) -> str:
        return self._message().partition_key()

    def get_ordering_key(self) -> str:
        return self._message().ordering_key()

    # --- the function --------------------------------------------------------------------------
    def get_function_tenant(self) -> str:
        return self.runtime.config.tenant

    def get_function_namespace(self) -> str:
        return self.runtime.config.namespace

    def get_function_name(self) -> str:
        return self.runtime.config.name

    def get_function_id(self) -> str:
        return self.runtime.function_id

    def get_instance_id(self) -> int:
        return self.runtime.instance_id

    def get_function_version(self) -> str:
        return self.runtime.function_version

    def get_logger(self) -> logging.Logger:
        return self.logger

    def get_user_config_value(self, key: str) -> Any:
        return self.runtime.config.userConfig.get(key)

    def get_user_config_map(self) -> dict[str, Any]:
        return dict(self.runtime.config.userConfig)

    def get_secret(self, secret_name: str) -> Any:
        return secret_value(self.runtime.config.secrets, secret_name)

    def get_input_topics(self) -> list[str]:
        return list(self.runtime.input_topics)

    def get_output_topic(self) -> str | None:
        return self.runtime.config.output

    def get_output_serde_class_name(self) -> str:
        return IDENTITY_SERDE

    def record_metric(self, metric_name: str, metric_value: Any) -> None:
        if not isinstance(metric_value, numbers.Number) or isinstance(metric_value, complex):
            raise TypeError(f"metric_value must be a number, not {type(metric_value).__name__}")
        with self._lock:
            self.metrics.setdefault(metric_name, Metric()).observe(float(metric_value))  # type: ignore[arg-type]

    # --- doing -----------------------------------------------------------------------------------
    def publish(self, topic_name: str, message: Any, serde_class_name: str = IDENTITY_SERDE,
                properties: dict[str, str] | None = None, compression_type: Any = None,
                callback: Callable[[Any, Any], None] | None = None,
                message_conf: dict[str, Any] | None = None) -> None:
        """Pulsar's publish: `message` serialized by the SerDe named (or, to a topic with a schema,
        encoded by the schema), sent asynchronously; `callback(result, message_id)` when stored.
        `message_conf` takes properties, partition_key, ordering_key, sequence_id,
        replication_clusters, disable_replication, event_timestamp (as pulsar-client's send)."""
        self.runtime.publish_from_context(topic_name, message, serde_class(serde_class_name)(), properties,
                                          compression_type, callback, dict(message_conf or {}))

    def ack(self, msgid: MessageId, topic: str | None = None) -> None:
        """Acknowledge a message id (functions with autoAck off)."""
        self.runtime.acks.ack(msgid)

    # --- state -------------------------------------------------------------------------------------
    def _state(self) -> FunctionState:
        if self.state is None:
            raise StateUnavailable("this function instance has no state store")
        return self.state

    def incr_counter(self, key: str, amount: int) -> int:
        return self._state().incr_counter(key, amount)

    def get_counter(self, key: str) -> int:
        return self._state().get_counter(key)

    def del_counter(self, key: str) -> None:
        self._state().del_counter(key)

    def put_state(self, key: str, value: bytes | str) -> None:
        """Set a value: bytes, or text stored as UTF-8."""
        self._state().put_state(key, value.encode("utf-8") if isinstance(value, str) else bytes(value))

    def get_state(self, key: str) -> bytes | None:
        return self._state().get_state(key)
