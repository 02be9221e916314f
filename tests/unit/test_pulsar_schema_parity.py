"""`magnetar.schema` against `pulsar.schema` (the snapshot's `schema_names`): the same classes,
methods and parameters, with the differences listed here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import magnetar.schema
from magnetar.client import exceptions

_spec = importlib.util.spec_from_file_location("_pulsar_api_parity", Path(__file__).with_name("test_pulsar_api_parity.py"))
assert _spec is not None and _spec.loader is not None
parity = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(parity)  # its compare() and snapshot, with this module's differences added

_PROTOBUF_STAND_IN = ("the snapshot was taken where protobuf was not installed: pulsar-client then defines a stand-in "
                      "taking `_record_cls=None`; its real class, like this one, takes `record_cls`")
SCHEMA_DIFFERENCES = {
    "ProtobufNativeSchema.__init__(_record_cls)": _PROTOBUF_STAND_IN,
    "ProtobufNativeSchema.__init__(record_cls)": _PROTOBUF_STAND_IN,
}


def test_magnetar_schema_has_pulsar_schemas_surface(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parity, "DIFFERENCES", {**parity.DIFFERENCES, **SCHEMA_DIFFERENCES})
    surface = {"names": parity.SNAPSHOT["schema_names"], "exceptions_module": []}
    assert len(surface["names"]) > 15
    problems = parity.compare(surface, magnetar.schema, exceptions)
    assert problems == [], "\n".join(problems)


def test_every_listed_schema_difference_still_differs() -> None:
    stale = [name for name in SCHEMA_DIFFERENCES if hasattr(magnetar.schema, name)]
    assert stale == [], f"no longer different, remove from SCHEMA_DIFFERENCES: {stale}"


def test_record_schemas_are_pulsar_clients() -> None:
    """The Avro schema of a record class as pulsar-client 3.13 generates it (nullable unions,
    defaults only with required_default, nested records and enums named once)."""
    import enum

    class Kind(enum.Enum):
        A = 1

    class Inner(magnetar.schema.Record):
        x = magnetar.schema.Long(required=True)

    class Outer(magnetar.schema.Record):
        _avro_namespace = "ns"
        kind = Kind
        inner = Inner()
        again = Inner()
        n = magnetar.schema.Integer(default=3, required_default=True)
        items = magnetar.schema.Array(magnetar.schema.String())

    assert Outer.schema() == {
        "type": "record", "name": "Outer", "namespace": "ns", "fields": [
            {"name": "kind", "type": ["null", {"type": "enum", "name": "Kind", "symbols": ["A"]}]},
            {"name": "inner", "type": ["null", {"type": "record", "name": "Inner",
                                                "fields": [{"name": "x", "type": "long"}]}]},
            {"name": "again", "type": ["null", "Inner"]},
            {"name": "n", "default": 3, "type": ["null", "int"]},
            {"name": "items", "type": ["null", {"type": "array", "items": "string"}]},
        ]}
    with pytest.raises(TypeError):
        Outer(n="three")
    with pytest.raises(AttributeError):
        Outer(n=1).missing = 2
