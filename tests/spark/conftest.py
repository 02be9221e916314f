"""Fixtures of the Spark tests (on the session's local cluster): one topic of test data, one local SparkSession."""

from __future__ import annotations

import base64
import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

ORDERS_TOPIC = "persistent://public/default/spark-orders"
EMPTY_TOPIC = "persistent://public/default/spark-empty"
ENTRIES = 60
PER_ENTRY = 5


def pytest_configure(config: pytest.Config) -> None:
    # pyspark 4.x warns about pandas 3 when a session starts: not ours to fix.
    config.addinivalue_line(
        "filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning"
    )


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return True
    return shutil.which("java") is not None


@pytest.fixture(scope="session")
def orders(cluster: Any) -> dict[str, Any]:
    """60 entries of 5 messages on `spark-orders`: each message and the id the broker gave it."""
    messages_out: list[dict[str, Any]] = []
    with httpx.Client(base_url=cluster.url, timeout=30) as http:
        for e in range(ENTRIES):
            batch = []
            for b in range(PER_ENTRY):
                n = e * PER_ENTRY + b
                message: dict[str, Any] = {
                    "payload": base64.b64encode(f"order-{n}".encode() + bytes([n % 256])).decode(),
                    "properties": {"n": str(n), "entry": str(e)},
                }
                if n % 3:
                    message["key"] = f"k{n % 7}"
                if n % 2 == 0:
                    message["eventTime"] = 1_700_000_000_000 + n
                batch.append(message)
            response = http.post("/topics/persistent/public/default/spark-orders", json={"messages": batch})
            assert response.status_code == 200, response.text
            ids = [r["messageId"] for r in response.json()["messagePublishResults"]]
            assert len(ids) == PER_ENTRY
            for message, mid in zip(batch, ids, strict=True):
                messages_out.append(
                    {
                        "value": base64.b64decode(message["payload"]),
                        "key": message.get("key"),
                        "properties": message["properties"],
                        "eventTime": message.get("eventTime"),
                        "messageId": mid,
                    }
                )
        response = http.put("/admin/v2/persistent/public/default/spark-empty")
        assert response.status_code in (204, 409), response.text
    return {"topic": ORDERS_TOPIC, "empty_topic": EMPTY_TOPIC, "messages": messages_out}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if not java_available():
        pytest.skip("no JVM: set JAVA_HOME or put java on PATH")
    pytest.importorskip("pyspark")
    # Spark's Python workers must run this interpreter (the venv that has magnetar and magnetar_spark).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from magnetar_spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("magnetar-spark-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.python.worker.reuse", "true")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)  # (Spark 4.0/4.1 refuse registering a source their lookup found: magnetar_spark.register)
    try:
        yield session
    finally:
        session.stop()
