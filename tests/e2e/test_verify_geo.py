"""`magnetar verify --clusters 2`: one short geo-replication run (a local instance of two
clusters, the replicator's and the unsubscribe's crash points armed in them, an outage) gives a
clean verdict, and the crash points did fire (the clusters' local stats): a run that took no crash
path proves nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(240)


def test_a_short_two_cluster_run_is_clean_and_its_crash_points_fired(tmp_path: Path) -> None:
    out = tmp_path / "geo.json"
    done = subprocess.run(
        [sys.executable, "-m", "magnetar.cli.main", "verify", "--clusters", "2", "--runs", "1", "--seconds", "5",
         "--seed", "7", "--json", str(out)],
        capture_output=True, text=True, timeout=200, env=dict(os.environ))
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    run = result["per_run"][0]
    assert done.returncode == 0, json.dumps(run, indent=1)
    assert run["verdict"] == "ok" and result["violations"] == 0 and not result["errors"]
    # what bench/report.py labels a results file by: the command that made it and when
    assert result["command"].startswith("magnetar verify --clusters 2 --runs 1") and result["when"].endswith("Z")
    assert run["acked"] > 0 and all(n >= run["acked"] for n in run["stored"].values())
    # the crash points fired in the cluster processes: every kind, as armed (the unsubscribe's in both clusters)
    assert all(result["crash_points_fired"].get(p, 0) > 0
               for p in ("replicate.after_append", "replicate.after_position")), result["crash_points_fired"]
    assert result["crash_points_fired"].get("unsubscribe.after_snapshot") == 2, result["crash_points_fired"]
    subscription = run["replicated_subscription"]
    assert subscription["received_first"] > 0 and subscription["skipped"] == 0
    assert subscription["skipped_in_second"] > 0  # the first cluster's acknowledgements reached the second
    # deleted in both clusters, subscribed again from the earliest entry: from the topic's first messages
    assert subscription["resubscribed_received"] == 10 and subscription["resubscribe_skipped"] == 0
    assert result["command"].startswith("magnetar verify --clusters 2")
