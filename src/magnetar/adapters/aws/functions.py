"""Pulsar Functions on Lambda: the dispatcher's ports (core/functions/dispatch.py).

- `LambdaFunctionInvoker`: a function's invocation is a synchronous (RequestResponse) invocation
  of the function's own Lambda function, named from its fqfn (`function_lambda_name`). Locally,
  the emulated Invoke API runs every such name on the local runtime's function
  (functions/function_runtime); deploying one Lambda function per registered function is the
  stack's next step.
- `LambdaDispatcherInvoker`: a dispatcher is started with an asynchronous (`Event`) invocation of
  the dispatcher function (functions/function_dispatcher), as the WebSocket function invokes itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import cache
from typing import Any

import boto3
from botocore.config import Config

from magnetar.adapters.aws.clients import client
from magnetar.core.functions.dispatch import FunctionTriggers

ENV_FUNCTION_PREFIX = "MAGNETAR_FUNCTION_PREFIX"
ENV_FUNCTION_DISPATCHER = "MAGNETAR_FUNCTION_DISPATCHER"
DEFAULT_FUNCTION_PREFIX = "magnetar-fn-"
DEFAULT_FUNCTION_DISPATCHER = "magnetar-function-dispatcher"
INVOKE_TIMEOUT_S = 70  # above the invocation's own processing time (functions/invocation.py)


def function_lambda_name(fqfn: str) -> str:
    """The Lambda function of a registered function: the prefix, the fqfn's readable part and a
    hash of the fqfn (Lambda's names: 64 characters of letters, digits, - and _)."""
    prefix = os.environ.get(ENV_FUNCTION_PREFIX, DEFAULT_FUNCTION_PREFIX)
    digest = hashlib.sha256(fqfn.encode()).hexdigest()[:10]
    readable = re.sub(r"[^A-Za-z0-9_-]", "-", fqfn)[: 64 - len(prefix) - len(digest) - 1]
    return f"{prefix}{readable}-{digest}"


@cache
def _sync_lambda(endpoint: str | None) -> Any:
    # not retried: a retried invocation would run the batch again (the dispatcher nacks on failure)
    config = Config(connect_timeout=3, read_timeout=INVOKE_TIMEOUT_S, retries={"mode": "standard", "max_attempts": 1})
    return boto3.session.Session().client("lambda", config=config, endpoint_url=endpoint)


class LambdaFunctionInvoker:
    def invoke(self, fqfn: str, event: dict[str, Any]) -> dict[str, Any]:
        endpoint = os.environ.get("AWS_ENDPOINT_URL_LAMBDA") or os.environ.get("AWS_ENDPOINT_URL")
        response = _sync_lambda(endpoint).invoke(FunctionName=function_lambda_name(fqfn),
                                                 InvocationType="RequestResponse", Payload=json.dumps(event).encode())
        result: dict[str, Any] = json.loads(response["Payload"].read() or b"{}")
        if response.get("FunctionError"):
            raise RuntimeError(f"{result.get('errorType', 'FunctionError')}: {result.get('errorMessage', '')}")
        return result


class LambdaDispatcherInvoker:
    def serve_async(self, fqfn: str) -> None:
        name = os.environ.get(ENV_FUNCTION_DISPATCHER, DEFAULT_FUNCTION_DISPATCHER)
        client("lambda").invoke(FunctionName=name, InvocationType="Event", Payload=json.dumps({"fqfn": fqfn}).encode())


@cache
def build_triggers() -> FunctionTriggers:
    """Which functions a topic triggers, cached in this process (one per warm container)."""
    from magnetar.adapters.aws import build_broker

    return FunctionTriggers(build_broker())
