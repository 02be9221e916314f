"""Spark integration for Magnetar: `spark.read.format("magnetar")` (a PySpark 4 Python data source).

from magnetar_spark import MagnetarDataSource
spark.dataSource.register(MagnetarDataSource)
df = (spark.read.format("magnetar")
      .option("service.url", "http://127.0.0.1:8080")
      .option("topic", "persistent://public/default/orders")
      .load())
"""

from magnetar_spark import _env
from magnetar_spark.source import (
    SCHEMA,
    SHORT_NAME,
    EntryRangePartition,
    MagnetarDataSource,
    MagnetarReader,
    MagnetarSourceError,
    message_id_bytes,
    message_id_from_bytes,
    split_range,
)

_env.configure_python()  # the workers run this Python (see _env), unless PYSPARK_PYTHON says otherwise

__all__ = [
    "SCHEMA",
    "SHORT_NAME",
    "EntryRangePartition",
    "MagnetarDataSource",
    "MagnetarReader",
    "MagnetarSourceError",
    "message_id_bytes",
    "message_id_from_bytes",
    "split_range",
]
