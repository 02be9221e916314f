"""A small seeded `magnetar verify` run: crashes fire, nothing acknowledged is lost."""

from __future__ import annotations

from magnetar.verify.runner import CRASH_POINTS, Verifier


def test_seeded_verify_finds_no_violation_while_crash_points_fire(cluster, verify_timings) -> None:  # type: ignore[no-untyped-def]
    summary = Verifier(cluster.url).run_all(runs=4, seed=11, allowed=CRASH_POINTS)
    assert summary.errors == []
    assert summary.runs == 4 and summary.acked > 0
    assert sum(summary.fired.values()) >= 4, summary.fired
    assert summary.violations == 0, summary.failures


def test_verify_with_refused_journal_writes_finds_no_violation(cluster, verify_timings) -> None:  # type: ignore[no-untyped-def]
    """The shard refuses writes for certain: the writers tombstone their own ids, the producers'
    retries store the messages under new ids, nothing acknowledged is lost or delivered twice."""
    summary = Verifier(cluster.url).run_all(runs=2, seed=5, allowed=("produce.journal_refused",))
    assert summary.errors == []
    assert summary.fired["produce.journal_refused"] >= 2, summary.fired
    assert summary.acked > 0 and summary.violations == 0, summary.failures


def test_verify_functions_under_dispatcher_crashes_loses_nothing_and_effectively_once_repeats_nothing(  # type: ignore[no-untyped-def]
        cluster, verify_timings) -> None:
    """Each run registers an ATLEAST_ONCE and an EFFECTIVELY_ONCE function on its topic and kills their
    dispatcher after the invocation or after storing the outputs (verify/functions.py)."""
    from magnetar.verify import functions

    summary = Verifier(cluster.url).run_all(runs=2, seed=3, allowed=functions.POINTS)
    assert summary.errors == []
    assert sum(summary.fired[p] for p in functions.POINTS) >= 2, summary.fired
    assert summary.acked > 0 and summary.violations == 0, summary.failures
