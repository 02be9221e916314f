"""Make `spark.read.format("magnetar")` work in the project's own environment with no import first.

The editable install (`pip install -e`) serves `magnetar_spark` and `pyspark_magnetar` through an
import hook that `pkgutil.iter_modules` does not list, and PySpark 4 finds Python data sources by
listing modules named `pyspark_*` in a Python worker it starts with `PYSPARK_PYTHON`, else the
first `python3` on PATH (another interpreter when the venv is not activated). A path file in the
venv's site-packages fixes both at interpreter start, the standard way (`site`): the `spark`
directory goes on `sys.path` (listed, so the lookup finds `pyspark_magnetar`), and
`PYSPARK_PYTHON` defaults to the interpreter itself. An explicit `PYSPARK_PYTHON` still wins.
"""

from __future__ import annotations

import site
import sys
from pathlib import Path

SPARK_DIR = Path(__file__).resolve().parent.parent / "spark"
PTH = "magnetar-spark.pth"


def main() -> None:
    site_packages = Path(site.getsitepackages()[0])
    (site_packages / PTH).write_text(
        f"{SPARK_DIR}\n"
        "import os, sys; os.environ.setdefault('PYSPARK_PYTHON', sys.executable)\n"
    )
    print(f"{site_packages / PTH}: {SPARK_DIR} on sys.path, PYSPARK_PYTHON defaults to {sys.executable}")


if __name__ == "__main__":
    main()
