"""Pulsar's frames: the bytes on the wire around each command (Pulsar's binary protocol, "Framing").

A simple command:

    [total size: 4][command size: 4][BaseCommand]

A command with a payload (SEND from a producer, MESSAGE to a consumer):

    [total size: 4][command size: 4][BaseCommand]
    [magic 0x0e01: 2][crc32c: 4][metadata size: 4][MessageMetadata][payload]

Sizes are big-endian unsigned 32-bit integers; the total size counts everything after itself. The
checksum (CRC32-C, Castagnoli) covers everything after itself: the metadata size, the metadata and
the payload. A frame without the magic number carries no checksum (older clients). The protobuf
messages come from `pulsar_api.proto` (generated: `pulsar_api_pb2`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import crc32c

from magnetar.protocol import pulsar_api_pb2 as pb

MAGIC = 0x0E01
MAX_FRAME_BYTES = 5 * 1024 * 1024 + 10 * 1024  # Pulsar's default maxMessageSize plus room for the command
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")

Type = pb.BaseCommand.Type


class FrameError(Exception):
    """A frame that cannot be read: the connection is closed (nothing sensible can follow it)."""


class ChecksumMismatch(Exception):
    """A payload whose CRC32-C does not match: the command is answered with ChecksumError."""

    def __init__(self, command: Any) -> None:
        super().__init__("Checksum mismatch")
        self.command = command


@dataclass
class Frame:
    command: Any  # pb.BaseCommand
    metadata: Any = None  # pb.MessageMetadata, on payload commands
    payload: bytes = b""


def encode(command: Any) -> bytes:
    """A simple command's frame."""
    body: bytes = command.SerializeToString()
    return _U32.pack(len(body) + 4) + _U32.pack(len(body)) + body


def encode_with_payload(command: Any, metadata: Any, payload: bytes) -> bytes:
    """A payload command's frame, with its checksum."""
    body = command.SerializeToString()
    meta = metadata.SerializeToString()
    checked = _U32.pack(len(meta)) + meta + payload
    checksum = crc32c.crc32c(checked)
    total = 4 + len(body) + 2 + 4 + len(checked)
    return b"".join((_U32.pack(total), _U32.pack(len(body)), body, _U16.pack(MAGIC), _U32.pack(checksum), checked))


def command(kind: int, **fields: Any) -> Any:
    """A BaseCommand of `kind` with one sub-command: `command(Type.PONG, pong={})`."""
    base = pb.BaseCommand(type=kind)
    for name, value in fields.items():
        sub = getattr(base, name)
        if isinstance(value, dict):
            sub.SetInParent()
            for key, item in value.items():
                _set(sub, key, item)
        else:
            sub.CopyFrom(value)
    return base


def _set(message: Any, name: str, value: Any) -> None:
    if value is None:
        return
    field = getattr(message, name)
    if hasattr(field, "CopyFrom") and not isinstance(value, dict):
        field.CopyFrom(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _set(field, key, item)
    elif isinstance(value, list | tuple):
        field.extend(value)
    else:
        setattr(message, name, value)


class FrameReader:
    """Splits a byte stream into frames (feed bytes as they arrive, take whole frames)."""

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame | ChecksumMismatch]:
        """Whole frames received so far; a payload failing its checksum comes as ChecksumMismatch."""
        self._buffer += data
        frames: list[Frame | ChecksumMismatch] = []
        while len(self._buffer) >= 4:
            (total,) = _U32.unpack_from(self._buffer, 0)
            if total < 4 or total > self.max_frame_bytes:
                raise FrameError(f"Invalid frame size {total}")
            if len(self._buffer) < 4 + total:
                break
            frame = bytes(self._buffer[4:4 + total])
            del self._buffer[:4 + total]
            try:
                frames.append(decode(frame))
            except ChecksumMismatch as exc:
                frames.append(exc)
        return frames


def decode(frame: bytes) -> Frame:
    """A frame without its total size (the bytes the total size counts)."""
    if len(frame) < 4:
        raise FrameError("Truncated frame")
    (size,) = _U32.unpack_from(frame, 0)
    if size > len(frame) - 4:
        raise FrameError(f"Command size {size} exceeds the frame")
    base = pb.BaseCommand()
    try:
        base.ParseFromString(frame[4:4 + size])
    except Exception as exc:  # protobuf raises DecodeError and friends on malformed input
        raise FrameError(f"Undecodable command: {exc}") from None
    rest = memoryview(frame)[4 + size:]
    if not rest:
        return Frame(base)
    checked = rest
    if len(rest) >= 6 and _U16.unpack_from(rest, 0)[0] == MAGIC:
        (checksum,) = _U32.unpack_from(rest, 2)
        checked = rest[6:]
        if crc32c.crc32c(bytes(checked)) != checksum:
            raise ChecksumMismatch(base)
    if len(checked) < 4:
        raise FrameError("Truncated payload")
    (meta_size,) = _U32.unpack_from(checked, 0)
    if meta_size > len(checked) - 4:
        raise FrameError(f"Metadata size {meta_size} exceeds the frame")
    metadata = pb.MessageMetadata()
    try:
        metadata.ParseFromString(bytes(checked[4:4 + meta_size]))
    except Exception as exc:
        raise FrameError(f"Undecodable message metadata: {exc}") from None
    return Frame(base, metadata, bytes(checked[4 + meta_size:]))
