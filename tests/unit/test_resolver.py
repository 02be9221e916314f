"""Concurrent invocations in one process never see each other's event (the local runtime runs
Lambda invocations as threads)."""

from __future__ import annotations

import json
import threading
from typing import Any

from magnetar.api.resolver import HttpApiResolver


def _event(path: str, body: str) -> dict[str, Any]:
    return {
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "", "headers": {},
        "requestContext": {"http": {"method": "POST", "path": path, "protocol": "HTTP/1.1", "sourceIp": "1.1.1.1",
                                    "userAgent": ""}, "stage": "$default", "requestId": "r", "routeKey": "$default"},
        "body": body, "isBase64Encoded": False,
    }


def test_a_request_reads_its_own_body_while_another_is_resolved() -> None:
    app = HttpApiResolver()
    first_inside = threading.Event()
    second_done = threading.Event()

    @app.post("/echo/<name>")
    def echo(name: str) -> dict[str, Any]:
        if name == "first":
            first_inside.set()
            assert second_done.wait(5)  # the second request is resolved while this one runs
        return {"name": name, "body": app.current_event.body}

    results: dict[str, Any] = {}
    first = threading.Thread(target=lambda: results.update(first=app.resolve(_event("/echo/first", "A"), None)))
    first.start()
    assert first_inside.wait(5)
    results["second"] = app.resolve(_event("/echo/second", "B"), None)  # type: ignore[arg-type]
    second_done.set()
    first.join(5)
    assert json.loads(results["first"]["body"]) == {"name": "first", "body": "A"}
    assert json.loads(results["second"]["body"]) == {"name": "second", "body": "B"}
