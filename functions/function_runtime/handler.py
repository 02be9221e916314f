"""A registered function's Lambda: runs one invocation (a batch of input messages) with the
functions runtime and returns what to publish and acknowledge (magnetar.functions.invocation).
The code is read from the registry's code store once per execution environment and code hash."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from magnetar.adapters.aws import build_broker
from magnetar.functions.invocation import FunctionHost

logger = Logger()


@cache
def _host() -> FunctionHost:
    return FunctionHost(build_broker().functions)


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return _host().handle(event)
