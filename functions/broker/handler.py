"""The broker Lambda: the HTTP API (admin v2, produce, consume) behind API Gateway (payload v2).

The routes live in `magnetar.api.routes` (one router per resource, each route with the access it
requires); every decision is the core's (`magnetar.core`).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from magnetar.adapters.aws.telemetry import LambdaTelemetry
from magnetar.api.app import build_app

logger = Logger()
telemetry = LambdaTelemetry()  # EMF metrics at the end of each invocation, X-Ray spans when traced
app = build_app()  # one per execution environment (see magnetar.api.app)


@logger.inject_lambda_context(clear_state=True)
@telemetry.instrument
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
