"""`ProtobufNativeSchema`: values as protobuf messages in their own binary encoding (Pulsar's
PROTOBUF_NATIVE).

The registered definition is Pulsar's ProtobufNativeSchemaData as JSON: the message's file and
every file it imports as one `FileDescriptorSet` (base64), the root message's full name and its
file's name — what Pulsar's Java and Python clients register, so their consumers can read the
topic. The protobuf runtime is imported only by this schema (it comes with `magnetar[local]`;
a producer of protobuf messages has it anyway).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from magnetar.schema.schema import Schema


def _file_descriptor_set(descriptor: Any) -> bytes:
    """The FileDescriptorSet of a message's file and its imports, each file once, imports first."""
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet()
    seen: set[str] = set()

    def add(file: Any) -> None:
        if file.name in seen:
            return
        seen.add(file.name)
        for dependency in file.dependencies:
            add(dependency)
        proto = files.file.add()
        file.CopyToProto(proto)

    add(descriptor.file)
    return bytes(files.SerializeToString())


def schema_definition(descriptor: Any) -> dict[str, str]:
    return {
        "fileDescriptorSet": base64.b64encode(_file_descriptor_set(descriptor)).decode("ascii"),
        "rootMessageTypeName": descriptor.full_name,
        "rootFileDescriptorName": descriptor.file.name,
    }


class ProtobufNativeSchema(Schema):
    """A generated protobuf message class's values, in protobuf's binary encoding."""

    def __init__(self, record_cls: Any) -> None:
        from google.protobuf.message import Message as ProtobufMessage

        if not (isinstance(record_cls, type) and issubclass(record_cls, ProtobufMessage)):
            raise TypeError(f"record_cls must be a protobuf Message subclass, got {record_cls!r}")
        descriptor: Any = getattr(record_cls, "DESCRIPTOR")  # noqa: B009  (generated classes have it; mypy does not know)
        super().__init__(record_cls, "PROTOBUF_NATIVE", json.dumps(schema_definition(descriptor)),
                         "PROTOBUF_NATIVE")

    def encode(self, obj: Any) -> bytes:
        self._validate_object_type(obj)
        data: bytes = obj.SerializeToString()
        return data

    def decode(self, data: bytes) -> Any:
        return self._record_cls.FromString(data)

    def __str__(self) -> str:
        return f"ProtobufNativeSchema({self._record_cls.DESCRIPTOR.full_name})"
