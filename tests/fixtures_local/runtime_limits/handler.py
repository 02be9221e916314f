"""A tiny Lambda handler for tests/e2e/test_runtime_limits.py: it sleeps, answers big, echoes, and
records what it saw in the JSON-lines file named by RUNTIME_LIMITS_LOG (each execution
environment is its own import of this module, so the file is what they share)."""

from __future__ import annotations

import json
import os
import time
from typing import Any


def _record(kind: str, **fields: Any) -> None:
    path = os.environ.get("RUNTIME_LIMITS_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"kind": kind, **fields}) + "\n")


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    context_ = event.get("requestContext") or {}
    route = context_.get("routeKey")
    if route in ("$connect", "$disconnect", "$default") and "http" not in context_:  # the WebSocket API
        _record(route, status=context_.get("disconnectStatusCode"), reason=context_.get("disconnectReason"))
        if route == "$default":
            return {"statusCode": 200, "body": f"echo:{event.get('body', '')}"}
        return {"statusCode": 200}
    if "Records" in event:  # an event-source mapping batch
        _record("batch", records=len(event["Records"]))
        return {"batchItemFailures": []}
    if "marker" in event:  # an asynchronous (or direct) invocation
        time.sleep(float(event.get("sleep", 0)))
        _record("marker", marker=event["marker"])
        return {"done": event["marker"]}
    if event.get("detail-type") == "Scheduled Event":
        time.sleep(float(os.environ.get("RUNTIME_LIMITS_SCHEDULE_SLEEP", "0")))
        _record("scheduled")
        return {"ran": True}
    parts = (event.get("rawPath") or "/").strip("/").split("/")  # the HTTP API
    if parts[0] == "sleep":
        time.sleep(float(parts[1]))
        _record("slept", seconds=float(parts[1]))
        return {"statusCode": 200, "body": "slept"}
    if parts[0] == "big":
        return {"statusCode": 200, "body": "a" * int(parts[1])}
    return {"statusCode": 200, "body": "ok"}
