"""The official pulsar-client through the binary protocol proxy, continued: chunked messages both
ways with the SDK, non-persistent topics, ExclusiveWithFencing, PROTOBUF_NATIVE and KEY_VALUE
schemas, end-to-end encrypted messages passed through (the proxy holds no key)."""

from __future__ import annotations

import json
import random
import struct
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import magnetar

pulsar = pytest.importorskip("pulsar")

# the `proxy` and `official` fixtures: imported, pytest defines them in this module (module scope: its own proxy)
from e2e.pulsar_protocol_fixtures import drain, official_fixture, proxy_fixture, quiet_logger  # noqa: E402, F401
from e2e.test_encryption import key_pair  # noqa: E402
from e2e.test_schema_sdk import _protobuf_class  # noqa: E402
from magnetar.protocol import ProxySettings, ProxyThread  # noqa: E402

BIG = 2_400_000  # over the proxy's maximum message size (~1 MiB) and the SDK's entry size: 3 chunks each way


def _payload(seed: int, size: int = BIG) -> bytes:
    """Half random, half repeated: compression has something to do and something it cannot."""
    rng = random.Random(seed)
    return rng.randbytes(size // 2) + b"magnetar" * (size // 16)


def test_official_chunked_message_reaches_official_and_sdk_consumers(
        official: pulsar.Client, client: magnetar.Client, topic: str) -> None:
    theirs = official.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
    sdk = client.subscribe(topic, "sdk", initial_position=magnetar.InitialPosition.Earliest)
    producer = official.create_producer(topic, chunking_enabled=True, batching_enabled=False,
                                        compression_type=pulsar.CompressionType.LZ4)
    payload = _payload(1)
    producer.send(b"before", partition_key="k0")
    producer.send(payload, partition_key="k1", properties={"p": "v"}, event_timestamp=1_700_000_000_000)
    producer.send(b"after")
    got = drain(theirs, 3, timeout_s=30)
    assert [m.data() for m in got] == [b"before", payload, b"after"]
    assert (got[1].partition_key(), got[1].properties(), got[1].event_timestamp()) == (
        "k1", {"p": "v"}, 1_700_000_000_000)
    mine = [sdk.receive(timeout_millis=30_000) for _ in range(3)]
    assert [m.data() for m in mine] == [b"before", payload, b"after"]
    assert (mine[1].partition_key(), mine[1].properties()) == ("k1", {"p": "v"})
    for m in mine:
        sdk.acknowledge(m)
    # the official acknowledgement of the chunked message covered every stored chunk
    theirs.close()
    again = official.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
    with pytest.raises(pulsar.Timeout):
        again.receive(timeout_millis=2000)
    producer.close()


def test_sdk_chunked_message_reaches_the_official_client(
        official: pulsar.Client, client: magnetar.Client, topic: str) -> None:
    theirs = official.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False,
                                      compression_type=magnetar.CompressionType.ZSTD)
    payload = _payload(2)
    sent = producer.send(payload, partition_key="big", properties={"kind": "chunked"})
    producer.send(b"small")
    got = drain(theirs, 2, timeout_s=30)
    assert [m.data() for m in got] == [payload, b"small"]
    assert (got[0].partition_key(), got[0].properties()) == ("big", {"kind": "chunked"})
    assert sent is not None
    theirs.close()
    again = official.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
    with pytest.raises(pulsar.Timeout):  # every chunk entry was acknowledged
        again.receive(timeout_millis=2000)


def test_non_persistent_topic_from_the_official_producer_to_a_pushed_consumer(
        official: pulsar.Client, client: magnetar.Client) -> None:
    topic = f"non-persistent://public/default/np-{uuid.uuid4().hex[:8]}"
    pushed = client.subscribe(topic, "s")  # pushed over the WebSocket API (the door of non-persistent topics)
    time.sleep(0.5)
    producer = official.create_producer(topic)
    for i in range(3):
        producer.send(f"np-{i}".encode(), partition_key=f"k{i}")
    got = [pushed.receive(timeout_millis=10_000) for _ in range(3)]
    assert [(m.data(), m.partition_key()) for m in got] == [(f"np-{i}".encode(), f"k{i}") for i in range(3)]
    with pytest.raises(pulsar.NotAllowedError):  # consuming one through the proxy is refused, with a reason
        official.subscribe(topic, "through-the-proxy")
    producer.close()
    pushed.close()


def test_exclusive_with_fencing_takes_the_topic_and_fences_the_holder(official: pulsar.Client, topic: str) -> None:
    first = official.create_producer(topic, producer_name="first", access_mode=pulsar.ProducerAccessMode.Exclusive)
    first.send(b"first's")
    second = official.create_producer(topic, producer_name="second",
                                      access_mode=pulsar.ProducerAccessMode.ExclusiveWithFencing)
    second.send(b"second's")
    with pytest.raises(pulsar.PulsarException):  # fenced: its writes are refused, it is closed
        first.send(b"too late")
    with pytest.raises((pulsar.ProducerFenced, pulsar.ProducerBusy)):
        official.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    consumer = official.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    assert [m.data() for m in drain(consumer, 2)] == [b"first's", b"second's"]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=1000)
    second.close()


def test_protobuf_native_schema_with_the_sdk_both_ways(
        official: pulsar.Client, client: magnetar.Client, topic: str) -> None:
    from pulsar.schema import ProtobufNativeSchema as Official

    from magnetar.schema import ProtobufNativeSchema as Ours

    order = _protobuf_class()
    producer = official.create_producer(topic, schema=Official(order))
    producer.send(order(id="from-official", quantity=2))
    sdk = client.subscribe(topic, "sdk", schema=Ours(order), initial_position=magnetar.InitialPosition.Earliest)
    value = sdk.receive(timeout_millis=10_000).value()
    assert (value.id, value.quantity) == ("from-official", 2)
    client.create_producer(topic, schema=Ours(order)).send(order(id="from-sdk", quantity=5))
    theirs = official.subscribe(topic, "official", schema=Official(order),
                                initial_position=pulsar.InitialPosition.Earliest)
    values = [theirs.receive(timeout_millis=10_000).value() for _ in range(2)]
    assert [(v.id, v.quantity) for v in values] == [("from-official", 2), ("from-sdk", 5)]


class _KeyValueBytes(pulsar.schema.Schema):  # type: ignore[misc]
    """A KEY_VALUE schema as Pulsar's clients put it on the wire (KeyValueSchemaInfo: the key's and
    the value's definitions, each after its 4-byte length; both BYTES here). pulsar-client's Python
    API has no KeyValue schema and its SchemaInfo takes no properties: its C++ core then refuses to
    send with one ("Not found kv.encoding.type by properties") and aborts the process on receiving
    with one, so this client only subscribes with it (Java and Go send the properties)."""

    def __init__(self) -> None:
        import _pulsar

        self._record_cls = bytes
        self._schema_info = _pulsar.SchemaInfo(_pulsar.SchemaType.KEY_VALUE, "KeyValue",
                                               (struct.pack(">i", 0) * 2).decode())

    def encode(self, obj: Any) -> bytes:
        key, value = obj
        return struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value

    def decode(self, data: bytes) -> tuple[bytes, bytes]:
        (k,) = struct.unpack_from(">i", data, 0)
        (v,) = struct.unpack_from(">i", data, 4 + k)
        return data[4:4 + k], data[8 + k:8 + k + v]


def test_key_value_schema_translated_for_an_official_consumer(
        official: pulsar.Client, client: magnetar.Client, admin, topic: str) -> None:  # type: ignore[no-untyped-def]
    from magnetar.schema import BytesSchema, JsonSchema, KeyValueSchema, Record, String

    producer = client.create_producer(topic, schema=KeyValueSchema(BytesSchema(), BytesSchema()))
    # the official consumer's KEY_VALUE schema, Pulsar's binary definition, read as the registry's JSON:
    # compatible with the topic's (both parts BYTES)
    official.subscribe(topic, "official", schema=_KeyValueBytes()).close()
    producer.send((b"k1", b"v1"))
    sdk = client.subscribe(topic, "sdk", schema=KeyValueSchema(BytesSchema(), BytesSchema()),
                           initial_position=magnetar.InitialPosition.Earliest)
    assert sdk.receive(timeout_millis=10_000).value() == (b"k1", b"v1")
    stored = admin.get_schema(topic)
    assert stored["type"] == "KEY_VALUE" and json.loads(stored["data"]) == {"key": "", "value": ""}

    class City(Record):
        name = String()

    other = topic + "-json"  # a KEY_VALUE whose value is JSON: the official consumer's BYTES parts are refused
    client.create_producer(other, schema=KeyValueSchema(BytesSchema(), JsonSchema(City))).send((b"k", City(name="x")))
    with pytest.raises(pulsar.IncompatibleSchema):
        official.subscribe(other, "official", schema=_KeyValueBytes())


def test_encrypted_messages_pass_through_both_ways(
        official: pulsar.Client, client: magnetar.Client, topic: str, tmp_path: Path) -> None:
    public, private = key_pair(tmp_path, "app")
    theirs = official.subscribe(topic, "official", crypto_key_reader=pulsar.CryptoKeyReader(public, private),
                                initial_position=pulsar.InitialPosition.Earliest)
    sdk = client.subscribe(topic, "sdk", crypto_key_reader=magnetar.CryptoKeyReader("", private),
                           initial_position=magnetar.InitialPosition.Earliest)
    ours = client.create_producer(topic, encryption_key="app", crypto_key_reader=magnetar.CryptoKeyReader(public, ""),
                                  batching_enabled=False, compression_type=magnetar.CompressionType.LZ4)
    ours.send(b"secret from the sdk " * 20, partition_key="a")
    producer = official.create_producer(topic, encryption_key="app", batching_enabled=False,
                                        crypto_key_reader=pulsar.CryptoKeyReader(public, private),
                                        compression_type=pulsar.CompressionType.ZLib)
    producer.send(b"secret from pulsar-client " * 20, partition_key="b")
    expected = [(b"secret from the sdk " * 20, "a"), (b"secret from pulsar-client " * 20, "b")]
    assert [(m.data(), m.partition_key()) for m in drain(theirs, 2)] == expected
    got = [sdk.receive(timeout_millis=10_000) for _ in range(2)]
    assert [(m.data(), m.partition_key()) for m in got] == expected
    # what the proxy stored is ciphertext with its context: a consumer without the key cannot read it
    blind = client.subscribe(topic, "blind", initial_position=magnetar.InitialPosition.Earliest,
                             crypto_failure_action=magnetar.ConsumerCryptoFailureAction.CONSUME)
    assert all(b"secret" not in blind.receive(timeout_millis=10_000).data() for _ in range(2))
    with pytest.raises(pulsar.PulsarException):  # an encrypted *batch* (one ciphertext) is refused at once
        official.create_producer(topic, encryption_key="app", crypto_key_reader=pulsar.CryptoKeyReader(public, private),
                                 batching_enabled=True).send(b"in a batch")


def _self_signed(tmp_path: Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 (and its key), PEM files: the client trusts it as its CA."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "proxy.crt", tmp_path / "proxy.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


def test_tls_on_a_port_of_its_own(cluster, topic: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cert, key = _self_signed(tmp_path)
    secured = ProxyThread(ProxySettings(port=0, tls_port=0, tls_cert_file=cert, tls_key_file=key)).start()
    try:
        url = secured.server.tls_service_url
        assert url is not None and url.startswith("pulsar+ssl://127.0.0.1:")
        c = pulsar.Client(url, tls_trust_certs_file_path=cert, operation_timeout_seconds=15, logger=quiet_logger())
        try:
            consumer = c.subscribe(topic, "tls", initial_position=pulsar.InitialPosition.Earliest)
            c.create_producer(topic).send(b"over TLS")
            assert [m.data() for m in drain(consumer, 1)] == [b"over TLS"]
        finally:
            c.close()
    finally:
        secured.stop()


def test_perf_run_with_the_official_client_through_the_proxy(cluster, proxy: ProxyThread) -> None:  # type: ignore[no-untyped-def]
    from magnetar.perf.runner import PerfConfig, PerfRun

    config = PerfConfig(mode="e2e", service_url=cluster.url, protocol="pulsar", pulsar_url=proxy.service_url,
                        topic=f"persistent://public/default/perf-{uuid.uuid4().hex[:8]}", consumers=2, rate=300,
                        duration_s=3, receive_batch=50, receive_wait_ms=100, check_delivery=True,
                        drain_timeout_s=30)
    result = PerfRun(config).run()
    delivery = result["delivery"]
    assert result["acked"] > 300 and result["failed"] == 0 and not result["drain_timed_out"]
    assert delivery["unique_received"] == delivery["acked"] == result["acked"] and delivery["duplicates"] == 0
    assert result["aws_requests_total"] > 0 and result["http_statuses"] == {}  # no HTTP: the binary protocol


def test_the_proxys_producers_share_the_pace_of_their_shard(official: pulsar.Client, proxy: ProxyThread,
                                                            admin: Any) -> None:
    """The official client's producers of a 4-partition topic through the proxy: each partition's
    producer paces with the proxy's pacer of its journal shard (2 local shards: 2 pacers, each
    shared by 2 partitions), as the SDK's producers of one client do."""
    topic = f"persistent://public/default/proxy-pace-{uuid.uuid4().hex[:8]}"
    admin.create_partitioned_topic(topic, 4)
    producer = official.create_producer(topic, batching_enabled=False,
                                        message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(8):
        producer.send(str(i).encode())
    pacers = {str(p.topic): p.pacer for conn in proxy.server.connections for p in conn.producers.values()}
    assert len(pacers) == 4, pacers.keys()
    assert len({id(p) for p in pacers.values()}) == 2, "2 shards: 2 pacers, each shared by 2 partitions"
    assert all(any(p is shared for shared in proxy.server.pacers._pacers.values()) for p in pacers.values())
