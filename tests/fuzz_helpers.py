"""bench/fuzz_api.py as a module for the fuzz tests (tests/e2e/test_fuzz.py, test_fuzz_auth.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SEED = 20


def load_bench() -> ModuleType:
    if "fuzz_api" in sys.modules:  # both fuzz files in one worker: one module
        return sys.modules["fuzz_api"]
    path = Path(__file__).resolve().parents[1] / "bench" / "fuzz_api.py"
    spec = importlib.util.spec_from_file_location("fuzz_api", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_api"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
