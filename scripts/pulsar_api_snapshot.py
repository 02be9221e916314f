"""Write the public API surface of the official `pulsar-client` package to a JSON snapshot.

`tests/unit/test_pulsar_api_parity.py` compares `magnetar`'s SDK with this snapshot mechanically
(names, parameter names, kinds and defaults), so the test runs without pulsar-client installed and
drift is caught whenever either side changes. To regenerate it for a new pulsar-client release:

    python -m venv /tmp/pcv && /tmp/pcv/bin/pip install 'pulsar-client==<version>'
    /tmp/pcv/bin/python scripts/pulsar_api_snapshot.py            # rewrites the snapshot
    .venv/bin/pytest -q tests/unit/test_pulsar_api_parity.py       # then close the new gaps

What is recorded, for every public name of the `pulsar` module (typing and stdlib re-exports,
submodules and Pulsar Functions' classes left out; `pulsar.schema`'s names apart, as `schema_names`):
classes with their public methods (parameter name, kind, default as `repr`); enums (pybind11 enums
of `_pulsar`) with their members and integer values; exceptions with their bases; module functions.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import types
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).resolve().parent.parent / "tests" / "fixtures_local" / "pulsar_client_api.json"
# re-exports that are not pulsar-client's own surface
SKIP_MODULES = ("typing", "datetime", "pulsar.schema", "pulsar.functions")


def _parameters(fn: Any) -> list[dict[str, Any]] | None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None  # a pybind11 builtin without a text signature
    out = []
    for p in signature.parameters.values():
        if p.name == "self":
            continue
        item: dict[str, Any] = {"name": p.name, "kind": p.kind.name}
        if p.default is not inspect.Parameter.empty:
            item["default"] = re.sub(r" at 0x[0-9a-f]+>", ">", repr(p.default))  # stable across runs
        out.append(item)
    return out


def _is_enum(cls: type) -> bool:
    return hasattr(cls, "__members__") and not issubclass(cls, BaseException)


def _class(cls: type) -> dict[str, Any]:
    if issubclass(cls, BaseException):
        return {"kind": "exception", "bases": [b.__name__ for b in cls.__bases__]}
    if _is_enum(cls):
        members: dict[str, Any] = getattr(cls, "__members__")  # noqa: B009 - pybind11 enums, not enum.Enum
        return {"kind": "enum", "members": sorted(members), "values": {k: int(v) for k, v in members.items()}}
    methods: dict[str, Any] = {}
    for name, raw in sorted(vars(cls).items()):
        if name.startswith("_") and name != "__init__":
            continue
        kind = "static" if isinstance(raw, staticmethod) else "class" if isinstance(raw, classmethod) else \
            "property" if isinstance(raw, property) else "method"
        fn = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
        if kind == "property":
            methods[name] = {"kind": kind}
        elif callable(fn):
            methods[name] = {"kind": kind, "parameters": _parameters(fn)}
        else:
            methods[name] = {"kind": "attribute", "type": type(fn).__name__}
    return {"kind": "class", "bases": [b.__name__ for b in cls.__bases__ if b is not object], "methods": methods}


def snapshot() -> dict[str, Any]:
    import pulsar

    names: dict[str, Any] = {}
    for name in sorted(dir(pulsar)):
        if name.startswith("_"):
            continue
        value = getattr(pulsar, name)
        module = getattr(value, "__module__", None) or ""
        if isinstance(value, types.ModuleType) or module.startswith(SKIP_MODULES) or not (
                isinstance(value, type) or inspect.isfunction(value)):
            continue
        if isinstance(value, type):
            names[name] = _class(value)
        else:
            names[name] = {"kind": "function", "parameters": _parameters(value)}
    exceptions = sorted(n for n in dir(pulsar.exceptions) if not n.startswith("_")
                        and isinstance(getattr(pulsar.exceptions, n), type))
    version = getattr(pulsar, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("pulsar-client")
    return {"pulsar_client_version": version, "python": sys.version.split()[0], "names": names,
            "exceptions_module": exceptions, "schema_names": _schema_names()}


def _schema_names() -> dict[str, Any]:
    """`pulsar.schema`'s public classes (Record, the field types, the schemas): `magnetar.schema`'s model."""
    import pulsar.schema

    names: dict[str, Any] = {}
    for name in sorted(dir(pulsar.schema)):
        value = getattr(pulsar.schema, name)
        if not name.startswith("_") and isinstance(value, type) and value.__module__.startswith("pulsar.schema"):
            names[name] = _class(value)
    return names


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else SNAPSHOT
    out.write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
