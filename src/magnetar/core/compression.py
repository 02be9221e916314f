"""Batch compression codecs, with Pulsar's names and raw formats (LZ4 block, zlib stream, ZSTD
frame, raw Snappy). The codec and the uncompressed size travel in the entry's metadata; the
consumer decompresses."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from enum import StrEnum

import lz4.block
import snappy
import zstandard

from magnetar.core.errors import InvalidInput

MAX_UNCOMPRESSED_BYTES = 256 * 1024 * 1024  # a decompression bomb stops here (chunked messages reach 64 MB+)


class Codec(StrEnum):
    NONE = "NONE"
    LZ4 = "LZ4"
    ZLIB = "ZLIB"
    ZSTD = "ZSTD"
    SNAPPY = "SNAPPY"

    @classmethod
    def parse(cls, value: str) -> Codec:
        try:
            return cls(value.upper())
        except ValueError:
            raise InvalidInput(f"Unknown compression {value!r}; one of {', '.join(c.value for c in cls)}") from None


def _zstd_decompress(data: bytes, size: int) -> bytes:
    return zstandard.ZstdDecompressor().decompress(data, max_output_size=size)


_COMPRESS: dict[Codec, Callable[[bytes], bytes]] = {
    Codec.NONE: lambda b: b,
    Codec.LZ4: lambda b: lz4.block.compress(b, store_size=False),
    Codec.ZLIB: zlib.compress,
    Codec.ZSTD: lambda b: zstandard.ZstdCompressor().compress(b),
    Codec.SNAPPY: snappy.compress,
}
_DECOMPRESS: dict[Codec, Callable[[bytes, int], bytes]] = {
    Codec.NONE: lambda b, n: b,
    Codec.LZ4: lambda b, n: lz4.block.decompress(b, uncompressed_size=n),
    Codec.ZLIB: lambda b, n: zlib.decompress(b, bufsize=max(n, 1)),
    Codec.ZSTD: _zstd_decompress,
    Codec.SNAPPY: lambda b, n: snappy.decompress(b),
}


def compress(codec: Codec, data: bytes) -> bytes:
    return _COMPRESS[codec](data)


def decompress(codec: Codec, data: bytes, uncompressed_size: int) -> bytes:
    if not 0 <= uncompressed_size <= MAX_UNCOMPRESSED_BYTES:
        raise InvalidInput(f"Invalid uncompressed size {uncompressed_size}")
    try:
        out = _DECOMPRESS[codec](data, uncompressed_size)
    except Exception as exc:  # each codec raises its own error types on corrupt input
        raise InvalidInput(f"Payload does not decompress with {codec}: {exc}") from None
    if len(out) != uncompressed_size:
        raise InvalidInput(f"Payload decompresses to {len(out)} bytes, not the declared {uncompressed_size}")
    return bytes(out)
