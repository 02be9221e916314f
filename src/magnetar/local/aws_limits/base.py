"""What the services' limits share: the endpoint's state and forwarding to moto, a request's
account and region, the response type, and the marks a refusal carries to the endpoint (which
counts them and takes them off: see `AwsEndpoint.refusals`)."""

from __future__ import annotations

import json
import re
import threading
import uuid
import zlib
from collections.abc import Callable, Iterable
from io import BytesIO
from typing import Any

from magnetar.local.aws_limits.buckets import _State

MIB = 1024 * 1024
KB = 1024

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/")

REFUSED_HEADER = "x-magnetar-refused"
REFUSED_COUNT_HEADER = "x-magnetar-refused-count"
REFUSALS_PATH = "/_magnetar/aws-limits"  # GET: what the limits refused, by service.operation:code
# POST {"stream", "shard", "bytes"}: another writer's share of a shard's write budget, taken now
SHARD_SPEND_PATH = REFUSALS_PATH + "/kinesis/shard-writes"

StartResponse = Callable[..., Any]
Response = tuple[str, list[tuple[str, str]], bytes]


def _b64_len(s: str) -> int:
    return len(s) * 3 // 4 - (2 if s.endswith("==") else 1 if s.endswith("=") else 0)


def _json_response(status: str, body: dict[str, Any], content_type: str, crc: bool = False) -> Response:
    data = json.dumps(body, separators=(",", ":")).encode()
    headers = [("Content-Type", content_type), ("Content-Length", str(len(data))),
               ("x-amzn-RequestId", str(uuid.uuid4()))]
    if crc:
        headers.append(("x-amz-crc32", str(zlib.crc32(data) & 0xFFFFFFFF)))
    return status, headers, data


def _refused(response: Response, code: str, count: int = 1) -> Response:
    """Mark a response the limits made (counted, then the marks are taken off: see `refusals`)."""
    status, headers, data = response
    return status, [*headers, (REFUSED_HEADER, code), (REFUSED_COUNT_HEADER, str(count))], data


class _PassThrough(Exception):
    """The request is not one the limits model (unknown stream or table...): moto answers it."""


class EndpointBase:
    """The endpoint's state, as the services' limits (mixins of `AwsEndpoint`) see it."""

    app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
    limits: bool
    backend_lock: threading.Lock
    clock: Callable[[], float]
    state: _State

    def _forward(self, environ: dict[str, Any], body: bytes | None = None) -> Response:
        if body is not None:
            environ["wsgi.input"] = BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        captured: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
            captured["status"], captured["headers"] = status, list(headers)
            return lambda _data: None

        data = b"".join(self.app(environ, capture))
        return captured["status"], captured["headers"], data

    # --- account and region of a request --------------------------------------------------
    @staticmethod
    def _scope(environ: dict[str, Any]) -> tuple[str, str]:
        m = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
        access_key, region = (m.group(1), m.group(2)) if m else ("", "us-east-1")
        try:
            from moto.iam.models import get_account_id_from

            return get_account_id_from(access_key), region
        except Exception:
            return "123456789012", region
