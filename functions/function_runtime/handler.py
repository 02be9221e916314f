"""A registered function's Lambda: runs one invocation (a batch of input messages) with the
functions runtime and returns what to publish and acknowledge (magnetar.functions.invocation).
The code is the event's (read from the cluster's bucket once per execution environment and code
hash), or, in a MagnetarFunction's package, the file MAGNETAR_FUNCTION_PACKAGED_CODE names.

Locally (`MAGNETAR_FUNCTION_WORKERS=process`, as `magnetar local up` sets it) the code runs in a
worker process of the function's own (magnetar.local.function_workers), stopped when the
invocation's time is up, as Lambda stops an invocation at its timeout."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from magnetar.adapters.aws import build_broker
from magnetar.adapters.aws.telemetry import LambdaTelemetry
from magnetar.config import ENV_FUNCTION_PACKAGED_CODE
from magnetar.functions.invocation import FunctionHost

logger = Logger()
telemetry = LambdaTelemetry()


@cache
def _host() -> FunctionHost:
    packaged = os.environ.get(ENV_FUNCTION_PACKAGED_CODE)
    return FunctionHost(build_broker().functions, packaged=Path(__file__).parent / packaged if packaged else None)


@logger.inject_lambda_context(clear_state=True)
@telemetry.instrument
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    from magnetar.local.function_workers import ENV_FUNCTION_WORKERS

    if os.environ.get(ENV_FUNCTION_WORKERS) == "process":
        from magnetar.local.function_workers import WORKERS

        return WORKERS.invoke(event, timeout_s=context.get_remaining_time_in_millis() / 1000)
    return _host().handle(event)
