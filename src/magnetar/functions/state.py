"""A function's state (Pulsar's state API): values and counters by key, per function.

The store behind it is the server's (DynamoDB through `/admin/v3/functions/.../state`); a running
function reaches it through this protocol. The REST contract, Pulsar's paths:

- `GET  /admin/v3/functions/{tenant}/{namespace}/{name}/state/{key}` → Pulsar's FunctionState
  `{"key", "stringValue" | "byteValue" (base64) | "numberValue", "version"}`, 404 when unset;
- `POST /admin/v3/functions/{tenant}/{namespace}/{name}/state/{key}` with a FunctionState body
  (JSON, or Pulsar's multipart form field `state`) → 204;
- Magnetar's own, for counters: `POST /magnetar/v1/functions/{tenant}/{namespace}/{name}/counters/{key}`
  `{"amount": n}` → `{"value": <after>}` (one atomic increment), `DELETE` the same path → 204.
  A counter reads as a FunctionState with `numberValue`.
"""

from __future__ import annotations

from typing import Protocol


class FunctionState(Protocol):
    def get_state(self, key: str) -> bytes | None: ...

    def put_state(self, key: str, value: bytes) -> None: ...

    def incr_counter(self, key: str, amount: int) -> int: ...

    def get_counter(self, key: str) -> int: ...

    def del_counter(self, key: str) -> None: ...
