"""Fixtures of the CDK tests."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import pytest

from infra_helpers import REPO_ROOT


@pytest.fixture(scope="module")
def config() -> ModuleType:
    if str(REPO_ROOT / "src") not in sys.path:
        sys.path.insert(0, str(REPO_ROOT / "src"))
    return importlib.import_module("magnetar.config")
