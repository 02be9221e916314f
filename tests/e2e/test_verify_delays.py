"""A short seeded `magnetar verify` run with delay points: steps stall past the write deadline and
the hole grace, and still nothing acknowledged is lost, nothing handed out twice, orders hold."""

from __future__ import annotations

from magnetar.core import delaypoints
from magnetar.verify.runner import DELAY_POINTS, RUN_HOLE_GRACE_MS, Verifier


def test_seeded_verify_with_delay_points_finds_no_violation(cluster, verify_timings) -> None:  # type: ignore[no-untyped-def]
    # seed 3: a sealer stalled mid-commit and a journal write landing after its ids' grace (two
    # producers on a deduplicated topic), then a writer stalled past its deadline before writing
    # (a loaded machine overruns the run's 0.5 s write deadline often: retried publishes multiply
    # the entries several times over, and Key_Shared consumers then need more than 30 s to drain)
    summary = Verifier(cluster.url, drain_timeout_s=90).run_all(runs=2, seed=3, allowed=(), delays=DELAY_POINTS)
    assert summary.errors == []
    assert summary.runs == 2 and summary.acked > 0
    assert sum(summary.delays_fired.values()) >= 2, summary.delays_fired
    assert delaypoints.delay_s() * 1000 > RUN_HOLE_GRACE_MS, "each stall crosses the grace"
    assert summary.violations == 0, summary.failures
    assert summary.as_dict()["delay_points_fired"] == dict(summary.delays_fired)
