"""The binary protocol proxy speaking raw frames over TCP, on a broker of in-memory ports: the
handshake, keep-alive, lookups, refusals, and a produce/consume round trip (no AWS, no client)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from magnetar.adapters.memory import memory_broker
from magnetar.protocol import ProxyServer, ProxySettings
from magnetar.protocol import pulsar_api_pb2 as pb
from magnetar.protocol.frames import Frame, FrameReader, Type, command, encode, encode_with_payload


class Peer:
    """A minimal client: sends frames, waits for the next one of a type."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.frames = reader, writer, FrameReader()
        self.pending: list[Frame] = []

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    async def next(self, kind: int | None = None, timeout: float = 5) -> Frame:
        while True:
            for i, frame in enumerate(self.pending):
                if kind is None or frame.command.type == kind:
                    return self.pending.pop(i)
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
            if not data:
                raise ConnectionError("closed")
            self.pending += [f for f in self.frames.feed(data) if isinstance(f, Frame)]

    async def connect(self, version: int = 19) -> Any:
        self.send(encode(command(Type.CONNECT, connect={"client_version": "test", "protocol_version": version})))
        return (await self.next(Type.CONNECTED)).command.connected


def run(test: Callable[[ProxyServer, Callable[[], Awaitable[Peer]]], Awaitable[None]]) -> None:
    broker = memory_broker()

    async def main() -> None:
        server = ProxyServer(ProxySettings(port=0), lambda: broker)
        await server.start()

        async def peer() -> Peer:
            return Peer(*await asyncio.open_connection("127.0.0.1", server.port))

        try:
            await test(server, peer)
        finally:
            await server.stop()

    asyncio.run(main())


def test_handshake_negotiates_the_version_and_answers_pings() -> None:
    async def test(server: ProxyServer, peer: Callable[[], Awaitable[Peer]]) -> None:
        old, new = await peer(), await peer()
        assert (await old.connect(15)).protocol_version == 15
        connected = await new.connect(99)
        assert connected.protocol_version == 21 and connected.max_message_size > 0
        new.send(encode(command(Type.PING, ping={})))
        await new.next(Type.PONG)

    run(test)


def test_a_command_before_connect_is_refused_and_the_connection_closed() -> None:
    async def test(server: ProxyServer, peer: Callable[[], Awaitable[Peer]]) -> None:
        p = await peer()
        p.send(encode(command(Type.LOOKUP, lookupTopic={"topic": "t", "request_id": 4})))
        error = (await p.next(Type.ERROR)).command.error
        assert (error.request_id, error.error) == (4, pb.NotAllowedError)
        assert await p.reader.read() == b""

    run(test)


def test_lookup_keeps_the_client_on_the_proxy() -> None:
    async def test(server: ProxyServer, peer: Callable[[], Awaitable[Peer]]) -> None:
        p = await peer()
        await p.connect()
        p.send(encode(command(Type.LOOKUP, lookupTopic={"topic": "orders", "request_id": 1})))
        answer = (await p.next(Type.LOOKUP_RESPONSE)).command.lookupTopicResponse
        assert (answer.response, answer.brokerServiceUrl, answer.proxy_through_service_url) == (
            pb.CommandLookupTopicResponse.Connect, server.service_url, True)
        p.send(encode(command(Type.LOOKUP, lookupTopic={"topic": "a://b", "request_id": 2})))
        failed = (await p.next(Type.LOOKUP_RESPONSE)).command.lookupTopicResponse
        assert (failed.response, failed.error) == (pb.CommandLookupTopicResponse.Failed, pb.InvalidTopicName)

    run(test)


def test_unserved_commands_get_an_answer_by_request_id() -> None:
    async def test(server: ProxyServer, peer: Callable[[], Awaitable[Peer]]) -> None:
        p = await peer()
        await p.connect()
        p.send(encode(command(Type.NEW_TXN, newTxn={"request_id": 7})))
        assert (await p.next(Type.ERROR)).command.error.request_id == 7
        p.send(encode(command(Type.GET_SCHEMA, getSchema={"request_id": 8, "topic": "t"})))
        schema = (await p.next(Type.GET_SCHEMA_RESPONSE)).command.getSchemaResponse
        assert schema.request_id == 8 and schema.HasField("error_code")

    run(test)


def test_produce_and_consume_round_trip_with_checksums() -> None:
    async def test(server: ProxyServer, peer: Callable[[], Awaitable[Peer]]) -> None:
        p = await peer()
        await p.connect()
        p.send(encode(command(Type.PRODUCER, producer={"topic": "orders", "producer_id": 1, "request_id": 1})))
        success = (await p.next(Type.PRODUCER_SUCCESS)).command.producer_success
        assert success.last_sequence_id == -1 and success.producer_name
        meta = pb.MessageMetadata(producer_name=success.producer_name, sequence_id=0, publish_time=1,
                                  partition_key="k", uncompressed_size=5)
        send = command(Type.SEND, send={"producer_id": 1, "sequence_id": 0})
        p.send(encode_with_payload(send, meta, b"hello"))
        receipt = (await p.next(Type.SEND_RECEIPT)).command.send_receipt
        assert (receipt.sequence_id, receipt.message_id.entryId) == (0, 0)
        corrupt = bytearray(encode_with_payload(command(Type.SEND, send={"producer_id": 1, "sequence_id": 1}),
                                                meta, b"hello"))
        corrupt[-1] ^= 0xFF
        p.send(bytes(corrupt))
        error = (await p.next(Type.SEND_ERROR)).command.send_error
        assert (error.sequence_id, error.error) == (1, pb.ChecksumError)
        p.send(encode(command(Type.SUBSCRIBE, subscribe={
            "topic": "orders", "subscription": "s", "subType": pb.CommandSubscribe.Shared, "consumer_id": 9,
            "request_id": 2, "initialPosition": pb.CommandSubscribe.Earliest})))
        assert (await p.next(Type.SUCCESS)).command.success.request_id == 2
        p.send(encode(command(Type.FLOW, flow={"consumer_id": 9, "messagePermits": 10})))
        message = await p.next(Type.MESSAGE)
        assert (message.payload, message.metadata.partition_key, message.command.message.message_id.entryId) == (
            b"hello", "k", 0)

    run(test)


def test_a_silent_client_is_pinged_then_dropped() -> None:
    broker = memory_broker()

    async def main() -> None:
        server = ProxyServer(ProxySettings(port=0, keep_alive_s=0.2), lambda: broker)
        await server.start()
        try:
            p = Peer(*await asyncio.open_connection("127.0.0.1", server.port))
            await p.connect()
            await p.next(Type.PING, timeout=2)  # the proxy asks
            p.send(encode(command(Type.PONG, pong={})))
            await p.next(Type.PING, timeout=2)  # still there: asked again later
            rest = await asyncio.wait_for(p.reader.read(), 3)  # no answer: dropped (read() returns at the end)
            assert p.reader.at_eof()
            assert {f.command.type for f in p.frames.feed(rest) if isinstance(f, Frame)} <= {Type.PING}
        finally:
            await server.stop()

    asyncio.run(main())
