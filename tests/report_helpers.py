"""bench/report.py loaded as a module (it is a script), for the tests of the documents it generates."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_report(name: str) -> ModuleType:
    path = list(sys.path)  # bench/report.py puts bench/ first to import its blocks; put the path back after
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path
    return module
