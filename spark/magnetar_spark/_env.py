"""The Python that Spark starts for its workers: this interpreter, unless the user chose one.

Spark starts its Python workers (the data source lookup, planning, reading and writing tasks)
with `PYSPARK_PYTHON`, else the first `python3` on `PATH`. A script run with a virtualenv's
interpreter that is not activated (`.venv/bin/python job.py`, an IDE) would then run its workers
with another Python, one without `magnetar_spark` (`No module named 'magnetar_spark'`, or
`format("magnetar")` not found). Importing `magnetar_spark` or `pyspark_magnetar` before the
SparkSession starts (or running the job with `magnetar spark submit --local`) sets the defaults:

- `PYSPARK_PYTHON` and `PYSPARK_DRIVER_PYTHON` = `sys.executable`, when not set;
- in an editable install (`pip install -e`), whose packages `pkgutil.iter_modules` does not list,
  the directory holding `pyspark_magnetar` is added to `PYTHONPATH`, so that Spark's data source
  lookup finds it there as it finds an installed one in site-packages.

The JVM copies the environment when it starts, so this must happen before the first
SparkSession of the process; an explicit `PYSPARK_PYTHON` always wins.
"""

from __future__ import annotations

import os
import pkgutil
import sys
from pathlib import Path

PACKAGE = "pyspark_magnetar"


def _package_root() -> str | None:
    """The directory holding `pyspark_magnetar`, when `iter_modules` (Spark's lookup) misses it."""
    if any(m.name == PACKAGE for m in pkgutil.iter_modules()):
        return None  # installed in site-packages (or on sys.path): the lookup finds it
    root = Path(__file__).resolve().parent.parent
    return str(root) if (root / PACKAGE / "__init__.py").exists() else None


def configure_python(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Sets the worker-Python defaults in `environ` (os.environ by default); returns what it set."""
    env: dict[str, str] | os._Environ[str] = os.environ if environ is None else environ
    changed: dict[str, str] = {}
    if sys.executable:
        for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
            if not env.get(name):
                env[name] = changed[name] = sys.executable
    root = _package_root()
    if root is not None:
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root not in paths:
            env["PYTHONPATH"] = changed["PYTHONPATH"] = os.pathsep.join([root, *paths])
    return changed
