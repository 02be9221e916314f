"""The core's refusals as Pulsar's ServerError codes (what an official client understands)."""

from __future__ import annotations

import logging

from magnetar.core import errors as core
from magnetar.core.schema.registry import IncompatibleSchema
from magnetar.protocol import pulsar_api_pb2 as pb

log = logging.getLogger(__name__)


class ProtocolError(core.MagnetarError):
    """A command the proxy refuses as such (not served, out of order): answered with `code`."""

    def __init__(self, reason: str, code: int = pb.NotAllowedError) -> None:
        super().__init__(reason)
        self.code = code


# most specific first: the first class an error is an instance of decides
_CODES: list[tuple[type[core.MagnetarError], int]] = [
    (core.TopicNotFound, pb.TopicNotFound),
    (core.SubscriptionNotFound, pb.SubscriptionNotFound),
    (core.NotFound, pb.TopicNotFound),
    (core.Unauthenticated, pb.AuthenticationError),
    (core.Forbidden, pb.AuthorizationError),
    (core.ConsumerBusy, pb.ConsumerBusy),
    (core.ConsumerLimitReached, pb.ConsumerBusy),
    (core.ConsumerAssignError, pb.ConsumerAssignError),
    (core.ProducerBusy, pb.ProducerBusy),
    (core.ProducerFenced, pb.ProducerFenced),
    (IncompatibleSchema, pb.IncompatibleSchema),
    (core.TopicLimitReached, pb.NotAllowedError),
    (core.TooManyRequests, pb.ServiceNotReady),  # held too long: the client retries
    (core.RetryableError, pb.ServiceNotReady),
    (core.PayloadTooLarge, pb.NotAllowedError),
    (core.NotAllowed, pb.NotAllowedError),
    (core.InvalidInput, pb.NotAllowedError),
    (core.Conflict, pb.NotAllowedError),
]


def server_error(exc: BaseException) -> tuple[int, str]:
    """(ServerError code, message) for an exception raised while serving a command."""
    if isinstance(exc, ProtocolError):
        return exc.code, exc.reason
    if isinstance(exc, core.BacklogQuotaExceeded):
        code = (pb.ProducerBlockedQuotaExceededError if exc.policy == "producer_request_hold"
                else pb.ProducerBlockedQuotaExceededException)
        return code, exc.reason
    if isinstance(exc, core.MagnetarError):
        for kind, code in _CODES:
            if isinstance(exc, kind):
                return code, exc.reason
        return pb.UnknownError, exc.reason
    log.warning("binary protocol: unexpected error", exc_info=exc)
    return pb.ServiceNotReady, f"Internal error: {type(exc).__name__}: {exc}"  # AWS hiccups: the client retries


# Refusals of a message itself: retrying it can never succeed
_PERMANENT = (core.InvalidInput, core.PayloadTooLarge, core.NotAllowed, IncompatibleSchema)


def send_error(exc: BaseException) -> tuple[int, str]:
    """(ServerError code, message) for a SEND that failed. The official clients drop a message
    answered with ChecksumError (its send fails at once) and answer any other code by reconnecting
    and sending it again: a message refused for what it is (empty, undecodable, too large, not
    served yet) is answered with ChecksumError, the reason in the message, so it fails instead of
    being sent again and again until the send timeout."""
    code, message = server_error(exc)
    if isinstance(exc, _PERMANENT):
        return pb.ChecksumError, f"Message refused: {message}"
    return code, message
