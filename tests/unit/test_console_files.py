"""The console's static files: what the page loads exists, the vendored libraries are the versions
package.json pins (and, where npm installed them, byte for byte their files), and the local
runtime finds the folder."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from magnetar.local.console import console_config, console_dir

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "console"
sys.path.insert(0, str(ROOT / "scripts"))
import console_vendor  # noqa: E402


def test_the_local_runtime_finds_the_console_in_the_source_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAGNETAR_CONSOLE_DIR", raising=False)
    assert console_dir() == CONSOLE and (console_dir() / "index.html").is_file()
    monkeypatch.setenv("MAGNETAR_CONSOLE_DIR", "/elsewhere")
    assert console_dir() == Path("/elsewhere")
    assert console_config() == {"apiUrl": "", "authentication": False}


def test_every_file_the_page_and_its_modules_load_is_there() -> None:
    index = (CONSOLE / "index.html").read_text()
    imports = json.loads(re.search(r'<script type="importmap">(.*?)</script>', index, re.S).group(1))["imports"]
    assert all((CONSOLE / path).is_file() for path in imports.values())
    for ref in re.findall(r'(?:src|href)="([^"#:]+)"', index):
        assert (CONSOLE / ref).is_file(), ref
    for module in CONSOLE.rglob("*.js"):
        if "vendor" in module.parts:
            continue
        for spec in re.findall(r'from "([^"]+)"', module.read_text()):
            assert spec in imports or (module.parent / spec).resolve().is_file(), f"{module.name}: {spec}"


def test_the_vendored_libraries_are_the_pinned_versions() -> None:
    versions = json.loads(console_vendor.VERSIONS.read_text())
    assert versions == console_vendor.pinned()
    assert all((console_vendor.VENDOR / name).is_file() for name in console_vendor.FILES)
    if all(console_vendor.installed(p) == v for p, v in versions.items()):  # npm ci has run: byte for byte
        assert console_vendor.differences() == []
