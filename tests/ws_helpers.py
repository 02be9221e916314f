"""A Pulsar WebSocket API client for the e2e tests: plain `websockets`, never the SDK."""

from __future__ import annotations

import base64
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

PUSH_WAIT_S = 10.0  # the journal consumer is polled every 0.2 s here (1 s on AWS): pushes come well within this


def ws_url(cluster: Any, path: str) -> str:
    return cluster.url.replace("http://", "ws://", 1) + path


def topic_path(topic: str) -> str:
    return topic.replace("://", "/", 1)


def new_topic(domain: str = "persistent") -> str:
    return f"{domain}://public/default/ws-{uuid.uuid4().hex[:10]}"


@contextlib.contextmanager
def open_ws(cluster: Any, path: str, headers: dict[str, str] | None = None) -> Iterator[ClientConnection]:
    with connect(ws_url(cluster, path), open_timeout=10, close_timeout=5, additional_headers=headers) as ws:
        yield ws


def refusal(cluster: Any, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """(status, body) of a connect the server refuses."""
    try:
        with connect(ws_url(cluster, path), open_timeout=10, additional_headers=headers):
            pass
    except InvalidStatus as exc:
        body = bytes(exc.response.body or b"")
        return exc.response.status_code, json.loads(body) if body else {}
    raise AssertionError(f"{path} was accepted")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def text_of(message: dict[str, Any]) -> str:
    return base64.b64decode(message["payload"]).decode()


def send(producer: ClientConnection, payload: str, context: str | None = None, **fields: Any) -> dict[str, Any]:
    """Publish one message and wait for its receipt."""
    frame: dict[str, Any] = {"payload": b64(payload), **fields}
    if context is not None:
        frame["context"] = context
    producer.send(json.dumps(frame))
    receipt: dict[str, Any] = json.loads(producer.recv(timeout=PUSH_WAIT_S))
    return receipt


def receive(ws: ClientConnection, count: int, timeout_s: float = PUSH_WAIT_S) -> list[dict[str, Any]]:
    """Exactly `count` pushed messages (fails if they do not come in time)."""
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"got {len(out)} of {count} messages in {timeout_s}s: {[text_of(m) for m in out]}")
        try:
            out.append(json.loads(ws.recv(timeout=left)))
        except TimeoutError:
            continue
    return out


def quiet(ws: ClientConnection, seconds: float) -> list[dict[str, Any]]:
    """Whatever is pushed within `seconds` (a test that expects nothing asserts it is empty)."""
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            out.append(json.loads(ws.recv(timeout=left)))
        except (TimeoutError, ConnectionClosed):
            break
    return out


def ack(ws: ClientConnection, message: dict[str, Any]) -> None:
    ws.send(json.dumps({"messageId": message["messageId"]}))
