"""Registered functions' code, locally, in a worker process per function.

On AWS each registered function is a Lambda function of its own (its own execution environments);
locally every such invocation reaches the local functions runtime (functions/function_runtime), which
hands it to the function's worker: a process started (spawned) on the function's first invocation,
which runs `FunctionHost` (magnetar.functions.invocation) on its own broker (the same emulated
table and bucket, from the environment) and answers each event over a pipe. The user's code is thus
imported in the worker, not in the cluster's process: a function that crashes or exits takes its
worker with it (the invocation fails, the dispatcher negatively acknowledges the batch, and the next
invocation starts a new worker), as a Lambda environment would.

One invocation at a time per worker (a lock), as one Lambda execution environment. A worker's start
(the process spawned, its imports, its broker built) is the environment's creation, which Lambda does
before an invocation's time starts: it has a limit of its own (`START_TIMEOUT_S`), and the function's
timeout counts from when the worker is ready. Counted in the invocation, a start slower than a short
timeout (a loaded machine) would fail every invocation, each killing the worker the next one starts
again, and the function would never run.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import multiprocessing
import threading
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

log = logging.getLogger(__name__)
ENV_FUNCTION_WORKERS = "MAGNETAR_FUNCTION_WORKERS"  # "process": a worker per function; else in process
INVOKE_TIMEOUT_S = 90.0
START_TIMEOUT_S = 120.0  # a worker's start (spawn, imports, broker): not the invocation's time
READY = "ready"


class WorkerFailed(RuntimeError):
    """The worker died or did not answer in time: the invocation failed."""


def _serve(connection: Connection) -> None:
    """The worker's loop: an event in, its result (or the error's text) out."""
    from magnetar.adapters.aws import build_broker
    from magnetar.functions.invocation import FunctionHost

    host = FunctionHost(build_broker().functions)
    connection.send((READY, None))
    while True:
        try:
            event = connection.recv()
        except EOFError:
            return
        if event is None:
            return
        try:
            connection.send(("ok", host.handle(event)))
        except Exception as exc:
            connection.send(("error", f"{type(exc).__name__}: {exc}"))


@dataclass
class _Worker:
    process: BaseProcess
    connection: Connection
    lock: threading.Lock = field(default_factory=threading.Lock)
    ready: bool = False  # it said so once started: invocations' timeouts count from then


class FunctionWorkers:
    def __init__(self, timeout_s: float = INVOKE_TIMEOUT_S, start_timeout_s: float = START_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self._workers: dict[str, _Worker] = {}
        self._lock = threading.Lock()
        self.started = 0

    def _worker(self, fqfn: str) -> _Worker:
        with self._lock:
            worker = self._workers.get(fqfn)
            if worker is None or not worker.process.is_alive():
                context = multiprocessing.get_context("spawn")
                parent, child = context.Pipe()
                process = context.Process(target=_serve, args=(child,), name=f"function-{fqfn}", daemon=True)
                process.start()
                child.close()
                worker = self._workers[fqfn] = _Worker(process, parent)
                self.started += 1
            return worker

    def invoke(self, event: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """Run `event` in the function's worker; past `timeout_s` (the invocation's time left, as the
        function's Lambda timeout allows, counted once the worker is ready) the worker is stopped and
        the invocation fails, as Lambda's."""
        fqfn = str(event["fqfn"])
        worker = self._worker(fqfn)
        timeout = self.timeout_s if timeout_s is None else max(0.1, timeout_s)
        with worker.lock:
            try:
                if not worker.ready:
                    self._await_start(worker)
                worker.connection.send(event)
                if not worker.connection.poll(timeout):
                    raise WorkerFailed(f"Task timed out after {timeout:.2f} seconds")
                kind, value = worker.connection.recv()
            except (EOFError, OSError, WorkerFailed) as exc:
                self._discard(fqfn, worker)
                raise WorkerFailed(f"the worker of {fqfn} failed: {exc!r}") from None
        if kind != "ok":
            raise RuntimeError(str(value))
        result: dict[str, Any] = value
        return result

    def _await_start(self, worker: _Worker) -> None:
        """Until the worker says it is ready (WorkerFailed past `start_timeout_s`, or if it died)."""
        if not worker.connection.poll(self.start_timeout_s):
            raise WorkerFailed(f"the worker did not start within {self.start_timeout_s:.0f} seconds")
        kind, _ = worker.connection.recv()
        if kind != READY:
            raise WorkerFailed(f"the worker answered {kind!r} before it was ready")
        worker.ready = True

    def _discard(self, fqfn: str, worker: _Worker) -> None:
        with self._lock:
            if self._workers.get(fqfn) is worker:
                del self._workers[fqfn]
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(timeout=5)

    def pids(self) -> dict[str, int | None]:
        with self._lock:
            return {fqfn: w.process.pid for fqfn, w in self._workers.items()}

    def close(self) -> None:
        with self._lock:
            workers, self._workers = list(self._workers.values()), {}
        for worker in workers:
            with contextlib.suppress(OSError):
                worker.connection.send(None)
            worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(timeout=5)


WORKERS = FunctionWorkers()  # the process's workers (the local runtime's function environments share them)
atexit.register(WORKERS.close)
