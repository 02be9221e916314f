"""Powertools' HTTP API resolver with the current event kept per thread.

Powertools stores the event being resolved on a class attribute (`BaseRouter.current_event`),
which is right on Lambda, where an execution environment runs one invocation at a time. A
local runtime that runs concurrent invocations as threads of one process (ours, and any test
harness calling handlers from threads) would let one request read another's event. Keeping the
event per thread costs nothing on Lambda and makes the same handler correct in both places.
"""

from __future__ import annotations

import threading
from typing import Any, cast

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

_invocation = threading.local()


def current_event() -> APIGatewayProxyEventV2:
    """The request this thread is resolving (routers and their helpers read it from here)."""
    return cast(APIGatewayProxyEventV2, _invocation.event)


class HttpApiResolver(APIGatewayHttpResolver):
    @property  # type: ignore[override]
    def current_event(self) -> BaseProxyEvent:
        event: BaseProxyEvent = _invocation.event
        return event

    @current_event.setter
    def current_event(self, value: BaseProxyEvent) -> None:
        _invocation.event = value

    def resolve(self, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:  # type: ignore[override]
        _invocation.event = self._to_proxy_event(event)
        return super().resolve(event, context)
