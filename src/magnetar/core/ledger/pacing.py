"""When to seal: by the load, not by the clock.

Every seal costs the same few requests whatever it holds (a segment object written, a DynamoDB
transaction, then a GET by each consumer container and a look-up of the topic's connections), so
a seal of 20 messages costs as much as one of 2,000. The journal's event-source mapping invokes
the journal consumer as soon as records arrive, one invocation at a time per shard, and records
that arrive meanwhile wait for the next one: how long an invocation takes decides how much the
next one gets. `SealPacing` turns that into the rule:

- a batch **big enough** to be worth an object (`full_bytes`) is sealed at once;
- on a **quiet** shard (nothing sealed on it for `latency_target_ms`: nothing else is coming) the
  batch is sealed at once, so a lone message is not held back;
- otherwise the batch is held until its oldest record has waited `latency_target_ms` since it
  reached the journal, and what arrives meanwhile gathers for the next invocation.

A busy shard is therefore sealed about every half target (the held invocation, then the one that
gathered during it), in segments that grow with the rate, and a message waits at most about the
target plus a seal for it. The mapping's own batching window (`journalBatchingWindow`, whole
seconds) still adds to this for those who trade more latency for still fewer seals.

Holding costs Lambda duration (at most the target per seal), priced in docs/cost-model.md: at
the default it is a fraction of the S3 PUT and DynamoDB transaction a seal saves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from magnetar.core.errors import InvalidInput
from magnetar.core.ports import JournalRecord

DEFAULT_SEAL_LATENCY_MS = 250  # keeps end-to-end p99 under ~700 ms at the defaults (docs/benchmarks.md)
MAX_SEAL_LATENCY_MS = 10_000  # well inside the writers' 10 s deadline and the 60 s hole grace
FULL_SEGMENT_BYTES = 1024 * 1024  # a batch this big is sealed at once: its PUT is well spent


def check_seal_latency(ms: int) -> int:
    """A seal latency target in ms, checked (0 turns holding off: every batch sealed at once)."""
    if not 0 <= ms <= MAX_SEAL_LATENCY_MS:
        raise InvalidInput(f"the seal latency target is 0 to {MAX_SEAL_LATENCY_MS} ms, not {ms}")
    return ms


@dataclass
class SealPacing:
    """How long the journal consumer holds a batch before sealing it (one per container: it
    remembers when it last sealed each shard; a container new to a shard seals at once)."""

    latency_target_ms: int = DEFAULT_SEAL_LATENCY_MS
    full_bytes: int = FULL_SEGMENT_BYTES
    _last_sealed: dict[str, int] = field(default_factory=dict)  # shard -> when its last batch was sealed here

    def __post_init__(self) -> None:
        check_seal_latency(self.latency_target_ms)

    def hold_ms(self, records: Sequence[JournalRecord], now_ms: int) -> int:
        """How long to hold `records` (one shard's batch) before sealing them: 0 to seal now."""
        if not records or self.latency_target_ms == 0:
            return 0
        if sum(len(r.data) for r in records) >= self.full_bytes:
            return 0
        last = self._last_sealed.get(records[0].position.shard_id)
        if last is None or now_ms - last >= self.latency_target_ms:
            return 0  # a quiet shard: nothing more is on its way
        oldest = min(r.arrival_ms for r in records)
        return max(0, min(oldest + self.latency_target_ms - now_ms, self.latency_target_ms))

    def sealed(self, records: Sequence[JournalRecord], now_ms: int) -> None:
        """Note that `records` (one shard's batch) were sealed at `now_ms`."""
        if records:
            if len(self._last_sealed) > 10_000:  # shards come and go with resharding
                self._last_sealed.clear()
            self._last_sealed[records[0].position.shard_id] = now_ms
