"""Pulsar's SerDe (`pulsar.functions.serde`): how a function's input bytes become its argument
and its result becomes the output's bytes when the topic has no schema.

`IdentitySerDe` behaves exactly as Pulsar's: serializing, an int, float, complex or str becomes
its text in UTF-8 and bytes stay as they are (anything else is a TypeError); deserializing, the
bytes become the first of int, float, complex, str that parses them as UTF-8 text, else stay bytes
(so b"7" arrives as 7 and b"hello" as "hello")."""

from __future__ import annotations

import pickle
from abc import abstractmethod
from typing import Any


class SerDe:
    """Interface for serialization/deserialization."""

    @abstractmethod
    def serialize(self, input: Any) -> bytes:
        """Serialize an object into bytes."""

    @abstractmethod
    def deserialize(self, input_bytes: bytes) -> Any:
        """Deserialize bytes into an object."""


class PickleSerDe(SerDe):
    """Pickle based serializer."""

    def serialize(self, input: Any) -> bytes:
        return pickle.dumps(input)

    def deserialize(self, input_bytes: bytes) -> Any:
        return pickle.loads(input_bytes)


class IdentitySerDe(SerDe):
    """Simple SerDe that converts to text and back (Pulsar's, type for type)."""

    def __init__(self) -> None:
        self._types: list[type] = [int, float, complex, str]

    def serialize(self, input: Any) -> bytes:
        if type(input) in self._types:
            return str(input).encode("utf-8")
        if type(input) is bytes:
            return input
        raise TypeError(f"IdentitySerde cannot serialize object of type {type(input)}")

    def deserialize(self, input_bytes: bytes) -> Any:
        for typ in self._types:
            try:
                return typ(input_bytes.decode("utf-8"))
            except Exception:
                continue
        return input_bytes


_BUILTIN: dict[str, type[SerDe]] = {"IdentitySerDe": IdentitySerDe, "PickleSerDe": PickleSerDe}
_PREFIXES = ("serde.", "pulsar.functions.serde.", "pulsar.serde.", "pulsar.", "magnetar.functions.serde.")


def serde_class(name: str) -> type[SerDe]:
    """The SerDe a class name names, as Pulsar resolves `serde_class_name`: "serde.IdentitySerDe",
    "IdentitySerDe", "pulsar.functions.serde.PickleSerDe"... name the built-in ones; anything else
    is "module.Class" imported (the function's code directory is on the import path)."""
    import importlib

    short = name
    for prefix in _PREFIXES:
        if name.startswith(prefix) and name[len(prefix):] in _BUILTIN:
            short = name[len(prefix):]
    if short in _BUILTIN:
        return _BUILTIN[short]
    module, _, attr = name.rpartition(".")
    if not module:
        raise ValueError(f"unknown serde class {name!r}: give module.Class")
    found = getattr(importlib.import_module(module), attr)
    if not isinstance(found, type):
        raise TypeError(f"{name} is not a class")
    return found
