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
    Ok = 0
    UnknownError = 1
    InvalidConfiguration = 2
    Timeout = 3
    TopicNotFound = 4
    ConsumerBusy = 5
    MessageTooBig = 6
    NotAllowedError = 7
    ConnectError = 8
    AlreadyClosed = 9

    @staticmethod
    def from_exception(exc: Exception) -> Result:
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


class CompressionType(Enum):
    NONE = "NONE"
    LZ4 = "LZ4"
    ZLib = "ZLIB"
    ZSTD = "ZSTD"
    SNAPPY = "SNAPPY"


class PartitionsRoutingMode(Enum):
    RoundRobinDistribution = 0
    UseSinglePartition = 1
    CustomPartition = 2


class ProducerAccessMode(Enum):
    Shared = "Shared"
    Exclusive = "Exclusive"
    WaitForExclusive = "WaitForExclusive"


@dataclass(frozen=True)
class ConsumerDeadLetterPolicy:
    """After `max_redeliver_count` redeliveries a message goes to `dead_letter_topic`
    (default `<topic>-<subscription>-DLQ`) instead of the application."""

    max_redeliver_count: int
    dead_letter_topic: str | None = None
    initial_subscription_name: str | None = None
    retry_letter_topic: str | None = None  # default `<topic>-<subscription>-RETRY` (with retry_enable)


class BatchingType(Enum):
    """Default: one batch for all messages; KeyBased: one batch per key, so that a Key_Shared
    subscription (which routes a batch by its key) never splits a key across consumers."""

    Default = 0
    KeyBased = 1
