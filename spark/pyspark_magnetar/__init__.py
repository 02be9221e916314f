"""Makes `spark.read.format("magnetar")` / `readStream` / `write` work without registering anything.

PySpark 4 looks up Python data sources once per session, in a Python worker: every top-level
module named `pyspark_*` that exposes a `DefaultSource` (a `DataSource` subclass) is registered
under `DefaultSource.name()` (`pyspark/sql/worker/lookup_data_sources.py`). Installing
`magnetar[spark]` puts this package in site-packages, so the lookup finds it.
"""

from magnetar_spark import _env
from magnetar_spark.source import MagnetarDataSource as DefaultSource

_env.configure_python()

__all__ = ["DefaultSource"]
