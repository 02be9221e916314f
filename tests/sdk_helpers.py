"""Helpers shared by the SDK-level test suites (importable: pytest puts tests/ on sys.path)."""

from __future__ import annotations

from typing import Any

import magnetar
from magnetar.client import exceptions


def receive_until_quiet(consumer: Any, timeout_ms: int = 1500, ack: bool = True) -> list[magnetar.Message]:
    """Every message the consumer gets until none arrives for `timeout_ms` (acknowledged if `ack`)."""
    out = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=timeout_ms)
        except exceptions.Timeout:
            return out
        out.append(msg)
        if ack:
            consumer.acknowledge(msg)
