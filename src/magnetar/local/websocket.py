"""API Gateway WebSocket API emulation: Pulsar's `/ws/v2/...` -> WebSocket events -> the WebSocket function.

What it reproduces, on the HTTP API's port:
- the CloudFront function the stack puts in front of the API: the Pulsar path goes into the
  query parameter `path` (decoded), the other query parameters stay;
- `$connect` when a client opens a socket: a status of 400 or more refuses the upgrade with that
  status and the handler's body (Pulsar's `{"reason"}`), as API Gateway does;
- `$default` for each frame, invoked concurrently as API Gateway invokes the integration per
  frame; the route response (the handler's `body`), if any, goes back to the client;
- `$disconnect` when either side closes;
- the management API: `POST /@connections/{id}` (a frame; 413 over 128 KB), `GET` and `DELETE`,
  all `410 GoneException` for a connection that is not open — including while its `$connect`
  runs, since API Gateway opens a connection only once `$connect` has returned;
- with `AwsFidelity.limits`: the idle timeout (10 min without a client message) and the 2 h
  connection limit, both closing with 1001 "Going away"; with modeled latency, API Gateway's
  overhead per message. Message sizes (128 KB) are enforced always: a hard limit.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from magnetar.local.authorizers import LocalAuthorizers, Refused
from magnetar.local.fidelity import (
    AWS_TIMEOUTS,
    EMULATOR_AS_IS,
    WEBSOCKET_API_OVERHEAD,
    AwsFidelity,
    LatencyModel,
    RuntimeTimeouts,
)
from magnetar.local.lambda_runtime import LocalFunction, ResponseTooLarge, Throttled

log = logging.getLogger(__name__)


class _DenialIsNotAnError(logging.Filter):
    """uvicorn logs a refused upgrade (a denial response) as an error; it is how $connect refuses."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "returned without completing handshake" not in record.getMessage()


logging.getLogger("uvicorn.error").addFilter(_DenialIsNotAnError())
MAX_MESSAGE_BYTES = 128 * 1024  # API Gateway's WebSocket message limit, both ways
STAGE = "local"
GOING_AWAY = (1001, "Going away")  # how API Gateway closes an idle or a 2 h old connection


@dataclass
class _Socket:
    websocket: WebSocket
    connected_at: int
    source_ip: str
    user_agent: str
    last_active: int = 0
    closed: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    opened: float = field(default_factory=time.monotonic)  # for the timeouts (monotonic clock)
    last_message: float = field(default_factory=time.monotonic)
    closed_with: tuple[int, str] | None = None  # the code and reason API Gateway closed it with


def _now_ms() -> int:
    return int(time.time() * 1000)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _gone() -> Response:
    return JSONResponse({"message": None}, status_code=410, headers={"x-amzn-ErrorType": "GoneException"})


class LocalWebSocketApi:
    def __init__(self, function: LocalFunction, authorizers: LocalAuthorizers | None = None, *,
                 fidelity: AwsFidelity = EMULATOR_AS_IS, timeouts: RuntimeTimeouts = AWS_TIMEOUTS,
                 latency: LatencyModel | None = None) -> None:
        self.function = function
        self.authorizers = authorizers
        self.sockets: dict[str, _Socket] = {}
        self.timeouts = timeouts if fidelity.limits else None
        self.latency = latency if latency is not None else (LatencyModel(fidelity.seed) if fidelity.latency else None)

    async def _overhead(self) -> None:
        if self.latency is not None:
            await asyncio.sleep(self.latency.delay(WEBSOCKET_API_OVERHEAD))

    def routes(self) -> list[BaseRoute]:
        return [
            WebSocketRoute("/ws/v2/{path:path}", self.serve),
            Route("/@connections/{connection_id}", self.manage, methods=["POST", "GET", "DELETE"]),
        ]

    # --- the WebSocket API ----------------------------------------------------------------------
    def _event(self, route: str, connection_id: str, sock: _Socket | None, **extra: Any) -> dict[str, Any]:
        now = time.time()
        kinds = {"$connect": "CONNECT", "$disconnect": "DISCONNECT"}
        context: dict[str, Any] = {
            "routeKey": route,
            "eventType": kinds.get(route, "MESSAGE"),
            "extendedRequestId": uuid.uuid4().hex,
            "requestTime": datetime.fromtimestamp(now, UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "messageDirection": "IN",
            "stage": STAGE,
            "connectedAt": sock.connected_at if sock else int(now * 1000),
            "requestTimeEpoch": int(now * 1000),
            "identity": {"sourceIp": sock.source_ip if sock else "127.0.0.1",
                         "userAgent": sock.user_agent if sock else ""},
            "requestId": uuid.uuid4().hex,
            "domainName": "127.0.0.1",
            "connectionId": connection_id,
            "apiId": "local",
        }
        if route == "$default":
            context["messageId"] = uuid.uuid4().hex
        if route == "$disconnect":
            context["disconnectStatusCode"] = extra.pop("status", 1000)
            context["disconnectReason"] = extra.pop("reason", "")
        return {"requestContext": context, "isBase64Encoded": False, **extra}

    async def serve(self, websocket: WebSocket) -> None:
        connection_id = base64.urlsafe_b64encode(os.urandom(12)).decode()
        client = websocket.client
        sock = _Socket(websocket, _now_ms(), client.host if client else "127.0.0.1",
                       websocket.headers.get("user-agent", ""))
        params = dict(websocket.query_params.items())
        params["path"] = websocket.scope["path"]  # what the CloudFront function does (decoded)
        headers = dict(websocket.headers.items())
        event = self._event("$connect", connection_id, sock, headers=headers,
                            multiValueHeaders={k: [v] for k, v in headers.items()}, queryStringParameters=params,
                            multiValueQueryStringParameters={k: [v] for k, v in params.items()})
        if self.authorizers is not None:  # the $connect route's REQUEST authorizer
            try:
                event["requestContext"]["authorizer"] = await run_in_threadpool(
                    self.authorizers.websocket, connection_id, headers, dict(websocket.query_params.items()))
            except Refused as refused:
                await websocket.send_denial_response(JSONResponse(refused.body(), status_code=refused.status))
                return
        await self._overhead()
        try:
            result = await run_in_threadpool(self.function.invoke, event)
        except (Throttled, ResponseTooLarge) as exc:  # the connection is refused, as for a crash
            log.warning("%s on $connect: %s", self.function.name, exc)
            result = {"statusCode": 500, "body": json.dumps({"message": "Internal server error"})}
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            log.exception("%s crashed on $connect", self.function.name)
            result = {"statusCode": 500, "body": json.dumps({"message": "Internal server error"})}
        status = int((result or {}).get("statusCode", 200))
        if status >= 300:  # the upgrade is refused with the handler's status and reason
            await websocket.send_denial_response(
                Response((result or {}).get("body") or "", status_code=status, media_type="application/json"))
            return
        await websocket.accept()
        sock.opened = sock.last_message = time.monotonic()
        self.sockets[connection_id] = sock
        frames: set[asyncio.Task[None]] = set()
        status, reason = 1000, ""
        expiry = asyncio.create_task(self._expire(sock)) if self.timeouts is not None else None
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    status = int(message.get("code") or 1000)
                    reason = str(message.get("reason") or "")
                    break
                text = message.get("text")
                if text is None and message.get("bytes") is not None:
                    text = message["bytes"].decode("utf-8", errors="replace")
                sock.last_active = _now_ms()
                sock.last_message = time.monotonic()
                task = asyncio.create_task(self._frame(connection_id, sock, text or ""))
                frames.add(task)
                task.add_done_callback(frames.discard)
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            sock.closed = True
            self.sockets.pop(connection_id, None)
            if expiry is not None:
                expiry.cancel()
        if sock.closed_with is not None:  # API Gateway closed it (timeouts): $disconnect says so
            status, reason = sock.closed_with
        if frames:  # frames the client sent before closing are handled first (acknowledgements)
            await asyncio.wait(frames, timeout=10)
        event = self._event("$disconnect", connection_id, sock, status=status, reason=reason)
        try:
            await run_in_threadpool(self.function.invoke, event)
        except Throttled as exc:  # API Gateway delivers $disconnect at best effort: this one is lost
            log.warning("%s on $disconnect: %s", self.function.name, exc)
        except Exception:
            log.exception("%s crashed on $disconnect", self.function.name)

    async def _expire(self, sock: _Socket) -> None:
        """Close the connection as API Gateway does: idle (no client message) for the idle
        timeout, or open for the maximum connection duration; both with 1001 "Going away"."""
        assert self.timeouts is not None
        while not sock.closed:
            now = time.monotonic()
            deadline = min(sock.opened + self.timeouts.websocket_max_connection_s,
                           sock.last_message + self.timeouts.websocket_idle_s)
            if now >= deadline:
                sock.closed_with = GOING_AWAY
                await self._close(sock, *GOING_AWAY)
                return
            await asyncio.sleep(deadline - now)

    async def _frame(self, connection_id: str, sock: _Socket, text: str) -> None:
        if len(text.encode()) > MAX_MESSAGE_BYTES:
            await self._close(sock, 1009, "Message too big")
            return
        await self._overhead()
        event = self._event("$default", connection_id, sock, body=text)
        try:
            result = await run_in_threadpool(self.function.invoke, event)
        except BaseException as exc:  # API Gateway tells the client, and keeps the connection
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            if isinstance(exc, Throttled | ResponseTooLarge):
                log.warning("%s on $default: %s", self.function.name, exc)
            else:
                log.exception("%s crashed on $default", self.function.name)
            result = {"statusCode": 500}
            await self._send(sock, json.dumps({"message": "Internal server error", "connectionId": connection_id,
                                               "requestId": uuid.uuid4().hex}))
        body = (result or {}).get("body") if isinstance(result, dict) else None
        if body:
            await self._send(sock, str(body))

    async def _send(self, sock: _Socket, text: str) -> bool:
        async with sock.lock:
            if sock.closed:
                return False
            try:
                await sock.websocket.send_text(text)
                return True
            except Exception:
                sock.closed = True
                return False

    async def _close(self, sock: _Socket, code: int = 1000, reason: str = "") -> None:
        async with sock.lock:
            if sock.closed:
                return
            sock.closed = True
            with contextlib.suppress(Exception):
                await sock.websocket.close(code, reason)

    # --- the management API ---------------------------------------------------------------------
    async def manage(self, request: Request) -> Response:
        connection_id = unquote(request.path_params["connection_id"])
        sock = self.sockets.get(connection_id)
        if sock is None or sock.closed:
            return _gone()
        if request.method == "POST":
            await self._overhead()
            data = await request.body()
            if len(data) > MAX_MESSAGE_BYTES:
                return JSONResponse({"message": f"Message of {len(data)} bytes is too large"}, status_code=413,
                                    headers={"x-amzn-ErrorType": "PayloadTooLargeException"})
            if not await self._send(sock, data.decode("utf-8", errors="replace")):
                return _gone()
            return Response(status_code=200)
        if request.method == "GET":
            return JSONResponse({"ConnectedAt": _iso(sock.connected_at),
                                 "Identity": {"SourceIp": sock.source_ip, "UserAgent": sock.user_agent},
                                 "LastActiveAt": _iso(sock.last_active or sock.connected_at)})
        self.sockets.pop(connection_id, None)
        await self._close(sock)
        return Response(status_code=204)
