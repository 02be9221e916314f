"""`magnetar perf` for scale runs (bench/scale_consumers.py): per-consumer delivery counts, the
exactly-once check, the emulator's refusals, the SDK's HTTP answers and Lambda concurrency, on the
session cluster (AWS limits on)."""

from __future__ import annotations

import uuid

from magnetar.perf.runner import PerfConfig, PerfRun


def test_scale_run_reports_spread_exactly_once_refusals_and_concurrency(cluster) -> None:  # type: ignore[no-untyped-def]
    config = PerfConfig(mode="e2e", service_url=cluster.url, topic=f"persistent://public/default/scale-{uuid.uuid4().hex[:8]}",
                        consumers=3, rate=200, duration_s=3, receive_batch=20, receive_wait_ms=200,
                        check_delivery=True, aws_endpoint=cluster.endpoint)
    result = PerfRun(config).run()

    delivery = result["delivery"]
    assert result["acked"] > 100 and result["failed"] == 0
    assert result["produce_seconds"] >= 2.5 and result["acked_per_s"] == result["acked"] / result["produce_seconds"]
    assert delivery["acked"] == result["acked"] == delivery["unique_received"]  # every tagged message, once
    assert delivery["lost"] == 0 and delivery["duplicates"] == 0 and delivery["received_not_acked"] == 0
    assert sorted(delivery["per_consumer"]) == ["perf-c0", "perf-c1", "perf-c2"]
    assert sum(delivery["per_consumer"].values()) == result["received"]
    assert isinstance(result["refusals"], dict)  # what the limits refused during the run (a delta)
    assert result["http_statuses"]["producers"].get("200", 0) >= 1
    assert result["http_statuses"]["consumers"].get("200", 0) >= 3
    concurrency = result["lambda_concurrency"]
    assert concurrency["mean_total"] > 0 and 1 <= concurrency["peak"] <= concurrency["limit"]


def test_scale_run_with_push_consumers_delivers_exactly_once(cluster) -> None:  # type: ignore[no-untyped-def]
    config = PerfConfig(mode="e2e", service_url=cluster.url, topic=f"persistent://public/default/scale-{uuid.uuid4().hex[:8]}",
                        consumers=3, rate=200, duration_s=3, receive_batch=20, receive_wait_ms=200,
                        check_delivery=True, delivery="push", drain_timeout_s=30)
    result = PerfRun(config).run()

    delivery = result["delivery"]
    assert result["acked"] > 100 and not result["drain_timed_out"]
    assert delivery["unique_received"] == delivery["acked"] == result["acked"]
    assert delivery["lost"] == 0 and delivery["duplicates"] == 0
    assert delivery["consumers_receiving"] >= 1 and sum(delivery["per_consumer"].values()) == result["received"]


def test_a_run_that_delivers_nothing_says_so_instead_of_failing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A journal batching window longer than the run: no message reaches the consumer in it (nor in
    any drain shorter than the window's 250 s, so a second of drain says the same as the default minute)."""
    import json
    import subprocess
    import sys

    out = tmp_path / "run.json"
    run = subprocess.run([sys.executable, "-m", "magnetar.cli.main", "perf", "e2e", "--journal-batching-window", "250",
                          "--duration", "2", "--drain-timeout", "1", "--no-limits", "--json", str(out)],
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 1, run.stdout + run.stderr  # not a measurement: said, and a failing status
    assert "Traceback" not in run.stderr
    said = [line for line in run.stderr.splitlines() if line.startswith("error: no message was delivered in the run")]
    assert len(said) == 1 and said[0].endswith("with a shorter window"), run.stderr  # one line, after the figures
    result = json.loads(out.read_text())
    assert result["messages"] == 0 and result["cost_usd_per_million_msgs"] is None
