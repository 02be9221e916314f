"""Pulsar's frames and message formats (magnetar.protocol.frames, .messages), without a network."""

from __future__ import annotations

import struct

import pytest

from magnetar.core.compression import Codec, compress
from magnetar.core.entry import Batch, Message, make_entry
from magnetar.core.errors import InvalidInput
from magnetar.protocol import pulsar_api_pb2 as pb
from magnetar.protocol.frames import (
    ChecksumMismatch,
    Frame,
    FrameError,
    FrameReader,
    Type,
    command,
    encode,
    encode_with_payload,
)
from magnetar.protocol.messages import ack_set, acked_indexes, batch_from_send, entry_message


def _single(payload: bytes, **fields: object) -> bytes:
    meta = pb.SingleMessageMetadata(payload_size=len(payload), **fields)  # type: ignore[arg-type]
    body = meta.SerializeToString()
    return struct.pack(">I", len(body)) + body + payload


def test_simple_command_round_trips_through_a_split_stream() -> None:
    data = encode(command(Type.PING, ping={})) + encode(command(Type.FLOW, flow={"consumer_id": 7,
                                                                                 "messagePermits": 1000}))
    reader = FrameReader()
    frames = reader.feed(data[:5]) + reader.feed(data[5:11]) + reader.feed(data[11:])
    assert [f.command.type for f in frames if isinstance(f, Frame)] == [Type.PING, Type.FLOW]
    assert frames[1].command.flow.messagePermits == 1000  # type: ignore[union-attr]


def test_payload_command_carries_metadata_and_a_checked_payload() -> None:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=3, publish_time=1)
    data = encode_with_payload(command(Type.SEND, send={"producer_id": 1, "sequence_id": 3}), meta, b"body")
    assert struct.unpack_from(">H", data, 8 + struct.unpack_from(">I", data, 4)[0])[0] == 0x0E01  # the magic
    (frame,) = FrameReader().feed(data)
    assert isinstance(frame, Frame)
    assert (frame.metadata.producer_name, frame.payload) == ("p", b"body")
    corrupt = data[:-1] + b"X"
    (bad,) = FrameReader().feed(corrupt)
    assert isinstance(bad, ChecksumMismatch) and bad.command.send.sequence_id == 3


def test_oversized_frame_is_refused() -> None:
    with pytest.raises(FrameError):
        FrameReader(max_frame_bytes=100).feed(struct.pack(">I", 101) + b"x" * 101)


@pytest.mark.parametrize("codec", list(Codec))
def test_a_pulsar_batch_becomes_one_magnetar_batch(codec: Codec) -> None:
    raw = (_single(b"one", partition_key="k1", properties=[pb.KeyValue(key="a", value="b")], event_time=5)
           + _single(b"two", ordering_key=b"o"))
    wire = {Codec.NONE: pb.NONE, Codec.LZ4: pb.LZ4, Codec.ZLIB: pb.ZLIB, Codec.ZSTD: pb.ZSTD, Codec.SNAPPY: pb.SNAPPY}
    meta = pb.MessageMetadata(producer_name="p", sequence_id=10, publish_time=1, num_messages_in_batch=2,
                              compression=wire[codec], uncompressed_size=len(raw))
    send = pb.CommandSend(producer_id=1, sequence_id=10, num_messages=2, highest_sequence_id=11)
    batch = batch_from_send(send, meta, compress(codec, raw))
    assert (batch.num_messages, batch.batched, batch.sequence_id, batch.highest_sequence_id) == (2, True, 10, 11)
    entry = make_entry("t", 0, 4, 0, 0, "p", batch)
    assert [(m.payload, m.key, m.properties, m.event_time, m.ordering_key) for m in entry.messages] == [
        (b"one", "k1", {"a": "b"}, 5, None), (b"two", None, {}, 0, "o")]


def test_a_truncated_batch_is_invalid_input() -> None:
    raw = _single(b"one")[:-1]
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=1)
    with pytest.raises(InvalidInput):
        batch_from_send(pb.CommandSend(producer_id=1, sequence_id=0), meta, raw)


def test_entries_go_out_as_pulsar_messages() -> None:
    batched = make_entry("t", 0, 1, 0, 9, "p", Batch.of([Message(b"a", "k"), Message(b"b", properties={"x": "y"})],
                                                         Codec.ZSTD, sequence_id=3, highest_sequence_id=4))
    meta, payload = entry_message(batched)
    assert (meta.num_messages_in_batch, meta.compression, meta.publish_time) == (2, pb.NONE, 9)
    size = struct.unpack_from(">I", payload, 0)[0]
    first = pb.SingleMessageMetadata.FromString(payload[4:4 + size])
    assert (first.partition_key, payload[4 + size:4 + size + first.payload_size]) == ("k", b"a")
    single = make_entry("t", 0, 2, 0, 9, "p", Batch.of([Message(b"z", "k2", {"p": "q"}, 77)], batched=False))
    meta, payload = entry_message(single)
    assert (meta.HasField("num_messages_in_batch"), meta.partition_key, meta.event_time, payload) == (
        False, "k2", 77, b"z")
    assert {kv.key: kv.value for kv in meta.properties} == {"p": "q"}


def test_ack_sets_mark_what_is_not_acknowledged() -> None:
    words = ack_set([0, 2], 70)
    assert acked_indexes(words, 70) == [0, 2]
    assert ack_set([], 64) == [-1]  # all 64 bits set: an int64 on the wire
