"""Typed columns for topics with a schema: the Avro -> Spark type mapping of the Pulsar Spark
connector, and rows decoded with the topic's schema versions.

For a topic whose schema is AVRO or JSON (a record), `spark.read.format("magnetar")` gives the
record's fields as columns, then the connector's metadata columns (`__key`, `__topic`,
`__messageId`, `__publishTime`, `__eventTime`, `__messageProperties`); for a STRING or primitive
schema, a typed `value` column instead of the binary one. Messages written under older versions
of the schema are read under the latest (Avro schema resolution; JSON: the latest's fields, a
missing one null), so a topic that evolved compatibly reads as one DataFrame.

Avro -> Spark (the connector's, i.e. spark-avro's SchemaConverters): boolean BooleanType, int
IntegerType (date: DateType), long LongType (timestamp-millis/-micros: TimestampType), float
FloatType, double DoubleType, bytes/fixed BinaryType (decimal: DecimalType), string and enum
StringType, record StructType, array ArrayType, map MapType(StringType, ...), a union with null
nullable, a union of int and long LongType, of float and double DoubleType. A union of other
types is a struct of `member0`, `member1`, ... (one set, the others null), as spark-avro has it.

Kept apart from the source (`source.py`, issue #12 rewrites it for streaming): the source asks
`TypedTopic.fetch` once on the driver, ships the object to the executors with the reader, and
builds each row with `TypedTopic.row`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from magnetar.core.schema.types import SchemaData
from magnetar.core.schema.values import decode_value

META_COLUMNS = ("__key", "__topic", "__messageId", "__publishTime", "__eventTime", "__messageProperties")
PRIMITIVES: dict[str, DataType] = {
    "STRING": StringType(), "BOOLEAN": BooleanType(), "INT8": ByteType(), "INT16": ShortType(),
    "INT32": IntegerType(), "INT64": LongType(), "FLOAT": FloatType(), "DOUBLE": DoubleType(),
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _named(avro: Any, names: dict[str, Any]) -> Any:
    if isinstance(avro, str) and avro in names:
        return names[avro]
    return avro


def spark_type(avro: Any, names: dict[str, Any] | None = None) -> tuple[DataType, bool]:
    """The Spark type of an Avro schema and whether it is nullable."""
    names = {} if names is None else names
    avro = _named(avro, names)
    if isinstance(avro, list):  # a union
        branches = [b for b in avro if b != "null"]
        nullable = len(branches) < len(avro)
        if not branches:
            return NullType(), True
        if len(branches) == 1:
            return spark_type(branches[0], names)[0], nullable
        kinds = {b if isinstance(b, str) else b.get("type") for b in branches}
        if kinds <= {"int", "long"}:
            return LongType(), nullable
        if kinds <= {"float", "double"}:
            return DoubleType(), nullable
        members = [StructField(f"member{i}", spark_type(b, names)[0], True) for i, b in enumerate(branches)]
        return StructType(members), nullable
    if isinstance(avro, dict):
        kind, logical = avro.get("type"), avro.get("logicalType")
        if kind == "record":
            full = avro["name"] if "." in avro["name"] or not avro.get("namespace") else f"{avro['namespace']}.{avro['name']}"
            names[avro["name"]] = names[full] = avro
            return StructType([StructField(f["name"], *spark_type(f["type"], names)) for f in avro["fields"]]), False
        if kind == "enum":
            names[avro["name"]] = avro
            return StringType(), False
        if kind == "array":
            element, element_null = spark_type(avro["items"], names)
            return ArrayType(element, element_null), False
        if kind == "map":
            value, value_null = spark_type(avro["values"], names)
            return MapType(StringType(), value, value_null), False
        if logical == "decimal":
            return DecimalType(int(avro.get("precision", 10)), int(avro.get("scale", 0))), False
        if logical == "date" and kind == "int":
            return DateType(), False
        if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
            return TimestampType(), False
        if kind == "fixed":
            names[avro["name"]] = avro
            return BinaryType(), False
        return spark_type(kind, names)
    simple: dict[str, DataType] = {"null": NullType(), "boolean": BooleanType(), "int": IntegerType(),
                                   "long": LongType(), "float": FloatType(), "double": DoubleType(),
                                   "bytes": BinaryType(), "string": StringType()}
    if avro not in simple:
        raise ValueError(f"magnetar: no Spark type for the Avro type {avro!r}")
    return simple[avro], avro == "null"


def _convert(value: Any, data_type: DataType, avro: Any, names: dict[str, Any]) -> Any:
    """A decoded value as Spark wants it for `data_type` (records as tuples in field order)."""
    if value is None:
        return None
    avro = _named(avro, names)
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if isinstance(data_type, StructType) and len(branches) > 1:  # memberN: the branch the value fits
            out: list[Any] = [None] * len(branches)
            for i, (branch, field) in enumerate(zip(branches, data_type.fields, strict=True)):
                if _fits(value, _named(branch, names)):
                    out[i] = _convert(value, field.dataType, branch, names)
                    break
            return tuple(out)
        return _convert(value, data_type, branches[0], names) if len(branches) == 1 else value
    if isinstance(data_type, StructType) and isinstance(avro, dict) and avro.get("type") == "record":
        names[avro["name"]] = avro
        by_name = {f["name"]: f for f in avro["fields"]}
        return tuple(_convert(value.get(f.name), f.dataType, by_name[f.name]["type"], names) for f in data_type.fields)
    if isinstance(data_type, ArrayType) and isinstance(avro, dict):
        return [_convert(v, data_type.elementType, avro["items"], names) for v in value]
    if isinstance(data_type, MapType) and isinstance(avro, dict):
        return {k: _convert(v, data_type.valueType, avro["values"], names) for k, v in value.items()}
    if isinstance(data_type, TimestampType):
        if isinstance(value, datetime):
            return value
        micros = avro.get("logicalType") == "timestamp-micros" if isinstance(avro, dict) else False
        return _EPOCH + (timedelta(microseconds=value) if micros else timedelta(milliseconds=value))
    if isinstance(data_type, DateType):
        return value if isinstance(value, date) else (_EPOCH + timedelta(days=value)).date()
    if isinstance(data_type, DecimalType):
        return value if isinstance(value, Decimal) else Decimal(str(value))
    if isinstance(data_type, StringType) and not isinstance(value, str):
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)
    if isinstance(data_type, BinaryType) and isinstance(value, str):
        return value.encode("utf-8")
    return value


def _fits(value: Any, avro: Any) -> bool:
    kind = avro.get("type") if isinstance(avro, dict) else avro
    checks: dict[str, Callable[[Any], bool]] = {
        "boolean": lambda v: isinstance(v, bool), "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "long": lambda v: isinstance(v, int) and not isinstance(v, bool), "float": lambda v: isinstance(v, float),
        "double": lambda v: isinstance(v, float), "string": lambda v: isinstance(v, str),
        "bytes": lambda v: isinstance(v, bytes), "record": lambda v: isinstance(v, dict),
        "map": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
        "enum": lambda v: isinstance(v, str) and v in avro.get("symbols", ()),
        "fixed": lambda v: isinstance(v, bytes)}
    return checks.get(str(kind), lambda v: True)(value)


class TypedTopic:
    """A topic's schema versions and the latest as the DataFrame's schema (picklable: it travels
    to the executors with the reader)."""

    def __init__(self, versions: dict[int, SchemaData], latest: int) -> None:
        self.versions = versions
        self.latest = versions[latest]
        self.record = self.latest.type in ("AVRO", "JSON")
        self.avro = json.loads(self.latest.data) if self.record else None
        if self.record:
            value_type, _ = spark_type(self.avro)
            if not isinstance(value_type, StructType):
                raise ValueError(f"magnetar: the {self.latest.type} schema is not a record: typed columns need one")
            self.value_type: DataType = value_type
            fields = list(value_type.fields)
        else:
            self.value_type = PRIMITIVES[self.latest.type]
            fields = [StructField("value", self.value_type, True)]
        taken = {f.name for f in fields} & set(META_COLUMNS)
        if taken:
            raise ValueError(f"magnetar: the schema's fields {sorted(taken)} clash with the metadata columns")
        self.schema = StructType([
            *fields,
            StructField("__key", StringType(), True), StructField("__topic", StringType(), True),
            StructField("__messageId", BinaryType(), True), StructField("__publishTime", TimestampType(), True),
            StructField("__eventTime", TimestampType(), True),
            StructField("__messageProperties", MapType(StringType(), StringType(), True), True)])

    @classmethod
    def of(cls, all_versions: list[dict[str, Any]]) -> TypedTopic | None:
        """From the registry's answer (`getSchemaResponses`); None when the latest version is not
        one typed columns are made of (BYTES, KEY_VALUE, PROTOBUF...)."""
        versions = {int(s["version"]): SchemaData(s["type"], s.get("data") or "", s.get("properties") or {})
                    for s in all_versions}
        if not versions:
            return None
        latest = max(versions)
        if versions[latest].type not in ("AVRO", "JSON", *PRIMITIVES):
            return None
        return cls(versions, latest)

    @classmethod
    def fetch(cls, get_json: Callable[[str], Any], schema_path: str) -> TypedTopic | None:
        """Asks the registry (`GET {schema_path}/schemas`) through the source's HTTP client."""
        answer = get_json(f"{schema_path}/schemas")
        return cls.of((answer or {}).get("getSchemaResponses") or [])

    def value(self, payload: bytes, version: int | None) -> Any:
        """The value under the latest schema (None when it cannot be decoded)."""
        writer = self.versions.get(version) if version is not None else None
        if writer is None or writer.type != self.latest.type:
            writer = self.latest
        try:
            if self.latest.type == "AVRO":
                return decode_value(writer, payload, self.latest)
            return decode_value(writer, payload)
        except Exception:  # bytes that are not a value of the schema: a null row
            return None

    def row(self, message: dict[str, Any], meta: tuple[Any, ...]) -> tuple[Any, ...]:
        """The typed row of a message read over the HTTP API; `meta`: the untyped row's metadata
        columns (key, topic, message id, publish time, event time, properties)."""
        payload = base64.b64decode(message.get("payload") or "")
        return self.row_of(payload, message.get("schemaVersion"), meta)

    def row_of(self, payload: bytes, version: int | None, meta: tuple[Any, ...]) -> tuple[Any, ...]:
        """The typed row of a message's payload written with schema `version` (direct reads)."""
        value = self.value(payload, version)
        if not self.record:
            return (value, *meta)
        assert isinstance(self.value_type, StructType)
        if not isinstance(value, dict):
            return (*([None] * len(self.value_type.fields)), *meta)
        converted = _convert(value, self.value_type, self.avro, {})
        return (*converted, *meta)
