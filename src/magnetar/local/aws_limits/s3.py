"""S3's limits (REST): per bucket and prefix (the key up to its last '/'), 3,500
PUT/COPY/POST/DELETE and 5,500 GET/HEAD requests/s: 503 SlowDown."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from magnetar.local.aws_limits.base import EndpointBase, Response, _refused

# S3 (https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html)
S3_PREFIX_WRITES_S = 3500
S3_PREFIX_READS_S = 5500


def s3_slow_down() -> Response:
    request_id = uuid.uuid4().hex[:16].upper()
    data = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
            f"<Message>Please reduce your request rate.</Message><RequestId>{request_id}</RequestId>"
            f"<HostId>{base64.b64encode(uuid.uuid4().bytes).decode()}</HostId></Error>").encode()
    return _refused(("503 Slow Down", [("Content-Type", "application/xml"), ("Content-Length", str(len(data))),
                                       ("x-amz-request-id", request_id)], data), "SlowDown")


class S3Limits(EndpointBase):
    """The endpoint's S3 requests (a mixin of `AwsEndpoint`)."""

    def _s3(self, environ: dict[str, Any], method: str) -> Response:
        host = str(environ.get("HTTP_HOST", "")).split(":")[0]
        path = str(environ.get("PATH_INFO", "/")).lstrip("/")
        labels = host.split(".")
        if len(labels) > 1 and not host.replace(".", "").isdigit() and (labels[1] == "s3" or host.endswith(".localhost")):
            bucket, key = labels[0], path
        else:
            bucket, _, key = path.partition("/")
        prefix = key.rpartition("/")[0]
        reading = method in ("GET", "HEAD")
        rate = S3_PREFIX_READS_S if reading else S3_PREFIX_WRITES_S
        now = self.clock()
        with self.state.lock:
            ok = self.state.bucket(("s3r" if reading else "s3w", bucket, prefix), rate, now).take(1, now)
        if not ok:
            self._drain(environ)
            return s3_slow_down()
        return self._forward(environ)

    @staticmethod
    def _drain(environ: dict[str, Any]) -> None:
        """Read a refused request's body, so the connection can carry the next request."""
        length = int(environ.get("CONTENT_LENGTH") or 0)
        stream = environ["wsgi.input"]
        while length > 0:
            chunk = stream.read(min(length, 1 << 16))
            if not chunk:
                break
            length -= len(chunk)
