"""The multi-partition receive (core/dispatch_partitions.py) against the in-memory ports."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.acks import Acks
from magnetar.core.dispatch_partitions import acknowledge_partitions, receive_partitions
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import InvalidInput, NotAllowed, SubscriptionNotFound
from magnetar.core.naming import TopicName
from magnetar.core.ports import CursorWrite

PARENT = TopicName.parse("parted")


def setup(n: int, consumers: list[str], sub_type: str = "Shared") -> tuple[Any, ManualClock]:
    clock = ManualClock()
    broker = memory_broker(clock)
    for p in range(n):
        for c in consumers:
            broker.subscriptions.subscribe(PARENT.partition(p), "s", c, sub_type, "Earliest")
    return broker, clock


def append(broker: Any, partition: int, count: int, key: str | None = None) -> None:
    for _ in range(count):
        broker.writer.append(PARENT.partition(partition), Batch.of([Message(b"x", key=key)], batched=False), "p")
    broker.sealer.seal(list(broker.journal.records))


def receive(broker: Any, consumer: str, partitions: list[int], **kw: Any) -> dict[int, list[int]]:
    got = receive_partitions(broker.subscriptions, PARENT, partitions, "s", consumer, kw.pop("max_messages", 100),
                             kw.pop("wait_ms", 0), kw.pop("request_id", ""), kw.pop("acks", {}), **kw)
    return {p: [d.entry.entry_id for d in r.entries] for p, r in got.items()}


def test_every_partition_is_served_and_each_partition_keeps_its_own_cursor() -> None:
    broker, _ = setup(3, ["c"])
    for p in range(3):
        append(broker, p, p + 1)
    assert receive(broker, "c", [0, 1, 2]) == {0: [0], 1: [0, 1], 2: [0, 1, 2]}
    assert receive(broker, "c", [0, 1, 2]) == {0: [], 1: [], 2: []}  # handed out, not twice


def test_max_messages_is_shared_fairly_and_leftovers_go_to_the_busy_partitions() -> None:
    broker, _ = setup(4, ["c"])
    append(broker, 0, 50)
    for p in (1, 2, 3):
        append(broker, p, 2)
    got = receive(broker, "c", [0, 1, 2, 3], max_messages=8)
    assert {p: len(v) for p, v in got.items()} == {0: 2, 1: 2, 2: 2, 3: 2}
    got = receive(broker, "c", [0, 1, 2, 3], max_messages=20)
    assert len(got[0]) == 20  # the quiet partitions are empty: the busy one takes all


def test_entries_larger_than_a_partitions_share_do_not_cut_the_receive_short() -> None:
    """Entries of 20 messages, a share of 30 per partition: the first pass takes one entry from
    each (a second would pass the share), the second pass fills the ask from the busy ones."""
    broker, _ = setup(2, ["c"])
    for p in (0, 1):
        for _ in range(3):
            broker.writer.append(PARENT.partition(p), Batch.of([Message(b"x")] * 20), "p")
    broker.sealer.seal(list(broker.journal.records))
    got = receive_partitions(broker.subscriptions, PARENT, [0, 1], "s", "c", 60, 0, "", {})
    assert sum(d.entry.num_messages for r in got.values() for d in r.entries) == 60


def test_small_asks_rotate_so_no_partition_starves() -> None:
    broker, _ = setup(4, ["c"])
    for p in range(4):
        append(broker, p, 10)
    served: dict[int, int] = defaultdict(int)
    for _ in range(12):
        for p, entries in receive(broker, "c", [0, 1, 2, 3], max_messages=1).items():
            served[p] += len(entries)
    assert sum(served.values()) == 12 and all(served[p] >= 1 for p in range(4)), served


def test_acks_by_partition_ride_along_and_nacks_redeliver() -> None:
    broker, _ = setup(2, ["c"])
    append(broker, 0, 2)
    append(broker, 1, 2)
    assert receive(broker, "c", [0, 1]) == {0: [0, 1], 1: [0, 1]}
    acks = {0: Acks(entries=(0, 1)), 1: Acks(entries=(0,), nacks=(1,), consumer="c")}
    assert receive(broker, "c", [0, 1], acks=acks) == {0: [], 1: [1]}
    views = broker.metadata.get_subscription_views([(PARENT.partition(0), "s"), (PARENT.partition(1), "s")])
    assert [v.cursor.mark_delete for v in views] == [2, 1]


def test_a_retried_request_gets_the_same_entries_back() -> None:
    broker, _ = setup(2, ["c"])
    append(broker, 0, 1)
    append(broker, 1, 1)
    first = receive(broker, "c", [0, 1], request_id="r1")
    assert receive(broker, "c", [0, 1], request_id="r1") == first == {0: [0], 1: [0]}


def test_key_shared_keys_stay_with_one_consumer_across_partitions() -> None:
    broker, _ = setup(2, ["a", "b"], "Key_Shared")
    for k in range(8):
        append(broker, k % 2, 3, key=f"k{k}")
    owners: dict[tuple[int, int], str] = {}
    for c in ("a", "b"):
        got = receive_partitions(broker.subscriptions, PARENT, [0, 1], "s", c, 100, 0, "", {})
        for p, r in got.items():
            for d in r.entries:
                owners[(p, d.entry.entry_id)] = c
    assert len(owners) == 24
    by_key: dict[tuple[int, int], set[str]] = defaultdict(set)
    for (p, e), c in owners.items():
        by_key[(p, (e // 3))].add(c)
    assert all(len(v) == 1 for v in by_key.values())


def test_failover_partition_goes_to_its_active_consumer_only() -> None:
    broker, _ = setup(2, ["a", "b"], "Failover")
    append(broker, 0, 1)
    append(broker, 1, 1)
    assert receive(broker, "a", [0, 1]) == {0: [0], 1: []}
    assert receive(broker, "b", [0, 1]) == {0: [], 1: [0]}


def test_a_refused_request_writes_nothing() -> None:
    broker, _ = setup(2, ["c"])
    append(broker, 0, 1)
    with pytest.raises(NotAllowed):  # a cumulative ack on Shared, on partition 1
        receive(broker, "c", [0, 1], acks={1: Acks(cumulative=(0, 0, -1))})
    with pytest.raises(SubscriptionNotFound):
        receive(broker, "nobody", [0, 1])
    assert receive(broker, "c", [0, 1]) == {0: [0], 1: []}  # partition 0 handed out nothing meanwhile


def test_bad_partition_lists_are_invalid() -> None:
    broker, _ = setup(1, ["c"])
    for partitions in ([], [0, 0], [-1]):
        with pytest.raises(InvalidInput):
            receive(broker, "c", partitions)
    with pytest.raises(InvalidInput):
        receive_partitions(broker.subscriptions, PARENT.partition(0), [0], "s", "c", 1, 0, "", {})
    with pytest.raises(InvalidInput):
        receive(broker, "c", [0], acks={3: Acks(entries=(0,))})


def test_a_partition_that_loses_a_race_is_stepped_again_alone_and_nothing_is_handed_out_twice() -> None:
    broker, _ = setup(2, ["a", "b"])
    append(broker, 0, 4)
    append(broker, 1, 4)
    store = broker.metadata
    real = store.put_cursors
    raced = {"done": False}

    def racing(writes: list[CursorWrite]) -> list[bool]:
        if not raced["done"]:  # another consumer claims on partition 1 between our read and write
            raced["done"] = True
            receive(broker, "b", [1], max_messages=2)
        return list(real(writes))

    store.put_cursors = racing
    got_a = receive(broker, "a", [0, 1], max_messages=8)
    store.put_cursors = real
    got_b = receive(broker, "b", [0, 1], max_messages=8)
    assert got_a[0] == [0, 1, 2, 3] and got_a[1] == [2, 3]  # partition 1 again: what b left
    assert got_b == {0: [], 1: []}


def test_long_poll_returns_when_any_partition_gets_messages() -> None:
    broker, clock = setup(3, ["c"])
    original_sleep = clock.sleep

    def sleep_and_publish(seconds: float) -> None:
        original_sleep(seconds)
        if not broker.journal.records:
            append(broker, 2, 1)

    clock.sleep = sleep_and_publish  # type: ignore[method-assign]
    assert receive(broker, "c", [0, 1, 2], wait_ms=10_000) == {0: [], 1: [], 2: [0]}


def test_min_messages_waits_for_enough_across_partitions() -> None:
    broker, clock = setup(2, ["c"])
    append(broker, 0, 1)
    original_sleep = clock.sleep
    looks = {"n": 0}

    def sleep_and_publish(seconds: float) -> None:
        original_sleep(seconds)
        looks["n"] += 1
        if looks["n"] == 2:
            append(broker, 1, 2)

    clock.sleep = sleep_and_publish  # type: ignore[method-assign]
    assert receive(broker, "c", [0, 1], wait_ms=10_000, min_messages=3) == {0: [0], 1: [0, 1]}


def test_acknowledge_partitions_applies_each_partitions_acks_in_one_step() -> None:
    broker, _ = setup(2, ["c"])
    append(broker, 0, 2)
    append(broker, 1, 2)
    receive(broker, "c", [0, 1])
    epochs = acknowledge_partitions(broker.subscriptions, PARENT, "s", {0: Acks(entries=(0, 1)), 1: Acks(entries=(1,))})
    assert epochs == {0: 0, 1: 0}
    views = broker.metadata.get_subscription_views([(PARENT.partition(0), "s"), (PARENT.partition(1), "s")])
    assert [v.cursor.mark_delete for v in views] == [2, 0]
    assert [v.cursor.acked for v in views] == [[], [[1, 2]]]
