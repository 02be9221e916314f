"""API Gateway HTTP API emulation: HTTP requests -> payload v2 events -> the broker handler."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from magnetar.config import SOURCE_CLUSTER_HEADER
from magnetar.core.errors import MagnetarError
from magnetar.local.authorizers import LocalAuthorizers, Refused
from magnetar.local.console import console_routes
from magnetar.local.fidelity import (
    AWS_TIMEOUTS,
    EMULATOR_AS_IS,
    HTTP_API_OVERHEAD,
    AwsFidelity,
    LatencyModel,
    RuntimeTimeouts,
)
from magnetar.local.lambda_runtime import LocalFunction, ResponseTooLarge, Throttled
from magnetar.local.network import LocalNetwork
from magnetar.local.scheduler import Schedule
from magnetar.local.websocket import LocalWebSocketApi

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 10 * 1024 * 1024  # HTTP API payload limit
MAX_INVOKE_BYTES = 6 * 1024 * 1024  # Lambda synchronous invocation payload limit, each way


class InboundReplication:
    """What other clusters' replicators sent this cluster (requests carrying the source cluster
    header), per source cluster: requests and request body bytes, the inter-region traffic a
    replicated topic costs (`/_magnetar/local/stats`, `replication_in`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, list[int]] = {}

    def add(self, source: str, body_bytes: int) -> None:
        with self._lock:
            counts = self._counts.setdefault(source, [0, 0])
            counts[0] += 1
            counts[1] += body_bytes

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {k: {"requests": v[0], "body_bytes": v[1]} for k, v in self._counts.items()}

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
_TEXT_TYPES = ("application/json", "text/", "application/x-www-form-urlencoded")


def _raw_path(request: Request) -> str:
    raw: bytes = request.scope.get("raw_path") or request.url.path.encode()
    return raw.decode("latin-1")


def http_api_event(request: Request, body: bytes) -> dict[str, Any]:
    content_type = request.headers.get("content-type", "")
    is_text = not body or any(content_type.startswith(t) for t in _TEXT_TYPES)
    if is_text and body:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:  # API Gateway passes a body that is not UTF-8 on base64-encoded
            is_text = False
    now = time.time()
    headers: dict[str, str] = {}
    for k, v in request.headers.items():  # repeated headers are comma-joined, as API Gateway does
        headers[k.lower()] = f"{headers[k.lower()]},{v}" if k.lower() in headers else v
    query: dict[str, str] = {}
    for k, v in request.query_params.multi_items():
        query[k] = f"{query[k]},{v}" if k in query else v
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": _raw_path(request),  # as API Gateway: still percent-encoded (routes unquote parameters)
        "rawQueryString": request.url.query,
        "headers": headers,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": request.url.hostname or "127.0.0.1",
            "domainPrefix": "local",
            "http": {
                "method": request.method,
                "path": request.url.path,
                "protocol": "HTTP/1.1",
                "sourceIp": request.client.host if request.client else "127.0.0.1",
                "userAgent": request.headers.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": datetime.fromtimestamp(now, UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now * 1000),
        },
        "isBase64Encoded": not is_text,
    }
    if query:
        event["queryStringParameters"] = query
    if body:
        event["body"] = body.decode("utf-8") if is_text else base64.b64encode(body).decode()
    return event


LAMBDA_CONCURRENCY = 256  # concurrent invocations the emulated function may run (long polls hold one)


def _signed_url(request: Request) -> str:
    """The URL as the client sent (and signed) it: the raw, still percent-encoded path."""
    query = request.scope.get("query_string") or b""
    host = request.headers.get("host", "127.0.0.1")
    return f"http://{host}{_raw_path(request)}" + (f"?{query.decode('latin-1')}" if query else "")


def _internal_error() -> Response:
    return JSONResponse({"message": "Internal Server Error"}, status_code=500)


def build_app(function: LocalFunction, schedules: dict[str, Schedule] | None = None,
              websocket: LocalFunction | None = None, authorizers: LocalAuthorizers | None = None,
              fidelity: AwsFidelity = EMULATOR_AS_IS, timeouts: RuntimeTimeouts = AWS_TIMEOUTS,
              latency: LatencyModel | None = None, network: LocalNetwork | None = None,
              inter_region_rtt_ms: float = 0.0) -> Starlette:
    """The HTTP API (and, with `websocket`, the WebSocket API) in front of `function`.

    With `fidelity.limits`, the integration times out after `timeouts.http_integration_s` (503,
    the function keeps running); with `latency` (a model shared with the functions' settings, or
    one of `fidelity`'s), API Gateway's own overhead is added to every request. With `network`
    (a cluster of a local instance), outages are staged through it and a replicator's request from
    a cluster off the network is refused, as a partition would, and `inter_region_rtt_ms` is added
    to every request another cluster's replicator makes (the round trip between two regions: the
    local clusters share one machine)."""
    inbound = InboundReplication()
    if latency is None and fidelity.latency:
        latency = LatencyModel(fidelity.seed)
    integration_timeout_s = timeouts.http_integration_s if fidelity.limits else None

    async def invoke(request: Request) -> Response:
        if network is not None and network.is_out(request.headers.get(SOURCE_CLUSTER_HEADER, "")):
            return JSONResponse({"message": "Service Unavailable (the caller's cluster is off the network)"},
                                status_code=503)
        source = request.headers.get(SOURCE_CLUSTER_HEADER, "")
        if source and inter_region_rtt_ms > 0:
            await asyncio.sleep(inter_region_rtt_ms / 1000)
        if latency is not None:
            await asyncio.sleep(latency.delay(HTTP_API_OVERHEAD))
        try:
            body = await request.body()
        except ClientDisconnect:  # the caller gave up before its body arrived: nothing to invoke
            return Response(status_code=499)
        if len(body) > MAX_REQUEST_BYTES:
            return JSONResponse({"message": "Request Entity Too Large"}, status_code=413)
        if source:
            inbound.add(source, len(body))
        event = http_api_event(request, body)
        if authorizers is not None:  # API Gateway authorizes before the function runs
            try:
                authorizer = await run_in_threadpool(authorizers.http, event, _signed_url(request), body)
            except Refused as refused:
                return JSONResponse(refused.body(), status_code=refused.status)
            except Throttled as exc:  # the authorizer could not run: API Gateway answers 500
                log.warning("%s throttled: %s", exc.function, exc)
                return _internal_error()
            if authorizer is not None:
                event["requestContext"]["authorizer"] = authorizer
        if len(body) * 4 // 3 > MAX_INVOKE_BYTES:
            return JSONResponse({"message": "Request too long"}, status_code=413)
        call = run_in_threadpool(function.invoke, event)
        try:
            if integration_timeout_s is None:
                result = await call
            else:
                invocation = asyncio.ensure_future(call)
                done, _ = await asyncio.wait({invocation}, timeout=integration_timeout_s)
                if not done:  # API Gateway gives up; the function runs on to its end (or its own timeout)
                    invocation.add_done_callback(_quiet_late_result)
                    log.warning("%s %s: no response after %ss: 503", request.method, request.url.path,
                                integration_timeout_s)
                    return JSONResponse({"message": "Service Unavailable"}, status_code=503)
                result = invocation.result()
        except Throttled as exc:  # Lambda refused the invocation: API Gateway answers 500, as for any
            # invocation error (a function error would be a 502 on a REST API; an HTTP API says 500 for both)
            log.warning("%s throttled on %s %s: %s", function.name, request.method, request.url.path, exc)
            return _internal_error()
        except ResponseTooLarge as exc:  # a function error (Function.ResponseSizeTooLarge)
            log.warning("%s on %s %s: %s", exc.error_type, request.method, request.url.path, exc)
            return _internal_error()
        except Exception:  # the function crashed: API Gateway answers 500 Internal Server Error
            log.exception("%s crashed on %s %s", function.name, request.method, request.url.path)
            return JSONResponse({"message": "Internal Server Error"}, status_code=500)
        except BaseException as exc:  # a simulated crash (crash points): the invocation died
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            return JSONResponse({"message": "Internal Server Error"}, status_code=502)
        raw = result.get("body") or ""
        payload = base64.b64decode(raw) if result.get("isBase64Encoded") else raw.encode()
        headers = {k: str(v) for k, v in (result.get("headers") or {}).items()}
        for name, values in (result.get("multiValueHeaders") or {}).items():
            headers[name] = ",".join(values)
        headers.pop("content-length", None)
        return Response(payload, status_code=int(result.get("statusCode", 200)), headers=headers)

    async def local_stats(request: Request) -> Response:
        """The local runtime's own counters (like LocalStack's /_localstack paths): AWS requests
        made by the emulated functions, by service and operation (and by call site, with
        MAGNETAR_REQUEST_SITES set), and each function's
        invocations and billed duration; with limits on, the account's concurrency (limit, peak since
        the last reset, throttles); the replication requests other clusters sent (`replication_in`);
        the crash points fired in this process since it started (`crash_points_fired`: not reset).
        DELETE resets the others."""
        from magnetar.adapters.aws.clients import REQUESTS
        from magnetar.core import crashpoints
        from magnetar.local.lambda_runtime import (
            AUTHORIZER,
            BROKER,
            FUNCTION_DISPATCHER,
            JOURNAL_CONSUMER,
            MAINTENANCE,
            WEBSOCKET,
        )

        # the stack's functions, then the registered Pulsar Functions' (created through Lambda's API)
        functions = ((BROKER, JOURNAL_CONSUMER, MAINTENANCE, WEBSOCKET, FUNCTION_DISPATCHER)
                     + ((AUTHORIZER,) if authorizers else ()) + tuple(c.local for c in lambda_api.created.values()))
        pool = BROKER.settings.concurrency  # the account's concurrency, with --aws-limits on
        if request.method == "DELETE":
            REQUESTS.reset()
            for f in functions:
                f.reset_stats()
            if pool is not None:
                pool.peak, pool.throttles = pool.running, 0
            inbound.reset()
        stats = {"aws_requests": REQUESTS.snapshot(), "lambda": {f.name: f.stats() for f in functions},
                 "replication_in": inbound.snapshot(), "crash_points_fired": dict(crashpoints.fired)}
        if REQUESTS.by_site:  # MAGNETAR_REQUEST_SITES: also by the core function that made them
            stats["aws_requests_by_site"] = REQUESTS.sites()
        if pool is not None:
            stats["concurrency"] = {"limit": pool.limit, "peak": pool.peak, "throttles": pool.throttles}
        return JSONResponse(stats)

    async def run_schedule(request: Request) -> Response:
        """Run a scheduled function once, now (the local twin of EventBridge's schedule)."""
        schedule = (schedules or {}).get(request.path_params["name"])
        if schedule is None:
            return JSONResponse({"reason": f"No schedule {request.path_params['name']}"}, status_code=404)
        body = await request.body()
        try:
            event = json.loads(body) if body.strip() else None
        except ValueError:
            return JSONResponse({"reason": "The body must be a JSON object (the rule's input)"}, status_code=400)
        if event is not None and not isinstance(event, dict):
            return JSONResponse({"reason": "The body must be a JSON object (the rule's input)"}, status_code=400)
        try:
            result = await run_in_threadpool(schedule.run_now, event)
        except MagnetarError as exc:  # the function refused the input (a rule's input it cannot take)
            return JSONResponse({"reason": str(exc)}, status_code=exc.status)
        except BaseException as exc:  # a crash of the run, simulated or not, is reported, not raised
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            return JSONResponse({"reason": f"{type(exc).__name__}: {exc}"}, status_code=500)
        return JSONResponse(result)

    async def outage(request: Request) -> Response:
        """Take a cluster of the instance off the network (POST) or bring it back (DELETE)."""
        name = request.path_params["name"]
        if network is None:
            return JSONResponse({"reason": "This cluster is not part of a local instance (local up --clusters)"},
                                status_code=404)
        try:
            network.set_outage(name, request.method == "POST")
        except (KeyError, ValueError):
            return JSONResponse({"reason": f"No cluster {name} in this instance ({', '.join(network.clusters)})"},
                                status_code=404)
        return JSONResponse({"cluster": name, "outage": request.method == "POST"})

    @contextlib.asynccontextmanager
    async def widen_thread_pool(app: Starlette) -> AsyncIterator[None]:
        # Lambda scales out per request; anyio's default of 40 worker threads would queue long
        # polls behind each other and make the local stack time out where AWS would not.
        import anyio.to_thread

        anyio.to_thread.current_default_thread_limiter().total_tokens = LAMBDA_CONCURRENCY
        yield

    from magnetar.local.lambda_api import LocalLambdaApi
    from magnetar.local.lambda_runtime import FUNCTION_DISPATCHER

    lambda_api = LocalLambdaApi([f for f in (websocket, FUNCTION_DISPATCHER) if f is not None],
                                account_concurrency=fidelity.lambda_concurrency if fidelity.limits else 1_000)
    methods = ["GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "OPTIONS"]
    return Starlette(
        lifespan=widen_thread_pool,
        routes=[
            Route("/_magnetar/local/stats", local_stats, methods=["GET", "DELETE"]),
            Route("/_magnetar/local/schedules/{name}", run_schedule, methods=["POST"]),
            Route("/_magnetar/local/clusters/{name}/outage", outage, methods=["POST", "DELETE"]),
            *console_routes(authentication=authorizers is not None),  # the web console (static files)
            # the WebSocket API and its management API (magnetar.local.websocket)
            *(LocalWebSocketApi(websocket, authorizers, fidelity=fidelity, timeouts=timeouts, latency=latency).routes()
              if websocket is not None else []),
            # Lambda's API: Invoke, and the calls managing registered functions' Lambda functions
            *lambda_api.routes(),
            _every_path(invoke, methods),
        ]
    )


def _quiet_late_result(invocation: asyncio.Future[Any]) -> None:
    """The end of an invocation API Gateway stopped waiting for: its outcome goes nowhere."""
    if not invocation.cancelled() and invocation.exception() is not None:
        log.warning("an invocation that timed out ended with %r", invocation.exception())


def _every_path(endpoint: Any, methods: list[str]) -> Route:
    """The catch-all route; API Gateway forwards any path, even one with an encoded newline
    (Starlette's path convertor stops at one)."""
    route = Route("/{path:path}", endpoint, methods=methods)
    route.path_regex = re.compile(r"^/(?P<path>.*)$", re.DOTALL)
    return route
