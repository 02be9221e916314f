"""What the CDK tests share: loading infra/ and layers/ scripts by path, and the inputs of a
synthesis (a --no-deps layer in a temporary directory, the stack module, cdk.json's context)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def load_module(name: str, path: Path) -> ModuleType:
    """Import a script by path: neither infra/ nor layers/ is a package."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def synthesis_inputs(tmp_path_factory: pytest.TempPathFactory, label: str = "layer") -> tuple[Path, ModuleType,
                                                                                                dict[str, Any]]:
    """(layer dir, the stack module, cdk.json's context): the layer is built without dependencies in a
    temporary directory, so a test never overwrites a full layer build in layers/core/build."""
    if str(REPO_ROOT / "src") not in sys.path:
        sys.path.insert(0, str(REPO_ROOT / "src"))
    layer_builder = load_module("magnetar_layer_build", REPO_ROOT / "layers" / "build.py")
    layer_dir = layer_builder.build(tmp_path_factory.mktemp(label) / "build", no_deps=True)
    stack_module = load_module("magnetar_stack", REPO_ROOT / "infra" / "magnetar_stack.py")
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    return layer_dir, stack_module, context
