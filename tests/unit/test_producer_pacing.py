"""The producer's pacing while the journal's shard is saturated (core/publish_pacing.py), on a
simulated shard: a token bucket of 1 MiB/s holding one second, as Kinesis's and the emulator's."""

from __future__ import annotations

import heapq
import random

import pytest

from magnetar.core.publish_pacing import (
    MAX_RATE,
    MIN_RATE,
    PROBE,
    PROBE_FIRST,
    PROBE_PERIOD_S,
    SHARD_WRITE_BYTES_S,
    STEP_BACK,
    PublishPacer,
    ShardPacers,
)

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


def test_before_any_report_requests_are_spaced_at_a_shards_rate() -> None:
    """A producer's first requests book the shard's rate: a flat-out producer does not empty the
    shard's one-second bucket and meet its refusals a second in."""
    pacer = PublishPacer()
    assert pacer.delay(0.0) == 0.0
    pacer.starting(0.0, 512 * 1024)
    assert pacer.rate is None and pacer.delay(0.0) == pytest.approx(0.5)
    pacer.starting(0.5, 256 * 1024)
    assert pacer.delay(0.6) == pytest.approx(0.15)
    assert pacer.delay(2.0) == 0.0  # a producer slower than the shard never waits


def test_no_pacing_until_the_broker_reports_a_wait_and_none_once_the_producer_slows_down() -> None:
    pacer = PublishPacer()
    pacer.answered(0.0, 0.1, 100_000, 0)
    assert pacer.rate is None and pacer.pace is None
    pacer.answered(0.1, 0.4, 300_000, 150)  # refused, then through: 300 KB in 0.3 s
    assert pacer.rate == pytest.approx(0.95 * 1_000_000)
    assert abs(pacer.delay(0.4) - (0.1 + 300_000 / pacer.rate - 0.4)) < 1e-9
    pace = 0.95 * 1_000_000
    pacer.answered(0.4, 0.5, 100_000, 0)  # went through without waiting: climb fast until a report...
    pace *= PROBE_FIRST ** (100_000 / pace / PROBE_PERIOD_S)  # (per tenth of a second of pace it spanned)
    assert pacer.rate == pytest.approx(pace)
    pacer.answered(0.5, 0.6, 100_000, 10)  # ...which steps back (600 KB got through in 0.6 s: more)
    pace *= STEP_BACK
    assert pacer.rate == pytest.approx(pace)
    pacer.answered(1.3, 1.4, 20_000, 0)  # and from then on climb slowly (at least one step a request)
    assert pacer.rate == pytest.approx(pace * PROBE)
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
    pacer.answered(1.3, 1.35, 95_000, 0)  # through: a probe (one step: 0.1 s of pace)
    assert pacer.rate == pytest.approx(0.95 * 1_000_000 * PROBE_FIRST)
    pacer.answered(1.4, 1.5, 95_000, 10)  # started after the change: a step back
    assert pacer.rate == pytest.approx(0.95 * 1_000_000 * PROBE_FIRST * STEP_BACK)


def test_a_client_has_one_pacer_per_shard() -> None:
    pacers = ShardPacers()
    assert pacers.of("shardId-0") is pacers.of("shardId-0") and pacers.of("shardId-1") is not pacers.of("shardId-0")
    assert ShardPacers().of("shardId-0") is not pacers.of("shardId-0")


def test_the_pace_never_exceeds_a_shards_rate_and_steps_back_from_it() -> None:
    """A first report measured during the bucket's burst (4 MB/s through) paces at the shard's
    rate, not above it; a probe past it goes on unseen, and a report steps back from the shard's
    rate, not from the unseen probe."""
    pacer = PublishPacer()
    pacer.answered(0.0, 0.25, 1_000_000, 0)
    pacer.answered(0.25, 0.5, 1_000_000, 40)
    assert pacer.pace == SHARD_WRITE_BYTES_S
    pacer.starting(2.0, 524_288)  # past the report's own booking: half a MiB is half a second
    assert pacer.delay(2.0) == pytest.approx(0.5)
    for i in range(5):
        pacer.answered(3.0 + i, 3.1 + i, 200_000, 0)
    assert pacer.rate is not None and pacer.rate > SHARD_WRITE_BYTES_S and pacer.pace == SHARD_WRITE_BYTES_S
    pacer.answered(8.0, 8.1, 200_000, 30)
    assert pacer.rate == pytest.approx(SHARD_WRITE_BYTES_S * STEP_BACK)


def test_a_pace_stepped_far_down_climbs_back_in_seconds_of_its_own_schedule() -> None:
    """The probe counts the pace's time a request spans, not requests: quarter-MiB requests at
    the lowest pace (16 s each) climb back to the shard's rate within a minute of schedule, where
    2 % a request took over ten minutes."""
    pacer = PublishPacer()
    pacer.answered(0.0, 0.1, 1_000, 0)
    for i in range(60):  # reports from a crowded shard push the pace to its floor
        pacer.answered(1.0 + i, 1.5 + i, 1_000, 900)
    assert pacer.rate == MIN_RATE
    now, size = 100.0, 256 * 1024
    while pacer.rate is not None and pacer.rate < SHARD_WRITE_BYTES_S:
        now += pacer.delay(now)
        pacer.starting(now, size)
        pacer.answered(now, now + 0.1, size, 0)
        now += 0.1
    assert now - 100.0 < 60.0, now - 100.0


def run_partitions_on_one_pacer(partitions: int, seconds: float, seed: int) -> tuple[float, int, float]:
    """`partitions` partition producers of one client on one shard (one pacer, one request in
    flight each, 150-250 KB requests), the broker retrying a refused put as the journal adapter
    does (after part of the record's refill time, doubling up to a second) for up to 8 s before
    the request fails. Returns (MiB/s delivered, requests failed, the longest retrying put in s)."""
    rnd, pacer, overhead, patience = random.Random(seed), PublishPacer(), 0.05, 8.0
    tokens, stamp, sent, failed, longest = float(MIB), 0.0, 0, 0, 0.0
    events: list[tuple[float, int, int, dict[str, float]]] = []
    for i in range(partitions):
        heapq.heappush(events, (rnd.uniform(0, 0.1), i, 0, {}))
    order = partitions
    while events:
        now, _, kind, request = heapq.heappop(events)
        if now > seconds:
            break
        order += 1
        if kind == 0:  # a partition producer is ready to send
            wait = pacer.delay(now)
            if wait > 0:
                heapq.heappush(events, (now + wait, order, 0, {}))
                continue
            size = rnd.randint(150_000, 250_000)
            pacer.starting(now, size)
            heapq.heappush(events, (now + overhead, order, 1, {"size": size, "started": now, "attempt": 0,
                                                               "first": now + overhead, "waited": 0.0}))
            continue
        tokens, stamp = min(float(MIB), tokens + (now - stamp) * MIB), now
        request["attempt"] += 1
        if tokens >= request["size"]:
            tokens -= request["size"]
            sent += int(request["size"])
            longest = max(longest, now - request["first"])
            pacer.answered(request["started"], now + overhead, int(request["size"]), round(request["waited"] * 1000))
            heapq.heappush(events, (now + overhead, order, 0, {}))
            continue
        refill = max(0.02, request["size"] / MIB)
        wait = rnd.uniform(0.5, 1.0) * min(1.0, refill * 2.0 ** min(request["attempt"] - 1, 3))
        if now + wait > request["first"] + patience:
            failed += 1  # the client retries the publish
            heapq.heappush(events, (now + overhead + 0.1, order, 0, {}))
            continue
        request["waited"] += wait
        heapq.heappush(events, (now + wait, order, 1, request))
    return sent / seconds / MIB, failed, longest


def test_sixteen_partition_producers_on_one_pacer_keep_the_shard_busy_without_starving_a_put() -> None:
    """A partitioned Key_Shared run's shape: four producers of eight partitions, four partitions a
    shard. Before the pace was capped at the shard's rate and stepped back by a fifth, the pace
    swung between half and four times the shard every ~25 s, and ten puts a minute starved for
    the broker's whole patience (each a failed publish, retried)."""
    runs = [run_partitions_on_one_pacer(16, 60, seed) for seed in range(5)]
    assert all(rate >= 0.85 for rate, _, _ in runs), runs
    assert sum(failed for _, failed, _ in runs) <= 5, runs
