"""Loads a function's handler from its code directory and invokes it as Lambda would."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from magnetar.config import (
    DEFAULT_FUNCTION_DISPATCHER,
    FUNCTION_DISPATCHER_TIMEOUT_S,
    JOURNAL_CONSUMER_MEMORY_MB,
    LAMBDA_MEMORY_MB,
)
from magnetar.local.fidelity import (
    LAMBDA_COLD_START,
    LAMBDA_WARM_OVERHEAD,
    AwsFidelity,
    LatencyModel,
    latency_model,
)
from magnetar.local.function_logs import FunctionLogs

REPO_ROOT = Path(__file__).resolve().parents[3]
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
# Lambda's synchronous payload limit, 6 MB each way; a response over it fails with the figure
# Lambda's error message names (Function.ResponseSizeTooLarge)
MAX_RESPONSE_BYTES = 6_291_556


class Throttled(Exception):
    """Lambda refused the invocation: TooManyRequestsException, ConcurrentInvocationLimitExceeded
    (the account's concurrency is in use) or ReservedFunctionConcurrentInvocationLimitExceeded (the
    function's reserved concurrency is). The function did not run."""

    def __init__(self, function: str, limit: int, reserved: bool = False) -> None:
        whose = "its reserved" if reserved else "the account's"
        super().__init__(f"Rate Exceeded. {function}: {whose} {limit} concurrent executions are in use")
        self.function, self.limit = function, limit
        self.reason = ("ReservedFunctionConcurrentInvocationLimitExceeded" if reserved
                       else "ConcurrentInvocationLimitExceeded")


class ResponseTooLarge(Exception):
    """The function ran but its response is over Lambda's payload limit: a function error."""

    error_type = "Function.ResponseSizeTooLarge"

    def __init__(self, size: int) -> None:
        super().__init__(f"Response payload size exceeded maximum allowed payload size ({MAX_RESPONSE_BYTES} bytes).")
        self.size = size


class AccountConcurrency:
    """The account's concurrent executions, shared by every function, as Lambda counts them: an
    invocation holds one from the start of its environment's initialization to its end."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0
        self.peak = 0
        self.throttles = 0
        self._lock = threading.Lock()

    def acquire(self) -> bool:
        with self._lock:
            if self.running >= self.limit:
                self.throttles += 1
                return False
            self.running += 1
            self.peak = max(self.peak, self.running)
            return True

    def release(self) -> None:
        with self._lock:
            self.running -= 1


@dataclass
class LambdaSettings:
    """How faithfully invocations imitate Lambda (`magnetar.local.fidelity`): off by default."""

    concurrency: AccountConcurrency | None = None  # limits: the account's concurrency quota
    check_response_size: bool = False  # limits: a response over 6 MB is a function error
    latency: LatencyModel | None = None  # modeled invocation overhead and cold starts
    logs: FunctionLogs | None = None  # each function's stdout (log lines, EMF metrics) to a file of its own

    @classmethod
    def from_fidelity(cls, fidelity: AwsFidelity, latency: LatencyModel | None = None) -> LambdaSettings:
        return cls(concurrency=AccountConcurrency(fidelity.lambda_concurrency) if fidelity.limits else None,
                   check_response_size=fidelity.limits,
                   latency=latency if latency is not None else latency_model(fidelity))


def response_size(result: Any) -> int:
    """The bytes Lambda returns for a handler's result: its JSON, as the Python runtime serializes it."""
    return len(json.dumps(result, default=str))


@dataclass
class LambdaContext:
    """The attributes of Lambda's context object that handlers and Powertools read."""

    function_name: str
    memory_limit_in_mb: int = LAMBDA_MEMORY_MB
    timeout_s: int = 29
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = ""
    log_group_name: str = ""
    log_stream_name: str = "local"
    function_version: str = "$LATEST"
    _started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"
        self.log_group_name = f"/aws/lambda/{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.timeout_s - (time.monotonic() - self._started)) * 1000))


@dataclass
class LocalFunction:
    """A function as CDK declares it: a code directory and `module.function`.

    Lambda runs one invocation at a time per execution environment and adds environments as
    concurrent invocations arrive. The emulation does the same: each environment is its own
    import of the handler module (its own module globals, such as Powertools' resolver and its
    `current_event`), used by one invocation at a time and kept warm for the next.
    """

    name: str
    code_dir: str
    handler: str = "handler.handler"
    timeout_s: int = 29
    memory_mb: int = LAMBDA_MEMORY_MB  # as the stack gives it (config.FUNCTION_MEMORY_MB)
    settings: LambdaSettings = field(default_factory=LambdaSettings)
    reserved_concurrency: int | None = None  # at most this many invocations at once (always enforced)
    _running: int = 0
    _warm: list[Handler] = field(default_factory=list)
    _created: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def load(self) -> Handler:
        """A new execution environment: a fresh import of the handler module (a cold start)."""
        with self._lock:
            self._created += 1
            number = self._created
        module_name, func = self.handler.rsplit(".", 1)
        path = REPO_ROOT / self.code_dir / f"{module_name}.py"
        spec = importlib.util.spec_from_file_location(f"magnetar_fn_{self.name}_{number}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # as an import does (dataclasses and pickling look it up)
        spec.loader.exec_module(module)
        fn: Handler = getattr(module, func)
        return fn

    invocations: int = 0
    errors: int = 0
    throttles: int = 0
    duration_ms_total: float = 0.0

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        """One synchronous invocation. With the settings' limits: Throttled when the account's
        concurrency is in use (the function does not run), ResponseTooLarge for a response over
        6 MB (it did run); with modeled latency: Lambda's overhead, a cold start's on a new
        environment (the local import's own time counts toward it)."""
        reserved = self.reserved_concurrency
        with self._lock:
            if reserved is not None and self._running >= reserved:
                self.throttles += 1
                raise Throttled(self.name, reserved, reserved=True)
            self._running += 1
        try:
            concurrency = self.settings.concurrency
            if concurrency is not None and not concurrency.acquire():
                self.throttles += 1
                raise Throttled(self.name, concurrency.limit)
            try:
                return self._run(event)
            finally:
                if concurrency is not None:
                    concurrency.release()
        finally:
            with self._lock:
                self._running -= 1

    def _run(self, event: dict[str, Any]) -> dict[str, Any]:
        logs = self.settings.logs
        if logs is None:
            return self._run_logged(event)
        with logs.capture(self.name):  # as Lambda sends a function's stdout to its log group
            return self._run_logged(event)

    def _run_logged(self, event: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            fn = self._warm.pop() if self._warm else None
        cold_s = 0.0
        if fn is None:
            loading = time.perf_counter()
            fn = self.load()
            cold_s = time.perf_counter() - loading
        latency = self.settings.latency
        if latency is not None:
            time.sleep(latency.delay(LAMBDA_COLD_START, cold_s) if cold_s else latency.delay(LAMBDA_WARM_OVERHEAD))
        started = time.perf_counter()
        try:
            result = fn(event, LambdaContext(self.name, self.memory_mb, timeout_s=self.timeout_s))
        except BaseException:
            self.errors += 1
            raise
        finally:  # billed duration: what Lambda would charge GB-seconds for (counters are approximate
            # under threads: += on floats is not atomic, a lost update only skews a benchmark figure)
            self.invocations += 1
            self.duration_ms_total += (time.perf_counter() - started) * 1000
            with self._lock:
                self._warm.append(fn)  # warm for the next invocation, as Lambda keeps it
        if self.settings.check_response_size:
            size = response_size(result)
            if size > MAX_RESPONSE_BYTES:
                self.errors += 1
                raise ResponseTooLarge(size)
        return result

    @property
    def environments(self) -> int:
        """Execution environments created so far (cold starts)."""
        return self._created

    def stats(self) -> dict[str, float]:
        return {"invocations": self.invocations, "errors": self.errors, "duration_ms_total": self.duration_ms_total,
                "environments": self._created, "throttles": self.throttles}

    def reset_stats(self) -> None:
        self.invocations, self.errors, self.throttles, self.duration_ms_total = 0, 0, 0, 0.0


BROKER = LocalFunction("magnetar-broker", "functions/broker", timeout_s=29)
JOURNAL_CONSUMER = LocalFunction("magnetar-journal-consumer", "functions/journal_consumer", timeout_s=120,
                                 memory_mb=JOURNAL_CONSUMER_MEMORY_MB)
MAINTENANCE = LocalFunction("magnetar-maintenance", "functions/maintenance", timeout_s=300)
WEBSOCKET = LocalFunction("magnetar-websocket", "functions/websocket", timeout_s=29)
AUTHORIZER = LocalFunction("magnetar-authorizer", "functions/authorizer", timeout_s=10)
# Pulsar Functions: the dispatcher (registered functions' Lambda functions are created at run time
# through the emulated Lambda API, magnetar.local.lambda_api, each a LocalFunction of its own)
FUNCTION_DISPATCHER = LocalFunction(DEFAULT_FUNCTION_DISPATCHER, "functions/function_dispatcher",
                                    timeout_s=FUNCTION_DISPATCHER_TIMEOUT_S)
FUNCTION_RUNTIME_DIR = "functions/function_runtime"
FUNCTIONS = (BROKER, JOURNAL_CONSUMER, MAINTENANCE, WEBSOCKET, AUTHORIZER,
             FUNCTION_DISPATCHER)  # one account: one concurrency pool


def configure(settings: LambdaSettings, functions: tuple[LocalFunction, ...] = FUNCTIONS) -> None:
    """Every function of the account under the same settings (and concurrency pool)."""
    for function in functions:
        function.settings = settings
