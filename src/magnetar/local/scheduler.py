"""EventBridge schedule emulation: invokes a function every `interval_s` with a Scheduled Event."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

from magnetar.local.lambda_runtime import LocalFunction, Throttled

log = logging.getLogger(__name__)


def scheduled_event(rule: str = "MaintenanceSchedule") -> dict[str, Any]:
    """What EventBridge sends a rule's Lambda target on a schedule."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "000000000000",
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-east-1",
        "resources": [f"arn:aws:events:us-east-1:000000000000:rule/{rule}"],
        "detail": {},
    }


class Schedule:
    """rate(interval): one invocation at a time (the stack gives the function a reserved
    concurrency of 1); a failed run is logged and the next tick runs again. EventBridge invokes
    asynchronously: an invocation Lambda throttles waits in Lambda's event queue and is retried,
    from 1 s, doubling up to 5 min (until the schedule stops)."""

    retry_first_s = 1.0
    retry_max_s = 300.0

    def __init__(self, function: LocalFunction, interval_s: float) -> None:
        self.function = function
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"schedule-{function.name}", daemon=True)

    def start(self) -> None:
        if self.interval_s > 0:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def run_now(self, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """One run at once (tests, `POST /_magnetar/local/schedules/maintenance`); `event` stands
        for a rule's constant input, as EventBridge sends it instead of the scheduled event."""
        event = event if event is not None else scheduled_event()
        wait = self.retry_first_s
        with self._lock:
            while True:
                try:
                    return self.function.invoke(event)
                except Throttled:
                    if self._stop.wait(wait):
                        raise
                    wait = min(wait * 2, self.retry_max_s)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.run_now()
            except BaseException:  # a crash of the run (or a simulated one): the next tick retries
                log.exception("scheduled run of %s failed", self.function.name)
