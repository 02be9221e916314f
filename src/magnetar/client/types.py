"""Enums of the official pulsar-client API."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from magnetar.client import exceptions


class ConsumerType(Enum):
    Exclusive = "Exclusive"
    Shared = "Shared"
    Failover = "Failover"
    KeyShared = "Key_Shared"


class InitialPosition(Enum):
    Latest = "Latest"
    Earliest = "Earliest"


class Result(Enum):
    """pulsar-client's results, with its numbers."""

    Ok = 0
    UnknownError = 1
    InvalidConfiguration = 2
    Timeout = 3
    LookupError = 4
    ConnectError = 5
    ReadError = 6
    AuthenticationError = 7
    AuthorizationError = 8
    ErrorGettingAuthenticationData = 9
    BrokerMetadataError = 10
    BrokerPersistenceError = 11
    ChecksumError = 12
    ConsumerBusy = 13
    NotConnected = 14
    AlreadyClosed = 15
    InvalidMessage = 16
    ConsumerNotInitialized = 17
    ProducerNotInitialized = 18
    ProducerBusy = 19
    TooManyLookupRequestException = 20
    InvalidTopicName = 21
    InvalidUrl = 22
    ServiceUnitNotReady = 23
    OperationNotSupported = 24
    ProducerBlockedQuotaExceededError = 25
    ProducerBlockedQuotaExceededException = 26
    ProducerQueueIsFull = 27
    MessageTooBig = 28
    TopicNotFound = 29
    SubscriptionNotFound = 30
    ConsumerNotFound = 31
    UnsupportedVersionError = 32
    TopicTerminated = 33
    CryptoError = 34
    IncompatibleSchema = 35
    ConsumerAssignError = 36
    CumulativeAcknowledgementNotAllowedError = 37
    TransactionCoordinatorNotFoundError = 38
    InvalidTxnStatusError = 39
    NotAllowedError = 40
    TransactionConflict = 41
    TransactionNotFound = 42
    ProducerFenced = 43
    MemoryBufferIsFull = 44
    Interrupted = 45

    @staticmethod
    def from_exception(exc: Exception) -> Result:
        named = getattr(Result, type(exc).__name__, None)
        if isinstance(named, Result):  # every SDK exception is named as its Result
            return named
        for cls, result in (
            (exceptions.Timeout, Result.Timeout),
            (exceptions.InvalidConfiguration, Result.InvalidConfiguration),
            (exceptions.TopicNotFound, Result.TopicNotFound),
            (exceptions.ConsumerBusy, Result.ConsumerBusy),
            (exceptions.MessageTooBig, Result.MessageTooBig),
            (exceptions.NotAllowedError, Result.NotAllowedError),
            (exceptions.ConnectError, Result.ConnectError),
            (exceptions.AlreadyClosed, Result.AlreadyClosed),
        ):
            if isinstance(exc, cls):
                return result
        return Result.UnknownError


@dataclass(frozen=True)
class ConsumerBatchReceivePolicy:
    """pulsar-client's batch-receive policy: `batch_receive()` returns when `max_num_message`
    messages (or `max_num_bytes`) are ready, or after `timeout_ms` with what there is."""

    max_num_message: int = -1
    max_num_bytes: int = 10 * 1024 * 1024
    timeout_ms: int = 100

    def __post_init__(self) -> None:
        for name in ("max_num_message", "max_num_bytes", "timeout_ms"):
            check_native(int, getattr(self, name), f"ConsumerBatchReceivePolicy {name}")


class CompressionType(Enum):
    NONE = "NONE"
    LZ4 = "LZ4"
    ZLib = "ZLIB"
    ZSTD = "ZSTD"
    SNAPPY = "SNAPPY"


class PartitionsRoutingMode(Enum):
    UseSinglePartition = 0
    RoundRobinDistribution = 1
    CustomPartition = 2


class ProducerAccessMode(Enum):
    """`ExclusiveWithFencing` takes the topic from the current exclusive producer, whose next write
    or lease renewal is refused (`ProducerFenced`), as Pulsar fences it."""

    Shared = "Shared"
    Exclusive = "Exclusive"
    WaitForExclusive = "WaitForExclusive"
    ExclusiveWithFencing = "ExclusiveWithFencing"


class KeySharedMode(Enum):
    AutoSplit = 0
    Sticky = 1


class RegexSubscriptionMode(Enum):
    PersistentOnly = 0
    NonPersistentOnly = 1
    AllTopics = 2


class ConsumerCryptoFailureAction(Enum):
    FAIL = 0
    DISCARD = 1
    CONSUME = 2


class LoggerLevel(Enum):
    Debug = 0
    Info = 1
    Warn = 2
    Error = 3


STICKY_HASH_MAX = 65535  # Pulsar's Key_Shared hash space: 0..65535


def _check_sticky_ranges(ranges: list[tuple[int, int]]) -> None:
    """pulsar-client's checks (its C++ KeySharedPolicy), with its messages: every bound within
    0..65535, no two ranges overlapping (a reversed range is left to the broker, as there)."""
    for start, end in ranges:
        if not (0 <= start <= STICKY_HASH_MAX and 0 <= end <= STICKY_HASH_MAX):
            raise ValueError(f"KeySharedPolicy Exception: Ranges must be [0, {STICKY_HASH_MAX}].")
    for i, (a_start, a_end) in enumerate(ranges):
        for b_start, b_end in ranges[i + 1:]:
            if max(a_start, b_start) <= min(a_end, b_end):
                raise ValueError("Ranges for KeyShared policy with overlap.")


class ConsumerKeySharedPolicy:
    """pulsar-client's Key_Shared policy, validated as pulsar-client validates it, for
    `subscribe(key_shared_policy=...)`: AutoSplit (the consumers split the hash range evenly) or
    Sticky with inclusive `sticky_ranges` of key hashes in 0..65535, checked by the broker;
    `allow_out_of_order_delivery` lets a key move to a new consumer at once (docs/semantics.md)."""

    def __init__(self, key_shared_mode: KeySharedMode = KeySharedMode.AutoSplit,
                 allow_out_of_order_delivery: bool = False,
                 sticky_ranges: list[tuple[int, int]] | None = None) -> None:
        if key_shared_mode == KeySharedMode.Sticky and sticky_ranges is None:
            raise ValueError("When using key_shared_mode = KeySharedMode.Sticky you must also provide sticky_ranges")
        check_native(KeySharedMode, key_shared_mode, "ConsumerKeySharedPolicy key_shared_mode")
        allow_out_of_order_delivery = native_flag(allow_out_of_order_delivery,
                                                  "ConsumerKeySharedPolicy allow_out_of_order_delivery")
        if sticky_ranges is not None and not (
                isinstance(sticky_ranges, list | tuple)
                and all(isinstance(r, tuple | list) and len(r) == 2 and all(type(b) is int for b in r)
                        for r in sticky_ranges)):
            raise TypeError("ConsumerKeySharedPolicy sticky_ranges: incompatible argument: a list of (start, end) "
                            "pairs of ints")
        _check_sticky_ranges(list(sticky_ranges or []))
        self._mode = key_shared_mode
        self._allow_out_of_order = allow_out_of_order_delivery
        self._ranges = list(sticky_ranges or [])

    @property
    def key_shared_mode(self) -> KeySharedMode:
        return self._mode

    @property
    def allow_out_of_order_delivery(self) -> bool:
        return self._allow_out_of_order

    @property
    def sticky_ranges(self) -> list[tuple[int, int]]:
        return list(self._ranges)


class ConsoleLogger:
    """pulsar-client's logger to standard output: here, the `magnetar` Python logger at `log_level`
    with a stream handler."""

    def __init__(self, log_level: LoggerLevel = LoggerLevel.Info) -> None:
        check_type(LoggerLevel, log_level, "log_level")
        self.log_level = log_level


class FileLogger:
    """pulsar-client's logger to a file: here, the `magnetar` Python logger appending to `log_file`."""

    def __init__(self, log_level: LoggerLevel, log_file: str) -> None:
        check_type(LoggerLevel, log_level, "log_level")
        check_type(str, log_file, "log_file")
        self.log_level = log_level
        self.log_file = log_file


def check_type(var_type: type | tuple[type, ...], var: object, name: str) -> None:
    """pulsar-client's `_check_type`: a wrong argument type is a ValueError, with its message."""
    if not isinstance(var, var_type):
        names = var_type.__name__ if isinstance(var_type, type) else "' or '".join(t.__name__ for t in var_type)
        raise ValueError(f"Argument {name} is expected to be of type '{names}' and not '{type(var).__name__}'")


def check_type_or_none(var_type: type | tuple[type, ...], var: object, name: str) -> None:
    """pulsar-client's `_check_type_or_none`."""
    if var is not None and not isinstance(var, var_type):
        names = var_type.__name__ if isinstance(var_type, type) else "' or '".join(t.__name__ for t in var_type)
        raise ValueError(f"Argument {name} is expected to be either None or of type '{names}'")


# What pulsar-client hands to its C++ library without a check of its own: there pybind11's
# conversion refuses a wrong type with a TypeError. These raise that TypeError, with a message of
# their own (pybind11's lists the C++ signatures).
def check_native(var_type: type, var: object, name: str) -> None:
    """A TypeError unless `var` converts to `var_type` as pybind11 converts: an `int` is an int
    or has `__index__` (not a float, not a str); a `str` a str; an enum one of its members."""
    if var_type is int:
        ok = isinstance(var, int) or (hasattr(type(var), "__index__") and not isinstance(var, float))
    else:
        ok = isinstance(var, var_type)
    if not ok:
        raise TypeError(f"{name}: incompatible argument: expected '{var_type.__name__}', got "
                        f"'{type(var).__name__}'")


def native_flag(var: object, name: str) -> bool:
    """A flag as pybind11 converts one: None is False, anything with `__bool__` (a bool, a number)
    its truth; anything else (a str, a list) a TypeError."""
    if var is None or hasattr(type(var), "__bool__"):
        return bool(var)
    raise TypeError(f"{name}: incompatible argument: expected 'bool', got '{type(var).__name__}'")


def check_properties(properties: object, name: str = "properties") -> None:
    """pulsar-client's checks of a properties map: a ValueError unless a dict (or None), then a
    TypeError for a key or value that is not a str (its C++ setter's)."""
    check_type_or_none(dict, properties, name)
    if isinstance(properties, dict) and not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in properties.items()):
        raise TypeError(f"{name} must map str to str (pulsar-client refuses other types with a TypeError too)")


@dataclass(frozen=True)
class ConsumerDeadLetterPolicy:
    """After `max_redeliver_count` redeliveries a message goes to `dead_letter_topic`
    (default `<topic>-<subscription>-DLQ`) instead of the application."""

    max_redeliver_count: int
    dead_letter_topic: str | None = None
    initial_subscription_name: str | None = None
    retry_letter_topic: str | None = None  # default `<topic>-<subscription>-RETRY` (with retry_enable)

    def __post_init__(self) -> None:
        """pulsar-client's checks: a count below 1 (or None) is a ValueError, other types a TypeError."""
        count: object = self.max_redeliver_count
        if count is not None and not isinstance(count, int | float):
            raise TypeError(f"'<' not supported between instances of '{type(count).__name__}' and 'int'")
        if count is None or count < 1:
            raise ValueError("max_redeliver_count must be greater than 0")
        check_native(int, count, "ConsumerDeadLetterPolicy max_redeliver_count")
        for name in ("dead_letter_topic", "initial_subscription_name", "retry_letter_topic"):
            value = getattr(self, name)
            if value is not None:
                check_native(str, value, f"ConsumerDeadLetterPolicy {name}")


class BatchingType(Enum):
    """Default: one batch for all messages; KeyBased: one batch per key, so that a Key_Shared
    subscription (which routes a batch by its key) never splits a key across consumers."""

    Default = 0
    KeyBased = 1
