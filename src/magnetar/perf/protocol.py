"""`magnetar perf --protocol pulsar`: the run's producers and consumers are the official
pulsar-client's, through the binary protocol proxy (`pulsar://`), instead of the SDK's.

The SDK follows pulsar-client's Python API, so the runner's workers drive either with the same
calls; what differs is here: the module whose enums and results they use, the errors a consumer
loop survives, and how a client is made (the official one takes the proxy's URL and token).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import magnetar
from magnetar.client import exceptions
from magnetar.client.auth import Authentication, AuthenticationToken

PROTOCOLS = ("magnetar", "pulsar")


@dataclass(frozen=True)
class Api:
    """The client library a run drives: its module (enums, Result) and its errors."""

    module: ModuleType
    already_closed: type[BaseException]
    error: type[BaseException]

    def consumer_type(self, name: str) -> Any:
        return getattr(self.module.ConsumerType, "KeyShared" if name == "Key_Shared" else name)

    def batch_policy(self, messages: int, timeout_ms: int) -> Any:
        if self.module is magnetar:
            return magnetar.ConsumerBatchReceivePolicy(max_num_message=messages, timeout_ms=timeout_ms)
        return self.module.ConsumerBatchReceivePolicy(messages, 10 * 1024 * 1024, timeout_ms)  # pulsar's: positional


def api_of(protocol: str) -> Api:
    if protocol == "pulsar":
        import pulsar

        return Api(pulsar, pulsar.AlreadyClosed, pulsar.PulsarException)
    return Api(magnetar, exceptions.AlreadyClosed, exceptions.PulsarException)


def official_client(url: str, authentication: Authentication | None) -> Any:
    """pulsar-client on the proxy (a token, when the run has one, as pulsar's AuthenticationToken)."""
    import pulsar

    logger = logging.getLogger("pulsar-perf")
    logger.setLevel(logging.WARNING)
    auth = (pulsar.AuthenticationToken(authentication.token())
            if isinstance(authentication, AuthenticationToken) else None)
    return pulsar.Client(url, authentication=auth, operation_timeout_seconds=30, logger=logger)
