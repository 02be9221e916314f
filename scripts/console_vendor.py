"""The console's third-party files (console/vendor/), copied from the npm packages package.json pins.

The console needs no build step: Preact, its hooks and htm are ES modules the page's import map
names, uPlot a script. They are committed, so that the console works wherever the repository is
(the local runtime, the CDK asset) without npm; this script refreshes them after a version change
in package.json (`npm ci`, then `python scripts/console_vendor.py`), and `--check` says whether
they are still the installed packages' files (tests/unit/test_console_files.py runs it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "console" / "vendor"
NODE_MODULES = ROOT / "node_modules"
# vendored file -> (npm package, its file)
FILES = {
    "preact.mjs": ("preact", "dist/preact.mjs"),
    "preact-hooks.mjs": ("preact", "hooks/dist/hooks.mjs"),
    "htm.mjs": ("htm", "dist/htm.mjs"),
    "uPlot.iife.min.js": ("uplot", "dist/uPlot.iife.min.js"),
    "uPlot.min.css": ("uplot", "dist/uPlot.min.css"),
    "LICENSE-preact": ("preact", "LICENSE"),
    "LICENSE-htm": ("htm", "LICENSE"),
    "LICENSE-uplot": ("uplot", "LICENSE"),
}
VERSIONS = VENDOR / "VERSIONS.json"  # package -> version the files came from


def pinned() -> dict[str, str]:
    """The versions package.json pins for the vendored packages."""
    dev = json.loads((ROOT / "package.json").read_text())["devDependencies"]
    return {package: dev[package] for package in sorted({p for p, _ in FILES.values()})}


def installed(package: str) -> str | None:
    manifest = NODE_MODULES / package / "package.json"
    return json.loads(manifest.read_text())["version"] if manifest.is_file() else None


def differences() -> list[str]:
    """What differs between console/vendor and the installed packages (empty: nothing)."""
    out = []
    for name, (package, path) in FILES.items():
        source, target = NODE_MODULES / package / path, VENDOR / name
        if not source.is_file():
            out.append(f"{package} is not installed (npm ci)")
        elif not target.is_file() or target.read_bytes() != source.read_bytes():
            out.append(f"{target.relative_to(ROOT)} is not {package}'s {path}")
    return sorted(set(out))


def copy() -> None:
    VENDOR.mkdir(parents=True, exist_ok=True)
    for name, (package, path) in FILES.items():
        shutil.copyfile(NODE_MODULES / package / path, VENDOR / name)
    versions = {package: installed(package) for package in pinned()}
    VERSIONS.write_text(json.dumps(versions, indent=2) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether the vendored files are current")
    args = parser.parse_args()
    if args.check:
        problems = differences()
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    wrong = {p: (v, installed(p)) for p, v in pinned().items() if installed(p) != v}
    if wrong:
        print(f"node_modules does not hold the pinned versions (npm ci): {wrong}", file=sys.stderr)
        return 1
    copy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
