"""Build the `core` Lambda layer: `magnetar` (minus local-only code) plus its runtime dependencies.

The layer is what lets the function assets stay tiny (just `handler.py`): Lambda adds
`/opt/python` to `sys.path`, so the layer's `python/` directory must hold the packages.
Dependencies are installed as manylinux aarch64 wheels for CPython 3.12 because the functions
run on arm64 with the python3.12 runtime, whatever machine builds the layer.

Usage: python layers/build.py [--no-deps] [--out DIR]

`--no-deps` copies only `magnetar` (seconds, offline): enough for `cdk synth` and the stack
tests, not for a deploy.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = REPO_ROOT / "src" / "magnetar"
REQUIREMENTS = REPO_ROOT / "layers" / "core" / "requirements.txt"
DEFAULT_BUILD_DIR = REPO_ROOT / "layers" / "core" / "build"

# Subpackages of `magnetar` that only run on a developer machine (emulator, CLI).
EXCLUDED_SUBPACKAGES = frozenset({"local", "cli"})

# The python3.12 runtime is Amazon Linux 2023 (glibc 2.34): manylinux2014 (glibc 2.17) wheels and
# the newer manylinux_2_28 / _2_34 ones all load there, so pip may pick any of them (cryptography,
# PyJWT[crypto]'s backend, ships some releases with the newer tags only).
PIP_PLATFORM_ARGS = [
    "--platform",
    "manylinux2014_aarch64",
    "--platform",
    "manylinux_2_28_aarch64",
    "--platform",
    "manylinux_2_34_aarch64",
    "--only-binary=:all:",
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
]


def _ignore(package_dir: Path) -> Callable[[str, list[str]], set[str]]:
    """Return a copytree filter dropping caches everywhere and local-only subpackages at the top."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".pyo"))}
        if Path(directory).resolve() == package_dir.resolve():
            skipped |= EXCLUDED_SUBPACKAGES.intersection(names)
        return skipped

    return ignore


# Packages whose presence tells a full build from a --no-deps one (the stack warns on the latter).
MARKER_PACKAGES = ("pydantic", "jwt", "cryptography")
ELF_MACHINE_AARCH64 = 183  # e_machine of an arm64 ELF object


def has_dependencies(build_dir: Path = DEFAULT_BUILD_DIR) -> bool:
    """Tell whether a built layer holds the pip dependencies (i.e. was not built with --no-deps)."""
    return all((build_dir / "python" / name).is_dir() for name in MARKER_PACKAGES)


def foreign_extensions(python_dir: Path) -> list[Path]:
    """Compiled extension modules in the layer that are not arm64 Linux ELF objects.

    A wheel for the build machine's platform (x86_64, macOS) would import fine in a local test and
    fail on Lambda with an ImportError at the first cold start; cryptography is the one that
    matters most (the authorizer cannot verify a token without it).
    """
    foreign = []
    for path in sorted(python_dir.rglob("*.so")):
        with path.open("rb") as file:
            header = file.read(20)
        # ELF magic, then e_machine (little-endian uint16 at offset 18)
        if header[:4] != b"\x7fELF" or int.from_bytes(header[18:20], "little") != ELF_MACHINE_AARCH64:
            foreign.append(path)
    return foreign


def build(build_dir: Path = DEFAULT_BUILD_DIR, *, no_deps: bool = False) -> Path:
    """Recreate `build_dir/python/` from scratch and return `build_dir`.

    Starting from an empty directory keeps deleted modules and stale wheels out of the layer.
    """
    python_dir = build_dir / "python"
    if build_dir.exists():
        shutil.rmtree(build_dir)
    python_dir.mkdir(parents=True)
    shutil.copytree(PACKAGE_DIR, python_dir / "magnetar", ignore=_ignore(PACKAGE_DIR))
    if not no_deps:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                # .pyc files compiled by the build machine's interpreter are useless on 3.12.
                "--no-compile",
                "--target",
                str(python_dir),
                *PIP_PLATFORM_ARGS,
                "-r",
                str(REQUIREMENTS),
            ],
            check=True,
        )
        foreign = foreign_extensions(python_dir)
        if foreign:
            raise RuntimeError(f"not arm64 Linux extension modules in the layer: {foreign}")
    return build_dir


def ensure_built(build_dir: Path = DEFAULT_BUILD_DIR) -> Path:
    """Build with --no-deps if `build_dir` holds no layer yet, so `cdk synth` never lacks the asset."""
    if not (build_dir / "python" / "magnetar").is_dir():
        build(build_dir, no_deps=True)
    return build_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the magnetar core Lambda layer.")
    parser.add_argument("--no-deps", action="store_true", help="copy magnetar only, skip pip install")
    parser.add_argument("--out", type=Path, default=DEFAULT_BUILD_DIR, help="layer directory to recreate")
    args = parser.parse_args(argv)
    out = build(args.out.resolve(), no_deps=args.no_deps)
    print(f"layer built in {out} ({'without' if args.no_deps else 'with'} dependencies)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
