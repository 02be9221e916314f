"""A producer's pacing when the journal's shard is saturated (the SDK's producers and the binary
protocol proxy's, one rule).

A topic partition's journal is one Kinesis shard: 1 MiB/s of writes, a token bucket holding one
second of it. A producer with more to send than that (flat out) would otherwise send every
request as soon as the previous one is answered, and every request would find the bucket empty:
the broker's append is refused and retried until the budget has refilled — each refusal an AWS
request, and its wait a part of the message's end-to-end latency, since the publish time is set
before the journal write.

Until anything is reported, a producer's requests are spaced at the shard's rate: sent faster,
they only empty the bucket's burst and are refused after it, a second into a flat-out run (two or
three refusals, each holding a whole request's messages for a retry: the worst end-to-end
latencies of a 20 s run, ~700 ms at its p99; spaced, none, and a p99 under 500 ms).

The broker reports how long a write waited for the shard (`throttledMs` in the publish response).
From the first such report on, the producer paces its requests at a byte rate: first 95 % of
what it got through over the last two seconds, sending as fast as it could (its share of the
shard; more while the shard's one-second bucket still held a burst), then probing upward while
requests go through without waiting — by 5 % per tenth of a second of pace until a report comes
while paced, by 2 % after it (TCP's slow start, then its congestion avoidance) — and stepping
back to 80 % of the pace at each report while paced.

The pace never exceeds a shard's write rate (`SHARD_WRITE_BYTES_S`): above it the shard refuses
whatever is sent, and a pace measured during the bucket's first burst (several MiB/s) took many
step-backs to come down — seconds of refusals in which large records starved through the broker's
whole retry patience. The probe goes on unseen above it, so a producer that no longer has more to
send than the shard takes climbs out of pacing (`MAX_RATE`). The probe counts the pace's time a
request spans, not requests: a quarter-MiB request at a low pace spans seconds, and a pace
stepped far down climbed back at a step a request for minutes (simulated with sixteen partition
producers on one shard: tests/unit/test_producer_pacing.py). Below the shard's rate the bucket
refills faster than it drains and absorbs the jitter of the requests' timing. Messages wait in
the producer meanwhile, so a request carries more of them when it can.

The producers of one client (or one proxy) whose topics share a shard share its pacer
(`ShardPacers`: the broker names the shard of each write, `journalShard`): a partitioned
producer's partitions, or several producers of one process, would otherwise each pace on their
own reports, send their requests together after a stall and drain the shard's bucket at once.
The shared pace is a schedule (each request, as it starts, books `nbytes / rate` of it: the
generic cell rate algorithm), and one saturation is answered once: reports of requests that
started before the pace last changed were sent at the old pace and neither step it back nor
probe it up. Producers of different processes each pace on their own reports and settle on
shares of the shard. The times are passed in, so the rule is tested without sleeping.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

FIRST_SHARE = 0.95  # the first report: pace at this share of the rate the refused request got through at
STEP_BACK = 0.8  # a report while paced: step back to this share of the pace
PROBE_FIRST = 1.05  # through without waiting, before any report while paced: climb fast...
PROBE = 1.02  # ...and after one, slowly around the rate it showed
PROBE_PERIOD_S = 0.1  # ...each step per this much of the pace a request spans (at least one step a request)
SHARD_WRITE_BYTES_S = 1024 * 1024.0  # a Kinesis shard's write rate: the pace never goes past it
WINDOW_S = 2.0  # the first report measures what the producer got through over this long
MAX_WAIT_S = 1.0  # the longest one wait (a close or flush is not held longer)
MIN_RATE = 16 * 1024.0  # bytes/s: never pace slower (a report from a shard shared with many)
MAX_RATE = 64 * 1024 * 1024.0  # bytes/s: probed past this (far above any shard), the pace holds nothing: stop


@dataclass
class PublishPacer:
    """The spacing of the requests of the producers that share it (see the module's docstring)."""

    rate: float | None = None  # bytes/s while pacing; None: requests go as soon as they are ready
    _next_start: float = 0.0  # the schedule: when the next request may start
    _changed: float = float("-inf")  # when the pace was set or stepped back last
    _found: bool = False  # a report came while paced: the shard's rate is near
    _recent: deque[tuple[float, int]] = field(default_factory=deque)  # (started, bytes) of the last WINDOW_S
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def pace(self) -> float | None:
        """The bytes/s requests are spaced at (None: not paced): the rate, at most a shard's."""
        return None if self.rate is None else _capped(self.rate)

    def delay(self, now: float) -> float:
        """Seconds to wait before the next request may start (0: now), at most `MAX_WAIT_S` at a
        time (a caller that waits it looks again)."""
        with self._lock:
            return min(MAX_WAIT_S, max(0.0, self._next_start - now))

    def starting(self, now: float, nbytes: int) -> None:
        """A request of `nbytes` payload bytes starts now: it books its time of the schedule (at the
        pace, or before any report at a shard's rate: sending faster only drains the shard's burst
        and is refused after it)."""
        with self._lock:
            pace = self.pace or SHARD_WRITE_BYTES_S
            self._next_start = max(self._next_start, now) + nbytes / pace

    def answered(self, started: float, finished: float, nbytes: int, throttled_ms: int) -> None:
        """A request of `nbytes` payload bytes, sent at `started`, was answered at `finished`;
        the broker's write waited `throttled_ms` for the shard (0: not at all)."""
        with self._lock:
            self._recent.append((started, nbytes))
            while len(self._recent) > 1 and self._recent[0][0] < finished - WINDOW_S:
                self._recent.popleft()  # (this request stays, however long it took)
            if started < self._changed:
                return  # sent at the former pace: its report is of the saturation already answered
            if throttled_ms > 0:
                if self.rate is None:  # what the producers got through lately, sent as fast as they could:
                    # their share of the shard (more while the shard's bucket still held a burst; the
                    # reports that follow step it down: too low would cost throughput until probed back)
                    first = min(s for s, _ in self._recent)
                    self.rate = FIRST_SHARE * sum(b for _, b in self._recent) / max(finished - first, 1e-3)
                else:  # paced too fast: a step back from the pace (not to what got through lately, which
                    # misses the requests still out and, measured just after a stall, would pace the
                    # producers far below the shard: measured, it halved a partitioned run's throughput)
                    self.rate, self._found = _capped(self.rate) * STEP_BACK, True
                self.rate = _capped(max(MIN_RATE, self.rate))
                self._changed = finished
                self._next_start = max(self._next_start, started + nbytes / self.rate)
            elif self.rate is not None:
                spanned = nbytes / _capped(self.rate)  # seconds of the pace it took
                self.rate *= (PROBE if self._found else PROBE_FIRST) ** max(1.0, spanned / PROBE_PERIOD_S)
                if self.rate > MAX_RATE:
                    self.rate, self._found = None, False


def _capped(rate: float) -> float:
    """A rate as a pace: at most a shard's write rate."""
    return min(rate, SHARD_WRITE_BYTES_S)


class ShardPacers:
    """One pacer per journal shard, shared by the producers of one client or one proxy whose
    topics' writes went to that shard (the broker names it with each write)."""

    def __init__(self) -> None:
        self._pacers: dict[str, PublishPacer] = {}
        self._lock = threading.Lock()

    def of(self, shard: str) -> PublishPacer:
        with self._lock:
            return self._pacers.setdefault(shard, PublishPacer())
