"""Build the zip to pass as `spark-submit --py-files` (EMR steps, EMR Serverless `sparkSubmitParameters`).

    python spark/jobs/build_pyfiles.py                 # dist/magnetar_spark.zip: our code only
    python spark/jobs/build_pyfiles.py --with-deps     # + httpx, msgpack and their pure-Python deps

The zip holds `magnetar_spark`, `magnetar/__init__.py` and `magnetar.core` (names and message
ids; no boto3, no SDK). With `--with-deps` it also holds the data source's third-party
dependencies, copied from the running environment without compiled extensions, so the zip works
on any Linux/Python >= 3.11 node: msgpack then uses its pure-Python fallback, which is all the
source needs (it parses message ids, it does not decode entries). Without `--with-deps`, install
`httpx` and `msgpack` on the nodes (a bootstrap action, or a packed virtualenv).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
OUR_CODE = [
    (ROOT / "spark" / "magnetar_spark", "magnetar_spark"),
    (ROOT / "spark" / "pyspark_magnetar", "pyspark_magnetar"),  # format("magnetar") without register
    (ROOT / "src" / "magnetar" / "core", "magnetar/core"),
]
OUR_FILES = [(ROOT / "src" / "magnetar" / "__init__.py", "magnetar/__init__.py")]
# The data source's runtime dependencies besides pyspark (which the cluster has).
DEPENDENCIES = [
    "httpx",
    "httpcore",
    "h11",
    "anyio",
    "sniffio",
    "idna",
    "certifi",
    "msgpack",
    "typing_extensions",
]
_SKIP_SUFFIXES = (".so", ".pyd", ".dll", ".dylib", ".pyc", ".pyi")


def _sources(directory: Path, arc_prefix: str) -> Iterator[tuple[Path, str]]:
    for path in sorted(directory.rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path, f"{arc_prefix}/{path.relative_to(directory).as_posix()}"


def _distribution_files(name: str) -> Iterator[tuple[Path, str]]:
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return  # optional (sniffio, typing_extensions on newer stacks)
    for file in dist.files or []:
        rel = PurePosixPath(str(file))
        if rel.parts[0].endswith((".dist-info", ".egg-info")) or rel.parts[0] in ("..", "bin"):
            continue
        if "__pycache__" in rel.parts or rel.name.endswith(_SKIP_SUFFIXES):
            continue
        path = Path(str(dist.locate_file(file)))
        if path.is_file():
            yield path, rel.as_posix()


def build(output: Path, with_deps: bool) -> list[str]:
    entries: list[tuple[Path, str]] = list(OUR_FILES)
    for directory, prefix in OUR_CODE:
        entries.extend(_sources(directory, prefix))
    if with_deps:
        for name in DEPENDENCIES:
            entries.extend(_distribution_files(name))
    output.parent.mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    with zipfile.ZipFile(output, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, arcname in entries:
            if arcname in names:
                continue
            zf.write(path, arcname)
            names.append(arcname)
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the --py-files zip of the Magnetar Spark source.")
    parser.add_argument("--output", type=Path, default=ROOT / "dist" / "magnetar_spark.zip")
    parser.add_argument("--with-deps", action="store_true", help="also vendor httpx, msgpack and their deps")
    args = parser.parse_args(argv)
    names = build(args.output, args.with_deps)
    print(f"{args.output}: {len(names)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
