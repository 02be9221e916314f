"""layers/build.py: the layer must carry arm64 Linux extension modules only (cryptography above all)."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("magnetar_layer_build", REPO_ROOT / "layers" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _elf(machine: int) -> bytes:
    return b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HH", 3, machine) + bytes(40)


def test_foreign_extensions(builder: ModuleType, tmp_path: Path) -> None:
    rust = tmp_path / "cryptography" / "hazmat" / "bindings"
    rust.mkdir(parents=True)
    (rust / "_rust.abi3.so").write_bytes(_elf(183))  # aarch64
    (tmp_path / "_cffi_backend.cpython-312-x86_64-linux-gnu.so").write_bytes(_elf(62))  # x86_64
    (tmp_path / "fat.so").write_bytes(b"\xcf\xfa\xed\xfe" + bytes(40))  # Mach-O
    foreign = builder.foreign_extensions(tmp_path)
    assert [p.name for p in foreign] == ["_cffi_backend.cpython-312-x86_64-linux-gnu.so", "fat.so"]


def test_requirements_carry_pyjwt_crypto(builder: ModuleType) -> None:
    requirements = builder.REQUIREMENTS.read_text()
    assert "PyJWT[crypto]" in requirements
    assert "manylinux2014_aarch64" in builder.PIP_PLATFORM_ARGS
    assert "--only-binary=:all:" in builder.PIP_PLATFORM_ARGS


def test_no_deps_build_is_not_a_full_build(builder: ModuleType, tmp_path: Path) -> None:
    out = builder.build(tmp_path / "build", no_deps=True)
    assert (out / "python" / "magnetar" / "security").is_dir()
    assert not (out / "python" / "magnetar" / "local").exists()
    assert not builder.has_dependencies(out)


def test_requirements_carry_the_tracer(builder: ModuleType) -> None:
    """Powertools' Tracer imports aws-xray-sdk, which the [tracer] extra brings (active tracing)."""
    requirements = builder.REQUIREMENTS.read_text()
    assert "aws-lambda-powertools[tracer]" in requirements
