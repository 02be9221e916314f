"""The WebSocket function: Pulsar's WebSocket API behind an API Gateway WebSocket API.

Routes `$connect` (the Pulsar path arrives in the query parameter `path`, put there by the
CloudFront function in front of the API), `$default` (one client frame; the answer, if any, is
the route response) and `$disconnect`. It also takes the event it sends itself after a connect
(`{"magnetarBacklog": connectionId}`, an asynchronous invocation): API Gateway accepts pushes to a
connection only once $connect has returned, so the backlog is pushed from there.

Only parsing and shaping happen here; every decision is the core's (`magnetar.core.push`).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from magnetar.adapters.aws.connections import LambdaSelfInvoker, build_push
from magnetar.core.errors import MagnetarError
from magnetar.core.metrics.container import counted
from magnetar.security.identity import principal_of_websocket_connect

logger = Logger()
BACKLOG_EVENT = "magnetarBacklog"


@logger.inject_lambda_context(clear_state=True)
@counted
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if BACKLOG_EVENT in event:
        return {"pushed": build_push().deliver_backlog(str(event[BACKLOG_EVENT]))}
    request = event.get("requestContext") or {}
    route = request.get("routeKey")
    connection_id = str(request.get("connectionId", ""))
    if route == "$connect":
        return _connect(event, connection_id, context)
    if route == "$disconnect":
        build_push().disconnect(connection_id)
        return {"statusCode": 200}
    body = event.get("body")
    if body is not None and event.get("isBase64Encoded"):
        body = base64.b64decode(body).decode("utf-8", errors="replace")
    answer = build_push().receive_frame(connection_id, body)
    return {"statusCode": 200, "body": answer} if answer is not None else {"statusCode": 200}


def _connect(event: dict[str, Any], connection_id: str, context: LambdaContext) -> dict[str, Any]:
    params = {str(k): str(v) for k, v in (event.get("queryStringParameters") or {}).items()}
    path = params.pop("path", "")
    params.pop("token", None)  # a browser's credentials (Pulsar's WebSocket API), read by the authorizer
    try:
        connection = build_push().connect(connection_id, path, params, principal_of_websocket_connect(event))
    except MagnetarError as exc:  # the upgrade is refused with Pulsar's status and reason
        logger.info("connect refused", extra={"path": path, "status": exc.status, "reason": exc.reason})
        return {"statusCode": exc.status, "headers": {"Content-Type": "application/json"},
                "body": json.dumps({"reason": exc.reason})}
    if connection.has_backlog:
        LambdaSelfInvoker().invoke(context.invoked_function_arn, {BACKLOG_EVENT: connection_id})
    return {"statusCode": 200}
