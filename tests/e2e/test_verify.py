"""A small seeded `magnetar verify` run: crashes fire, nothing acknowledged is lost."""

from __future__ import annotations

from http_helpers import HTTP
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


def test_verify_functions_keeps_the_outputs_until_the_check_reads_them(cluster) -> None:  # type: ignore[no-untyped-def]
    """An output topic nobody subscribes to keeps nothing past a maintenance run in a namespace without
    retention (as Pulsar): the check's own subscription holds the functions' outputs until it reads them."""
    import time
    import uuid

    import magnetar
    from magnetar.client.admin import AdminClient
    from magnetar.verify import functions

    topic = f"persistent://public/default/verify-hold-{uuid.uuid4().hex[:8]}"
    unheld = f"{topic}-unheld"
    registered = functions.prepare(cluster.url, None, topic)
    admin = AdminClient(cluster.url)
    try:
        outputs = [out for _, out in registered.names.values()]
        client = magnetar.Client(cluster.url)
        try:
            for target in [*outputs, unheld]:
                producer = client.create_producer(target, batching_enabled=False)
                for i in range(3):
                    producer.send(f"m{i}!".encode(), properties={"__pfn_input_msg_id__": f"(0,{i},-1,0)"})
                producer.close()
        finally:
            client.close()
        deadline = time.monotonic() + 30
        while True:  # all three sealed (what the maintenance run may trim)
            stats = [admin.topic_internal_stats(t) for t in [*outputs, unheld]]
            if all(s["ledgers"] and s["ledgers"][0]["segments"]
                   and s["ledgers"][0]["segments"][-1]["lastEntry"] >= 2 for s in stats):
                break
            assert time.monotonic() < deadline, stats
            time.sleep(0.2)
        response = HTTP.post(f"{cluster.url}/_magnetar/local/schedules/maintenance",
                              json={"topics": [*outputs, unheld]}, timeout=120)
        assert response.status_code == 200, response.text
        reader = magnetar.Client(cluster.url)
        try:
            assert functions._outputs(reader, unheld) == []  # trimmed: nobody subscribes to it
            for output in outputs:
                assert functions._outputs(reader, output) == [(f"(0,{i},-1,0)", f"m{i}!") for i in range(3)]
        finally:
            reader.close()
    finally:
        functions.cleanup(cluster.url, None, registered)
    try:  # the check's subscription goes with the functions
        for output in outputs:
            assert functions.HOLD_SUBSCRIPTION not in admin.subscriptions(output)
    finally:
        admin.close()
