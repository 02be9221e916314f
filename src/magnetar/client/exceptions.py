"""Exceptions of the SDK, named as the official pulsar-client's `pulsar.exceptions`."""

from __future__ import annotations


class PulsarException(Exception):
    """Base class of every SDK error; `reason` is the broker's explanation."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class Timeout(PulsarException):
    pass


class InvalidConfiguration(PulsarException):
    pass


class TopicNotFound(PulsarException):
    pass


class SubscriptionNotFound(PulsarException):
    pass


class NotAllowedError(PulsarException):
    pass


class ConsumerBusy(PulsarException):
    pass


class ProducerFenced(PulsarException):
    """Another producer holds the topic exclusively."""


class MessageTooBig(PulsarException):
    pass


class AlreadyClosed(PulsarException):
    pass


class ServiceUnitNotReady(PulsarException):
    """The broker asked for a retry (503) and the retries ran out."""


class ConnectError(PulsarException):
    pass


class AuthenticationError(ConnectError):
    """401: the client presented no credentials, or invalid or expired ones. A ConnectError too,
    as pulsar-client reports credentials the broker refuses (its connection is refused)."""


class AuthorizationError(PulsarException):
    """403: the caller's role is not allowed this operation."""


class ProducerBlockedQuotaExceededException(PulsarException):
    """The topic's backlog quota refuses producers (policy producer_exception)."""


class ProducerBlockedQuotaExceededError(PulsarException):
    """A publish held by the backlog quota (producer_request_hold) until the send timeout."""


class ProducerBusy(PulsarException):
    """The topic has its maximum number of producers."""


class CumulativeAcknowledgementNotAllowedError(InvalidConfiguration):
    """Cumulative acknowledgement on a Shared or Key_Shared subscription (Pulsar refuses it). Also an
    `InvalidConfiguration`, which the SDK raised for it before it had pulsar-client's name."""


class OperationNotSupported(PulsarException):
    """A Pulsar feature Magnetar does not (yet) provide."""


# The rest of pulsar-client's exception names, so that `except pulsar.X` ports unchanged. Magnetar
# raises the ones whose meaning it has; the others exist only for the names.
class UnknownError(PulsarException):
    pass


class InvalidUrl(PulsarException):
    pass


class InvalidTopicName(PulsarException):
    pass


class InvalidMessage(PulsarException):
    pass


class LookupError(PulsarException):
    pass


class ReadError(PulsarException):
    pass


class ConsumerNotFound(PulsarException):
    pass


class ConsumerNotInitialized(PulsarException):
    pass


class ConsumerAssignError(PulsarException):
    pass


class ProducerNotInitialized(PulsarException):
    pass


class ProducerQueueIsFull(PulsarException):
    pass


class MemoryBufferIsFull(PulsarException):
    pass


class BrokerMetadataError(PulsarException):
    pass


class BrokerPersistenceError(PulsarException):
    pass


class ChecksumError(PulsarException):
    pass


class CryptoError(PulsarException):
    pass


class ErrorGettingAuthenticationData(PulsarException):
    pass


class IncompatibleSchema(PulsarException):
    pass


class Interrupted(PulsarException):
    pass


class NotConnected(PulsarException):
    pass


class TopicTerminated(PulsarException):
    pass


class TooManyLookupRequestException(PulsarException):
    pass


class UnsupportedVersionError(PulsarException):
    pass


class TransactionConflict(PulsarException):
    pass


class TransactionCoordinatorNotFoundError(PulsarException):
    pass


class TransactionNotFound(PulsarException):
    pass


class InvalidTxnStatusError(PulsarException):
    pass


def from_response(status: int, reason: str) -> PulsarException:
    if status == 405 and "Cumulative acknowledgement is not allowed" in reason:
        return CumulativeAcknowledgementNotAllowedError(reason, status)
    if status == 409 and reason.startswith(("Range conflict", "Ranges for KeyShared", "Fixed hash range")):
        return ConsumerAssignError(reason, status)
    if status == 409 and reason.startswith("Incompatible schema"):
        return IncompatibleSchema(reason, status)
    if status == 409 and "exclusive producer" in reason:
        return ProducerFenced(reason, status)
    if status == 409 and "backlog quota" in reason:
        return ProducerBlockedQuotaExceededException(reason, status)
    if status == 409 and "maximum number of producers" in reason:
        return ProducerBusy(reason, status)
    if status == 401:
        return AuthenticationError(reason, status)
    if status == 403:
        return AuthorizationError(reason, status)
    if status == 429:
        return ProducerBlockedQuotaExceededError(reason, status)
    if status == 404:
        return (SubscriptionNotFound if "ubscription" in reason or "onsumer" in reason else TopicNotFound)(reason, status)
    kind = {400: InvalidConfiguration, 405: NotAllowedError, 408: Timeout, 409: ConsumerBusy, 413: MessageTooBig, 503: ServiceUnitNotReady}
    return kind.get(status, PulsarException)(reason, status)
