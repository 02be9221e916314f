"""A message's end-to-end encryption context, as stored and as the HTTP/WebSocket APIs show it.

The SDK encrypts (client/crypto.py); the broker never holds a key and never sees plaintext. What it
does with an encrypted message is store its context (`Message.encryption`, written in the entry's
trailing per-message map), check that the context is well formed (`check`, from `Batch.validated`,
so a malformed one cannot poison consumers), and show it to the REST and WebSocket consumers in
Pulsar's WebSocket shape (`to_wire`, PIP-290's `encryptionContext`); a WebSocket producer's
pre-encrypted message comes the other way (`from_wire`).

Stored shape (msgpack, written with every encrypted message, so short):
`{"keys": [[name, encrypted data key, {metadata}], ...], "iv": 12 bytes, "algo": str,
"codec": "LZ4"... (absent: NONE), "size": uncompressed size (absent: NONE)}`.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from magnetar.core.compression import MAX_UNCOMPRESSED_BYTES, Codec
from magnetar.core.errors import InvalidInput

ALGORITHM = "AES-256-GCM"
IV_BYTES = 12
MAX_KEYS = 32  # encryption keys of one message
MAX_KEY_VALUE_BYTES = 4096  # an encrypted data key (RSA-4096: 512 bytes; ECIES on P-521: 161)


def check(enc: object) -> dict[str, Any]:
    """A stored encryption context, checked: InvalidInput when malformed."""
    if not isinstance(enc, dict):
        raise InvalidInput("Invalid encryption context: expected a map")
    keys = enc.get("keys")
    if not isinstance(keys, list) or not 1 <= len(keys) <= MAX_KEYS:
        raise InvalidInput(f"Invalid encryption context: 1 to {MAX_KEYS} encryption keys expected")
    for key in keys:
        if not (isinstance(key, list | tuple) and len(key) == 3 and isinstance(key[0], str) and key[0]
                and isinstance(key[1], bytes) and 0 < len(key[1]) <= MAX_KEY_VALUE_BYTES
                and isinstance(key[2], dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in key[2].items())):
            raise InvalidInput("Invalid encryption context: each key is [name, encrypted data key, {str: str}]")
    iv = enc.get("iv")
    if not isinstance(iv, bytes) or len(iv) != IV_BYTES:
        raise InvalidInput(f"Invalid encryption context: iv must be {IV_BYTES} bytes")
    if not isinstance(enc.get("algo", ""), str):
        raise InvalidInput("Invalid encryption context: algo must be a string")
    codec = enc.get("codec", "NONE")
    if not isinstance(codec, str) or codec not in Codec.__members__:
        raise InvalidInput(f"Invalid encryption context: codec must be one of {', '.join(Codec.__members__)}")
    size = enc.get("size", 0)
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_UNCOMPRESSED_BYTES:
        raise InvalidInput("Invalid encryption context: size must be a non-negative integer")
    unknown = set(enc) - {"keys", "iv", "algo", "codec", "size"}
    if unknown:
        raise InvalidInput(f"Invalid encryption context: unknown fields {sorted(unknown)}")
    return enc


def to_wire(enc: dict[str, Any]) -> dict[str, Any]:
    """Pulsar's WebSocket `encryptionContext` (PIP-290): keys by name with their base64 value and
    metadata, the base64 IV as `param`, the compression the plaintext went through."""
    codec = str(enc.get("codec", "NONE"))
    return {
        "keys": {str(name): {"keyValue": base64.b64encode(value).decode(), "metadata": dict(metadata)}
                 for name, value, metadata in enc["keys"]},
        "param": base64.b64encode(enc["iv"]).decode(),
        "algorithm": str(enc.get("algo", "")),
        "compressionType": codec,
        "uncompressedMessageSize": int(enc.get("size", 0)) if codec != "NONE" else 0,
    }


def _b64(value: object, what: str) -> bytes:
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"Invalid encryptionContext: {what} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"Invalid encryptionContext: {what} is not base64") from None


def from_wire(wire: object) -> dict[str, Any]:
    """An `encryptionContext` as `to_wire` writes it (a WebSocket producer's pre-encrypted
    message), as stored: InvalidInput when malformed."""
    if not isinstance(wire, dict):
        raise InvalidInput("Invalid encryptionContext: expected an object")
    keys = wire.get("keys")
    if not isinstance(keys, dict) or not keys:
        raise InvalidInput("Invalid encryptionContext: keys must map key names to {keyValue, metadata}")
    stored_keys = []
    for name, key in keys.items():
        if not isinstance(key, dict):
            raise InvalidInput("Invalid encryptionContext: keys must map key names to {keyValue, metadata}")
        metadata = key.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise InvalidInput("Invalid encryptionContext: a key's metadata must be an object of strings")
        stored_keys.append([str(name), _b64(key.get("keyValue"), f"keys.{name}.keyValue"),
                            {str(k): str(v) for k, v in metadata.items()}])
    enc: dict[str, Any] = {"keys": stored_keys, "iv": _b64(wire.get("param"), "param"),
                           "algo": str(wire.get("algorithm") or ALGORITHM)}
    codec = wire.get("compressionType") or "NONE"
    if not isinstance(codec, str):
        raise InvalidInput("Invalid encryptionContext: compressionType must be a string")
    if Codec.parse(codec) is not Codec.NONE:
        size = wire.get("uncompressedMessageSize")
        if not isinstance(size, int) or isinstance(size, bool):
            raise InvalidInput("Invalid encryptionContext: uncompressedMessageSize is required with compression")
        enc.update(codec=Codec.parse(codec).value, size=size)
    return check(enc)
