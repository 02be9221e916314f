"""The SDK producer's request assembly: batches that queued while a request was in flight are
joined again up to the batching limits (a low rate per partition closes a batch by its delay
after a message or two), with key-based batching into entries of one key each, ordered by their
highest sequence ids."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from magnetar.client.producer import Producer
from magnetar.client.producer_entries import Pending, requests_of
from magnetar.client.transport import Transport
from magnetar.client.types import BatchingType
from magnetar.core.entry import Message
from magnetar.core.naming import TopicName


@pytest.fixture
def transport() -> Transport:
    return Transport("http://127.0.0.1:9")  # never called: no request is sent here


def producer(transport: Transport, **kwargs: object) -> Producer:
    # its sender thread idles (a daemon): these tests call the assembly directly
    return Producer(transport, TopicName.parse("persistent://public/default/entries"), None,
                    **kwargs)  # type: ignore[arg-type]


def queued(keys: list[str | None], size: int = 1000) -> list[list[Pending]]:
    """One one-message batch per key: what the delay left while a request was in flight."""
    return [[Pending(Message(b"x" * size, key), size, Future(), None, seq)] for seq, key in enumerate(keys)]


def test_one_message_batches_are_joined_up_to_the_batching_limit(transport: Transport) -> None:
    p = producer(transport, batching_max_messages=100)
    entries = p._entries(queued([None] * 250))
    assert [len(e) for e in entries] == [100, 100, 50]
    assert [m.sequence_id for e in entries for m in e] == list(range(250)), "order kept"


def test_joined_batches_keep_the_byte_limit(transport: Transport) -> None:
    p = producer(transport, batching_max_messages=1000, batching_max_allowed_size_in_bytes=10_000)
    assert [len(e) for e in p._entries(queued([None] * 25, size=1000))] == [10, 10, 5]


def test_key_based_batches_become_one_entry_per_key_ordered_by_highest_sequence_id(transport: Transport) -> None:
    p = producer(transport, batching_max_messages=100, batching_type=BatchingType.KeyBased)
    keys: list[str | None] = [f"k{i % 4}" for i in range(200)]
    entries = p._entries(queued(keys))
    assert len(entries) == 4 and all(len({m.message.key for m in e}) == 1 and len(e) == 50 for e in entries)
    highest = [e[-1].sequence_id for e in entries]
    assert highest == sorted(highest) == [196, 197, 198, 199]
    assert all([m.sequence_id for m in e] == sorted(m.sequence_id for m in e) for e in entries)
    # a request of 200 one-message entries (before joining) against 4: the request size cut counts entries
    assert len(requests_of(entries)) == 1 and len(requests_of([[m] for e in entries for m in e])) == 2


def test_without_batching_every_message_stays_its_own_entry(transport: Transport) -> None:
    p = producer(transport, batching_enabled=False)
    assert [len(e) for e in p._entries(queued([None] * 5))] == [1] * 5


def test_batches_of_different_replication_settings_are_never_joined(transport: Transport) -> None:
    p = producer(transport, batching_max_messages=100)
    settings: list[tuple[str, ...] | None] = [None, None, ("a", "b"), ("a", "b"), (), None]
    batches = [[Pending(Message(b"x"), 1, Future(), None, seq, replicate_to=rt)] for seq, rt in enumerate(settings)]
    entries = p._entries(batches)
    assert [[m.sequence_id for m in e] for e in entries] == [[0, 1], [2, 3], [4], [5]]
    assert [p._encode(e).get("replicationClusters") for e in entries] == [None, ["a", "b"], [], None]


def test_key_based_entries_keep_their_replication_setting_apart(transport: Transport) -> None:
    p = producer(transport, batching_type=BatchingType.KeyBased)
    settings: list[tuple[str, ...] | None] = [None, ("a",), None, ("a",)]
    batches = [[Pending(Message(b"x", "k"), 1, Future(), None, seq, replicate_to=rt)]
               for seq, rt in enumerate(settings)]
    entries = p._entries(batches)
    assert all(len({m.replicate_to for m in e}) == 1 for e in entries)
    assert sorted(m.sequence_id for e in entries for m in e) == [0, 1, 2, 3]
