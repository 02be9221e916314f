"""End-to-end encryption's parts (client/crypto.py, core/encryption.py) without a cluster: keys
generated here, written as PEM (or DER) files, as an application keeps them."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from magnetar.client import exceptions
from magnetar.client.crypto import (
    CryptoKeyReader,
    EncryptionContext,
    MessageDecryptor,
    MessageEncryptor,
    decryptor,
    encryptor,
)
from magnetar.client.message import Message, MessageId
from magnetar.client.types import CompressionType, ConsumerCryptoFailureAction
from magnetar.core import encryption
from magnetar.core.entry import Batch
from magnetar.core.entry import Message as StoredMessage
from magnetar.core.errors import InvalidInput

PLAIN = b"the quarterly numbers, in confidence " * 20


def key_files(tmp_path: Path, name: str, kind: str = "rsa", der: bool = False) -> tuple[str, str]:
    """A key pair of `kind` ("rsa", "p256", "p521"), as files: (public path, private path)."""
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if kind == "rsa":
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    else:
        private = ec.generate_private_key(ec.SECP256R1() if kind == "p256" else ec.SECP521R1())
    encoding = serialization.Encoding.DER if der else serialization.Encoding.PEM
    public_path, private_path = tmp_path / f"{name}.pub", tmp_path / f"{name}.key"
    public_path.write_bytes(private.public_key().public_bytes(encoding, serialization.PublicFormat.SubjectPublicKeyInfo))
    private_path.write_bytes(private.private_bytes(encoding, serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
    return str(public_path), str(private_path)


def received(payload: bytes, enc: dict[str, object] | None) -> Message:
    return Message(payload, MessageId(-1, 1, 2, -1, "persistent://public/default/t"), "persistent://public/default/t",
                   _encryption=enc)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["rsa", "p256", "p521"])
def test_round_trip_with_rsa_and_ec_keys(tmp_path: Path, kind: str) -> None:
    public, private = key_files(tmp_path, "app", kind)
    sealer = MessageEncryptor(["app"], CryptoKeyReader(public, ""), CompressionType.NONE)
    ciphertext, enc = sealer.encrypt(PLAIN)
    assert PLAIN not in ciphertext and len(ciphertext) == len(PLAIN) + 16  # AES-GCM's tag
    assert encryption.check(enc) is enc and enc["algo"] == "AES-256-GCM" and len(enc["iv"]) == 12
    assert MessageDecryptor(CryptoKeyReader("", private)).decrypt(ciphertext, enc) == PLAIN


def test_der_keys_are_read_too(tmp_path: Path) -> None:
    public, private = key_files(tmp_path, "der", "rsa", der=True)
    ciphertext, enc = MessageEncryptor(["der"], CryptoKeyReader(public, ""), CompressionType.NONE).encrypt(PLAIN)
    assert MessageDecryptor(CryptoKeyReader("", private)).decrypt(ciphertext, enc) == PLAIN


def test_each_message_has_its_own_iv_under_one_data_key(tmp_path: Path) -> None:
    public, _ = key_files(tmp_path, "app")
    sealer = MessageEncryptor(["app"], CryptoKeyReader(public, ""), CompressionType.NONE)
    (c1, e1), (c2, e2) = sealer.encrypt(PLAIN), sealer.encrypt(PLAIN)
    assert e1["iv"] != e2["iv"] and c1 != c2
    assert e1["keys"] == e2["keys"]  # the data key is the producer's, not the message's


def test_the_data_key_is_renewed_after_the_rotation_period(tmp_path: Path) -> None:
    public, private = key_files(tmp_path, "app")
    now = [0.0]
    sealer = MessageEncryptor(["app"], CryptoKeyReader(public, ""), CompressionType.NONE, rotate_s=100,
                              clock=lambda: now[0])
    old = sealer.encrypt(PLAIN)
    now[0] = 99.0
    assert sealer.encrypt(PLAIN)[1]["keys"] == old[1]["keys"]
    now[0] = 100.0
    new = sealer.encrypt(PLAIN)
    assert new[1]["keys"][0][1] != old[1]["keys"][0][1]
    opener = MessageDecryptor(CryptoKeyReader("", private))
    assert opener.decrypt(*old) == PLAIN and opener.decrypt(*new) == PLAIN
    Path(public).unlink()  # the next renewal fails: the producer keeps sending under its current key
    now[0] = 200.0
    kept = sealer.encrypt(PLAIN)
    assert kept[1]["keys"] == new[1]["keys"] and opener.decrypt(*kept) == PLAIN


def test_several_keys_any_one_decrypts(tmp_path: Path) -> None:
    pub_a, priv_a = key_files(tmp_path, "a")
    pub_b, priv_b = key_files(tmp_path, "b", "p256")
    _, priv_c = key_files(tmp_path, "c")
    sealer = MessageEncryptor(["a", "b"], CryptoKeyReader({"a": pub_a, "b": pub_b}, ""), CompressionType.NONE)
    ciphertext, enc = sealer.encrypt(PLAIN)
    assert [k[0] for k in enc["keys"]] == ["a", "b"]
    assert MessageDecryptor(CryptoKeyReader("", priv_a)).decrypt(ciphertext, enc) == PLAIN
    assert MessageDecryptor(CryptoKeyReader("", priv_b)).decrypt(ciphertext, enc) == PLAIN
    with pytest.raises(exceptions.CryptoError, match="No key decrypts"):
        MessageDecryptor(CryptoKeyReader("", priv_c)).decrypt(ciphertext, enc)


@pytest.mark.parametrize("compression", [CompressionType.LZ4, CompressionType.ZLib, CompressionType.ZSTD,
                                         CompressionType.SNAPPY])
def test_compressed_then_encrypted(tmp_path: Path, compression: CompressionType) -> None:
    public, private = key_files(tmp_path, "app")
    ciphertext, enc = MessageEncryptor(["app"], CryptoKeyReader(public, ""), compression).encrypt(PLAIN)
    assert len(ciphertext) < len(PLAIN)  # compressed before encryption: repetitive text shrinks
    assert enc["codec"] == compression.value and enc["size"] == len(PLAIN)
    context = EncryptionContext(enc)
    assert context.compression_type() is compression and context.uncompressed_message_size() == len(PLAIN)
    assert MessageDecryptor(CryptoKeyReader("", private)).decrypt(ciphertext, enc) == PLAIN


def test_tampered_payload_and_unreadable_keys_are_crypto_errors(tmp_path: Path) -> None:
    public, private = key_files(tmp_path, "app")
    ciphertext, enc = MessageEncryptor(["app"], CryptoKeyReader(public, ""), CompressionType.NONE).encrypt(PLAIN)
    opener = MessageDecryptor(CryptoKeyReader("", private))
    with pytest.raises(exceptions.CryptoError, match="does not decrypt"):
        opener.decrypt(bytes([ciphertext[0] ^ 1]) + ciphertext[1:], enc)
    with pytest.raises(exceptions.CryptoError, match="Cannot read the private key"):
        MessageDecryptor(CryptoKeyReader("", str(tmp_path / "missing.pem"))).decrypt(ciphertext, enc)
    with pytest.raises(exceptions.CryptoError, match="no crypto_key_reader"):
        MessageDecryptor(None).decrypt(ciphertext, enc)
    with pytest.raises(exceptions.CryptoError, match="Cannot read the public key"):  # the producer fails to start
        MessageEncryptor(["app"], CryptoKeyReader(str(tmp_path / "missing.pem"), ""), CompressionType.NONE)
    (tmp_path / "junk.pem").write_bytes(b"-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n")
    with pytest.raises(exceptions.CryptoError, match="Not a public key"):
        MessageEncryptor(["app"], CryptoKeyReader(str(tmp_path / "junk.pem"), ""), CompressionType.NONE)


def test_the_failure_actions(tmp_path: Path) -> None:
    public, private = key_files(tmp_path, "app")
    _, other = key_files(tmp_path, "other")
    ciphertext, enc = MessageEncryptor(["app"], CryptoKeyReader(public, ""), CompressionType.NONE).encrypt(PLAIN)
    acked: list[Message] = []
    opened = decryptor(CryptoKeyReader("", private), ConsumerCryptoFailureAction.FAIL).open(received(ciphertext, enc))
    assert opened is not None and opened.data() == PLAIN
    context = opened.encryption_context()
    assert context is not None and not context.is_decryption_failed()
    assert [k.key for k in context.keys()] == ["app"] and context.param() == enc["iv"] and context.batch_size() == -1  # noqa: SIM118
    wrong = CryptoKeyReader("", other)
    assert decryptor(wrong, ConsumerCryptoFailureAction.FAIL).open(received(ciphertext, enc), acked.append) is None
    assert acked == []  # held back, not acknowledged
    assert decryptor(wrong, ConsumerCryptoFailureAction.DISCARD).open(received(ciphertext, enc), acked.append) is None
    assert len(acked) == 1
    consumed = decryptor(None, ConsumerCryptoFailureAction.CONSUME).open(received(ciphertext, enc))
    assert consumed is not None and consumed.data() == ciphertext
    failed = consumed.encryption_context()
    assert failed is not None and failed.is_decryption_failed() and failed.keys()[0].value == enc["keys"][0][1]
    plain = received(b"clear", None)
    assert decryptor(None, ConsumerCryptoFailureAction.FAIL).open(plain) is plain and plain.encryption_context() is None
    with pytest.raises(ValueError, match="crypto_failure_action"):
        decryptor(None, "CONSUME")  # type: ignore[arg-type]


def test_producer_arguments(tmp_path: Path) -> None:
    public, _ = key_files(tmp_path, "app")
    assert encryptor(None, CryptoKeyReader(public, ""), CompressionType.NONE) is None
    with pytest.raises(exceptions.InvalidConfiguration, match="crypto_key_reader"):
        encryptor("app", None, CompressionType.NONE)
    sealer = encryptor("app", CryptoKeyReader(public, ""), CompressionType.NONE)
    assert sealer is not None
    message = sealer.seal(StoredMessage(PLAIN, "k", {"p": "v"}))
    assert message.payload != PLAIN and message.key == "k" and message.properties == {"p": "v"}
    assert sealer.seal(StoredMessage(b"", null_value=True)).encryption is None  # a null value has nothing to hide
    with pytest.raises(ValueError, match="public_key_path"):
        CryptoKeyReader(1, "")  # type: ignore[arg-type]


def test_the_wire_shape_round_trips_and_the_broker_checks_the_stored_one(tmp_path: Path) -> None:
    public, _ = key_files(tmp_path, "app")
    _, enc = MessageEncryptor(["app"], CryptoKeyReader(public, ""), CompressionType.LZ4).encrypt(PLAIN)
    wire = encryption.to_wire(enc)
    assert set(wire) == {"keys", "param", "algorithm", "compressionType", "uncompressedMessageSize"}
    assert wire["compressionType"] == "LZ4" and wire["uncompressedMessageSize"] == len(PLAIN)
    assert set(wire["keys"]["app"]) == {"keyValue", "metadata"}
    assert encryption.from_wire(wire) == enc
    stored = msgpack.unpackb(msgpack.packb(enc, use_bin_type=True), raw=False)  # as an entry keeps it
    assert encryption.check(stored) == enc
    for bad in ({**enc, "iv": b"short"}, {**enc, "keys": []}, {**enc, "codec": "RAR"}, {**enc, "extra": 1},
                {**enc, "keys": [["app", "not bytes", {}]]}, "text"):
        with pytest.raises(InvalidInput, match="encryption context"):
            encryption.check(bad)
        if isinstance(bad, dict):  # a batch carrying it is refused: it would poison consumers
            with pytest.raises(InvalidInput):
                Batch.of([StoredMessage(b"x", encryption=bad)]).validated()
    assert Batch.of([StoredMessage(b"x", encryption=enc)]).validated().num_messages == 1
    with pytest.raises(InvalidInput, match="keyValue"):
        encryption.from_wire({**wire, "keys": {"app": {"keyValue": "%%%"}}})


def test_one_private_key_operation_per_data_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer holding the second of two keys opens the data key once, and does not try the
    first key again for every message (a private-key operation costs about a millisecond)."""
    from magnetar.client import crypto

    pub_a, _ = key_files(tmp_path, "a")
    pub_b, priv_b = key_files(tmp_path, "b")
    sealer = MessageEncryptor(["a", "b"], CryptoKeyReader({"a": pub_a, "b": pub_b}, ""), CompressionType.NONE)
    calls: list[int] = []
    real = crypto.unwrap_data_key

    def counted(private_key: crypto.PrivateKey, value: bytes) -> bytes:
        calls.append(1)
        return real(private_key, value)

    monkeypatch.setattr(crypto, "unwrap_data_key", counted)
    opener = MessageDecryptor(CryptoKeyReader("", priv_b))
    for i in range(5):
        ciphertext, enc = sealer.encrypt(PLAIN + bytes([i]))
        assert opener.decrypt(ciphertext, enc) == PLAIN + bytes([i])
    assert len(calls) == 2  # key a (does not open, remembered), then key b (cached)
