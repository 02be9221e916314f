"""pulsar-client's configuration objects: `ProducerConfiguration`, `ConsumerConfiguration`,
`ReaderConfiguration`.

In pulsar-client they are its C++ library's (`_pulsar`), which `create_producer`, `subscribe` and
`create_reader` fill from their keyword arguments. Here they hold the same settings in Python, with
the C++ objects' accessors: `conf.send_timeout_millis()` reads a setting, `conf.send_timeout_millis(12)`
sets it (a wrong type is the TypeError pulsar-client raises) and returns the configuration, so
calls chain; `property(key, value)` adds a property; a few settings are set only (`encryption_key`,
`crypto_key_reader`, `message_router`, `message_listener`, `reader_listener`, as in pulsar-client).
`options()` gives what was set as the keyword arguments of the client's call:

    conf = magnetar.ProducerConfiguration().send_timeout_millis(5000).compression_type(CompressionType.LZ4)
    producer = client.create_producer(topic, **conf.options())

A setting never set reads as its default (the call's own; pulsar-client's C++ defaults where the
call has none) and is left out of `options()`, so the call's defaults apply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from magnetar.client.crypto import CryptoKeyReader
from magnetar.client.producer import DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS
from magnetar.client.types import (
    BatchingType,
    CompressionType,
    ConsumerBatchReceivePolicy,
    ConsumerCryptoFailureAction,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
)
from magnetar.schema import BytesSchema, Schema

C = TypeVar("C", bound="_Configuration")


Kind = type | tuple[type, ...] | None  # None: a callable (a listener, a router)


def _accepts(kind: Kind, value: object) -> bool:
    """What the C++ accessor takes: an int for an int (a bool too), a bool or an int for a flag."""
    if kind is None:
        return callable(value)
    if kind is int:
        return isinstance(value, int)
    if kind is bool:
        return isinstance(value, bool | int)
    return isinstance(value, kind)


class _Setting:
    """One accessor: called without an argument it reads the setting, with one it sets it.
    `keyword`: the client call's keyword argument it becomes in `options()`."""

    def __init__(self, kind: Kind, default: Any, keyword: str | None = None,
                 readable: bool = True, to_option: Callable[[Any], Any] | None = None) -> None:
        self.kind = kind
        self.default = default
        self.keyword = keyword
        self.readable = readable
        self.to_option = to_option
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        if self.keyword is None:
            self.keyword = name

    def __get__(self, conf: _Configuration | None, owner: type | None = None) -> Callable[..., Any]:
        if conf is None:
            return self.describe  # on the class: what the setting is

        def accessor(*value: Any) -> Any:
            if not value and self.readable:
                return conf._values.get(self.name, self.default)
            if len(value) != 1 or not _accepts(self.kind, value[0]):
                raise _incompatible(type(conf).__name__, self.name, value, self.kind, self.readable)
            conf._values[self.name] = bool(value[0]) if self.kind is bool else value[0]
            return conf

        accessor.__name__ = self.name
        accessor.__doc__ = f"pulsar-client's `{self.name}`: read it (no argument) or set it."
        return accessor


    def describe(self) -> tuple[str, Any]:
        """(the call's keyword, the default)."""
        assert self.keyword is not None
        return self.keyword, self.default


def _incompatible(owner: str, name: str, given: tuple[Any, ...], kind: Kind, readable: bool) -> TypeError:
    """pybind11's TypeError for a call the C++ accessor has no overload for."""
    if kind is None:
        names = "Callable"
    else:
        names = kind.__name__ if isinstance(kind, type) else " | ".join(k.__name__ for k in kind)
    supported = (f"(self: {owner}) -> value, " if readable else "") + f"(self: {owner}, arg0: {names}) -> {owner}"
    got = ", ".join(type(v).__name__ for v in given) or "nothing"
    return TypeError(f"{name}(): incompatible function arguments. The following argument types are supported: "
                     f"{supported}. Invoked with: {got}")


class _Configuration:
    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._properties: dict[str, str] = {}

    def property(self: C, key: str, value: str) -> C:
        """Add a property (pulsar-client's `property(key, value)`); `options()` gives them as `properties`."""
        if not isinstance(key, str) or not isinstance(value, str):
            raise _incompatible(type(self).__name__, "property", (key, value), str, False)
        self._properties[key] = value
        return self

    def options(self) -> dict[str, Any]:
        """The settings set so far, as keyword arguments of the client's call."""
        out: dict[str, Any] = {}
        for name, value in self._values.items():
            setting: _Setting = type(self).__dict__[name]
            assert setting.keyword is not None
            out[setting.keyword] = setting.to_option(value) if setting.to_option is not None else value
        if self._properties:
            out["properties"] = dict(self._properties)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options()})"


def _name_or_none(name: str) -> str | None:
    return name or None  # C++'s "" is the keyword's None: a name of the SDK's choosing


class ProducerConfiguration(_Configuration):
    """`create_producer`'s settings (pulsar-client's `_pulsar.ProducerConfiguration`)."""

    producer_name = _Setting(str, "", to_option=_name_or_none)
    schema = _Setting(Schema, BytesSchema())
    initial_sequence_id = _Setting(
        int, -1, to_option=lambda v: None if v < 0 else v)
    send_timeout_millis = _Setting(int, 30_000)
    compression_type = _Setting(CompressionType, CompressionType.NONE)
    max_pending_messages = _Setting(int, 1000)
    max_pending_messages_across_partitions = _Setting(int, 50_000)
    block_if_queue_full = _Setting(bool, False)
    batching_enabled = _Setting(bool, True)
    batching_max_messages = _Setting(int, 1000)
    batching_max_allowed_size_in_bytes = _Setting(int, 128 * 1024)
    batching_max_publish_delay_ms = _Setting(int, DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS)
    batching_type = _Setting(BatchingType, BatchingType.Default)
    chunking_enabled = _Setting(bool, False)
    partitions_routing_mode = _Setting(
        PartitionsRoutingMode, PartitionsRoutingMode.RoundRobinDistribution, keyword="message_routing_mode")
    lazy_start_partitioned_producers = _Setting(bool, False)
    access_mode = _Setting(ProducerAccessMode, ProducerAccessMode.Shared)
    encryption_key = _Setting(str, None, readable=False)
    crypto_key_reader = _Setting(CryptoKeyReader, None, readable=False)
    message_router = _Setting(None, None, readable=False)


class ConsumerConfiguration(_Configuration):
    """`subscribe`'s settings (pulsar-client's `_pulsar.ConsumerConfiguration`)."""

    consumer_type = _Setting(ConsumerType, ConsumerType.Exclusive)
    consumer_name = _Setting(str, "", to_option=_name_or_none)
    schema = _Setting(Schema, BytesSchema())
    message_listener = _Setting(None, None, readable=False)
    receiver_queue_size = _Setting(int, 1000)
    max_total_receiver_queue_size_across_partitions = _Setting(int, 50_000)
    unacked_messages_timeout_ms = _Setting(int, 0, to_option=lambda v: v or None)
    broker_consumer_stats_cache_time_ms = _Setting(int, 30_000)
    negative_ack_redelivery_delay_ms = _Setting(int, 60_000)
    read_compacted = _Setting(bool, False, keyword="is_read_compacted")
    pattern_auto_discovery_period = _Setting(int, 60)
    subscription_initial_position = _Setting(
        InitialPosition, InitialPosition.Latest, keyword="initial_position")
    crypto_key_reader = _Setting(CryptoKeyReader, None, readable=False)
    crypto_failure_action = _Setting(
        ConsumerCryptoFailureAction, ConsumerCryptoFailureAction.FAIL)
    replicate_subscription_state_enabled = _Setting(bool, False)
    max_pending_chunked_message = _Setting(int, 10)
    auto_ack_oldest_chunked_message_on_queue_full = _Setting(bool, False)
    start_message_id_inclusive = _Setting(bool, False)
    batch_receive_policy = _Setting(
        ConsumerBatchReceivePolicy, ConsumerBatchReceivePolicy())
    key_shared_policy = _Setting(ConsumerKeySharedPolicy, ConsumerKeySharedPolicy())
    batch_index_ack_enabled = _Setting(bool, False)
    regex_subscription_mode = _Setting(
        RegexSubscriptionMode, RegexSubscriptionMode.PersistentOnly)
    dead_letter_policy = _Setting(ConsumerDeadLetterPolicy, None)


class ReaderConfiguration(_Configuration):
    """`create_reader`'s settings (pulsar-client's `_pulsar.ReaderConfiguration`)."""

    reader_listener = _Setting(None, None, readable=False)
    schema = _Setting(Schema, BytesSchema())
    receiver_queue_size = _Setting(int, 1000)
    reader_name = _Setting(str, "", to_option=_name_or_none)
    subscription_role_prefix = _Setting(str, "", to_option=_name_or_none)
    read_compacted = _Setting(bool, False, keyword="is_read_compacted")
    crypto_key_reader = _Setting(CryptoKeyReader, None, readable=False)
    crypto_failure_action = _Setting(
        ConsumerCryptoFailureAction, ConsumerCryptoFailureAction.FAIL)
    start_message_id_inclusive = _Setting(bool, False)
