"""Record classes and their field types, with pulsar-client's names and behaviour.

A `Record` subclass declares its fields as class attributes (`name = String(required=True)`);
`Record.schema()` gives the Avro schema pulsar-client generates for it (so a Magnetar producer
and a pulsar-client producer of the same class register the same schema): a field is the union
`["null", type]` unless `required=True`, and carries its `default` only with
`required_default=True`. Instances check each value's type on assignment and compare field by
field. A nested record is declared as an instance (`address = Address()`), an enum as the Python
`Enum` class itself or `CustomEnum(MyEnum)`.
"""

from __future__ import annotations

import copy
from enum import Enum, EnumMeta
from typing import Any, cast


def _type_name(t: Any) -> str:
    return getattr(t, "__name__", str(t))


class Field:
    """A record field: `default`, `required` (not nullable) and `required_default` (the default
    written into the schema)."""

    def __init__(self, default: Any = None, required: bool = False, required_default: bool = False) -> None:
        self._required = required
        self._required_default = required_default
        self._default = None if default is None else self.validate_type("default", default)

    def type(self) -> Any:
        raise NotImplementedError

    def python_type(self) -> Any:
        raise NotImplementedError

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, self.python_type()):
            raise TypeError(f"Invalid type '{type(val)}' for field '{name}'. Expected: "
                            f"{_type_name(self.python_type())}")
        return val

    def schema(self) -> Any:
        return self.type()

    def schema_info(self, defined_names: set[str]) -> Any:
        return self.type()

    def default(self) -> Any:
        return self._default

    def required_default(self) -> bool:
        return self._required_default


class Null(Field):
    def type(self) -> str:
        return "null"

    def python_type(self) -> Any:
        return type(None)

    def validate_type(self, name: str, val: Any) -> Any:
        if val is not None:
            raise TypeError(f"Field {name} is set to be None")
        return val


class Boolean(Field):
    def type(self) -> str:
        return "boolean"

    def python_type(self) -> Any:
        return bool

    def default(self) -> Any:
        return False if self._default is None else self._default


class Integer(Field):
    def type(self) -> str:
        return "int"

    def python_type(self) -> Any:
        return int


class Long(Field):
    def type(self) -> str:
        return "long"

    def python_type(self) -> Any:
        return int


class Float(Field):
    def type(self) -> str:
        return "float"

    def python_type(self) -> Any:
        return (float, int)


class Double(Field):
    def type(self) -> str:
        return "double"

    def python_type(self) -> Any:
        return (float, int)


class Bytes(Field):
    def type(self) -> str:
        return "bytes"

    def python_type(self) -> Any:
        return (bytes, str)

    def validate_type(self, name: str, val: Any) -> Any:
        return val.encode() if isinstance(val, str) else val


class String(Field):
    def type(self) -> str:
        return "string"

    def python_type(self) -> Any:
        return (str, bytes)

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, str | bytes):
            raise TypeError(f"Invalid type '{type(val)}' for field '{name}'. Expected a string")
        return val.decode() if isinstance(val, bytes) else val


class CustomEnum(Field):
    """A Python `Enum` as an Avro enum (its member names are the symbols)."""

    def __init__(self, enum_type: type[Enum], default: Any = None, required: bool = False,
                 required_default: bool = False) -> None:
        if not (isinstance(enum_type, type) and issubclass(enum_type, Enum)):
            raise Exception(f"{_type_name(enum_type)} is not a valid Enum type")
        self.enum_type = enum_type
        self.values = {member.value: member for member in enum_type.__members__.values()}
        super().__init__(default, required, required_default)

    def type(self) -> str:
        return "enum"

    def python_type(self) -> Any:
        return self.enum_type

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        if type(val) is str:
            if val not in self.enum_type.__members__:
                raise TypeError(f"Invalid enum value '{val}' for field '{name}'. Expected: "
                                f"{list(self.enum_type.__members__)}")
            return self.enum_type.__members__[val]
        if type(val) is int:
            if val not in self.values:
                raise TypeError(f"Invalid enum value '{val}' for field '{name}'. Expected: {list(self.values)}")
            return self.values[val]
        if not isinstance(val, self.enum_type):
            raise TypeError(f"Invalid type '{type(val)}' for field '{name}'. Expected: {_type_name(self.enum_type)}")
        return val

    def schema(self) -> Any:
        return self.schema_info(set())

    def schema_info(self, defined_names: set[str]) -> Any:
        name = self.enum_type.__name__
        if name in defined_names:
            return name
        defined_names.add(name)
        return {"type": "enum", "name": name, "symbols": [m.name for m in self.enum_type]}


def _check_element(x: Any) -> None:
    if isinstance(x, type) and not issubclass(x, Record) and not isinstance(x, Field):
        raise Exception(f"Argument {_type_name(x)} is not a Record or a Field")


def _element_schema(element: Any, defined_names: set[str]) -> Any:
    return element.schema_info(defined_names) if isinstance(element, Array | Map | Record | CustomEnum) \
        else element.type()


class Array(Field):
    def __init__(self, array_type: Any, default: Any = None, required: bool = False,
                 required_default: bool = False) -> None:
        _check_element(array_type)
        self.array_type = array_type
        super().__init__(default=default, required=required, required_default=required_default)

    def type(self) -> str:
        return "array"

    def python_type(self) -> Any:
        return list

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        super().validate_type(name, val)
        for item in val:
            if not isinstance(item, self.array_type.python_type()):
                raise TypeError(f"Array field {name} items should all be of type {_type_name(self.array_type.type())}")
        return val

    def schema(self) -> Any:
        return self.schema_info(set())

    def schema_info(self, defined_names: set[str]) -> Any:
        return {"type": "array", "items": _element_schema(self.array_type, defined_names)}


class Map(Field):
    def __init__(self, value_type: Any, default: Any = None, required: bool = False,
                 required_default: bool = False) -> None:
        _check_element(value_type)
        self.value_type = value_type
        super().__init__(default=default, required=required, required_default=required_default)

    def type(self) -> str:
        return "map"

    def python_type(self) -> Any:
        return dict

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        super().validate_type(name, val)
        for key, value in val.items():
            if not isinstance(key, str):
                raise TypeError(f"Map keys for field {name}  should all be strings")
            if not isinstance(value, self.value_type.python_type()):
                raise TypeError(f"Map values for field {name} should all be of type "
                                f"{_type_name(self.value_type.python_type())}")
        return val

    def schema(self) -> Any:
        return self.schema_info(set())

    def schema_info(self, defined_names: set[str]) -> Any:
        return {"type": "map", "values": _element_schema(self.value_type, defined_names)}


class RecordMeta(type):
    """Collects a Record subclass's declared fields (in declaration order) into `_fields`."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> RecordMeta:
        if name != "Record":
            fields: dict[str, Any] = {}
            for attr, value in namespace.items():
                if isinstance(value, EnumMeta):
                    value = CustomEnum(cast(type[Enum], value))
                elif isinstance(value, RecordMeta):
                    value = value()
                if isinstance(value, Record | Field):
                    fields[attr] = value
            namespace["_fields"] = fields
            namespace["_required"] = False
        return super().__new__(mcs, name, bases, namespace)


class Record(metaclass=RecordMeta):
    """Subclass it and declare fields; construct with keyword values (nested records and arrays or
    maps of records may be given as dicts)."""

    _fields: dict[str, Any]
    _avro_namespace: str | None = None  # the Avro schema's namespace
    _sorted_fields = False  # fields in the schema sorted by name instead of declaration order

    def __init__(self, default: Any = None, required_default: bool = False, required: bool = False,
                 *args: Any, **kwargs: Any) -> None:
        self._required_default = required_default
        self._default = default
        self._required = required
        for name, field in self._fields.items():
            if name not in kwargs:
                if isinstance(field, Record):
                    self.__setattr__(name, field)
                else:
                    object.__setattr__(self, name, field.default())
                continue
            value = kwargs[name]
            if isinstance(field, Record) and isinstance(value, dict):
                value = _record_from(field, value)
            elif isinstance(field, Array) and isinstance(field.array_type, Record) and isinstance(value, list):
                value = [_record_from(field.array_type, v) if isinstance(v, dict) else v for v in value]
            elif isinstance(field, Map) and isinstance(field.value_type, Record) and isinstance(value, dict):
                value = {k: _record_from(field.value_type, v) if isinstance(v, dict) else v for k, v in value.items()}
            self.__setattr__(name, value)

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The Avro schema of this record class (pulsar-client's layout)."""
        info = cls.schema_info(set())
        assert isinstance(info, dict)
        return info

    @classmethod
    def schema_info(cls, defined_names: set[str]) -> Any:
        full_name = f"{cls._avro_namespace}.{cls.__name__}" if cls._avro_namespace else cls.__name__
        if full_name in defined_names:
            return full_name
        defined_names.add(full_name)
        schema: dict[str, Any] = {"type": "record", "name": cls.__name__}
        if cls._avro_namespace is not None:
            schema["namespace"] = cls._avro_namespace
        fields = []
        for name in (sorted(cls._fields) if cls._sorted_fields else cls._fields):
            field = cls._fields[name]
            field_type = field.schema_info(defined_names)
            entry: dict[str, Any] = {"name": name, "type": field_type if field._required else ["null", field_type]}
            if field.required_default():
                default = field.default()
                entry = {"name": name, "default": default.name if isinstance(default, Enum) else default,
                         "type": entry["type"]}
            fields.append(entry)
        schema["fields"] = fields
        return schema

    def __setattr__(self, key: str, value: Any) -> None:
        if key in ("_default", "_required_default", "_required"):
            object.__setattr__(self, key, value)
            return
        if key not in self._fields:
            raise AttributeError(f"Cannot set undeclared field {key} on record")
        object.__setattr__(self, key, self._fields[key].validate_type(key, value))

    def __eq__(self, other: object) -> bool:
        return all(getattr(self, name) == getattr(other, name, None) for name in self._fields)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __str__(self) -> str:
        return str(self.__dict__)

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({values})"

    def type(self) -> str:
        return type(self).__name__

    def python_type(self) -> Any:
        return type(self)

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, type(self)):
            raise TypeError(f"Invalid type '{type(val)}' for sub-record field '{name}'. Expected: {type(self).__name__}")
        return val

    def default(self) -> Any:
        return self._default

    def required_default(self) -> bool:
        return self._required_default


def _record_from(template: Record, values: dict[str, Any]) -> Record:
    record = copy.copy(template)
    type(template).__init__(record, **values)
    return record
