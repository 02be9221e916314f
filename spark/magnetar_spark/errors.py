"""The connector's error: a request the broker refused, or a read that cannot go on."""

from __future__ import annotations


class MagnetarSourceError(RuntimeError):
    """The broker refused a request (its `reason` is in the message) or the read cannot go on."""

    def __init__(self, message: str, status: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
