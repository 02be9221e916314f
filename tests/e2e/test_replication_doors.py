"""Geo-replication through every door, end to end on the session's local cluster: what a publish
asks for (`replication_clusters`, `disable_replication`) stored per entry from the SDK, the
WebSocket producer and the official client through the binary proxy; a replicated copy's origin
shown by the SDK, the WebSocket consumer and the binary protocol; the `replication` section of
topic stats, with the replicators' cursors kept out of the subscriptions."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from typing import Any

import pytest
from typer.testing import CliRunner

import magnetar
from http_helpers import HTTP
from magnetar.adapters.aws.dynamodb import DynamoMetadataStore
from magnetar.adapters.aws.kinesis import KinesisJournal
from magnetar.adapters.aws.s3 import S3SegmentStore
from magnetar.core.broker import Broker
from magnetar.core.entry import Entry, Message, encode_messages
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.replication import replicator_name
from ws_helpers import b64, open_ws, receive, send, topic_path

pulsar = pytest.importorskip("pulsar")

from e2e.pulsar_protocol_fixtures import official_fixture, proxy_fixture  # noqa: E402, F401
from magnetar.protocol import pulsar_api_pb2 as pb  # noqa: E402
from magnetar.protocol.frames import Frame, FrameReader, Type, command, encode  # noqa: E402


def core(cluster: Any) -> Broker:
    """The cluster's stored state, read as the broker reads it (tail reads: sealed or not)."""
    names = cluster.names
    return Broker(DynamoMetadataStore(names.table), S3SegmentStore(names.bucket), KinesisJournal(names.stream))


def stored(cluster: Any, topic: str, count: int, timeout_s: float = 15) -> list[Entry]:
    """The topic's first `count` entries (fails if they are not all there in time)."""
    broker, name = core(cluster), TopicName.parse(topic)
    deadline = time.monotonic() + timeout_s
    while True:
        entries = [] if broker.metadata.get_topic_state(name)[1] is None else broker.read_entries(name, 0, count + 10)
        if len(entries) >= count or time.monotonic() > deadline:
            assert len(entries) == count, f"{len(entries)} entries, expected {count}"
            return entries
        time.sleep(0.2)


def texts(entry: Entry) -> list[str]:
    return [m.payload.decode() for m in entry.messages]


def publish_copy(cluster: Any, topic: str, text: str, origin: str, entry_id: int) -> None:
    """What another cluster's replicator appends: a batch with its origin."""
    raw = encode_messages([Message(text.encode())])
    body = {"producerName": replicator_name(origin), "sequenceId": entry_id, "highestSequenceId": entry_id,
            "batch": {"payload": base64.b64encode(raw).decode(), "numMessages": 1, "compression": "NONE",
                      "uncompressedSize": len(raw), "batched": False,
                      "origin": {"cluster": origin, "ledgerId": 7, "entryId": entry_id, "producerName": "far-away",
                                 "sequenceId": 3, "highestSequenceId": 3, "publishTime": 1_700_000_000_000}}}
    response = HTTP.post(f"{cluster.url}/topics/{topic_path(topic)}", json=body, timeout=30)
    assert response.status_code == 200, response.text


# --- the SDK ----------------------------------------------------------------------------------------
def test_sdk_replication_settings_are_stored_per_entry_and_split_batches(
        client: magnetar.Client, cluster: Any, topic: str) -> None:
    producer = client.create_producer(topic, batching_max_publish_delay_ms=60_000, batching_max_messages=100)
    plan: list[tuple[str, dict[str, Any]]] = [
        ("m0", {}), ("m1", {"replication_clusters": []}),  # [] is the topic's clusters, as no setting
        ("m2", {"replication_clusters": ["east", "west"]}), ("m3", {"replication_clusters": ["east", "west"]}),
        ("m4", {"disable_replication": True}), ("m5", {"replication_clusters": ["east"], "disable_replication": True}),
        ("m6", {}),
    ]
    for text, kwargs in plan:
        producer.send_async(text.encode(), None, **kwargs)
    producer.flush()
    entries = stored(cluster, topic, 4)
    assert [texts(e) for e in entries] == [["m0", "m1"], ["m2", "m3"], ["m4", "m5"], ["m6"]]
    assert [e.replicate_to for e in entries] == [None, ("east", "west"), (), None]
    assert all(e.origin is None for e in entries)

    async def send_async_api() -> None:  # the asyncio API takes the same keywords to the same effect
        from magnetar.asyncio import Client as AsyncClient

        async_client = AsyncClient(cluster.url)
        try:
            async_producer = await async_client.create_producer(topic, batching_enabled=False)
            await async_producer.send(b"m7", replication_clusters=["west"])
            await async_producer.send(b"m8", disable_replication=True)
            await async_producer.close()
        finally:
            await async_client.close()

    asyncio.run(send_async_api())
    assert [e.replicate_to for e in stored(cluster, topic, 6)[4:]] == [("west",), ()]
    reader = client.create_reader(topic, magnetar.MessageId.earliest)
    seen = [reader.read_next(timeout_millis=10_000) for _ in range(9)]
    assert [m.data().decode() for m in seen] == [f"m{i}" for i in range(9)]
    assert not any(m.is_replicated() for m in seen) and {m.replicated_from() for m in seen} == {""}


def test_partitioned_producer_passes_the_settings_to_its_partitions(
        client: magnetar.Client, admin: Any, cluster: Any, topic: str) -> None:
    admin.create_partitioned_topic(topic, 2)
    producer = client.create_producer(topic, batching_enabled=False,
                                      message_routing_mode=magnetar.PartitionsRoutingMode.UseSinglePartition)
    producer.send(b"p0", replication_clusters=["east"])
    producer.send(b"p1", disable_replication=True)
    broker, deadline = core(cluster), time.monotonic() + 15
    while True:  # both went to the one partition the producer chose
        entries = {p: broker.read_entries(TopicName.parse(f"{topic}-partition-{p}"), 0, 10) for p in (0, 1)}
        if sum(map(len, entries.values())) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert sorted([e.replicate_to for e in v] for v in entries.values()) == [[], [("east",), ()]]


def test_a_replicated_copy_shows_its_origin_through_the_sdk_the_websocket_and_rest(
        client: magnetar.Client, cluster: Any, topic: str) -> None:
    client.create_producer(topic, batching_enabled=False).send(b"local")
    publish_copy(cluster, topic, "copied", "east", 0)
    entries = stored(cluster, topic, 2)
    assert [e.replicated_from for e in entries] == ["", "east"]
    assert (entries[1].producer_name, entries[1].publish_time) == ("far-away", 1_700_000_000_000)

    reader = client.create_reader(topic, magnetar.MessageId.earliest)
    got = [reader.read_next(timeout_millis=10_000) for _ in range(2)]
    assert [(m.data(), m.is_replicated(), m.replicated_from()) for m in got] == [
        (b"local", False, ""), (b"copied", True, "east")]
    consumer = client.subscribe(topic, "sdk", initial_position=magnetar.InitialPosition.Earliest)
    got = [consumer.receive(timeout_millis=10_000) for _ in range(2)]
    assert [(m.data(), m.replicated_from()) for m in got] == [(b"local", ""), (b"copied", "east")]

    with open_ws(cluster, f"/ws/v2/consumer/{topic_path(topic)}/ws?subscriptionInitialPosition=Earliest") as ws:
        pushed = receive(ws, 2)
    assert [(base64.b64decode(m["payload"]), m.get("replicatedFrom")) for m in pushed] == [
        (b"local", None), (b"copied", "east")]
    with open_ws(cluster, f"/ws/v2/reader/{topic_path(topic)}?messageId=earliest") as ws:
        assert [m.get("replicatedFrom") for m in receive(ws, 2)] == [None, "east"]


# --- the WebSocket producer -------------------------------------------------------------------------
def test_websocket_producer_replication_clusters_are_honoured(cluster: Any, topic: str) -> None:
    with open_ws(cluster, f"/ws/v2/producer/{topic_path(topic)}") as ws:
        assert send(ws, "w0", "c0", replicationClusters=["east", "west"])["result"] == "ok"
        assert send(ws, "w1", "c1", replicationClusters=[])["result"] == "ok"  # Pulsar's: the topic's clusters
        assert send(ws, "w2", "c2", disableReplication=True)["result"] == "ok"  # Magnetar's, as the REST producer
        assert send(ws, "w3", "c3")["result"] == "ok"
        refused = send(ws, "w4", "c4", replicationClusters="east")
        assert refused["result"] == "send-error:7" and "replicationClusters" in refused["errorMsg"]
        ws.send(json.dumps({"payload": b64("w5"), "disableReplication": "yes"}))
        assert json.loads(ws.recv(timeout=10))["result"] == "send-error:7"
    assert [e.replicate_to for e in stored(cluster, topic, 4)] == [("east", "west"), None, (), None]


# --- the binary protocol ----------------------------------------------------------------------------
class _Peer:
    """A raw binary-protocol client (the official Python client does not show replicated_from)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.frames, self.pending = reader, writer, FrameReader(), list[Frame]()

    async def next(self, kind: int, timeout: float = 15) -> Frame:
        while True:
            for i, frame in enumerate(self.pending):
                if frame.command.type == kind:
                    return self.pending.pop(i)
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
            if not data:
                raise ConnectionError("closed")
            self.pending += [f for f in self.frames.feed(data) if isinstance(f, Frame)]


def raw_messages(port: int, topic: str, count: int) -> list[Frame]:
    async def run() -> list[Frame]:
        peer = _Peer(*await asyncio.open_connection("127.0.0.1", port))
        peer.writer.write(encode(command(Type.CONNECT, connect={"client_version": "raw", "protocol_version": 19})))
        await peer.next(Type.CONNECTED)
        peer.writer.write(encode(command(Type.SUBSCRIBE, subscribe={
            "topic": topic, "subscription": f"raw-{uuid.uuid4().hex[:6]}", "subType": pb.CommandSubscribe.Exclusive,
            "consumer_id": 1, "request_id": 1, "initialPosition": pb.CommandSubscribe.Earliest})))
        await peer.next(Type.SUCCESS)
        peer.writer.write(encode(command(Type.FLOW, flow={"consumer_id": 1, "messagePermits": 100})))
        out = [await peer.next(Type.MESSAGE) for _ in range(count)]
        peer.writer.close()
        return out

    return asyncio.run(run())


def test_official_client_replication_settings_and_replicated_from_over_the_binary_protocol(
        official: Any, proxy: Any, cluster: Any, topic: str) -> None:
    producer = official.create_producer(topic, batching_enabled=False)
    producer.send(b"o0", replication_clusters=["east", "west"])
    producer.send(b"o1", disable_replication=True)  # the client sends replicate_to ["__local__"]
    producer.send(b"o2")
    batching = official.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=10)
    batching.send(b"o3", replication_clusters=["west"])
    publish_copy(cluster, topic, "copied", "east", 0)
    entries = stored(cluster, topic, 5)
    assert [e.replicate_to for e in entries] == [("east", "west"), (), None, ("west",), None]

    frames = raw_messages(proxy.port, topic, 5)
    assert [f.payload for i, f in enumerate(frames) if i != 3] == [b"o0", b"o1", b"o2", b"copied"]
    assert frames[3].metadata.num_messages_in_batch == 1  # o3, in Pulsar's batch format
    metadata = [f.metadata for f in frames]
    assert [list(m.replicate_to) for m in metadata] == [["east", "west"], ["__local__"], [], ["west"], []]
    assert [m.replicated_from for m in metadata] == ["", "", "", "", "east"]
    assert metadata[4].HasField("replicated_from") and not metadata[0].HasField("replicated_from")

    consumer = official.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(timeout_millis=10_000).data() for _ in range(5)]
    assert got == [b"o0", b"o1", b"o2", b"o3", b"copied"]


# --- topic stats ------------------------------------------------------------------------------------
def test_stats_show_a_replicator_left_behind_and_keep_it_out_of_the_subscriptions(
        client: magnetar.Client, admin: Any, cluster: Any) -> None:
    namespace = f"public/geo-{uuid.uuid4().hex[:8]}"
    admin.create_namespace(namespace)
    # the namespace's replication clusters: this one and one that is not there (its replicator stays behind)
    core(cluster).admin.set_policy(NamespaceName.parse(namespace), "replication_clusters",
                                   [cluster.cluster_name, "elsewhere"])
    topic = f"persistent://{namespace}/t"
    consumer = client.subscribe(topic, "sub", initial_position=magnetar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(f"g{i}".encode())
    for _ in range(3):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    consumer.close()  # its acknowledgements sent

    deadline = time.monotonic() + 20
    while True:  # the journal consumer seals the entries and makes the replicator's cursor
        stats = admin.topic_stats(topic)
        remote = stats["replication"].get("elsewhere")
        caught_up = stats["subscriptions"].get("sub", {}).get("msgBacklog") == 0
        if (remote and remote["replicationBacklog"] == 3 and caught_up) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert set(stats["replication"]) == {"elsewhere"}, stats["replication"]
    assert remote is not None
    assert remote["replicationBacklog"] == 3 and remote["connected"] is False
    assert remote["msgRateOut"] == 0 and remote["msgThroughputOut"] == 0
    assert 0 < remote["replicationDelayInSeconds"] < 60  # the oldest unreplicated entry's age
    assert set(stats["subscriptions"]) == {"sub"}  # as in Pulsar: replicators are not subscriptions
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 0
    assert stats["backlogSize"] > 0  # the replicator's backlog still counts (quotas and retention see it)
    assert admin.subscriptions(topic) == ["sub"]
    assert replicator_name("elsewhere") in admin.topic_internal_stats(topic)["cursors"]

    result = CliRunner().invoke(_cli_app(), ["admin", "topics", "stats", topic, "--service-url", cluster.url])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["replication"]["elsewhere"]["replicationBacklog"] == 3


def _cli_app() -> Any:
    from magnetar.cli.main import app

    return app
