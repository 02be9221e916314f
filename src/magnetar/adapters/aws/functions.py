"""Pulsar Functions on Lambda: the dispatcher's ports (core/functions/dispatch.py).

- `LambdaFunctionInvoker`: a function's invocation is a synchronous (RequestResponse) invocation
  of the function's own Lambda function, named from its fqfn (`function_lambda_name`, created by
  the broker: magnetar.adapters.aws.function_deployer), or of the user's Lambda function named by
  its `functionArn`. Lambda's refusals become the core's errors: a throttle (the function's
  reserved concurrency, its `parallelism`, in use) TooManyRequests, a function still being
  created or updated RetryableError, a missing one NotFound.
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
from botocore.exceptions import ClientError

from magnetar.adapters.aws.clients import client
from magnetar.config import (
    DEFAULT_FUNCTION_DISPATCHER,
    DEFAULT_FUNCTION_PREFIX,
    ENV_FUNCTION_DISPATCHER,
    ENV_FUNCTION_PREFIX,
)
from magnetar.core.errors import NotFound, RetryableError, TooManyRequests
from magnetar.core.functions.deployment import MAX_TIMEOUT_MS
from magnetar.core.functions.inputs import FunctionTriggers

INVOKE_TIMEOUT_S = MAX_TIMEOUT_MS // 1000 + 10  # above any function's timeout (core/functions/deployment.py)
MAX_NAME = 64  # Lambda's function names: 64 letters, digits, - and _


def function_prefix() -> str:
    return os.environ.get(ENV_FUNCTION_PREFIX, DEFAULT_FUNCTION_PREFIX)


def function_lambda_name(fqfn: str) -> str:
    """The Lambda function of a registered function: the prefix, the fqfn's readable part and a
    hash of the fqfn (Lambda's names: 64 characters of letters, digits, - and _)."""
    prefix = function_prefix()
    digest = hashlib.sha256(fqfn.encode()).hexdigest()[:10]
    readable = re.sub(r"[^A-Za-z0-9_-]", "-", fqfn)[: MAX_NAME - len(prefix) - len(digest) - 1]
    return f"{prefix}{readable}-{digest}"


@cache
def _sync_lambda(endpoint: str | None) -> Any:
    # not retried: a retried invocation would run the batch again (the dispatcher decides what to redo)
    config = Config(connect_timeout=3, read_timeout=INVOKE_TIMEOUT_S, retries={"mode": "standard", "max_attempts": 1})
    return boto3.session.Session().client("lambda", config=config, endpoint_url=endpoint)


def lambda_error(exc: ClientError, what: str) -> Exception:
    """A Lambda API error as the core's: throttles, conflicts, missing functions, the rest."""
    code = exc.response.get("Error", {}).get("Code", "")
    message = exc.response.get("Error", {}).get("Message", "") or str(exc)
    if code == "TooManyRequestsException":
        return TooManyRequests(f"{what}: throttled ({message})")
    if code == "ResourceNotFoundException":
        return NotFound(f"{what}: no such Lambda function ({message})")
    if code in ("ResourceConflictException", "ResourceNotReadyException"):
        return RetryableError(f"{what}: the Lambda function is being created or updated ({message})")
    return RetryableError(f"{what}: Lambda answered {code}: {message}")


class LambdaFunctionInvoker:
    def invoke(self, fqfn: str, event: dict[str, Any], function_arn: str | None = None) -> dict[str, Any]:
        endpoint = os.environ.get("AWS_ENDPOINT_URL_LAMBDA") or os.environ.get("AWS_ENDPOINT_URL")
        name = function_arn or function_lambda_name(fqfn)
        try:
            response = _sync_lambda(endpoint).invoke(FunctionName=name, InvocationType="RequestResponse",
                                                     Payload=json.dumps(event).encode())
        except ClientError as exc:
            raise lambda_error(exc, f"invoking {name}") from None
        result: dict[str, Any] = json.loads(response["Payload"].read() or b"{}")
        if response.get("FunctionError"):
            raise RuntimeError(f"{result.get('errorType', 'FunctionError')}: {result.get('errorMessage', '')}")
        return result


class LambdaDispatcherInvoker:
    def __init__(self, name: str | None = None) -> None:
        self.name = name or os.environ.get(ENV_FUNCTION_DISPATCHER, DEFAULT_FUNCTION_DISPATCHER)

    def serve_async(self, fqfn: str) -> None:
        client("lambda").invoke(FunctionName=self.name, InvocationType="Event", Payload=json.dumps({"fqfn": fqfn}).encode())


@cache
def build_triggers() -> FunctionTriggers:
    """Which functions a topic triggers, cached in this process (one per warm container)."""
    from magnetar.adapters.aws import build_broker

    return FunctionTriggers(build_broker())
