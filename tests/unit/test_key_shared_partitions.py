"""Key_Shared on a partitioned topic (core/cursor.py `partition_owner`, core/dispatch.py `claim`)
against the in-memory ports: with at least as many partitions as consumers (AutoSplit), each
partition's keys all go to one consumer, partition i to the i mod n-th live consumer sorted by
name; only that consumer admits into and writes the partition's cursor. With more consumers than
partitions, on a non-partitioned topic, or with Sticky ranges, keys are split by their hash."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.acks import Acks
from magnetar.core.claims import PARTITION_COUNT_TTL_MS
from magnetar.core.cursor import CursorState
from magnetar.core.dispatch_partitions import receive_partitions
from magnetar.core.entry import Batch, Message
from magnetar.core.key_shared import HASH_RANGE, KeySharedPolicy, key_hash
from magnetar.core.naming import TopicName
from magnetar.core.ports import CursorWrite

PARENT = TopicName.parse("ks-parted")
KEYS = [f"key-{i}" for i in range(16)]


def setup(partitions: int, consumers: list[str], sub_type: str = "Key_Shared",
          partitioned: bool = True) -> tuple[Any, ManualClock]:
    clock = ManualClock()
    broker = memory_broker(clock)
    if partitioned:
        assert broker.metadata.create_partitioned_topic(PARENT, partitions)
    for c in consumers:
        for p in range(partitions):
            broker.subscriptions.subscribe(PARENT.partition(p), "s", c, sub_type, "Earliest")
    return broker, clock


def append(broker: Any, partition: int, keys: list[str]) -> None:
    for key in keys:
        broker.writer.append(PARENT.partition(partition), Batch.of([Message(key.encode(), key=key)], batched=False),
                             "p")
    broker.sealer.seal(list(broker.journal.records))


def receive_all(broker: Any, consumer: str, partitions: int, acks: dict[int, Acks] | None = None,
                max_messages: int = 1000) -> dict[int, list[tuple[int, str]]]:
    got = receive_partitions(broker.subscriptions, PARENT, list(range(partitions)), "s", consumer, max_messages, 0,
                             "", acks or {})
    return {p: [(d.entry.entry_id, d.entry.key or "") for d in r.entries] for p, r in got.items()}


def receive_one(broker: Any, partition: int, consumer: str, max_messages: int = 100,
                acks: Any = None) -> list[tuple[int, str]]:
    got = broker.subscriptions.receive(PARENT.partition(partition), "s", consumer, max_messages,
                                       acks=acks or Acks())
    return [(d.entry.entry_id, d.entry.key or "") for d in got.entries]


def cursor(broker: Any, partition: int) -> tuple[CursorState, int]:
    view = broker.metadata.get_subscription_view(PARENT.partition(partition), "s")
    return view.cursor, view.cursor_version


def count_writes(broker: Any) -> list[CursorWrite]:
    """Every cursor write from here on, single or transactional."""
    written: list[CursorWrite] = []
    store = broker.metadata
    put_cursor = store.put_cursor

    def one(topic: TopicName, subscription: str, state: CursorState, expected: int) -> bool:
        written.append(CursorWrite(topic, subscription, state, expected))
        return bool(put_cursor(topic, subscription, state, expected))

    def many(writes: list[CursorWrite]) -> list[bool]:
        written.extend(writes)
        return [bool(put_cursor(w.topic, w.subscription, w.state, w.expected_version)) for w in writes]

    store.put_cursor, store.put_cursors = one, many
    return written


# --- the assignment ------------------------------------------------------------------------------
def test_each_partition_goes_to_one_consumer_the_i_mod_n_th_by_name() -> None:
    consumers = ["d", "b", "a", "c"]  # subscribed out of order: the rule sorts them by name
    broker, _ = setup(8, consumers)
    for p in range(8):
        append(broker, p, KEYS)
    owners: dict[int, set[str]] = defaultdict(set)
    for c in consumers:
        for p, entries in receive_all(broker, c, 8).items():
            if entries:
                owners[p].add(c)
                assert [e for e, _ in entries] == list(range(len(KEYS)))  # the whole partition, in order
    assert dict(owners) == {p: {"abcd"[p % 4]} for p in range(8)}
    state, _ = cursor(broker, 5)
    now = broker.clock.now_ms()
    assert state.partition_owner(now, 5, 8) == "b"
    assert {state.key_owner(h, now, 5, 8) for h in range(0, HASH_RANGE, 97)} == {"b"}


def test_fewer_partitions_than_consumers_split_keys_by_hash() -> None:
    broker, _ = setup(2, ["a", "b", "c"])
    append(broker, 0, KEYS)
    state, _ = cursor(broker, 0)
    now = broker.clock.now_ms()
    assert state.partition_owner(now, 0, 2) is None
    split = {k: ["a", "b", "c"][key_hash(k) * 3 // HASH_RANGE] for k in KEYS}
    assert {state.key_owner(key_hash(k), now, 0, 2) for k in KEYS} == set(split.values()) == {"a", "b", "c"}
    got = {c: receive_one(broker, 0, c) for c in ("a", "b", "c")}
    assert {k: c for c, entries in got.items() for _, k in entries} == split


def test_a_non_partitioned_topic_or_sticky_ranges_keep_the_hash_split() -> None:
    state = CursorState("Key_Shared", 0, 0)
    for c in ("a", "b"):
        state.attach(c, "Key_Shared", 0, 1000, 0)
    assert state.partition_owner(1, -1, 0) is None
    assert state.key_owner(0, 1, 3, 8) == state.key_owner(HASH_RANGE - 1, 1, 3, 8) == "b"  # partition 3 of 8 -> b
    assert state.key_owner(0, 1) == "a" and state.key_owner(HASH_RANGE - 1, 1) == "b"  # no partition: the split
    sticky = CursorState("Key_Shared", 0, 0)
    sticky.attach("a", "Key_Shared", 0, 1000, 0, KeySharedPolicy(((0, 99),)))
    sticky.attach("b", "Key_Shared", 0, 1000, 0, KeySharedPolicy(((100, HASH_RANGE - 1),)))
    assert sticky.partition_owner(1, 3, 8) is None
    assert sticky.key_owner(50, 1, 3, 8) == "a" and sticky.key_owner(500, 1, 3, 8) == "b"
    shared = CursorState("Shared", 0, 0)
    shared.attach("a", "Shared", 0, 1000, 0)
    assert shared.partition_owner(1, 0, 8) is None


def test_a_partition_of_a_topic_that_is_not_partitioned_keeps_the_hash_split() -> None:
    broker, _ = setup(1, ["a", "b"], partitioned=False)  # "ks-parted-partition-0" is a plain topic here
    append(broker, 0, KEYS)
    got = {c: receive_one(broker, 0, c) for c in ("a", "b")}
    assert all(got.values())  # both get keys: split by hash


# --- who writes ----------------------------------------------------------------------------------
def test_a_non_owner_neither_admits_nor_writes() -> None:
    broker, _ = setup(8, ["a", "b", "c", "d"])
    append(broker, 1, KEYS)  # partition 1 -> "b"
    before, version = cursor(broker, 1)
    writes = count_writes(broker)
    for c in ("a", "c", "d"):
        assert receive_one(broker, 1, c) == []
        assert receive_all(broker, c, 8) == {p: [] for p in range(8)}
    assert writes == []
    after, again = cursor(broker, 1)
    assert again == version and after.read_position == before.read_position == 0  # nothing admitted
    assert [e for e, _ in receive_one(broker, 1, "b")] == list(range(len(KEYS)))
    assert len(writes) == 1


def test_one_multi_partition_receive_writes_only_the_consumers_own_partitions() -> None:
    broker, _ = setup(8, ["a", "b", "c", "d"])
    for p in range(8):
        append(broker, p, KEYS[:4])
    writes = count_writes(broker)
    got = receive_all(broker, "c", 8)
    assert {p for p, entries in got.items() if entries} == {2, 6}
    assert sorted(w.topic.partition_index for w in writes) == [2, 6]


def test_a_non_owner_still_writes_its_acks() -> None:
    broker, _ = setup(4, ["b", "c"])
    append(broker, 0, ["k"])  # partition 0 -> "b" while "b" and "c" are attached
    assert receive_one(broker, 0, "b") == [(0, "k")]
    broker.subscriptions.subscribe(PARENT.partition(0), "s", "a", "Key_Shared", "Earliest")  # partition 0 -> "a"
    assert receive_one(broker, 0, "b", acks=Acks(entries=(0,))) == []
    state, _ = cursor(broker, 0)
    assert state.mark_delete == 1 and state.unacked() == 0


def test_the_partition_count_is_read_for_key_shared_partitions_only_and_cached() -> None:
    reads: list[TopicName] = []
    for sub_type in ("Shared", "Failover", "Key_Shared"):
        broker, clock = setup(4, ["a", "b"], sub_type)
        for p in range(4):
            append(broker, p, KEYS[:2])
        real = broker.metadata.get_partitions

        def counting(topic: TopicName, real: Any = real) -> int | None:
            reads.append(topic)
            return real(topic)  # type: ignore[no-any-return]

        broker.metadata.get_partitions = counting
        for _ in range(3):
            receive_all(broker, "a", 4)
            receive_one(broker, 1, "b")
        if sub_type != "Key_Shared":
            assert reads == [], sub_type
    assert reads == [PARENT]  # once for all the partitions and receives
    clock.advance(PARTITION_COUNT_TTL_MS - 10_000)
    receive_one(broker, 1, "b")  # (renews "b"'s lease) the cached count still serves
    assert reads == [PARENT]
    clock.advance(10_000)
    receive_one(broker, 1, "b")
    assert reads == [PARENT, PARENT]


# --- ownership moves ------------------------------------------------------------------------------
def test_when_a_consumer_leaves_a_moved_partitions_keys_wait_for_the_old_owners_acks() -> None:
    broker, _ = setup(4, ["a", "b", "c"])  # 0 -> a, 1 -> b, 2 -> c, 3 -> a
    append(broker, 3, ["k", "k"])
    append(broker, 2, ["m", "m"])
    assert receive_one(broker, 3, "a", max_messages=1) == [(0, "k")]  # held by "a", unacknowledged
    assert receive_one(broker, 2, "c", max_messages=1) == [(0, "m")]
    for p in range(4):
        broker.subscriptions.close_consumer(PARENT.partition(p), "s", "c")  # now 0 -> a, 1 -> b, 2 -> a, 3 -> b
    append(broker, 3, ["j", "k"])  # entries 2 and 3
    assert receive_one(broker, 3, "b") == [(2, "j")]  # "k" waits: "a" still holds entry 0 of it
    assert receive_one(broker, 3, "a") == []  # "a" no longer owns partition 3
    assert receive_one(broker, 2, "a") == [(0, "m"), (1, "m")]  # "c"'s released entries, in order
    assert receive_one(broker, 3, "a", acks=Acks(entries=(0,))) == []
    assert receive_one(broker, 3, "b") == [(1, "k"), (3, "k")]  # in order once "a" acknowledged


def test_a_joining_consumer_takes_a_partition_and_the_held_keys_drain_first() -> None:
    broker, _ = setup(4, ["b", "c"])  # 0 -> b, 1 -> c, 2 -> b, 3 -> c
    append(broker, 0, ["k", "k"])
    assert receive_one(broker, 0, "b", max_messages=1) == [(0, "k")]
    for p in range(4):  # "a" joins: 0 -> a, 1 -> b, 2 -> c, 3 -> a
        broker.subscriptions.subscribe(PARENT.partition(p), "s", "a", "Key_Shared", "Earliest")
    append(broker, 0, ["j"])
    assert receive_one(broker, 0, "a") == [(2, "j")]  # "k" waits for "b"'s ack
    assert receive_one(broker, 0, "b", acks=Acks(entries=(0,))) == []  # "b" keeps nothing of partition 0
    assert receive_one(broker, 0, "a") == [(1, "k")]


def test_a_fifth_consumer_on_four_partitions_falls_back_to_the_hash_split_in_order() -> None:
    broker, _ = setup(4, ["a", "b", "c", "d"])
    append(broker, 0, KEYS + KEYS)  # key-i at entries i and 16 + i
    assert [e for e, _ in receive_one(broker, 0, "a", max_messages=4)] == [0, 1, 2, 3]  # held by "a"
    broker.subscriptions.subscribe(PARENT.partition(0), "s", "e", "Key_Shared", "Earliest")  # 5 > 4: split
    state, _ = cursor(broker, 0)
    assert state.partition_owner(broker.clock.now_ms(), 0, 4) is None
    held = set(KEYS[:4])
    order: list[tuple[str, int, str]] = [("a", e, KEYS[e]) for e in range(4)]
    for round_ in range(2):
        for c in "abcde":
            mine = [e for who, e, _ in order if who == c]
            got = receive_one(broker, 0, c, acks=Acks(entries=tuple(mine)) if round_ else None)
            order.extend((c, e, k) for e, k in got)
            if round_ == 0:  # a key "a" holds goes to no one else until "a" acknowledges it
                assert all(k not in held for e, k in got if c != "a"), (c, got)
    assert sorted(e for _, e, _ in order) == list(range(32))  # each entry once
    by_key: dict[str, list[int]] = defaultdict(list)
    for _, e, k in order:
        by_key[k].append(e)
    assert all(entries == sorted(entries) for entries in by_key.values()), by_key
    assert len({who for who, _, _ in order}) > 1


# --- stats ------------------------------------------------------------------------------------------
def test_stats_report_the_partition_owner_with_the_whole_hash_range() -> None:
    broker, _ = setup(4, ["a", "b"])
    for p in range(4):
        append(broker, p, KEYS[:1])
    total = broker.stats.partitioned_stats(PARENT)
    for p in range(4):
        subscription = total["partitions"][str(PARENT.partition(p))]["subscriptions"]["s"]
        ranges = {c["consumerName"]: c["keyHashRanges"] for c in subscription["consumers"]}
        assert ranges == {"ab"[p % 2]: [f"[0, {HASH_RANGE - 1}]"], "ab"[1 - p % 2]: []}, (p, ranges)
    single = broker.stats.topic_stats(PARENT.partition(1))["subscriptions"]["s"]
    assert {c["consumerName"]: c["keyHashRanges"] for c in single["consumers"]} == {"a": [], "b": ["[0, 65535]"]}


def test_stats_of_more_consumers_than_partitions_report_the_hash_split() -> None:
    broker, _ = setup(2, ["a", "b", "c"])
    append(broker, 0, KEYS[:1])
    single = broker.stats.topic_stats(PARENT.partition(0))["subscriptions"]["s"]
    assert [c["keyHashRanges"] for c in single["consumers"]] == [["[0, 21845]"], ["[21846, 43690]"],
                                                                  ["[43691, 65535]"]]
