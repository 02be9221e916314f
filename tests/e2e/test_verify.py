"""A small seeded `magnetar verify` run: crashes fire, nothing acknowledged is lost."""

from __future__ import annotations

from magnetar.verify.runner import CRASH_POINTS, Verifier


def test_seeded_verify_finds_no_violation_while_crash_points_fire(cluster, verify_timings) -> None:  # type: ignore[no-untyped-def]
    summary = Verifier(cluster.url).run_all(runs=4, seed=11, allowed=CRASH_POINTS)
    assert summary.errors == []
    assert summary.runs == 4 and summary.acked > 0
    assert sum(summary.fired.values()) >= 4, summary.fired
    assert summary.violations == 0, summary.failures
