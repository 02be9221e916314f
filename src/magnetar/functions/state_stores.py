"""Two implementations of `FunctionState` (functions/state.py):

- `MemoryFunctionState`: in this process only, gone when it ends (unit tests; `localrun --state memory`);
- `RestFunctionState`: the server's store through the REST contract of functions/state.py
  (`--state rest`, localrun's default), reaching the function's state wherever it runs.

Values and counters share one key space, as in Pulsar: a counter read with `get_state` is its
8-byte big-endian value, and `get_counter` of a key set with `put_state` reads 8 bytes back the same
way (a ValueError for anything else). An unset counter is 0; an unset value is None.
"""

from __future__ import annotations

import base64
import struct
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from magnetar.client.transport import Transport


def counter_bytes(value: int) -> bytes:
    """A counter as Pulsar's state store holds it: a signed 64-bit big-endian integer."""
    return struct.pack(">q", value)


def counter_of(value: bytes) -> int:
    if len(value) != 8:
        raise ValueError("the key holds a value, not a counter")
    number: int = struct.unpack(">q", value)[0]
    return number


class MemoryFunctionState:
    """A function's state in a dict (thread-safe); one instance per function."""

    def __init__(self) -> None:
        self._values: dict[str, bytes | int] = {}
        self._lock = threading.Lock()

    def get_state(self, key: str) -> bytes | None:
        with self._lock:
            value = self._values.get(key)
        return counter_bytes(value) if isinstance(value, int) else value

    def put_state(self, key: str, value: bytes) -> None:
        with self._lock:
            self._values[key] = bytes(value)

    def incr_counter(self, key: str, amount: int) -> int:
        with self._lock:
            current = self._values.get(key, 0)
            after = (counter_of(current) if isinstance(current, bytes) else current) + int(amount)
            self._values[key] = after
            return after

    def get_counter(self, key: str) -> int:
        with self._lock:
            value = self._values.get(key, 0)
        return counter_of(value) if isinstance(value, bytes) else value

    def del_counter(self, key: str) -> None:
        with self._lock:
            self._values.pop(key, None)


class RestFunctionState:
    """A function's state through the broker's REST API (the contract in functions/state.py), with
    the SDK's transport (its credentials, retries of 5xx and connection errors)."""

    def __init__(self, transport: Transport, tenant: str, namespace: str, name: str) -> None:
        self._transport = transport
        fn = "/".join(quote(part, safe="") for part in (tenant, namespace, name))
        self._state = f"/admin/v3/functions/{fn}/state"
        self._counters = f"/magnetar/v1/functions/{fn}/counters"

    @staticmethod
    def _key(key: str) -> str:
        return quote(key, safe="")

    def _read(self, key: str) -> dict[str, Any] | None:
        from magnetar.client import exceptions

        try:
            answer = self._transport.call("GET", f"{self._state}/{self._key(key)}")
        except exceptions.PulsarException as exc:
            if exc.status == 404:  # the contract's "unset"
                return None
            raise
        return answer if isinstance(answer, dict) else None

    def get_state(self, key: str) -> bytes | None:
        state = self._read(key)
        if state is None:
            return None
        if state.get("byteValue") is not None:
            return base64.b64decode(state["byteValue"])
        if state.get("stringValue") is not None:
            return str(state["stringValue"]).encode("utf-8")
        if state.get("numberValue") is not None:
            return counter_bytes(int(state["numberValue"]))
        return None

    def put_state(self, key: str, value: bytes) -> None:
        body = {"key": key, "byteValue": base64.b64encode(bytes(value)).decode("ascii")}
        self._transport.call("POST", f"{self._state}/{self._key(key)}", body)

    def incr_counter(self, key: str, amount: int) -> int:
        answer = self._transport.call("POST", f"{self._counters}/{self._key(key)}", {"amount": int(amount)})
        return int(answer["value"])

    def get_counter(self, key: str) -> int:
        state = self._read(key)
        if state is None:
            return 0
        if state.get("numberValue") is not None:
            return int(state["numberValue"])
        if state.get("byteValue") is not None:
            return counter_of(base64.b64decode(state["byteValue"]))
        raise ValueError(f"state key {key!r} holds a value, not a counter")

    def del_counter(self, key: str) -> None:
        from magnetar.client import exceptions

        try:
            self._transport.call("DELETE", f"{self._counters}/{self._key(key)}")
        except exceptions.PulsarException as exc:
            if exc.status != 404:  # already unset
                raise
