"""Pulsar's schema compatibility strategies, decided with Avro's schema-resolution rules.

The rules themselves are Apache Avro's schema resolution (`avro.compatibility`'s
`ReaderWriterCompatibilityChecker`, the Python port of Java's `SchemaCompatibility`): data written
with schema W can be read with schema R. Pulsar's check (`AvroSchemaBasedCompatibilityCheck`) asks
Java Avro's `SchemaValidator`, which resolves the two schemas' grammars
(`ResolvingGrammarGenerator`): that resolution matches records by their fields, not their names
(a record named `User1` reads data written as `User2`; in a union, a record branch of another name
matches by structure), while enums and fixed types keep their names. So the checker here skips the
record-name rule (`_PulsarChecker`) and keeps every other. Per strategy, for a new schema N and
the topic's existing versions:

| strategy    | N must be able to                                    |
|-------------|------------------------------------------------------|
| BACKWARD    | read data written with the latest version (R=N, W=latest) |
| FORWARD     | be read by the latest version (R=latest, W=N)         |
| FULL        | both                                                 |
| *_TRANSITIVE| the same, against every version instead of the latest |
| ALWAYS_COMPATIBLE / ALWAYS_INCOMPATIBLE | anything / nothing new    |

A schema identical to an existing version is never a change (the registry answers with that
version before asking here). Schemas of different types are incompatible (except under
ALWAYS_COMPATIBLE); STRING, BYTES and the primitive types have nothing to evolve; KEY_VALUE
checks its key and value schemas each; PROTOBUF_NATIVE schemas of one type are accepted (Pulsar
compares descriptors' root message names, which Magnetar does not parse).
"""

from __future__ import annotations

from typing import Any

from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType, SchemaType

from magnetar.core.errors import InvalidInput
from magnetar.core.schema.types import STRUCTS, SchemaData, avro_schema

STRATEGIES = ("ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL",
              "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE")
UNDEFINED = "UNDEFINED"  # a namespace without its own strategy: the broker's default applies
DEFAULT_STRATEGY = "FULL"  # Pulsar broker's schemaCompatibilityStrategy default


def check_strategy(value: object) -> str:
    if not isinstance(value, str) or value.upper() not in (*STRATEGIES, UNDEFINED):
        raise InvalidInput(f"Invalid schema compatibility strategy {value!r}: one of {', '.join(STRATEGIES)}, "
                           f"{UNDEFINED}")
    return value.upper()


def effective_strategy(value: object) -> str:
    """The strategy in force for a namespace's stored value (None or UNDEFINED: the default)."""
    return value if isinstance(value, str) and value in STRATEGIES else DEFAULT_STRATEGY


class _PulsarChecker(ReaderWriterCompatibilityChecker):
    """Avro's reader/writer checker without its record-name rule, as Pulsar's grammar-based check
    (the module's docstring): two records are compatible when their fields are."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]

    def calculate_compatibility(self, reader: Any, writer: Any, location: list[str]) -> Any:
        if reader.type == writer.type == SchemaType.RECORD:
            return self.check_reader_writer_record_fields(reader, writer, location)
        return super().calculate_compatibility(reader, writer, location)


def _can_read(reader: SchemaData, writer: SchemaData) -> str | None:
    """None when data written with `writer` can be read with `reader`, else why not."""
    if reader.type != writer.type:
        return f"schema type {writer.type} cannot be read as {reader.type}"
    if reader.type in STRUCTS:
        checker = _PulsarChecker()
        result = checker.get_compatibility(avro_schema(reader.data), avro_schema(writer.data))
        if result.compatibility is SchemaCompatibilityType.compatible:
            return None
        kinds = ", ".join(sorted(i.value for i in result.incompatibilities))
        where = ", ".join(sorted(result.locations))
        return f"{kinds} at {where} ({'; '.join(sorted(result.messages))})"
    if reader.type == "KEY_VALUE":
        for r, w, what in zip(reader.key_value(), writer.key_value(), ("key", "value"), strict=True):
            why = _can_read(r, w)
            if why:
                return f"{what}: {why}"
    return None


def check_compatible(new: SchemaData, existing: list[SchemaData], strategy: str) -> str | None:
    """None when `new` may follow `existing` (oldest first) under `strategy`, else the reason."""
    if not existing or strategy == "ALWAYS_COMPATIBLE":
        return None
    if strategy == "ALWAYS_INCOMPATIBLE":
        return "the strategy is ALWAYS_INCOMPATIBLE"
    against = existing if strategy.endswith("_TRANSITIVE") else existing[-1:]
    base = strategy.removesuffix("_TRANSITIVE")
    for old in reversed(against):
        if base in ("BACKWARD", "FULL"):
            why = _can_read(new, old)
            if why:
                return f"{base}: the new schema cannot read data written with an existing one: {why}"
        if base in ("FORWARD", "FULL"):
            why = _can_read(old, new)
            if why:
                return f"{base}: an existing schema cannot read data written with the new one: {why}"
    return None
