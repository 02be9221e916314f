"""End-to-end encryption through the SDK (pulsar-client's names), the HTTP API and the WebSocket API,
against the emulated AWS: the broker stores and serves ciphertext only, and the stored segments
prove it. Keys are generated here and written as PEM files, as an application keeps them."""

from __future__ import annotations

import base64
import json
import random
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import magnetar
from http_helpers import HTTP
from magnetar.client.admin import AdminClient
from magnetar.client.crypto import MessageEncryptor
from magnetar.core import encryption
from ws_helpers import open_ws, receive, refusal, topic_path

SECRET = b"SECRET-PAYLOAD-do-not-store-in-the-clear"


def key_pair(tmp_path: Path, name: str, kind: str = "rsa") -> tuple[str, str]:
    """(public PEM path, private PEM path) of a new RSA-2048 or EC P-256 key pair."""
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "rsa"
        else ec.generate_private_key(ec.SECP256R1()))
    public_path, private_path = tmp_path / f"{name}-pub.pem", tmp_path / f"{name}-priv.pem"
    public_path.write_bytes(private.public_key().public_bytes(serialization.Encoding.PEM,
                                                              serialization.PublicFormat.SubjectPublicKeyInfo))
    private_path.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
    return str(public_path), str(private_path)


def secret(i: int) -> bytes:
    return SECRET + f"-{i:03d}".encode()


def receive_all(consumer: Any, n: int, timeout_ms: int = 10_000) -> list[magnetar.Message]:
    out = []
    for _ in range(n):
        message = consumer.receive(timeout_millis=timeout_ms)
        consumer.acknowledge(message)
        out.append(message)
    return out


def publish(client: magnetar.Client, topic: str, n: int, keys: str | list[str], reader: magnetar.CryptoKeyReader,
            **options: Any) -> None:
    producer = client.create_producer(topic, encryption_key=keys, crypto_key_reader=reader, **options)
    for i in range(n):
        producer.send_async(secret(i), None, partition_key=f"k{i}", properties={"i": str(i)})
    producer.flush()
    producer.close()


@pytest.mark.parametrize("kind", ["rsa", "ec"])
def test_a_batch_round_trips_with_rsa_and_ec_keys(client: magnetar.Client, topic: str, tmp_path: Path,
                                                  kind: str) -> None:
    public, private = key_pair(tmp_path, "app", kind)
    consumer = client.subscribe(topic, "s", crypto_key_reader=magnetar.CryptoKeyReader("", private))
    publish(client, topic, 20, "app", magnetar.CryptoKeyReader(public, ""), batching_max_publish_delay_ms=50)
    messages = receive_all(consumer, 20)
    assert sorted(m.data() for m in messages) == sorted(secret(i) for i in range(20))
    assert any(m.message_id().batch_index() > 0 for m in messages)  # batched: several messages per entry
    assert all(m.properties() == {"i": str(int(m.data()[-3:]))} for m in messages)  # in the clear, as in Pulsar
    context = messages[0].encryption_context()
    assert context is not None and not context.is_decryption_failed()
    assert [k.key for k in context.keys()] == ["app"] and len(context.param()) == 12  # noqa: SIM118
    assert context.algorithm() == "AES-256-GCM" and context.compression_type() is magnetar.CompressionType.NONE
    consumer.close()


def test_several_keys_two_consumers_each_with_its_own_private_key(client: magnetar.Client, topic: str,
                                                                  tmp_path: Path) -> None:
    pub_a, priv_a = key_pair(tmp_path, "a")
    pub_b, priv_b = key_pair(tmp_path, "b", "ec")
    a = client.subscribe(topic, "team-a", crypto_key_reader=magnetar.CryptoKeyReader("", priv_a))
    b = client.subscribe(topic, "team-b", crypto_key_reader=magnetar.CryptoKeyReader("", priv_b))
    publish(client, topic, 5, ["a", "b"], magnetar.CryptoKeyReader({"a": pub_a, "b": pub_b}, ""))
    for consumer in (a, b):
        messages = receive_all(consumer, 5)
        assert [m.data() for m in messages] == [secret(i) for i in range(5)]
        context = messages[0].encryption_context()
        assert context is not None and [k.key for k in context.keys()] == ["a", "b"]  # noqa: SIM118
        consumer.close()


def test_the_failure_actions(client: magnetar.Client, topic: str, tmp_path: Path) -> None:
    public, private = key_pair(tmp_path, "app")
    _, wrong = key_pair(tmp_path, "wrong")
    subs = {action: client.subscribe(topic, f"s-{action.name}", crypto_failure_action=action,
                                     crypto_key_reader=magnetar.CryptoKeyReader("", wrong))
            for action in magnetar.ConsumerCryptoFailureAction}
    publish(client, topic, 1, "app", magnetar.CryptoKeyReader(public, ""))

    # CONSUME: delivered still encrypted, with what the application needs to decrypt it itself
    consumed = subs[magnetar.ConsumerCryptoFailureAction.CONSUME].receive(timeout_millis=10_000)
    assert consumed.data() != secret(0) and SECRET not in consumed.data()
    context = consumed.encryption_context()
    assert context is not None and context.is_decryption_failed()
    private_key = serialization.load_pem_private_key(Path(private).read_bytes(), None)
    assert isinstance(private_key, rsa.RSAPrivateKey)
    data_key = private_key.decrypt(context.keys()[0].value, padding.OAEP(
        mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None))
    assert AESGCM(data_key).decrypt(context.param(), consumed.data(), None) == secret(0)

    # FAIL: held back, not acknowledged: a consumer with the right key gets it afterwards
    with pytest.raises(magnetar.Timeout):
        subs[magnetar.ConsumerCryptoFailureAction.FAIL].receive(timeout_millis=1500)
    # DISCARD: acknowledged and dropped: the subscription has nothing left
    with pytest.raises(magnetar.Timeout):
        subs[magnetar.ConsumerCryptoFailureAction.DISCARD].receive(timeout_millis=1500)
    for consumer in subs.values():
        consumer.close()
    right = magnetar.CryptoKeyReader("", private)
    held = client.subscribe(topic, "s-FAIL", crypto_key_reader=right)
    assert held.receive(timeout_millis=10_000).data() == secret(0)
    held.close()
    dropped = client.subscribe(topic, "s-DISCARD", crypto_key_reader=right)
    with pytest.raises(magnetar.Timeout):
        dropped.receive(timeout_millis=1500)
    dropped.close()


def test_no_crypto_key_reader_holds_encrypted_messages_back_by_default(client: magnetar.Client, topic: str,
                                                                       tmp_path: Path) -> None:
    public, _ = key_pair(tmp_path, "app")
    consumer = client.subscribe(topic, "plain")
    publish(client, topic, 1, "app", magnetar.CryptoKeyReader(public, ""))
    with pytest.raises(magnetar.Timeout):
        consumer.receive(timeout_millis=1500)
    consumer.close()
    with pytest.raises(magnetar.InvalidConfiguration, match="crypto_key_reader"):
        client.create_producer(topic, encryption_key="app")
    with pytest.raises(magnetar.CryptoError):  # a public key that cannot be read fails the producer, as in Pulsar
        client.create_producer(topic, encryption_key="app",
                               crypto_key_reader=magnetar.CryptoKeyReader(str(tmp_path / "none.pem"), ""))


def test_compression_then_encryption(client: magnetar.Client, topic: str, tmp_path: Path) -> None:
    public, private = key_pair(tmp_path, "app")
    payload = SECRET * 100  # compresses well: only if compressed before encryption
    good = client.subscribe(topic, "good", crypto_key_reader=magnetar.CryptoKeyReader("", private))
    raw = client.subscribe(topic, "raw", crypto_failure_action=magnetar.ConsumerCryptoFailureAction.CONSUME)
    producer = client.create_producer(topic, encryption_key="app", crypto_key_reader=magnetar.CryptoKeyReader(public, ""),
                                      compression_type=magnetar.CompressionType.LZ4)
    producer.send(payload)
    producer.close()
    assert good.receive(timeout_millis=10_000).data() == payload
    encrypted = raw.receive(timeout_millis=10_000)
    context = encrypted.encryption_context()
    assert context is not None and context.compression_type() is magnetar.CompressionType.LZ4
    assert context.uncompressed_message_size() == len(payload) and len(encrypted.data()) < len(payload) // 4
    good.close()
    raw.close()


def test_the_stored_segments_hold_no_plaintext(cluster: Any, client: magnetar.Client, topic: str,
                                               tmp_path: Path) -> None:
    public, private = key_pair(tmp_path, "app")
    marker = f"clear-key-{uuid.uuid4().hex[:8]}"  # keys stay in the clear (as in Pulsar): finds our entries
    consumer = client.subscribe(topic, "s", crypto_key_reader=magnetar.CryptoKeyReader("", private))
    producer = client.create_producer(topic, encryption_key="app", crypto_key_reader=magnetar.CryptoKeyReader(public, ""))
    for i in range(5):
        producer.send(secret(i), partition_key=marker)
    producer.close()
    assert [m.data() for m in receive_all(consumer, 5)] == [secret(i) for i in range(5)]  # consumers read sealed
    consumer.close()
    s3 = boto3.client("s3", endpoint_url=cluster.endpoint)
    local = topic.rsplit("/", 1)[1]
    objects: list[bytes] = []
    deadline = time.monotonic() + 20
    while not any(marker.encode() in body for body in objects):
        assert time.monotonic() < deadline, "no segment object of the topic holds its entries"
        listing = s3.list_objects_v2(Bucket=cluster.names.bucket, Prefix="segments/public/default/")
        keys = [o["Key"] for o in listing.get("Contents", []) if f"/{local}/" in o["Key"]]
        objects = [s3.get_object(Bucket=cluster.names.bucket, Key=k)["Body"].read() for k in keys]
        time.sleep(0.2)
    stored = b"".join(objects)
    assert stored.count(marker.encode()) >= 5 and SECRET not in stored


def test_partitioned_topic_and_readers(client: magnetar.Client, admin: AdminClient, tmp_path: Path) -> None:
    topic = f"persistent://public/default/enc-{uuid.uuid4().hex[:8]}"
    admin.create_partitioned_topic(topic, 3)
    public, private = key_pair(tmp_path, "app")
    keys = magnetar.CryptoKeyReader("", private)
    consumer = client.subscribe(topic, "s", crypto_key_reader=keys, initial_position=magnetar.InitialPosition.Earliest)
    publish(client, topic, 12, "app", magnetar.CryptoKeyReader(public, ""))
    assert sorted(m.data() for m in receive_all(consumer, 12)) == sorted(secret(i) for i in range(12))
    assert receive_all_ids(consumer) == []
    consumer.close()
    reader = client.create_reader(topic, magnetar.MessageId.earliest, crypto_key_reader=keys)
    assert sorted(reader.read_next(10_000).data() for _ in range(12)) == sorted(secret(i) for i in range(12))
    reader.close()
    blind = client.create_reader(topic, magnetar.MessageId.earliest,
                                 crypto_failure_action=magnetar.ConsumerCryptoFailureAction.CONSUME)
    first = blind.read_next(10_000)
    assert SECRET not in first.data() and first.encryption_context().is_decryption_failed()  # type: ignore[union-attr]
    blind.close()
    skipping = client.create_reader(topic + "-partition-0", magnetar.MessageId.earliest)  # FAIL: nothing readable
    with pytest.raises(magnetar.Timeout):
        skipping.read_next(1000)
    skipping.close()


def receive_all_ids(consumer: Any) -> list[magnetar.Message]:
    """Whatever is left (nothing, once everything was acknowledged)."""
    out = []
    while True:
        try:
            out.append(consumer.receive(timeout_millis=300))
        except magnetar.Timeout:
            return out


def test_http_and_websocket_consumers_get_the_ciphertext_with_its_context(cluster: Any, client: magnetar.Client,
                                                                        topic: str, tmp_path: Path) -> None:
    public, private = key_pair(tmp_path, "app")
    path = topic_path(topic)
    status, body = refusal(cluster, f"/ws/v2/consumer/{path}/ws-sub?cryptoFailureAction=IGNORE")
    assert status == 400 and "cryptoFailureAction" in body["reason"]
    with open_ws(cluster, f"/ws/v2/consumer/{path}/ws-sub?subscriptionInitialPosition=Earliest"
                          "&cryptoFailureAction=CONSUME") as ws:  # as PIP-290's client-side decryption
        publish(client, topic, 2, "app", magnetar.CryptoKeyReader(public, ""), compression_type=magnetar.CompressionType.ZLib)
        pushed = receive(ws, 2)
    page = HTTP.post(f"{cluster.url}/magnetar/v1/reader/{path}/read",
                      json={"startEntryId": 0, "maxEntries": 10, "format": "messages"}, timeout=30).json()
    rest = page["messages"]
    assert len(rest) == 2
    opener = magnetar.CryptoKeyReader("", private)
    from magnetar.client.crypto import MessageDecryptor

    for i, frame in enumerate(pushed):
        assert frame["payload"] == rest[i]["payload"] and frame["encryptionContext"] == rest[i]["encryptionContext"]
        payload = base64.b64decode(frame["payload"])
        assert SECRET not in payload
        wire = frame["encryptionContext"]
        assert set(wire) == {"keys", "param", "algorithm", "compressionType", "uncompressedMessageSize"}
        assert list(wire["keys"]) == ["app"] and wire["compressionType"] == "ZLIB"
        assert MessageDecryptor(opener).decrypt(payload, encryption.from_wire(wire)) == secret(i)


def test_websocket_producer_sends_pre_encrypted_messages(cluster: Any, client: magnetar.Client, topic: str,
                                                        tmp_path: Path) -> None:
    public, private = key_pair(tmp_path, "app")
    consumer = client.subscribe(topic, "s", crypto_key_reader=magnetar.CryptoKeyReader("", private))
    push = client.subscribe(topic, "push", delivery="push", crypto_key_reader=magnetar.CryptoKeyReader("", private))
    sealer = MessageEncryptor(["app"], magnetar.CryptoKeyReader(public, ""), magnetar.CompressionType.NONE)
    ciphertext, enc = sealer.encrypt(secret(7))
    context = encryption.to_wire(enc)
    with open_ws(cluster, f"/ws/v2/producer/{topic_path(topic)}") as ws:
        param = context.pop("param")  # Pulsar's per-message field stands in for the context's
        ws.send(json.dumps({"payload": base64.b64encode(ciphertext).decode(), "encryptionContext": context,
                            "encryptionParam": param, "context": "c1"}))
        assert json.loads(ws.recv(timeout=10))["result"] == "ok"
        ws.send(json.dumps({"payload": base64.b64encode(ciphertext).decode(), "encryptionParam": param}))
        refused = json.loads(ws.recv(timeout=10))
        assert refused["result"] == "send-error:7" and "encryptionContext" in refused["errorMsg"]
        ws.send(json.dumps({"payload": base64.b64encode(ciphertext).decode(),
                            "encryptionContext": {**context, "param": "AAAA"}}))
        assert json.loads(ws.recv(timeout=10))["result"] == "send-error:7"  # a 3-byte IV
    for c in (consumer, push):
        message = c.receive(timeout_millis=10_000)
        assert message.data() == secret(7)
        assert not message.encryption_context().is_decryption_failed()  # type: ignore[union-attr]
        c.acknowledge(message)
        c.close()


def test_a_chunked_message_is_encrypted_then_chunked(client: magnetar.Client, topic: str, tmp_path: Path) -> None:
    public, private = key_pair(tmp_path, "app")
    consumer = client.subscribe(topic, "s", crypto_key_reader=magnetar.CryptoKeyReader("", private))
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False, encryption_key="app",
                                      crypto_key_reader=magnetar.CryptoKeyReader(public, ""))
    payload = SECRET + random.Random(3).randbytes(1_200_000)  # over the journal's record limit: two chunks
    sent = producer.send(payload)
    producer.close()
    message = consumer.receive(timeout_millis=20_000)
    assert message.data() == payload and message.message_id() == sent
    assert message.encryption_context() is not None
    consumer.acknowledge(message)
    consumer.close()


def test_non_persistent_topics_pushed_encrypted(client: magnetar.Client, tmp_path: Path) -> None:
    topic = f"non-persistent://public/default/enc-{uuid.uuid4().hex[:8]}"
    public, private = key_pair(tmp_path, "app", "ec")
    consumer = client.subscribe(topic, "s", crypto_key_reader=magnetar.CryptoKeyReader("", private))
    blind = client.subscribe(topic, "blind", crypto_failure_action=magnetar.ConsumerCryptoFailureAction.CONSUME)
    publish(client, topic, 3, "app", magnetar.CryptoKeyReader(public, ""))
    assert [m.data() for m in receive_all(consumer, 3)] == [secret(i) for i in range(3)]
    assert all(SECRET not in m.data() for m in receive_all(blind, 3))
    consumer.close()
    blind.close()


def test_websocket_producer_with_pip_290_connect_keys(cluster: Any, client: magnetar.Client, topic: str,
                                                      tmp_path: Path) -> None:
    """Pulsar's client-side encryption over WebSocket (PIP-290): the encrypted data key at the connect
    (`encryptionKeys`, `encryptionKeyValues`, `encryptionKeyMetadata`), each message with its IV
    (`encryptionParam`) and its compression; an SDK consumer decrypts."""
    public, private = key_pair(tmp_path, "app")
    consumer = client.subscribe(topic, "s", crypto_key_reader=magnetar.CryptoKeyReader("", private))
    sealer = MessageEncryptor(["app"], magnetar.CryptoKeyReader(public, ""), magnetar.CompressionType.ZSTD)
    payload = SECRET * 10
    ciphertext, enc = sealer.encrypt(payload)
    value = quote(base64.b64encode(enc["keys"][0][1]).decode(), safe="")
    metadata = quote(base64.b64encode(json.dumps({"owner": "ops"}).encode()).decode(), safe="")
    query = f"encryptionKeys=app&encryptionKeyValues={value}&encryptionKeyMetadata={metadata}"
    status, body = refusal(cluster, f"/ws/v2/producer/{topic_path(topic)}?encryptionKeys=app,other&"
                                    f"encryptionKeyValues={value}")
    assert status == 400 and "encryptionKeyValues" in body["reason"]
    with open_ws(cluster, f"/ws/v2/producer/{topic_path(topic)}?{query}") as ws:
        ws.send(json.dumps({"payload": base64.b64encode(ciphertext).decode(), "key": "k",
                            "encryptionParam": base64.b64encode(enc["iv"]).decode(),
                            "compressionType": "ZSTD", "uncompressedMessageSize": len(payload)}))
        assert json.loads(ws.recv(timeout=10))["result"] == "ok"
        ws.send(json.dumps({"payload": base64.b64encode(b"clear").decode()}))  # an encrypting producer's plaintext
        refused = json.loads(ws.recv(timeout=10))
        assert refused["result"] == "send-error:7" and "encryptionParam" in refused["errorMsg"]
    message = consumer.receive(timeout_millis=10_000)
    assert message.data() == payload and message.partition_key() == "k"
    context = message.encryption_context()
    assert context is not None and context.keys()[0].metadata == {"owner": "ops"}
    assert context.compression_type() is magnetar.CompressionType.ZSTD
    consumer.acknowledge(message)
    consumer.close()


def test_the_connect_keys_are_kept_with_the_connection_on_dynamodb(cluster: Any) -> None:
    """A frame may reach another WebSocket function container than the connect: the producer's
    PIP-290 keys are read back from the connection's DynamoDB item."""
    from magnetar.adapters.aws.connections import DynamoConnectionRegistry
    from magnetar.config import ResourceNames
    from magnetar.core.ports.push import Connection

    registry = DynamoConnectionRegistry(ResourceNames.from_env().table)
    keys = json.dumps([["app", base64.b64encode(b"wrapped data key").decode(), {"owner": "ops"}]])
    producer = Connection(f"enc-{uuid.uuid4().hex[:8]}=", "producer", "persistent://public/default/enc-reg", 1_000,
                          "p", encryption_keys=keys)
    plain = Connection(f"enc-{uuid.uuid4().hex[:8]}=", "producer", "persistent://public/default/enc-reg", 1_000, "q")
    for conn in (producer, plain):
        registry.add(conn)
        assert registry.get(conn.connection_id) == conn
        registry.remove(conn)
