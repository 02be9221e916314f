"""One receive over partitions for several consumers of a subscription
(core/dispatch_partitions.py `receive_partitions_together`) against the in-memory ports: one read
of the partitions and one write of each changed cursor serve them all, with each consumer's own
subscription-type rules, acks and claims."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.acks import Acks
from magnetar.core.dispatch_partitions import ConsumerAsk, receive_partitions_together
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import InvalidInput, SubscriptionNotFound
from magnetar.core.naming import TopicName
from magnetar.core.ports import CursorWrite

PARENT = TopicName.parse("together")


def setup(n: int, consumers: list[str], sub_type: str) -> Any:
    broker = memory_broker(ManualClock())
    assert broker.metadata.create_partitioned_topic(PARENT, n)
    for c in consumers:
        for p in range(n):
            broker.subscriptions.subscribe(PARENT.partition(p), "s", c, sub_type, "Earliest")
    return broker


def append(broker: Any, partition: int, count: int, key: str | None = None) -> None:
    for _ in range(count):
        broker.writer.append(PARENT.partition(partition), Batch.of([Message(b"x", key=key)], batched=False), "p")
    broker.sealer.seal(list(broker.journal.records))


def together(broker: Any, asks: list[ConsumerAsk], partitions: int, request_id: str = "") -> dict[str, dict[int, list[int]]]:
    got = receive_partitions_together(broker.subscriptions, PARENT, list(range(partitions)), "s", asks, 0, request_id)
    return {c: {p: [d.entry.entry_id for d in r.entries] for p, r in per.items()} for c, per in got.items()}


def counting(broker: Any) -> tuple[list[int], list[list[CursorWrite]]]:
    """How many partitions each read of views asked for, and each cursor write, from here on."""
    store, reads, writes = broker.metadata, [], []
    read, write = store.get_subscription_views, store.put_cursors

    def counted_read(keys: list[tuple[TopicName, str]]) -> Any:
        reads.append(len(keys))
        return read(keys)

    def counted_write(batch: list[CursorWrite]) -> list[bool]:
        writes.append(list(batch))
        return list(write(batch))

    store.get_subscription_views, store.put_cursors = counted_read, counted_write
    return reads, writes


def test_key_shared_consumers_polling_together_get_their_own_partitions_in_one_read_and_one_write() -> None:
    consumers = ["a", "b", "c", "d"]
    broker = setup(8, consumers, "Key_Shared")
    for p in range(8):
        append(broker, p, 3, key=f"k{p}")
    reads, writes = counting(broker)
    got = together(broker, [ConsumerAsk(c, 1000) for c in consumers], 8)
    assert reads == [8] and len(writes) == 1  # one look, one transaction, for the four of them
    assert sorted(w.topic.partition_index for w in writes[0]) == list(range(8))  # each cursor once
    for c, per in got.items():  # partition i to the i mod 4-th consumer by name, all of it
        assert {p: ids for p, ids in per.items() if ids} == {p: [0, 1, 2] for p in range(8) if "abcd"[p % 4] == c}


def test_shared_consumers_polling_together_split_the_entries_and_take_turns_going_first() -> None:
    broker = setup(2, ["a", "b"], "Shared")
    firsts: dict[str, int] = defaultdict(int)
    seen: list[tuple[int, int]] = []
    for round_ in range(4):
        append(broker, 0, 2)
        append(broker, 1, 2)
        got = together(broker, [ConsumerAsk("a", 2), ConsumerAsk("b", 2)], 2, request_id=f"r{round_}")
        for c, per in got.items():
            seen += [(p, e) for p, ids in per.items() for e in ids]
            firsts[c] += sum(len(ids) for ids in per.values()) == 2
    assert sorted(seen) == [(p, e) for p in (0, 1) for e in range(8)]  # every entry once, to one of them
    assert firsts["a"] == firsts["b"] == 4  # each asked for 2 and got its 2 every round


def test_each_consumers_acks_ride_along_and_are_applied() -> None:
    broker = setup(2, ["a", "b"], "Failover")  # partition 0 to a, partition 1 to b
    append(broker, 0, 2)
    append(broker, 1, 2)
    assert together(broker, [ConsumerAsk("a", 10), ConsumerAsk("b", 10)], 2) == \
        {"a": {0: [0, 1], 1: []}, "b": {0: [], 1: [0, 1]}}
    asks = [ConsumerAsk("a", 10, {0: Acks(entries=(0, 1))}), ConsumerAsk("b", 10, {1: Acks(entries=(0,))})]
    assert together(broker, asks, 2) == {"a": {0: [], 1: []}, "b": {0: [], 1: []}}
    views = broker.metadata.get_subscription_views([(PARENT.partition(p), "s") for p in (0, 1)])
    assert [v.cursor.mark_delete for v in views] == [2, 1]


def test_a_retried_receive_together_gets_each_consumer_the_same_entries_back() -> None:
    broker = setup(2, ["a", "b"], "Shared")
    append(broker, 0, 2)
    append(broker, 1, 2)
    asks = [ConsumerAsk("a", 2), ConsumerAsk("b", 2)]
    first = together(broker, asks, 2, request_id="r1")
    assert together(broker, asks, 2, request_id="r1") == first
    assert sorted(e for per in first.values() for ids in per.values() for e in ids) == [0, 0, 1, 1]


def test_one_consumer_not_attached_refuses_the_receive_and_nothing_is_written() -> None:
    broker = setup(2, ["a"], "Shared")
    append(broker, 0, 2)
    before = broker.metadata.get_subscription_view(PARENT.partition(0), "s").cursor_version
    with pytest.raises(SubscriptionNotFound):
        together(broker, [ConsumerAsk("a", 10, {0: Acks(entries=(0,))}), ConsumerAsk("nobody", 10)], 2)
    assert broker.metadata.get_subscription_view(PARENT.partition(0), "s").cursor_version == before
    assert together(broker, [ConsumerAsk("a", 10)], 2) == {"a": {0: [0, 1], 1: []}}


def test_a_lost_race_steps_every_consumer_again_and_nothing_is_handed_out_twice() -> None:
    broker = setup(2, ["a", "b", "c"], "Shared")
    append(broker, 0, 4)
    append(broker, 1, 4)
    store = broker.metadata
    real = store.put_cursors
    raced = {"done": False}
    taken: set[tuple[int, int]] = set()

    def racing(writes: list[CursorWrite]) -> list[bool]:
        if not raced["done"]:  # consumer c claims on partition 1 between the read and the write
            raced["done"] = True
            taken.update((p, e) for p, ids in together(broker, [ConsumerAsk("c", 4)], 2)["c"].items() for e in ids)
        return list(real(writes))

    store.put_cursors = racing
    got = together(broker, [ConsumerAsk("a", 2), ConsumerAsk("b", 2)], 2)
    store.put_cursors = real
    handed = sorted((p, e) for per in got.values() for p, ids in per.items() for e in ids)
    assert len(taken) == 4 and not taken & set(handed)  # nothing c took meanwhile
    assert len(handed) == len(set(handed)) == 4  # a and b still got their 2 each, once


@pytest.mark.parametrize("asks", [[], [ConsumerAsk("a", 1), ConsumerAsk("a", 1)], [ConsumerAsk("a", 0)],
                                  [ConsumerAsk("a", 1, {5: Acks(entries=(0,))})]])
def test_bad_asks_are_invalid(asks: list[ConsumerAsk]) -> None:
    broker = setup(2, ["a"], "Shared")
    with pytest.raises(InvalidInput):
        together(broker, asks, 2)


def test_an_answer_stays_within_its_byte_budget_when_a_partition_lost_a_race() -> None:
    """Eight consumers take a whole answer's worth from one busy partition, and the cursor write
    loses a race: stepped again, the partition still hands out no more than one answer's budget
    (entries and their metadata: Lambda's response is 6 MB at most), not a budget per consumer."""
    import os

    from magnetar.core.claims import MAX_RECEIVE_BYTES, WIRE_BYTES_PER_ENTRY

    consumers = [f"c{i}" for i in range(8)]
    broker = setup(2, [*consumers, "other"], "Shared")
    for _ in range(1000):  # 10 MB on partition 0, 10 KB entries
        broker.writer.append(PARENT.partition(0), Batch.of([Message(os.urandom(1000)) for _ in range(10)]), "p")
    broker.sealer.seal(list(broker.journal.records))
    store = broker.metadata
    real = store.put_cursors
    raced = {"done": False}

    def racing(writes: list[CursorWrite]) -> list[bool]:
        if not raced["done"]:  # another consumer claims on partition 0 between the read and the write
            raced["done"] = True
            assert together(broker, [ConsumerAsk("other", 10)], 2)["other"][0]
        return list(real(writes))

    store.put_cursors = racing
    got = receive_partitions_together(broker.subscriptions, PARENT, [0, 1], "s",
                                      [ConsumerAsk(c, 1000) for c in consumers], 0, "r")
    handed = [d for per in got.values() for r in per.values() for d in r.entries]
    assert raced["done"] and len({c for c, per in got.items() if per[0].entries}) > 1  # stepped again
    assert sum(d.entry.size + WIRE_BYTES_PER_ENTRY for d in handed) <= MAX_RECEIVE_BYTES


def test_consumers_of_a_topic_that_is_not_partitioned_poll_together_in_one_read_and_one_write() -> None:
    from magnetar.core.dispatch_partitions import receive_topic_together

    broker = memory_broker(ManualClock())
    topic = TopicName.parse("plain-together")
    for c in ("a", "b"):
        broker.subscriptions.subscribe(topic, "s", c, "Shared", "Earliest")
    for _ in range(6):
        broker.writer.append(topic, Batch.of([Message(b"x")], batched=False), "p")
    broker.sealer.seal(list(broker.journal.records))
    reads, writes = counting(broker)
    got = receive_topic_together(broker.subscriptions, topic, "s", [ConsumerAsk("a", 3), ConsumerAsk("b", 3)], 0, "")
    ids = {c: [d.entry.entry_id for d in r.entries] for c, r in got.items()}
    assert sorted(ids["a"] + ids["b"]) == list(range(6)) and len(ids["a"]) == len(ids["b"]) == 3
    assert reads == [1] and [len(w) for w in writes] == [1], "one read, one cursor write for both"
    acks = {-1: Acks(entries=tuple(ids["b"]), consumer="b")}
    receive_topic_together(broker.subscriptions, topic, "s", [ConsumerAsk("a", 1), ConsumerAsk("b", 1, acks)], 0, "")
    cursor = broker.metadata.get_subscription_view(topic, "s").cursor
    assert cursor is not None and cursor.unacked() == 3, "b's three acknowledged: only a's are out"
