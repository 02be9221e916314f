"""End-to-end encryption, Pulsar's scheme, with pulsar-client's names.

- A producer with `encryption_key` and a `crypto_key_reader` makes a random AES-256 *data key*
  when it starts and again every 4 hours (`ROTATE_S`, as Pulsar's producers), and encrypts it with
  the public key of each named key: RSA-OAEP (SHA-1 and MGF1-SHA-1, Pulsar's padding) for RSA
  keys, ECIES for EC keys (an ephemeral ECDH key on the key's curve, HKDF-SHA256, AES-256-GCM;
  Pulsar's Java client uses BouncyCastle's ECIES, whose format this is not).
- Each message's payload is compressed with the producer's `compression_type` (Pulsar compresses,
  then encrypts) and encrypted with AES-256-GCM under the data key and a random 12-byte IV of its
  own (a message is the unit here: the broker still decodes a batch into its messages). The
  encrypted data keys, the IV, the algorithm and the compression travel in the message's
  encryption context (`magnetar.core.encryption`); key, properties and event time stay in the
  clear, as in Pulsar.
- A consumer or reader with a `crypto_key_reader` tries the message's keys in turn with the
  reader's private key (any one suffices); the decrypted data keys are cached. When no key opens
  the message, `crypto_failure_action` decides: FAIL holds it back (not delivered, not
  acknowledged: redelivered after an ack timeout, a negative ack or a reconnect, as in Pulsar),
  DISCARD acknowledges and drops it, CONSUME delivers it still encrypted, with
  `encryption_context().is_decryption_failed()` True.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from magnetar.client import exceptions
from magnetar.client.types import CompressionType, ConsumerCryptoFailureAction, check_type
from magnetar.core import encryption
from magnetar.core.compression import Codec, compress, decompress
from magnetar.core.entry import Message as StoredMessage
from magnetar.core.errors import InvalidInput

if TYPE_CHECKING:
    from magnetar.client.message import Message

log = logging.getLogger(__name__)
ROTATE_S = 4 * 3600  # Pulsar's producers renew their data key every 4 hours
DATA_KEY_BYTES = 32  # AES-256
_ECIES_INFO = b"magnetar-ecies-data-key"
_CACHE_SIZE = 1000  # decrypted data keys a consumer keeps (one per producer and rotation)

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


class CryptoKeyReader:
    """pulsar-client's default key reader: the public key (PEM or DER; producers) and the private
    key (PEM or DER, unencrypted; consumers and readers) from files, read when first needed.

    As pulsar-client's, it gives the same key whatever the key name. Magnetar's additions: either
    path may instead be a mapping `{key name: path}` (a producer encrypting for several keys), and a
    subclass may override `get_public_key`/`get_private_key` (Pulsar's CryptoKeyReader interface)
    to fetch keys elsewhere, returning the key's bytes or `(bytes, metadata)`."""

    def __init__(self, public_key_path: str | Mapping[str, str], private_key_path: str | Mapping[str, str]) -> None:
        check_type((str, Mapping), public_key_path, "public_key_path")
        check_type((str, Mapping), private_key_path, "private_key_path")
        self._public = public_key_path
        self._private = private_key_path

    @staticmethod
    def _read(paths: str | Mapping[str, str], key_name: str, what: str) -> bytes:
        path = paths if isinstance(paths, str) else paths.get(key_name)
        if not path:
            raise exceptions.CryptoError(f"No {what} key for {key_name!r}")
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as exc:
            raise exceptions.CryptoError(f"Cannot read the {what} key {key_name!r} from {path}: {exc}") from None

    def get_public_key(self, key_name: str, metadata: dict[str, str]) -> bytes | tuple[bytes, dict[str, str]]:
        return self._read(self._public, key_name, "public")

    def get_private_key(self, key_name: str, metadata: dict[str, str]) -> bytes | tuple[bytes, dict[str, str]]:
        return self._read(self._private, key_name, "private")


def _key_info(answer: bytes | tuple[bytes, dict[str, str]]) -> tuple[bytes, dict[str, str]]:
    if isinstance(answer, tuple):
        return bytes(answer[0]), {str(k): str(v) for k, v in (answer[1] or {}).items()}
    return bytes(answer), {}


def load_public_key(data: bytes) -> PublicKey:
    try:
        key = (serialization.load_pem_public_key(data) if data.lstrip().startswith(b"-----")
               else serialization.load_der_public_key(data))
    except ValueError as exc:
        raise exceptions.CryptoError(f"Not a public key (PEM or DER): {exc}") from None
    if not isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
        raise exceptions.CryptoError(f"{type(key).__name__}: only RSA and EC keys encrypt data keys")
    return key


def load_private_key(data: bytes) -> PrivateKey:
    try:
        key = (serialization.load_pem_private_key(data, None) if data.lstrip().startswith(b"-----")
               else serialization.load_der_private_key(data, None))
    except (ValueError, TypeError) as exc:
        raise exceptions.CryptoError(f"Not an unencrypted private key (PEM or DER): {exc}") from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise exceptions.CryptoError(f"{type(key).__name__}: only RSA and EC keys decrypt data keys")
    return key


# Pulsar's padding for RSA keys (Java: RSA/NONE/OAEPWithSHA1AndMGF1Padding; C++: RSA_PKCS1_OAEP_PADDING)
_OAEP = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)


def _kek(shared: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_ECIES_INFO).derive(shared)


def wrap_data_key(public_key: PublicKey, data_key: bytes) -> bytes:
    """The data key encrypted for one public key: RSA-OAEP, or ECIES (ephemeral point || nonce || AES-GCM)."""
    if isinstance(public_key, rsa.RSAPublicKey):
        return public_key.encrypt(data_key, _OAEP)
    ephemeral = ec.generate_private_key(public_key.curve)
    point = ephemeral.public_key().public_bytes(serialization.Encoding.X962,
                                                serialization.PublicFormat.UncompressedPoint)
    nonce = os.urandom(encryption.IV_BYTES)
    sealed = AESGCM(_kek(ephemeral.exchange(ec.ECDH(), public_key))).encrypt(nonce, data_key, point)
    return point + nonce + sealed


def unwrap_data_key(private_key: PrivateKey, value: bytes) -> bytes:
    """`wrap_data_key` undone; ValueError when this key did not encrypt it."""
    if isinstance(private_key, rsa.RSAPrivateKey):
        return private_key.decrypt(value, _OAEP)
    point_size = 1 + 2 * ((private_key.curve.key_size + 7) // 8)
    point, nonce, sealed = value[:point_size], value[point_size:point_size + encryption.IV_BYTES], \
        value[point_size + encryption.IV_BYTES:]
    try:
        peer = ec.EllipticCurvePublicKey.from_encoded_point(private_key.curve, point)
        return AESGCM(_kek(private_key.exchange(ec.ECDH(), peer))).decrypt(nonce, sealed, point)
    except InvalidTag:
        raise ValueError("not encrypted for this key") from None


class MessageEncryptor:
    """A producer's side: its data key (renewed every `rotate_s`), encrypted for each named key."""

    def __init__(self, key_names: list[str], reader: CryptoKeyReader, compression: CompressionType,
                 rotate_s: float = ROTATE_S, clock: Callable[[], float] = time.monotonic) -> None:
        if not key_names or not all(isinstance(k, str) and k for k in key_names):
            raise exceptions.InvalidConfiguration("encryption_key: give one key name or a list of key names")
        self._names = list(dict.fromkeys(key_names))
        self._reader = reader
        self._codec = Codec.parse(compression.value)
        self._rotate_s = rotate_s
        self._clock = clock
        self._lock = threading.Lock()
        self._cipher: AESGCM
        self._keys: list[list[Any]] = []
        self._since = 0.0
        self._renew()  # a key that cannot be read fails the producer's creation, as in Pulsar

    def _renew(self) -> None:
        data_key = AESGCM.generate_key(bit_length=8 * DATA_KEY_BYTES)
        keys: list[list[Any]] = []
        for name in self._names:
            raw, metadata = _key_info(self._reader.get_public_key(name, {}))
            keys.append([name, wrap_data_key(load_public_key(raw), data_key), metadata])
        self._cipher, self._keys, self._since = AESGCM(data_key), keys, self._clock()

    def overhead(self) -> int:
        """Bytes a message's encryption context adds (for the producer's batch and request sizes)."""
        return 64 + sum(len(name) + len(value) + 16 for name, value, _ in self._keys)

    def encrypt(self, payload: bytes) -> tuple[bytes, dict[str, Any]]:
        """The payload compressed then encrypted, and its encryption context (as stored)."""
        with self._lock:
            if self._clock() - self._since >= self._rotate_s:
                try:
                    self._renew()
                except Exception:  # a key reader failing now must not fail the sends: keep the current key
                    log.warning("could not renew the data key; keeping the current one", exc_info=True)
                    self._since = self._clock()
            cipher, keys = self._cipher, self._keys
        plain = compress(self._codec, payload)
        iv = os.urandom(encryption.IV_BYTES)
        enc: dict[str, Any] = {"keys": keys, "iv": iv, "algo": encryption.ALGORITHM}
        if self._codec is not Codec.NONE:
            enc.update(codec=self._codec.value, size=len(payload))
        return cipher.encrypt(iv, plain, None), enc

    def seal(self, message: StoredMessage) -> StoredMessage:
        """A message about to be sent, encrypted (a null value has no payload to encrypt)."""
        if message.null_value:
            return message
        payload, enc = self.encrypt(message.payload)
        return replace(message, payload=payload, encryption=enc)


class MessageDecryptor:
    """A consumer's or reader's side: its key reader (or none) and its failure action."""

    def __init__(self, reader: CryptoKeyReader | None = None,
                 action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL) -> None:
        self.reader = reader
        self.action = action
        self._lock = threading.Lock()
        self._data_keys: OrderedDict[bytes, AESGCM] = OrderedDict()  # encrypted value -> its data key
        self._unopened: OrderedDict[bytes, str] = OrderedDict()  # encrypted values this key does not open
        self._private: dict[str, PrivateKey] = {}

    def _private_key(self, name: str, metadata: dict[str, str]) -> PrivateKey:
        key = self._private.get(name)
        if key is None:
            assert self.reader is not None
            key = load_private_key(_key_info(self.reader.get_private_key(name, metadata))[0])
            self._private[name] = key
        return key

    def _data_key(self, enc: dict[str, Any]) -> AESGCM:
        """The message's data key: from the cache (one private-key operation per producer and
        rotation), else from the first of its encrypted copies this reader's key opens. A copy
        that did not open is remembered too: a consumer holding the second of two keys does not
        try the first again for every message."""
        with self._lock:
            for _, value, _ in enc["keys"]:
                cached = self._data_keys.get(value)
                if cached is not None:
                    self._data_keys.move_to_end(value)
                    return cached
        errors = []
        for name, value, metadata in enc["keys"]:
            if value in self._unopened:
                errors.append(f"{name}: {self._unopened[value]}")
                continue
            try:
                data_key = unwrap_data_key(self._private_key(name, metadata), value)
            except ValueError as exc:  # not encrypted for this key (a key that cannot be read: retried)
                with self._lock:
                    self._unopened[value] = str(exc) or "not encrypted for this key"
                    while len(self._unopened) > _CACHE_SIZE:
                        self._unopened.popitem(last=False)
                errors.append(f"{name}: {exc}")
                continue
            except exceptions.CryptoError as exc:
                errors.append(f"{name}: {exc.reason}")
                continue
            cipher = AESGCM(data_key)
            with self._lock:
                self._data_keys[value] = cipher
                while len(self._data_keys) > _CACHE_SIZE:
                    self._data_keys.popitem(last=False)
            return cipher
        raise exceptions.CryptoError(f"No key decrypts the message's data key ({'; '.join(errors)})")

    def decrypt(self, payload: bytes, enc: dict[str, Any]) -> bytes:
        """The plaintext of an encrypted payload; CryptoError when it cannot be had."""
        if self.reader is None:
            raise exceptions.CryptoError("The message is encrypted and no crypto_key_reader is configured")
        try:
            encryption.check(enc)
            plain = self._data_key(enc).decrypt(enc["iv"], payload, None)
            return decompress(Codec.parse(enc.get("codec", "NONE")), plain, int(enc.get("size", len(plain))))
        except InvalidTag:
            raise exceptions.CryptoError("The payload does not decrypt (tampered, or another data key)") from None
        except InvalidInput as exc:
            raise exceptions.CryptoError(exc.reason) from None

    def open(self, message: Message, acknowledge: Callable[[Message], None] | None = None) -> Message | None:
        """A received message for the application: decrypted; or, when it cannot be, what the
        failure action says (None: not for the application; DISCARD acknowledges it first)."""
        enc = message._encryption
        if enc is None:
            return message
        try:
            return replace(message, _data=self.decrypt(message._data, enc))
        except exceptions.CryptoError as exc:
            return self.failed(message, exc.reason, acknowledge)

    def failed(self, message: Message, reason: str,
               acknowledge: Callable[[Message], None] | None = None) -> Message | None:
        """What `crypto_failure_action` makes of a message that cannot be decrypted."""
        if self.action is ConsumerCryptoFailureAction.CONSUME:
            return replace(message, _decryption_failed=True)
        if self.action is ConsumerCryptoFailureAction.DISCARD:
            log.warning("discarding message %s: %s", message.message_id(), reason)
            if acknowledge is not None:
                acknowledge(message)
            return None
        log.warning("message %s held back (crypto_failure_action FAIL): %s", message.message_id(), reason)
        return None


def encryptor(encryption_key: str | list[str] | None, reader: CryptoKeyReader | None,
              compression: CompressionType) -> MessageEncryptor | None:
    """A producer's encryptor from pulsar-client's arguments (None: the producer does not encrypt)."""
    if encryption_key is None or encryption_key == [] or encryption_key == "":
        return None
    if reader is None:
        raise exceptions.InvalidConfiguration("encryption_key needs a crypto_key_reader (for the public keys)")
    names = [encryption_key] if isinstance(encryption_key, str) else list(encryption_key)
    return MessageEncryptor(names, reader, compression)


def decryptor(reader: CryptoKeyReader | None, action: ConsumerCryptoFailureAction) -> MessageDecryptor:
    check_type(ConsumerCryptoFailureAction, action, "crypto_failure_action")
    return MessageDecryptor(reader, action)


class EncryptionKey:
    """One encryption key of a message: its name, the data key encrypted with it, its metadata."""

    def __init__(self, key: tuple[str, bytes, dict[str, str]] | list[Any]) -> None:
        self._key = (str(key[0]), bytes(key[1]), dict(key[2]))

    @property
    def key(self) -> str:
        return self._key[0]

    @property
    def value(self) -> bytes:
        return self._key[1]

    @property
    def metadata(self) -> dict[str, str]:
        return dict(self._key[2])

    def __str__(self) -> str:
        return f"EncryptionKey(key={self.key}, value_len={len(self.value)}, metadata={self.metadata})"

    __repr__ = __str__


class EncryptionContext:
    """pulsar-client's EncryptionContext of a message: how to decrypt it yourself."""

    def __init__(self, context: dict[str, Any], decryption_failed: bool = False) -> None:
        self._context = context
        self._failed = decryption_failed

    def keys(self) -> list[EncryptionKey]:
        return [EncryptionKey(k) for k in self._context["keys"]]

    def param(self) -> bytes:
        """The IV."""
        return bytes(self._context["iv"])

    def algorithm(self) -> str:
        return str(self._context.get("algo", ""))

    def compression_type(self) -> CompressionType:
        return CompressionType(self._context.get("codec", "NONE"))

    def uncompressed_message_size(self) -> int:
        """The payload's size before compression, 0 without compression (as pulsar-client)."""
        return int(self._context.get("size", 0)) if self._context.get("codec", "NONE") != "NONE" else 0

    def batch_size(self) -> int:
        """-1: each message is encrypted on its own, never a batch as one payload."""
        return -1

    def is_decryption_failed(self) -> bool:
        return self._failed

    def __str__(self) -> str:
        return (f"EncryptionContext(algorithm={self.algorithm()}, compression_type={self.compression_type().name}, "
                f"uncompressed_message_size={self.uncompressed_message_size()}, "
                f"is_decryption_failed={self.is_decryption_failed()}, "
                f"keys=[{', '.join(str(key) for key in self.keys())}])")

    __repr__ = __str__
