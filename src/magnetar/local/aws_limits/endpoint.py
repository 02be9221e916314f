"""The middleware, `AwsEndpoint`: which service and operation a request is (Kinesis and DynamoDB
by `X-Amz-Target`, S3 by its SigV4 credential scope), dispatch to that service's limits
(`kinesis`, `dynamodb`, `s3`), the count of what the limits refused (GET /_magnetar/aws-limits),
a shard's write budget spent from outside (POST /_magnetar/aws-limits/kinesis/shard-writes)
and modeled latency (`magnetar.local.aws_latency`), added after the request is applied and
outside the serialization lock. Everything else passes through unchanged."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from io import BytesIO
from typing import Any

from magnetar.local.aws_latency import LatencyModel
from magnetar.local.aws_limits.base import (
    _CREDENTIAL,
    REFUSALS_PATH,
    REFUSED_COUNT_HEADER,
    REFUSED_HEADER,
    SHARD_SPEND_PATH,
    Response,
    StartResponse,
    _json_response,
    _PassThrough,
)
from magnetar.local.aws_limits.buckets import _State
from magnetar.local.aws_limits.dynamodb import DynamoDbLimits
from magnetar.local.aws_limits.fan_out_push import ShardWrites
from magnetar.local.aws_limits.kinesis import KinesisLimits, _Shards
from magnetar.local.aws_limits.s3 import S3Limits


class AwsEndpoint(KinesisLimits, DynamoDbLimits, S3Limits):
    """The middleware: `limits` enforces the services' limits (`kinesis`, `dynamodb`, `s3`), `latency`
    adds modeled latency.

    `app` is the serialized moto app; `backend_lock` is its lock, taken for the few reads of
    moto's backends (a stream's shards, a table's key schema, a stored item's size)."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]], limits: bool = True,
                 latency: LatencyModel | None = None, backend_lock: threading.Lock | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.limits = limits
        self.latency = latency
        self.backend_lock = backend_lock or threading.Lock()
        self.clock = clock
        self.state = _State()
        self._shards: dict[tuple[str, str, str], _Shards] = {}
        self.shard_writes = ShardWrites()
        self._key_schemas: dict[tuple[str, str, str], tuple[str, str | None]] = {}
        self.refusals: Counter[str] = Counter()  # "kinesis.GetRecords:ProvisionedThroughputExceededException" -> n
        # conditional writes DynamoDB declined ("dynamodb.PutItem:ConditionalCheckFailedException" -> n): not
        # limits, but the races optimistic concurrency lost (a cursor written by two consumers at once)
        self.declined: Counter[str] = Counter()

    # --- WSGI -----------------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        started = time.monotonic()
        if environ.get("PATH_INFO") == REFUSALS_PATH and environ.get("REQUEST_METHOD") == "GET":
            with self.state.lock:
                report = {"limits": self.limits, "refusals": dict(sorted(self.refusals.items())),
                          "declined": dict(sorted(self.declined.items()))}
            status, headers, data = _json_response("200 OK", report, "application/json")
            start_response(status, headers)
            return [data]
        if environ.get("PATH_INFO") == SHARD_SPEND_PATH and environ.get("REQUEST_METHOD") == "POST":
            status, headers, data = self._spend_shard_writes(environ, self._read_body(environ)) if self.limits else \
                _json_response("409 Conflict", {"reason": "the emulator's limits are off: no budget to spend"},
                               "application/json")
            start_response(status, headers)
            return [data]
        service, operation, body = self._classify(environ)
        response = self._handle(environ, service, operation, body) if service else self._forward(environ)
        marks = {k: v for k, v in response[1] if k in (REFUSED_HEADER, REFUSED_COUNT_HEADER)}
        if marks:
            with self.state.lock:
                self.refusals[f"{service}.{operation}:{marks[REFUSED_HEADER]}"] += int(marks[REFUSED_COUNT_HEADER])
            response = response[0], [h for h in response[1] if h[0] not in marks], response[2]
        if service == "dynamodb" and response[0].startswith("400"):
            declined = _declined_condition(response[2])
            if declined:
                with self.state.lock:
                    self.declined[f"dynamodb.{operation}:{declined}"] += 1
        if self.latency is not None and service:
            remaining = self.latency.delay_s(service, operation) - (time.monotonic() - started)
            if remaining > 0:
                time.sleep(remaining)  # outside moto's lock: other requests go on meanwhile
        status, headers, data = response
        start_response(status, headers)
        return [data]

    def _classify(self, environ: dict[str, Any]) -> tuple[str, str, bytes | None]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target:
            prefix, _, operation = target.partition(".")
            service = {"Kinesis_20131202": "kinesis", "DynamoDB_20120810": "dynamodb"}.get(prefix, "")
            if service:
                return service, operation, self._read_body(environ)
            return "", "", None
        scope = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
        query = str(environ.get("QUERY_STRING", ""))
        if (scope is not None and scope.group(3) == "s3") or ("X-Amz-Credential=" in query and "%2Fs3%2F" in query):
            return "s3", str(environ.get("REQUEST_METHOD", "GET")), None
        return "", "", None

    @staticmethod
    def _read_body(environ: dict[str, Any]) -> bytes:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        stream = environ["wsgi.input"]
        body: bytes = stream.read(length) if length else stream.read() if environ.get("wsgi.input_terminated") else b""
        environ["wsgi.input"] = BytesIO(body)
        return body

    def _handle(self, environ: dict[str, Any], service: str, operation: str, body: bytes | None) -> Response:
        if not self.limits:
            return self._forward(environ)
        try:
            if service == "kinesis":
                return self._kinesis(environ, operation, body or b"")
            if service == "dynamodb":
                return self._dynamodb(environ, operation, body or b"")
            return self._s3(environ, operation)
        except _PassThrough:
            return self._forward(environ)


_DECLINED = ("ConditionalCheckFailedException", "TransactionCanceledException")


def _declined_condition(body: bytes) -> str | None:
    """The error type of a DynamoDB 400 that declined a conditional write (None for others)."""
    if not any(t.encode() in body for t in _DECLINED):
        return None
    try:
        kind = str(json.loads(body).get("__type", ""))
    except ValueError:
        return None
    return next((t for t in _DECLINED if kind.endswith(t)), None)
