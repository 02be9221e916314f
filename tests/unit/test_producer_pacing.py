"""The producer's pacing while the journal's shard is saturated (core/publish_pacing.py), on a
simulated shard: a token bucket of 1 MiB/s holding one second, as Kinesis's and the emulator's."""

from __future__ import annotations

import pytest

from magnetar.core.publish_pacing import MAX_RATE, MIN_RATE, PublishPacer, ShardPacers

MIB = 1024 * 1024


class Shard:
    """A shard's write budget and a broker that retries a refused put after the record's refill
    time, as the journal adapter does (reporting the wait)."""

    def __init__(self) -> None:
        self.tokens, self.stamp, self.refusals, self.puts = float(MIB), 0.0, 0, 0

    def put(self, now: float, size: int) -> tuple[float, int]:
        """Returns when the record landed and how long it waited (ms)."""
        waited = 0.0
        while True:
            self.tokens = min(MIB, self.tokens + (now + waited - self.stamp) * MIB)
            self.stamp = now + waited
            self.puts += 1
            if self.tokens >= size:
                self.tokens -= size
                return now + waited, round(waited * 1000)
            self.refusals += 1
            waited += 0.75 * size / MIB


def run(pacer: PublishPacer | None, seconds: float, size: int = 200 * 1024, overhead: float = 0.05) -> tuple[Shard, float]:
    """A producer that always has `size` bytes ready, one request in flight; each request spends
    `overhead` before and after its put. Returns the shard and the bytes/s delivered."""
    shard, now, sent = Shard(), 0.0, 0
    while now < seconds:
        if pacer is not None:
            now += pacer.delay(now)
            pacer.starting(now, size)
        started = now
        landed, waited_ms = shard.put(started + overhead, size)
        now = landed + overhead
        sent += size
        if pacer is not None:
            pacer.answered(started, now, size, waited_ms)
    return shard, sent / now


def test_pacing_cuts_the_refusals_of_a_saturated_shard_and_keeps_most_of_its_rate() -> None:
    unpaced, unpaced_rate = run(None, 60)
    paced, paced_rate = run(PublishPacer(), 60)
    requests = paced.puts - paced.refusals
    assert unpaced.refusals >= 0.5 * (unpaced.puts - unpaced.refusals)  # nearly every request refused once
    assert paced.refusals <= 0.2 * requests, (paced.refusals, requests)
    assert paced_rate >= 0.85 * MIB and unpaced_rate <= 1.05 * MIB


def run_shared(flows: int, seconds: float, paced: bool = True, size: int = 200 * 1024,
               overhead: float = 0.05) -> tuple[Shard, float]:
    """`flows` producers like `run`'s, each pacing itself (or not), sharing one shard (event by
    event, in the order the requests start). Returns the shard and the bytes/s delivered in all."""
    shard, sent = Shard(), 0
    pacers = [PublishPacer() for _ in range(flows)]
    ready = [i * 0.01 for i in range(flows)]  # when each producer's next request is ready
    while min(ready) < seconds:
        i = ready.index(min(ready))
        start = ready[i] + pacers[i].delay(ready[i])
        if start > ready[i]:
            ready[i] = start  # held: the others may go first
            continue
        if paced:
            pacers[i].starting(start, size)
        landed, waited_ms = shard.put(start + overhead, size)
        ready[i] = landed + overhead
        sent += size
        if paced:
            pacers[i].answered(start, ready[i], size, waited_ms)
    return shard, sent / max(ready)


def test_producers_sharing_a_shard_keep_its_rate_with_far_fewer_refusals() -> None:
    for flows in (2, 4):
        unpaced, _ = run_shared(flows, 60, paced=False)
        shard, rate = run_shared(flows, 60)
        assert rate >= 0.9 * MIB, (flows, rate / MIB)
        assert shard.refusals <= 0.3 * unpaced.refusals, (flows, shard.refusals, unpaced.refusals)


def test_no_pacing_until_the_broker_reports_a_wait_and_none_once_the_producer_slows_down() -> None:
    pacer = PublishPacer()
    pacer.answered(0.0, 0.1, 100_000, 0)
    assert pacer.rate is None and pacer.delay(0.1) == 0.0
    pacer.answered(0.1, 0.4, 300_000, 150)  # refused, then through: 300 KB in 0.3 s
    assert pacer.rate == pytest.approx(0.95 * 1_000_000)
    assert abs(pacer.delay(0.4) - (0.1 + 300_000 / pacer.rate - 0.4)) < 1e-9
    pacer.answered(0.4, 0.5, 100_000, 0)  # went through without waiting: climb fast until a report...
    assert pacer.rate == pytest.approx(0.95 * 1_000_000 * 1.05)
    pacer.answered(0.5, 0.6, 100_000, 10)  # ...which steps back by 10 % (600 KB got through in 0.6 s: more)
    assert pacer.rate == pytest.approx(0.95 * 1_000_000 * 1.05 * 0.9)
    pacer.answered(1.3, 1.4, 100_000, 0)  # and from then on climb slowly
    assert pacer.rate == pytest.approx(0.95 * 1_000_000 * 1.05 * 0.9 * 1.02)
    for i in range(2_000):  # the producer slows down: every request raises the pace until pacing stops
        pacer.answered(2.0 + i, 2.1 + i, 100_000, 0)
        if pacer.rate is None:
            break
    assert pacer.rate is None and pacer.delay(3_000.0) == 0.0 and i < 1_000
    assert MAX_RATE > 1024 * 1024


def test_reports_from_a_crowded_shard_never_stop_the_producer() -> None:
    pacer = PublishPacer()
    for i in range(50):
        pacer.answered(i * 1.0, i * 1.0 + 0.9, 1_000, 800)
    assert pacer.rate == MIN_RATE


def test_a_request_slower_than_the_window_measures_itself() -> None:
    pacer = PublishPacer()
    pacer.answered(0.0, 0.1, 100_000, 0)
    pacer.answered(1.0, 6.0, 500_000, 4_000)  # answered 5 s after it was sent, past the 2 s window
    assert pacer.rate == pytest.approx(0.95 * 500_000 / 5.0)



def test_a_shared_pace_is_a_schedule_and_one_saturation_is_answered_once() -> None:
    """Producers sharing a pacer (a client's on one shard): each request books its time as it
    starts, so requests ready together go one pace apart; the reports of requests sent before
    the pace changed are of the saturation it answered and change nothing."""
    pacer = PublishPacer()
    for i in range(10):  # 100 KB every 0.1 s through: 1 MB/s
        pacer.answered(i * 0.1, i * 0.1 + 0.1, 100_000, 0)
    pacer.answered(1.0, 1.1, 100_000, 20)
    assert pacer.rate == pytest.approx(0.95 * 1_100_000 / 1.1)
    pacer.answered(1.05, 1.2, 100_000, 30)  # started before the pace was set: the same saturation
    pacer.answered(1.08, 1.3, 100_000, 0)  # nor does it probe
    assert pacer.rate == pytest.approx(0.95 * 1_000_000)
    now = 1.3
    assert pacer.delay(now) == 0.0
    pacer.starting(now, 95_000)  # producers ready at once: one pace apart
    assert pacer.delay(now) == pytest.approx(0.1)
    pacer.starting(now + 0.1, 95_000)
    assert pacer.delay(now + 0.1) == pytest.approx(0.1)
    pacer.answered(1.3, 1.35, 95_000, 0)  # through: a probe
    assert pacer.rate == pytest.approx(0.95 * 1_000_000 * 1.05)
    pacer.answered(1.4, 1.5, 95_000, 10)  # started after the change: a step back
    assert pacer.rate == pytest.approx(0.95 * 1_000_000 * 1.05 * 0.9)


def test_a_client_has_one_pacer_per_shard() -> None:
    pacers = ShardPacers()
    assert pacers.of("shardId-0") is pacers.of("shardId-0") and pacers.of("shardId-1") is not pacers.of("shardId-0")
    assert ShardPacers().of("shardId-0") is not pacers.of("shardId-0")
