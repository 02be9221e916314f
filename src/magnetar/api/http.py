"""Reading requests and shaping responses for the broker's routes (Pulsar's conventions)."""

from __future__ import annotations

import base64
import json
from typing import Any, TypeVar
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response, content_types
from pydantic import BaseModel

from magnetar.api.resolver import current_event
from magnetar.core.errors import InvalidInput
from magnetar.core.naming import NamespaceName, TopicName

DOMAINS = ("persistent", "non-persistent")
M = TypeVar("M", bound=BaseModel)


def json_response(body: Any, status: int = 200) -> Response[str]:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=json.dumps(body))


def no_content() -> Response[str]:
    return Response(status_code=204)


def _raw_body() -> str:
    event = current_event()
    raw = event.body or ""
    if event.is_base64_encoded:
        raw = base64.b64decode(raw).decode("utf-8", errors="replace")
    return raw


def body(model: type[M]) -> M:
    raw = _raw_body() or "{}"
    try:
        json.loads(raw)
    except ValueError:
        raise InvalidInput("Request body is not valid JSON") from None
    return model.model_validate_json(raw)


def json_body() -> Any:
    """Pulsar's admin API sends bare JSON values (a partition count, true/false, a list of actions)."""
    try:
        return json.loads(_raw_body().strip())
    except ValueError:
        raise InvalidInput("Request body is not valid JSON") from None


def int_body() -> int:
    value = json_body()
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInput("Request body must be a JSON integer")
    return value


def has_body() -> bool:
    return _raw_body().strip() != ""


def query(name: str) -> str | None:
    return current_event().get_query_string_value(name)


def flag_query(name: str, default: bool) -> bool:
    """A true/false query parameter (Pulsar's ?perPartition=false)."""
    value = query(name)
    if value is None or value == "":
        return default
    if value.lower() not in ("true", "false"):
        raise InvalidInput(f"Query parameter {name} must be true or false")
    return value.lower() == "true"


def topic_name(domain: str, tenant: str, namespace: str, topic: str) -> TopicName:
    return TopicName.of(domain, unquote(tenant), unquote(namespace), unquote(topic))


def namespace_name(tenant: str, namespace: str) -> NamespaceName:
    return NamespaceName.of(unquote(tenant), unquote(namespace))
