"""Chunked messages, encryption metadata and KEY_VALUE definitions between Pulsar's wire and
Magnetar's entries (magnetar.protocol.chunks, .messages, .schemas), without a network."""

from __future__ import annotations

import os
import struct

import pytest

from magnetar.core.compression import Codec, compress, decompress
from magnetar.core.entry import decode_messages, make_entry
from magnetar.core.errors import InvalidInput
from magnetar.protocol import pulsar_api_pb2 as pb
from magnetar.protocol.chunks import CHUNK_BYTES, Assembly, Reassembly
from magnetar.protocol.frames import Frame, Type, command
from magnetar.protocol.messages import batch_from_send, entry_message
from magnetar.protocol.schemas import _key_value_definition, _key_value_wire


def _chunks(payload: bytes, size: int, codec: int = pb.LZ4) -> list[Frame]:
    """A Pulsar producer's chunk SENDs of `payload`: compressed whole, then cut in `size` pieces."""
    packed = compress(Codec.LZ4, payload) if codec == pb.LZ4 else payload
    pieces = [packed[i:i + size] for i in range(0, len(packed), size)]
    frames = []
    for index, piece in enumerate(pieces):
        metadata = pb.MessageMetadata(producer_name="p", sequence_id=7, publish_time=1, partition_key="k",
                                      compression=codec, uncompressed_size=len(payload), uuid="p-7",
                                      chunk_id=index, num_chunks_from_msg=len(pieces),
                                      total_chunk_msg_size=len(packed))
        metadata.properties.add(key="a", value="b")
        frames.append(Frame(command(Type.SEND, send={"producer_id": 1, "sequence_id": 7, "is_chunk": True}),
                            metadata, piece))
    return frames


def test_chunks_are_held_until_whole_then_stored_in_the_sdks_chunk_format() -> None:
    payload = os.urandom(1_500_000) + b"x" * 1_000_000
    frames = _chunks(payload, 1_000_000)
    assembly = Assembly()
    assert [assembly.add(f) for f in frames[:-1]] == [None] * (len(frames) - 1)
    complete = assembly.add(frames[-1])
    assert complete is not None and complete.frames == frames and not assembly.partial
    batches = complete.batches
    assert all(len(b.payload) <= CHUNK_BYTES for b in batches) and len(batches) >= 2
    assert [b.sequence_id for b in batches] == [-1] * (len(batches) - 1) + [7]  # dedup sees the message once
    # as the SDK's consumer reassembles: the pieces, joined, are one entry payload
    blob = b"".join(b.payload for b in batches)
    [message] = decode_messages(decompress(batches[-1].compression, blob, batches[-1].uncompressed_size))
    assert (message.payload, message.key, message.properties) == (payload, "k", {"a": "b"})


def test_a_chunk_out_of_order_is_refused_and_its_message_dropped() -> None:
    frames = _chunks(os.urandom(300_000), 100_000, pb.NONE)
    assembly = Assembly()
    assembly.add(frames[0])
    with pytest.raises(InvalidInput, match="out of order"):
        assembly.add(frames[2])
    assert not assembly.partial


def test_stored_chunks_go_to_consumers_as_pulsar_chunks_with_their_entry_ids() -> None:
    payload = os.urandom(2_000_000)
    frames = _chunks(payload, 1_000_000, pb.NONE)
    assembly = Assembly()
    for f in frames[:-1]:
        assembly.add(f)
    complete = assembly.add(frames[-1])
    assert complete is not None
    entries = [make_entry("persistent://public/default/t", 1, 10 + i, 0, 5, "p", b)
               for i, b in enumerate(complete.batches)]
    reassembly = Reassembly()
    assert reassembly.add(entries[1], 0) is None and reassembly.add(entries[0], 0) is None
    out = reassembly.add(entries[2], 1) if len(entries) == 3 else None
    assert out is not None and [e.entry_id for e, _, _ in out] == [10, 11, 12]
    assert b"".join(p for _, _, p in out) == payload
    for index, (_, metadata, _) in enumerate(out):
        assert (metadata.uuid, metadata.chunk_id, metadata.num_chunks_from_msg, metadata.total_chunk_msg_size,
                metadata.partition_key) == (out[0][1].uuid, index, 3, len(payload), "k")


def test_encrypted_message_keeps_its_ciphertext_and_keys_both_ways() -> None:
    metadata = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, compression=pb.ZLIB,
                                  uncompressed_size=40, encryption_param=b"i" * 12, encryption_algo="")
    key = metadata.encryption_keys.add(key="app", value=b"wrapped-data-key")
    key.metadata.add(key="k", value="v")
    ciphertext = b"\x01\x02ciphertext-not-zlib"
    batch = batch_from_send(command(Type.SEND, send={"producer_id": 1, "sequence_id": 1}).send, metadata, ciphertext)
    [stored] = decode_messages(batch.payload)
    assert stored.payload == ciphertext and stored.encryption is not None
    assert stored.encryption["keys"] == [["app", b"wrapped-data-key", {"k": "v"}]]
    assert (stored.encryption["codec"], stored.encryption["size"]) == ("ZLIB", 40)
    entry = make_entry("persistent://public/default/t", 1, 0, 0, 1, "p", batch)
    out, payload = entry_message(entry)
    assert payload == ciphertext and out.encryption_param == b"i" * 12
    assert (out.compression, out.uncompressed_size, out.encryption_keys[0].key) == (pb.ZLIB, 40, "app")
    batched = pb.MessageMetadata()
    batched.CopyFrom(metadata)
    batched.num_messages_in_batch = 2
    with pytest.raises(InvalidInput, match="batching disabled"):
        batch_from_send(command(Type.SEND, send={"producer_id": 1, "sequence_id": 1}).send, batched, ciphertext)


def test_key_value_definitions_between_pulsars_binary_and_the_registrys_json() -> None:
    key, value = b'{"type":"string"}', b'{"type":"record","name":"V","fields":[{"name":"x","type":"int"}]}'
    wire = struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value
    definition = _key_value_definition(wire)
    assert definition.startswith('{"key": {"type": "string"}, "value": {"type": "record"')
    assert _key_value_definition(_key_value_wire(definition)) == definition
    assert _key_value_definition(struct.pack(">i", 0) * 2) == '{"key": "", "value": ""}'
