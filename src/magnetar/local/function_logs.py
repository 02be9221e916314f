"""The local functions' logs: what each function prints during its invocations goes to its own
file, as Lambda sends a function's stdout to its log group.

The local runtime runs every function in one process, so the process's stdout is routed: a write
made inside an invocation (the handler's thread, and the core's pool threads, which run in a copy
of its context) goes to `<directory>/<function name>.log`; any other write goes to the process's
stdout as before. Powertools' Logger lines and the EMF metric lines (magnetar.adapters.aws.telemetry)
land there, one JSON document a line. A file past `max_bytes` is moved to `<name>.log.1`.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any

MAX_LOG_BYTES = 20 * 1024 * 1024
_FUNCTION: ContextVar[FunctionLog | None] = ContextVar("magnetar_function_log", default=None)


def default_directory(port: int) -> Path:
    """Where `magnetar local up` on `port` writes its functions' logs unless told (--logs-dir)."""
    return Path(tempfile.gettempdir()) / f"magnetar-{port}" / "logs"


class FunctionLog:
    """One function's log file (appended; rotated once past `max_bytes`)."""

    def __init__(self, path: Path, max_bytes: int = MAX_LOG_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._file: IO[str] | None = None

    def write(self, text: str) -> None:
        with self._lock:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("a", encoding="utf-8")
            self._file.write(text)
            self._file.flush()
            if self._file.tell() > self.max_bytes:
                self._file.close()
                self.path.replace(self.path.with_name(self.path.name + ".1"))
                self._file = None

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


class _RoutedStdout(io.TextIOBase):
    """sys.stdout, routed: into the invocation's function log when there is one."""

    def __init__(self, fallback: IO[str]) -> None:
        self.fallback = fallback

    def write(self, text: str) -> int:
        target = _FUNCTION.get()
        if target is None:
            return self.fallback.write(text)
        target.write(text)
        return len(text)

    def flush(self) -> None:
        if _FUNCTION.get() is None:
            self.fallback.flush()

    def isatty(self) -> bool:
        return self.fallback.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.fallback, "encoding", "utf-8")

    def fileno(self) -> int:
        return self.fallback.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fallback, name)


_INSTALL_LOCK = threading.Lock()


def _install() -> None:
    with _INSTALL_LOCK:
        if not isinstance(sys.stdout, _RoutedStdout):
            sys.stdout = _RoutedStdout(sys.stdout)


class FunctionLogs:
    """The logs of the local functions, one file each in `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._logs: dict[str, FunctionLog] = {}
        self._lock = threading.Lock()
        _install()

    def log(self, function: str) -> FunctionLog:
        with self._lock:
            if function not in self._logs:
                self._logs[function] = FunctionLog(self.directory / f"{function}.log")
            return self._logs[function]

    def path(self, function: str) -> Path:
        return self.directory / f"{function}.log"

    @contextlib.contextmanager
    def capture(self, function: str) -> Iterator[None]:
        """Route this context's stdout to `function`'s log (an invocation)."""
        _install()  # again: a test harness may have swapped sys.stdout since
        token = _FUNCTION.set(self.log(function))
        try:
            yield
        finally:
            _FUNCTION.reset(token)

    def close(self) -> None:
        with self._lock:
            for log in self._logs.values():
                log.close()
