"""The API's own contract: `GET /openapi.json`, public (magnetar.api.openapi)."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from magnetar.api.access import guarded
from magnetar.api.http import json_response
from magnetar.api.openapi import OBJECT, document
from magnetar.core.authz import Access

router = Router()  # type: ignore[no-untyped-call]


@cache
def _document() -> dict[str, Any]:
    return document()


@guarded(router, "GET", "/openapi.json", Access.PUBLIC, response=OBJECT)
def openapi() -> Response[str]:
    """This API's OpenAPI 3.1 document."""
    return json_response(_document())
