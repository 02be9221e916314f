"""Helpers shared by the SDK-level test suites (importable: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import magnetar
from magnetar.client import exceptions


def receive_until_quiet(consumer: Any, timeout_ms: int = 2500, ack: bool = True) -> list[magnetar.Message]:
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


@contextmanager
def producing(producer: Any, interval_s: float = 0.01) -> Iterator[list[bytes]]:
    """`producer` sends m0, m1, ... every `interval_s` from a thread while the block runs (then
    flushes); yields the list of what it sent, growing meanwhile."""
    stop, sent = threading.Event(), []

    def produce() -> None:
        while not stop.is_set():
            payload = f"m{len(sent)}".encode()
            producer.send_async(payload, None)
            sent.append(payload)
            time.sleep(interval_s)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        yield sent
    finally:
        stop.set()
        thread.join()
        producer.flush()
