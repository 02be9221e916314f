"""`multipart/form-data` request bodies (Pulsar's function admin API: `functionConfig` + `data`).

Parsed with the standard library's `email` parser (MIME is what multipart/form-data is, RFC 7578
on RFC 2046): no dependency added to the Lambda layer, and a parser kept with CPython. The body
arrives whole in the API Gateway event (base64-encoded when binary) and is at most a few MB
(`MAX_BODY_BYTES`), so a streaming parser (python-multipart) would buy nothing here.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from email import policy
from email.errors import MessageDefect
from email.message import EmailMessage
from email.parser import BytesParser

from magnetar.api.resolver import current_event
from magnetar.core.errors import InvalidInput, PayloadTooLarge

# Lambda's synchronous invocation takes 6 MB, and a binary body travels base64-encoded in it:
# what API Gateway (10 MB) lets through and the function can still receive.
MAX_BODY_BYTES = 4_500_000


@dataclass(frozen=True)
class Part:
    name: str
    data: bytes
    filename: str | None = None
    content_type: str = "text/plain"

    @property
    def text(self) -> str:
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"Form field {self.name} is not UTF-8 text") from None


def raw_body() -> bytes:
    """The request body as bytes (API Gateway base64-encodes binary ones)."""
    event = current_event()
    raw = event.body or ""
    if event.is_base64_encoded:
        try:
            return base64.b64decode(raw)
        except ValueError:
            raise InvalidInput("Request body is not valid base64") from None
    return raw.encode("utf-8")


def content_type() -> str:
    headers = current_event().headers or {}
    return next((v for k, v in headers.items() if k.lower() == "content-type"), "")


def is_multipart() -> bool:
    return content_type().lower().startswith("multipart/form-data")


def parse(header: str, body: bytes) -> dict[str, Part]:
    """The parts of a multipart/form-data body by field name (a repeated field: the first)."""
    if not header.lower().startswith("multipart/form-data"):
        raise InvalidInput("Expected a multipart/form-data request body")
    if len(body) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"Request body of {len(body)} bytes exceeds {MAX_BODY_BYTES} bytes "
                              "(a Lambda invocation's 6 MB, the body base64-encoded)")
    try:
        head = f"Content-Type: {header}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    except UnicodeEncodeError:
        raise InvalidInput("Invalid Content-Type header") from None
    message = BytesParser(policy=policy.HTTP).parsebytes(head + body)
    if not isinstance(message, EmailMessage) or not message.is_multipart() or not message.get_boundary():
        raise InvalidInput("Malformed multipart/form-data body (no boundary or no parts)")
    if any(isinstance(d, MessageDefect) and "Boundary" in type(d).__name__ for d in message.defects):
        raise InvalidInput("Malformed multipart/form-data body (its boundaries do not match)")
    parts: dict[str, Part] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or not name:
            continue
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        parts.setdefault(name, Part(name, data, part.get_filename(), part.get_content_type()))
    return parts


def request_parts() -> dict[str, Part]:
    """The current request's multipart/form-data parts."""
    return parse(content_type(), raw_body())
