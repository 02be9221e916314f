"""spark/jobs: the Parquet export job and the --py-files zip."""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

JOBS = Path(__file__).resolve().parents[2] / "spark" / "jobs"


def _job(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"magnetar_spark_jobs_{name}", JOBS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_pyfiles_zip(tmp_path: Path) -> None:
    build = _job("build_pyfiles")
    ours = tmp_path / "ours.zip"
    build.build(ours, with_deps=False)
    names = set(zipfile.ZipFile(ours).namelist())
    assert {"magnetar/__init__.py", "magnetar/core/naming.py", "magnetar/core/entry.py"} <= names
    assert {"magnetar_spark/__init__.py", "magnetar_spark/source.py"} <= names
    assert not any(n.startswith(("magnetar/client", "magnetar/adapters", "httpx/")) for n in names)

    full = tmp_path / "full.zip"
    build.build(full, with_deps=True)
    names = set(zipfile.ZipFile(full).namelist())
    assert {"httpx/__init__.py", "httpcore/__init__.py", "h11/__init__.py", "msgpack/fallback.py"} <= names
    assert not any(n.endswith((".so", ".pyc")) or ".dist-info/" in n for n in names)


@pytest.mark.spark
def test_topic_to_parquet(cluster: Any, orders: dict[str, Any], spark: Any, tmp_path: Path) -> None:
    job = _job("topic_to_parquet")
    output = tmp_path / "orders"
    args = job.parse_args(
        [
            "--service-url", cluster.url,
            "--topic", "spark-orders",
            "--output", str(output),
            "--partitions", "3",
            "--partition-by-date",
            "--files", "2",
        ]
    )  # fmt: skip
    assert job.run(spark, args) == 300

    written = spark.read.parquet(str(output))
    assert written.count() == 300
    assert {"value", "__key", "__topic", "__messageId", "__publishTime", "__eventTime"} <= set(
        written.columns
    )
    assert "publishDate" in written.columns
    assert {bytes(r.value) for r in written.select("value").collect()} == {
        m["value"] for m in orders["messages"]
    }

    with pytest.raises(Exception, match="already exists"):  # default mode: errorifexists
        job.run(
            spark,
            job.parse_args(
                ["--service-url", cluster.url, "--topic", "spark-orders", "--output", str(output)]
            ),
        )


@pytest.mark.spark
def test_stream_to_parquet(cluster: Any, spark: Any, tmp_path: Path) -> None:
    """The example pipeline: topic -> date-partitioned Parquet with a checkpoint, twice (a restart)."""
    from tests.spark.test_sources import make_namespace, produce

    topic = f"persistent://{make_namespace(cluster.url)}/pipeline"
    produce(cluster.url, topic, [f"p{i}" for i in range(4)])
    job = _job("stream_to_parquet")
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    argv = ["--service-url", cluster.url, "--topics", topic, "--output", str(output),
            "--checkpoint", str(checkpoint), "--available-now"]
    query = job.start(spark, job.parse_args(argv))
    assert query.awaitTermination(180) and query.exception() is None
    produce(cluster.url, topic, ["p4"])
    query = job.start(spark, job.parse_args(argv))
    assert query.awaitTermination(180) and query.exception() is None

    written = spark.read.parquet(str(output))
    assert "publishDate" in written.columns
    assert sorted(bytes(r["value"]).decode() for r in written.collect()) == [f"p{i}" for i in range(5)]
    assert any(p.name.startswith("publishDate=") for p in output.iterdir())
