"""`magnetar spark submit --local`: the job runs with this interpreter as Spark's worker Python."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from magnetar.cli.main import app


def test_submit_local_sets_the_worker_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS"):
        monkeypatch.delenv(name, raising=False)
    job = tmp_path / "job.py"
    out = tmp_path / "seen.json"
    job.write_text("import json, os, sys\n"
                   "keys = ('PYSPARK_PYTHON', 'PYSPARK_DRIVER_PYTHON', 'PYSPARK_SUBMIT_ARGS', 'PYTHONPATH')\n"
                   "json.dump({'argv': sys.argv[1:], **{k: os.environ.get(k) for k in keys}},"
                   " open(sys.argv[1], 'w'))\n"
                   "sys.exit(3)\n")
    result = CliRunner().invoke(app, ["spark", "submit", "--local", "--master", "local[2]", str(job), str(out),
                                      "--topic", "orders"])
    assert result.exit_code == 3, result.output  # the job's own exit code
    seen = json.loads(out.read_text())
    assert seen["argv"] == [str(out), "--topic", "orders"]
    assert seen["PYSPARK_PYTHON"] == seen["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert seen["PYSPARK_SUBMIT_ARGS"] == "--master local[2] pyspark-shell"


def test_spark_submit_parameters_put_the_environment_on_the_python_path() -> None:
    from magnetar.cli.spark import spark_submit_parameters

    params = spark_submit_parameters("s3://b/env.zip", ["spark.executor.cores=2"])
    assert params.split(" --conf ") == [
        "--conf spark.archives=s3://b/env.zip#environment",
        "spark.emr-serverless.driverEnv.PYTHONPATH=./environment",
        "spark.executorEnv.PYTHONPATH=./environment", "spark.executor.cores=2"]
    assert spark_submit_parameters(None, []) == ""
