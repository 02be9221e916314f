"""Errors the core raises, each with the HTTP status the broker answers with.

The shape of the body, `{"reason": "..."}`, is Pulsar admin's error shape.
"""

from __future__ import annotations


class MagnetarError(Exception):
    """Base class: a refusal the caller can understand and act on."""

    status = 500

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidInput(MagnetarError):
    status = 400


class Unauthenticated(MagnetarError):
    """Missing, malformed or expired credentials (Pulsar's AuthenticationException)."""

    status = 401


class Forbidden(MagnetarError):
    """Authenticated, but the role holds no grant for this operation (Pulsar's 403)."""

    status = 403


class NotAllowed(MagnetarError):
    """The request is well-formed but the subscription's configuration forbids it."""

    status = 405


class NotFound(MagnetarError):
    status = 404


class TopicNotFound(NotFound):
    pass


class SubscriptionNotFound(NotFound):
    pass


class Conflict(MagnetarError):
    status = 409


class ConsumerBusy(Conflict):
    """Pulsar's ConsumerBusy: an exclusive subscription already has a consumer."""


class ConsumerAssignError(Conflict):
    """Pulsar's ConsumerAssignError: a Key_Shared Sticky consumer's hash ranges are invalid or
    overlap another consumer's."""


class AlreadyExists(Conflict):
    pass


class ProducerBusy(Conflict):
    """Pulsar's ProducerBusy for a topic at its maximum number of producers."""


class ConsumerLimitReached(Conflict):
    """Pulsar's ConsumerBusy for a topic at its maximum number of consumers."""


class ProducerFenced(Conflict):
    """Pulsar's ProducerFenced / ProducerBusy: another producer holds the topic exclusively."""


class BacklogQuotaExceeded(Conflict):
    """Pulsar's ProducerBlockedQuotaExceededException: the topic's backlog is over its quota and
    the policy refuses (producer_exception) or holds (producer_request_hold) new publishes."""

    def __init__(self, reason: str, policy: str = "producer_exception") -> None:
        super().__init__(reason)
        self.policy = policy


class PreconditionFailed(MagnetarError):
    """Pulsar's 412 Precondition Failed: the request contradicts the instance's state (a cluster
    still in use, clusters that do not exist, an invalid cluster name)."""

    status = 412


class TopicLimitReached(MagnetarError):
    """Pulsar's admin answer for a namespace at its maxTopicsPerNamespace (412 Precondition
    Failed, "Exceed maximum number of topics in namespace."). A topic created on first use gets
    Pulsar's client-side NotAllowedError instead (405, see ledger.ensure_topic)."""

    status = 412


class TooManyRequests(MagnetarError):
    """Back-pressure: the request was held as long as allowed; the client retries later."""

    status = 429


class PayloadTooLarge(MagnetarError):
    status = 413


class RequestTimeout(MagnetarError):
    """Nothing came within the wait a request allows (Pulsar's 408: a function trigger's output)."""

    status = 408


class RetryableError(MagnetarError):
    """A transient refusal: nothing was acknowledged, the client retries."""

    status = 503


class StalePolicies(RetryableError):
    """Policies changed between their read and a write conditional on it: read again and retry."""


class JournalRefused(RetryableError):
    """The journal refused every attempt of an append for certain (throttled, never a timeout or a
    broken connection whose request may still land): the record is not stored, and never will be."""


class ConfigurationUnavailable(RetryableError):
    """The configuration store's home replica cannot be reached (its region is out, or
    partitioned from this one): configuration changes are refused, nothing written, until it
    answers again; reads go on from this region's replica."""
