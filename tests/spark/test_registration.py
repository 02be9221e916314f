"""Installed is registered: PySpark 4's data source lookup finds `pyspark_magnetar`, and a script
run with this venv's interpreter (not the `python3` on PATH) gets workers that can import us."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

SPARK_DIR = Path(__file__).resolve().parents[2] / "spark"


def test_lookup_finds_default_source() -> None:
    """What `pyspark/sql/worker/lookup_data_sources.py` does: every `pyspark_*` module on the path
    with a `DefaultSource` is registered under its `name()`."""
    from pyspark.sql.datasource import DataSource

    import pyspark_magnetar

    found = {m.name for m in pkgutil.iter_modules([str(SPARK_DIR)])}
    assert "pyspark_magnetar" in found
    assert issubclass(pyspark_magnetar.DefaultSource, DataSource)
    assert pyspark_magnetar.DefaultSource.name() == "magnetar"


def test_configure_python_defaults() -> None:
    from magnetar_spark._env import configure_python

    env: dict[str, str] = {"PYSPARK_PYTHON": "/opt/python3"}
    changed = configure_python(env)
    assert env["PYSPARK_PYTHON"] == "/opt/python3"  # the user's choice wins
    assert env["PYSPARK_DRIVER_PYTHON"] == sys.executable == changed["PYSPARK_DRIVER_PYTHON"]
    if not any(m.name == "pyspark_magnetar" for m in pkgutil.iter_modules()):  # an editable install
        assert env["PYTHONPATH"].split(os.pathsep)[0] == str(SPARK_DIR)


@pytest.mark.spark
def test_script_without_register_or_pyspark_python(cluster: Any, orders: dict[str, Any], tmp_path: Path) -> None:
    """`.venv/bin/python job.py` with no PYSPARK_PYTHON, no import of Magnetar and no register call,
    the venv not activated: the read works (the install's path file, scripts/spark_path.py)."""
    from tests.spark.conftest import java_available

    if not java_available():
        pytest.skip("no JVM")
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(f"""
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                 .getOrCreate())
        df = spark.read.format("magnetar").option("service.url", {cluster.url!r}).option("topic", "spark-orders").load()
        print("COUNT", df.count())
        spark.stop()
    """))
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"  # the python3 found first is not this venv's
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=240,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "COUNT 300" in done.stdout
