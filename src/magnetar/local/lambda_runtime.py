"""Loads a function's handler from its code directory and invokes it as Lambda would."""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[3]
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


@dataclass
class LambdaContext:
    """The attributes of Lambda's context object that handlers and Powertools read."""

    function_name: str
    memory_limit_in_mb: int = 1024
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
    duration_ms_total: float = 0.0

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            fn = self._warm.pop() if self._warm else None
        if fn is None:
            fn = self.load()
        started = time.perf_counter()
        try:
            return fn(event, LambdaContext(self.name, timeout_s=self.timeout_s))
        except BaseException:
            self.errors += 1
            raise
        finally:  # billed duration: what Lambda would charge GB-seconds for (counters are approximate
            # under threads: += on floats is not atomic, a lost update only skews a benchmark figure)
            self.invocations += 1
            self.duration_ms_total += (time.perf_counter() - started) * 1000
            with self._lock:
                self._warm.append(fn)  # warm for the next invocation, as Lambda keeps it

    @property
    def environments(self) -> int:
        """Execution environments created so far (cold starts)."""
        return self._created

    def stats(self) -> dict[str, float]:
        return {"invocations": self.invocations, "errors": self.errors, "duration_ms_total": self.duration_ms_total,
                "environments": self._created}

    def reset_stats(self) -> None:
        self.invocations, self.errors, self.duration_ms_total = 0, 0, 0.0


BROKER = LocalFunction("magnetar-broker", "functions/broker", timeout_s=29)
JOURNAL_CONSUMER = LocalFunction("magnetar-journal-consumer", "functions/journal_consumer", timeout_s=120)
MAINTENANCE = LocalFunction("magnetar-maintenance", "functions/maintenance", timeout_s=300)
WEBSOCKET = LocalFunction("magnetar-websocket", "functions/websocket", timeout_s=29)
AUTHORIZER = LocalFunction("magnetar-authorizer", "functions/authorizer", timeout_s=10)
