"""The functions' dispatcher Lambda (core/functions/dispatch.py), invoked asynchronously:

- `{"fqfn": ...}` (the journal consumer, once a sealed batch touched the function's inputs):
  serves that function while messages come, within the invocation's time (an invocation of the
  function and the storing of its outputs always fit in what is left);
- `{"backlog": true}` (the maintenance run): starts a dispatcher for every function with a
  backlog (redeliveries due, messages left by a dispatcher that ran out of time).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from magnetar.adapters.aws import build_broker
from magnetar.adapters.aws.functions import LambdaDispatcherInvoker, LambdaFunctionInvoker
from magnetar.adapters.aws.telemetry import LambdaTelemetry
from magnetar.core.functions.dispatch import FunctionDispatcher
from magnetar.core.functions.inputs import backlogged_functions

logger = Logger()
telemetry = LambdaTelemetry()


@logger.inject_lambda_context(clear_state=True)
@telemetry.instrument
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    broker = build_broker()
    if event.get("backlog"):
        started = backlogged_functions(broker)
        for fqfn in started:
            LambdaDispatcherInvoker(context.function_name).serve_async(fqfn)
        return {"started": started}
    named = event.get("fqfn")
    if not isinstance(named, str) or named.count("/") != 2:
        raise ValueError("'fqfn' must name a function: tenant/namespace/name")
    remaining = context.get_remaining_time_in_millis()
    report = FunctionDispatcher(broker, LambdaFunctionInvoker()).serve(named, remaining, remaining_ms=remaining)
    logger.info("served", extra={"report": report.__dict__})
    return dict(report.__dict__)
