"""Spark integration for Magnetar: `spark.read.format("magnetar")` (a PySpark 4 Python data source).

from magnetar_spark import MagnetarDataSource
spark.dataSource.register(MagnetarDataSource)
df = (spark.read.format("magnetar")
      .option("service.url", "http://127.0.0.1:8080")
      .option("topic", "persistent://public/default/orders")
      .load())

The modules: source (the DataSource), options and settings (the options), broker (the HTTP
calls), reading, direct and stream (reads), sink (writes), columns and typed (the columns),
offsets, errors.
"""

from magnetar_spark import _env
from magnetar_spark.columns import SCHEMA, message_id_bytes, message_id_from_bytes
from magnetar_spark.errors import MagnetarSourceError
from magnetar_spark.reading import split_range
from magnetar_spark.source import SHORT_NAME, MagnetarDataSource

_env.configure_python()  # the workers run this Python (see _env), unless PYSPARK_PYTHON says otherwise


def register(spark: object) -> None:
    """`spark.dataSource.register(MagnetarDataSource)` unless Spark already found the installed source
    (`pyspark_magnetar`): Spark 4.0 and 4.1 refuse a second registration of a name
    (DATA_SOURCE_ALREADY_EXISTS, seen with pyspark 4.0.2), later versions replace it."""
    try:
        spark.dataSource.register(MagnetarDataSource)  # type: ignore[attr-defined]
    except Exception as exc:
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise

__all__ = [
    "SCHEMA",
    "SHORT_NAME",
    "MagnetarDataSource",
    "MagnetarSourceError",
    "message_id_bytes",
    "message_id_from_bytes",
    "register",
    "split_range",
]
