"""The broker Lambda: the HTTP API (admin v2, produce, consume) behind API Gateway (payload v2).

The routes live in `magnetar.api.routes` (one router per resource, each route with the access it
requires); every decision is the core's (`magnetar.core`).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from magnetar.api.app import build_app
from magnetar.core.metrics.container import counted

logger = Logger()
app = build_app()  # one per execution environment (see magnetar.api.app)


@logger.inject_lambda_context(clear_state=True)
@counted
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
