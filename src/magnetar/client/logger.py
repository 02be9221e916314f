"""pulsar-client's `logger=` setting: where the SDK's log (the `magnetar` logger) goes, for one client."""

from __future__ import annotations

import logging
import sys
from typing import Any

from magnetar.client.types import ConsoleLogger, FileLogger, LoggerLevel

_LEVELS = {LoggerLevel.Debug: logging.DEBUG, LoggerLevel.Info: logging.INFO, LoggerLevel.Warn: logging.WARNING,
           LoggerLevel.Error: logging.ERROR}


class _ToLogger(logging.Handler):
    """Hands the SDK's records to the application's logger (pulsar-client's `logger=Logger`)."""

    def __init__(self, target: logging.Logger) -> None:
        super().__init__()
        self._target = target

    def emit(self, record: logging.LogRecord) -> None:
        self._target.handle(record)


def log_handler(logger: Any) -> logging.Handler | None:
    """pulsar-client's `logger`: where the SDK's log (the `magnetar` logger) goes, for this client."""
    handler: logging.Handler
    level = logging.NOTSET
    if logger is None:
        return None
    if isinstance(logger, logging.Logger):
        handler = _ToLogger(logger)
    elif isinstance(logger, ConsoleLogger):
        handler, level = logging.StreamHandler(sys.stdout), _LEVELS[logger.log_level]
    elif isinstance(logger, FileLogger):
        handler, level = logging.FileHandler(logger.log_file), _LEVELS[logger.log_level]
    else:
        raise ValueError("Logger is expected to be either None, logger.Logger, pulsar.ConsoleLogger or "
                         "pulsar.FileLogger")
    handler.setLevel(level)
    root = logging.getLogger("magnetar")
    if level and (root.level == logging.NOTSET or root.level > level):
        root.setLevel(level)
    root.addHandler(handler)
    return handler
