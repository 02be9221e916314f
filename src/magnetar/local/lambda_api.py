"""Lambda's API, emulated on the local HTTP port (`AWS_ENDPOINT_URL_LAMBDA` points here).

- Invoke (`POST /2015-03-31/functions/{name}/invocations`), synchronous or `Event`: the
  WebSocket function's invocations of itself, the dispatcher's, and registered functions'; an
  asynchronous invocation Lambda throttles is retried as Lambda's event queue retries it.
- The calls through which the broker manages registered functions' Lambda functions
  (magnetar.adapters.aws.function_deployer): CreateFunction, GetFunction,
  GetFunctionConfiguration, UpdateFunctionCode, UpdateFunctionConfiguration, DeleteFunction,
  PutFunctionConcurrency, GetFunctionConcurrency, DeleteFunctionConcurrency, with Lambda's checks
  (memory 128 to 10,240 MB, timeout 1 to 900 s, a role ARN, the account's unreserved minimum of
  100) and error codes, and Lambda's states: a new function is Pending for a moment, an update
  InProgress (invoking or updating it meanwhile is a ResourceConflictException).

A created function is a `LocalFunction` of its own running functions/function_runtime (whatever
package the call names: the local runtime runs the repository's code) with its timeout (the
handler stops the function's worker when it is up) and reserved concurrency (an invocation over it
is throttled, 429). Its memory is recorded, not enforced.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from magnetar.local.lambda_runtime import (
    FUNCTION_RUNTIME_DIR,
    LocalFunction,
    ResponseTooLarge,
    Throttled,
)

log = logging.getLogger(__name__)
REGION, ACCOUNT = "us-east-1", "000000000000"
PENDING_S = 0.3  # a new function is Pending this long, an update InProgress
UNRESERVED_MINIMUM = 100
ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:role/.+")
# Lambda's event queue retries a throttled asynchronous invocation for up to 6 h, the interval
# growing from 1 s to 5 min
ASYNC_RETRY_FIRST_S, ASYNC_RETRY_MAX_S, ASYNC_RETRY_FOR_S = 1.0, 300.0, 6 * 3600.0


def _error(status: int, code: str, message: str, **extra: str) -> JSONResponse:
    return JSONResponse({"Type": "User", "message": message, **extra}, status_code=status,
                        headers={"x-amzn-ErrorType": code})


def _invalid(message: str) -> JSONResponse:
    return _error(400, "InvalidParameterValueException", message)


class _Refused(Exception):
    def __init__(self, response: JSONResponse) -> None:
        self.response = response


@dataclass
class CreatedFunction:
    """A function created through the API: its configuration (Lambda's FunctionConfiguration) and
    the LocalFunction that runs it."""

    configuration: dict[str, Any]
    local: LocalFunction
    tags: dict[str, str] = field(default_factory=dict)
    busy_until: float = 0.0  # Pending or InProgress until then

    def current(self) -> dict[str, Any]:
        if time.monotonic() >= self.busy_until:
            if self.configuration.get("State") == "Pending":
                self.configuration["State"] = "Active"
            if self.configuration.get("LastUpdateStatus") == "InProgress":
                self.configuration["LastUpdateStatus"] = "Successful"
        return self.configuration

    @property
    def busy(self) -> bool:
        current = self.current()
        return current.get("State") == "Pending" or current.get("LastUpdateStatus") == "InProgress"


class LocalLambdaApi:
    def __init__(self, functions: list[LocalFunction], account_concurrency: int = 1_000,
                 pending_s: float = PENDING_S) -> None:
        self.fixed = {f.name: f for f in functions}  # the stack's own functions (WebSocket, dispatcher)
        self.created: dict[str, CreatedFunction] = {}
        self.account_concurrency = account_concurrency
        self.pending_s = pending_s
        self._lock = threading.Lock()

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/2015-03-31/functions", self.create_function, methods=["POST"]),
            Route("/2015-03-31/functions/{name}", self.function, methods=["GET", "DELETE"]),
            Route("/2015-03-31/functions/{name}/configuration", self.configuration, methods=["GET", "PUT"]),
            Route("/2015-03-31/functions/{name}/code", self.update_code, methods=["PUT"]),
            Route("/2017-10-31/functions/{name}/concurrency", self.concurrency, methods=["PUT", "DELETE"]),
            Route("/2019-09-30/functions/{name}/concurrency", self.concurrency, methods=["GET"]),
            Route("/2015-03-31/functions/{name}/invocations", self.invoke, methods=["POST"]),
        ]

    # --- the control plane ------------------------------------------------------------------------
    @staticmethod
    def _name(request: Request) -> str:
        return unquote(request.path_params["name"]).split(":function:")[-1].split(":")[0]

    def _created(self, name: str) -> CreatedFunction:
        found = self.created.get(name)
        if found is None:
            raise _Refused(_error(404, "ResourceNotFoundException",
                                  f"Function not found: arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"))
        return found

    @staticmethod
    def _check(settings: dict[str, Any]) -> None:
        memory = settings.get("MemorySize")
        if memory is not None and not (isinstance(memory, int) and 128 <= memory <= 10_240):
            raise _Refused(_invalid(f"1 validation error detected: Value '{memory}' at 'memorySize' failed to "
                                    "satisfy constraint: Member must have value less than or equal to 10240"))
        timeout = settings.get("Timeout")
        if timeout is not None and not (isinstance(timeout, int) and 1 <= timeout <= 900):
            raise _Refused(_invalid(f"1 validation error detected: Value '{timeout}' at 'timeout' failed to "
                                    "satisfy constraint: Member must have value less than or equal to 900"))
        role = settings.get("Role")
        if role is not None and not ROLE_ARN.fullmatch(str(role)):
            raise _Refused(_invalid(f"The role defined for the function cannot be assumed by Lambda: {role}"))

    async def _body(self, request: Request) -> dict[str, Any]:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            raise _Refused(_invalid("The request body is not JSON")) from None
        if not isinstance(body, dict):
            raise _Refused(_invalid("The request body must be a JSON object"))
        return body

    async def _answer(self, work: Any, status: int = 200) -> Response:
        try:
            result = await work
        except _Refused as refused:
            return refused.response
        if result is None:
            return Response(status_code=204)
        return JSONResponse(result, status_code=status)

    async def create_function(self, request: Request) -> Response:
        async def create() -> dict[str, Any]:
            body = await self._body(request)
            name = str(body.get("FunctionName") or "")
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
                raise _Refused(_invalid(f"Invalid function name: {name!r}"))
            if not body.get("Role") or not body.get("Code"):
                raise _Refused(_invalid("Role and Code are required"))
            self._check(body)
            with self._lock:
                if name in self.created or name in self.fixed:
                    raise _Refused(_error(409, "ResourceConflictException", f"Function already exist: {name}"))
                configuration = {
                    "FunctionName": name, "FunctionArn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
                    "Runtime": body.get("Runtime"), "Role": body["Role"], "Handler": body.get("Handler"),
                    "Description": body.get("Description", ""), "Timeout": int(body.get("Timeout") or 3),
                    "MemorySize": int(body.get("MemorySize") or 128), "Version": "$LATEST",
                    "Environment": {"Variables": dict((body.get("Environment") or {}).get("Variables") or {})},
                    "Layers": [{"Arn": arn} for arn in body.get("Layers") or []],
                    "Architectures": body.get("Architectures") or ["x86_64"], "State": "Pending",
                    "LastUpdateStatus": "Successful", "PackageType": "Zip", "CodeSha256": "",
                    "LoggingConfig": body.get("LoggingConfig") or {"LogFormat": "Text", "LogGroup": f"/aws/lambda/{name}"},
                }
                template = self.fixed_settings()
                local = LocalFunction(name, FUNCTION_RUNTIME_DIR, timeout_s=configuration["Timeout"],
                                      memory_mb=configuration["MemorySize"], settings=template)
                self.created[name] = CreatedFunction(configuration, local, dict(body.get("Tags") or {}),
                                                     time.monotonic() + self.pending_s)
                return dict(configuration)
        return await self._answer(create(), 201)

    def fixed_settings(self) -> Any:
        """The account's settings every function shares (one concurrency pool): the dispatcher's."""
        from magnetar.local.lambda_runtime import FUNCTION_DISPATCHER

        return FUNCTION_DISPATCHER.settings

    def _update(self, created: CreatedFunction, changes: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if created.busy:
                raise _Refused(_error(409, "ResourceConflictException",
                                      "The operation cannot be performed at this time. An update is in progress for "
                                      f"resource: {created.configuration['FunctionArn']}"))
            created.configuration.update(changes)
            created.configuration["LastUpdateStatus"] = "InProgress"
            created.busy_until = time.monotonic() + self.pending_s
            created.local.timeout_s = int(created.configuration["Timeout"])
            created.local.memory_mb = int(created.configuration["MemorySize"])
            created.local._warm.clear()  # new execution environments, as an update brings
            return dict(created.configuration)

    async def function(self, request: Request) -> Response:
        async def act() -> dict[str, Any] | None:
            name = self._name(request)
            created = self._created(name)
            if request.method == "DELETE":
                with self._lock:
                    self.created.pop(name, None)
                return None
            answer: dict[str, Any] = {"Configuration": dict(created.current()), "Tags": dict(created.tags),
                                      "Code": {"RepositoryType": "S3", "Location": ""}}
            if created.local.reserved_concurrency is not None:
                answer["Concurrency"] = {"ReservedConcurrentExecutions": created.local.reserved_concurrency}
            return answer
        return await self._answer(act())

    async def configuration(self, request: Request) -> Response:
        async def act() -> dict[str, Any]:
            created = self._created(self._name(request))
            if request.method == "GET":
                return dict(created.current())
            body = await self._body(request)
            self._check(body)
            allowed = ("Role", "Handler", "Description", "Timeout", "MemorySize", "Environment", "Runtime",
                       "LoggingConfig")
            changes = {k: v for k, v in body.items() if k in allowed}
            if "Layers" in body:
                changes["Layers"] = [{"Arn": arn} for arn in body["Layers"]]
            return self._update(created, changes)
        return await self._answer(act())

    async def update_code(self, request: Request) -> Response:
        async def act() -> dict[str, Any]:
            created = self._created(self._name(request))
            await self._body(request)
            return self._update(created, {})
        return await self._answer(act())

    async def concurrency(self, request: Request) -> Response:
        async def act() -> dict[str, Any] | None:
            created = self._created(self._name(request))
            if request.method == "GET":
                reserved = created.local.reserved_concurrency
                return {} if reserved is None else {"ReservedConcurrentExecutions": reserved}
            if request.method == "DELETE":
                created.local.reserved_concurrency = None
                return None
            body = await self._body(request)
            wanted = body.get("ReservedConcurrentExecutions")
            if not isinstance(wanted, int) or wanted < 0:
                raise _Refused(_invalid("ReservedConcurrentExecutions must be a number of 0 or more"))
            with self._lock:
                others = sum(c.local.reserved_concurrency or 0 for n, c in self.created.items() if c is not created)
                if others + wanted > self.account_concurrency - UNRESERVED_MINIMUM:
                    raise _Refused(_invalid(
                        "Specified ReservedConcurrentExecutions for function decreases account's "
                        f"UnreservedConcurrentExecution below its minimum value of [{UNRESERVED_MINIMUM}]."))
                created.local.reserved_concurrency = wanted
            return {"ReservedConcurrentExecutions": wanted}
        return await self._answer(act())

    # --- invocations --------------------------------------------------------------------------------
    def _target(self, name: str) -> LocalFunction | JSONResponse:
        fixed = self.fixed.get(name)
        if fixed is not None:
            return fixed
        created = self.created.get(name)
        if created is None:
            return _error(404, "ResourceNotFoundException", f"Function not found: {name}")
        state = created.current().get("State")
        if state == "Pending":
            return _error(409, "ResourceConflictException", "The operation cannot be performed at this time. "
                          "The function is currently in the following state: Pending")
        return created.local

    async def invoke(self, request: Request) -> Response:
        target = self._target(self._name(request))
        if isinstance(target, JSONResponse):
            return target
        payload = json.loads(await request.body() or b"{}")
        if request.headers.get("x-amz-invocation-type", "RequestResponse") == "Event":
            threading.Thread(target=self._invoke_quietly, args=(target, payload), name=f"{target.name}-async",
                             daemon=True).start()
            return Response(status_code=202)
        try:
            result = await run_in_threadpool(target.invoke, payload)
        except Throttled as exc:  # Lambda's answer to a synchronous invocation it cannot run
            return _error(429, "TooManyRequestsException", "Rate Exceeded.", Reason=exc.reason)
        except ResponseTooLarge as exc:  # a function error: 200 with X-Amz-Function-Error, as Lambda
            return JSONResponse({"errorType": exc.error_type, "errorMessage": str(exc)},
                                headers={"X-Amz-Function-Error": "Unhandled"})
        except Exception as exc:  # the handler raised: Lambda's 200 with X-Amz-Function-Error
            return JSONResponse({"errorType": type(exc).__name__, "errorMessage": str(exc)},
                                headers={"X-Amz-Function-Error": "Unhandled"})
        return JSONResponse(result)

    def _invoke_quietly(self, function: LocalFunction, payload: dict[str, Any]) -> None:
        """An asynchronous invocation: Lambda's event queue retries it while it is throttled."""
        wait, given_up_at = ASYNC_RETRY_FIRST_S, time.monotonic() + ASYNC_RETRY_FOR_S
        while True:
            try:
                function.invoke(payload)
                return
            except Throttled as exc:
                if time.monotonic() + wait > given_up_at:
                    log.warning("%s: an asynchronous invocation throttled for 6 h is dropped", function.name)
                    return
                log.debug("%s: asynchronous invocation throttled (%s), retried in %ss", function.name, exc, wait)
                time.sleep(wait)
                wait = min(wait * 2, ASYNC_RETRY_MAX_S)
            except BaseException as exc:  # (also when the cluster stops meanwhile) the maintenance run catches up
                log.debug("%s failed on an asynchronous invocation: %s", function.name, exc)
                return
