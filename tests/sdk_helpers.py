"""Helpers shared by the SDK-level test suites (importable: pytest puts tests/ on sys.path)."""

from __future__ import annotations

from typing import Any

import magnetar
from magnetar.client import exceptions


def receive_until_quiet(consumer: Any, timeout_ms: int = 1500, ack: bool = True) -> list[magnetar.Message]:
    """Every message the consumer gets until none arrives for `timeout_ms` (acknowledged if `ack`);
    with those a poll brought just after that time (a receive's Timeout leaves them queued)."""
    out: list[magnetar.Message] = []
    wait_ms = timeout_ms
    while True:
        try:
            msg = consumer.receive(timeout_millis=wait_ms)
        except exceptions.Timeout:
            if wait_ms == 0:
                return out
            wait_ms = 0  # what is queued already, without waiting again
            continue
        wait_ms = timeout_ms
        out.append(msg)
        if ack:
            consumer.acknowledge(msg)
