"""A registered function's Lambda: runs one invocation (a batch of input messages) with the
functions runtime and returns what to publish and acknowledge (magnetar.functions.invocation).
The code is read from the registry's code store once per execution environment and code hash.

Locally (`MAGNETAR_FUNCTION_WORKERS=process`, as `magnetar local up` sets it) every registered
function's invocations reach this one local function, which runs each function's code in a worker
process of its own (magnetar.local.function_workers)."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from magnetar.adapters.aws import build_broker
from magnetar.core.metrics.container import counted
from magnetar.functions.invocation import FunctionHost

logger = Logger()


@cache
def _host() -> FunctionHost:
    return FunctionHost(build_broker().functions)


@logger.inject_lambda_context(clear_state=True)
@counted
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    from magnetar.local.function_workers import ENV_FUNCTION_WORKERS

    if os.environ.get(ENV_FUNCTION_WORKERS) == "process":
        from magnetar.local.function_workers import WORKERS

        return WORKERS.invoke(event)
    return _host().handle(event)
