"""bench/scale_topics.py runs: three topics for a few seconds on a cluster of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_scale_topics_active_runs_and_delivers_everything(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    subprocess.run([sys.executable, str(ROOT / "bench/scale_topics.py"), "active", "--topics", "3", "--rate", "2",
                    "--duration", "3", "--procs", "1", "--drain", "20", "--out", str(out)],
                   check=True, timeout=120, capture_output=True)
    run = json.loads(out.read_text())["runs"][0]
    assert run["topics"] == 3 and run["failed"] == 0
    assert run["sent"] >= 12 and run["acked"] == run["sent"] and run["received"] == run["acked"]
    assert run["e2e_latency_ms"]["count"] == run["received"]
    assert run["aws_requests_per_1000_msgs"] > 0
    assert "kinesis.PutRecord" in run["aws_requests_per_1000_msgs_by_operation"] or \
        "kinesis.PutRecords" in run["aws_requests_per_1000_msgs_by_operation"]
