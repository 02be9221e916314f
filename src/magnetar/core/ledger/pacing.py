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

When a batch was held, the sealer also reads ahead (`Sealer.gather`): what reached the shard
during the hold is read with one GetRecords and sealed with the batch, instead of gathering for
an invocation of its own that would be sealed at once (its oldest record having waited most of a
target already). The mapping still delivers those records in its next batch; the container
remembers how far it sealed (`gathered_through`) and that batch skips them (`fresh`). A busy
shard is therefore sealed about once per target, in segments that grow with the rate, and a
message waits at most about the target plus a seal for it. The mapping's own batching window (`journalBatchingWindow`, whole
seconds) still adds to this for those who trade more latency for still fewer seals.

Holding costs Lambda duration (at most the target per seal), priced in docs/cost-model.md: at
the default it is a fraction of the S3 PUT and DynamoDB transaction a seal saves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from magnetar.core.errors import InvalidInput
from magnetar.core.ports import JournalPosition, JournalRecord, SealState

# A message of a busy topic waits twice before it is readable: in its producer's batch (at most the
# producer's batching delay) and in the journal for its seal (at most this target). A producer's
# wait costs a publish request per delay, a seal's a seal per target, so the split that costs least
# puts delay : target at sqrt(price of a publish : price of a seal): a publish is an API Gateway
# request, a Lambda invocation of ~20 ms, a reservation and a journal record, ~$2.1 per million; a
# seal a segment PUT, a 4-unit commit, the consumer's poll and GET, a journal-consumer invocation
# and its hold, ~$12 per million (magnetar.cost.prices). sqrt(2.1 / 12) ~ 0.42: a budget of 300 ms
# splits into ~90 ms of delay and ~210 ms of target, rounded to 100 and 200. End-to-end latency
# counted from the publish time (set by the broker, after the producer's batch closed) is about
# the target plus 230-260 ms of publish, push, seal, look and GET at the p99 at 100 msg/s: 200
# keeps it under 500 ms (427-464 ms in three runs; 250 put it on that bound, 468-515 ms;
# docs/benchmarks.md).
DEFAULT_SEAL_LATENCY_MS = 200  # and the SDK's batching delay 100 ms (client/producer.py)
MAX_SEAL_LATENCY_MS = 10_000  # well inside the writers' 10 s deadline and the 60 s hole grace
FULL_SEGMENT_BYTES = 1024 * 1024  # a batch this big is sealed at once: its PUT is well spent


MAX_PREDICTED_SEAL_INTERVAL_MS = 1_000  # a slower cadence is not a busy topic's: not predicted


def next_seal_in_ms(seal: SealState, now_ms: int) -> int | None:
    """When a busy topic's next seal is due, in ms from `now_ms`, from the cadence of its newest
    segments (a busy shard is sealed about once per latency target): a consumer that keeps up needs
    no look before then. None when it cannot be told: a quiet topic is sealed as soon as something
    arrives, and a seal already overdue is not predicted again."""
    cadence = _cadence(seal)
    if cadence is None or cadence[0] <= now_ms:
        return None
    return cadence[0] - now_ms


def seal_expected(seal: SealState, now_ms: int) -> bool:
    """Whether a busy topic's next seal is due within about a cadence's interval: predicted, or
    late by less than one interval (a consumer looking just before it comes finds nothing)."""
    cadence = _cadence(seal)
    return cadence is not None and now_ms < cadence[0] + cadence[1]


def _cadence(seal: SealState) -> tuple[int, int] | None:
    """(when the next seal is due, the mean interval) of a busy topic, from its newest segments.
    The mean of the recent intervals: consecutive intervals vary against each other (a longer
    hold's read-ahead leaves less for the next), so the last one alone mispredicts more (measured
    flat out: a mean error of 62 ms, against 47 ms over three). None for a quiet topic."""
    times = [s.created_at for s in seal.recent_segments]
    busy: list[int] = []  # the newest intervals, back to the first that was not a busy topic's
    for interval in reversed([b - a for a, b in pairwise(times)]):
        if not 0 < interval <= MAX_PREDICTED_SEAL_INTERVAL_MS:
            break
        busy.append(interval)
    if not busy:
        return None
    mean = round(sum(busy) / len(busy))
    return times[-1] + mean, mean


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
    # shard -> the sequence number through which this container sealed records it read ahead of
    # the mapping (the mapping's next batch starts with them)
    _gathered: dict[str, int] = field(default_factory=dict)

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

    def fresh(self, records: Sequence[JournalRecord]) -> list[JournalRecord]:
        """`records` (one shard's batch) without those this container already sealed from a read-ahead."""
        if not records:
            return []
        through = self._gathered.get(records[0].position.shard_id)
        if through is None:
            return list(records)
        return [r for r in records if int(r.position.sequence) > through]

    def gathered_through(self, position: JournalPosition) -> None:
        """Note that every record of `position`'s shard through it is sealed (read ahead of the mapping)."""
        if len(self._gathered) > 10_000:
            self._gathered.clear()
        self._gathered[position.shard_id] = int(position.sequence)
