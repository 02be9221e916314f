"""A registered function's instance stats (Pulsar's: received, processed, user and system
exceptions, latency, last invocation, latest exceptions), added up per invocation by the
dispatcher in this cluster's table beside the function's state; `functions status|stats` read them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from magnetar.core.ports import MetadataStore

STATS_SUFFIX = "#stats"  # the stats' items sit beside the function's state, under their own name


class FunctionStats:
    """A function's instance stats, added up per invocation in the registry's store: counters
    (one atomic write each) and the last invocation and latest exceptions as values."""

    COUNTERS = ("received", "processed", "userExceptions", "systemExceptions", "latencyUsTotal", "latencyCount")

    def __init__(self, metadata: MetadataStore, fqfn: str) -> None:
        self.metadata = metadata
        self.key = fqfn + STATS_SUFFIX

    def add(self, stats: dict[str, Any]) -> None:
        amounts = {"received": int(stats.get("received", 0)), "processed": int(stats.get("processed", 0)),
                   "userExceptions": int(stats.get("userExceptions", 0)),
                   "systemExceptions": int(stats.get("systemExceptions", 0)),
                   "latencyUsTotal": int(float(stats.get("latencyMsTotal", 0.0)) * 1000),
                   "latencyCount": int(stats.get("latencyCount", 0))}
        for name, amount in amounts.items():
            if amount:
                self.metadata.incr_function_counter(self.key, name, amount)
        last = int(stats.get("lastInvocation") or 0)
        if last:
            self.metadata.put_function_state(self.key, "lastInvocation", str(last).encode())
        for name in ("latestUserExceptions", "latestSystemExceptions"):
            if stats.get(name):
                self.metadata.put_function_state(self.key, name, json.dumps(stats[name][-10:]).encode())

    def read(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in self.COUNTERS:
            item = self.metadata.get_function_state(self.key, name)
            values[name] = (item.counter or 0) if item is not None else 0
        for name in ("lastInvocation", "latestUserExceptions", "latestSystemExceptions"):
            item = self.metadata.get_function_state(self.key, name)
            raw = item.value if item is not None and item.value is not None else None
            values[name] = (int(raw) if name == "lastInvocation" else json.loads(raw)) if raw else None
        return values

    def clear(self) -> None:
        self.metadata.clear_function_state(self.key)
