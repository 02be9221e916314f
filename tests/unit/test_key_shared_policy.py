"""Key_Shared policies (core/cursor.py KeySharedPolicy) against the in-memory ports: Sticky hash
ranges, keys no consumer covers waiting, refused overlaps and mixed modes, out-of-order delivery."""

from __future__ import annotations

from typing import Any

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.acks import Acks
from magnetar.core.cursor import CursorState
from magnetar.core.dispatch import DEFAULT_LEASE_MS
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import ConsumerAssignError, ConsumerBusy
from magnetar.core.key_shared import AUTO_SPLIT, HASH_RANGE, KeySharedPolicy, key_hash
from magnetar.core.naming import TopicName

TOPIC = TopicName.parse("ks-policy")
LOW, HIGH = ((0, HASH_RANGE // 2 - 1),), ((HASH_RANGE // 2, HASH_RANGE - 1),)


def keys_in(lo: int, hi: int, count: int) -> list[str]:
    out = [k for k in (f"key-{i}" for i in range(1000)) if lo <= key_hash(k) <= hi]
    return out[:count]


LOW_KEYS, HIGH_KEYS = keys_in(*LOW[0], 3), keys_in(*HIGH[0], 3)


def broker() -> tuple[Any, ManualClock]:
    clock = ManualClock()
    return memory_broker(clock), clock


def subscribe(b: Any, consumer: str, ranges: tuple[tuple[int, int], ...] | None = None,
              out_of_order: bool = False) -> None:
    b.subscriptions.subscribe(TOPIC, "s", consumer, "Key_Shared", "Earliest",
                              key_shared=KeySharedPolicy(ranges, out_of_order))


def publish(b: Any, keys: list[str]) -> None:
    for key in keys:
        b.writer.append(TOPIC, Batch.of([Message(b"x", key=key)], batched=False), "p")
    b.sealer.seal(list(b.journal.records))


def keys_received(b: Any, consumer: str, acks: Acks | None = None) -> list[str]:
    got = b.subscriptions.receive(TOPIC, "s", consumer, 100, acks=acks or Acks())
    return [d.entry.key for d in got.entries]


def test_sticky_consumers_get_exactly_the_keys_in_their_ranges() -> None:
    b, _ = broker()
    subscribe(b, "low", LOW)
    subscribe(b, "high", HIGH)
    publish(b, LOW_KEYS + HIGH_KEYS)
    assert sorted(keys_received(b, "high")) == sorted(HIGH_KEYS)
    assert sorted(keys_received(b, "low")) == sorted(LOW_KEYS)


def test_keys_no_consumer_covers_wait_for_one_that_does() -> None:
    b, _ = broker()
    subscribe(b, "low", LOW)
    publish(b, HIGH_KEYS + LOW_KEYS)
    assert sorted(keys_received(b, "low")) == sorted(LOW_KEYS)
    assert keys_received(b, "low") == []  # the high keys wait, they do not fall to "low"
    subscribe(b, "high", HIGH)
    assert sorted(keys_received(b, "high")) == sorted(HIGH_KEYS)


def test_overlapping_ranges_are_refused_until_the_other_consumer_is_gone() -> None:
    b, clock = broker()
    subscribe(b, "a", ((0, 100), (200, 300)))
    with pytest.raises(ConsumerAssignError, match="Range conflict with consumer a"):
        subscribe(b, "b", ((300, 400),))  # inclusive ends: 300 is a's
    subscribe(b, "b", ((301, 400), (101, 199)))  # the gaps are free
    subscribe(b, "a", ((0, 100), (200, 300)))  # a consumer renewing its own ranges is no conflict
    b.subscriptions.close_consumer(TOPIC, "s", "a")
    subscribe(b, "c", ((0, 100),))  # a's ranges are free once a closed
    clock.advance(DEFAULT_LEASE_MS + 1)  # b and c lapse: their ranges are free again
    subscribe(b, "d", ((0, HASH_RANGE - 1),))


@pytest.mark.parametrize("ranges, reason", [
    ((), "must not be empty"),
    (((10, 5),), "start > end"),
    (((0, HASH_RANGE),), "outside"),
    (((-1, 5),), "outside"),
    (((0, 10), (10, 20)), "must not overlap"),
])
def test_invalid_ranges_are_refused(ranges: tuple[tuple[int, int], ...], reason: str) -> None:
    b, _ = broker()
    with pytest.raises(ConsumerAssignError, match=reason):
        subscribe(b, "a", ranges)


def test_sticky_and_auto_split_consumers_do_not_mix() -> None:
    b, _ = broker()
    subscribe(b, "sticky", LOW)
    with pytest.raises(ConsumerBusy, match="different type"):
        subscribe(b, "auto")
    b2, _ = broker()
    subscribe(b2, "auto")
    with pytest.raises(ConsumerBusy, match="different type"):
        subscribe(b2, "sticky", LOW)
    with pytest.raises(ConsumerBusy, match="allowOutOfOrderDelivery"):
        subscribe(b2, "ooo", out_of_order=True)


def test_the_policy_survives_persistence_and_lease_renewal() -> None:
    b, clock = broker()
    subscribe(b, "low", LOW, out_of_order=True)
    clock.advance(DEFAULT_LEASE_MS * 2 // 3)  # the next receive renews the lease
    publish(b, HIGH_KEYS + LOW_KEYS)
    assert sorted(keys_received(b, "low")) == sorted(LOW_KEYS)
    state = b.metadata.get_subscription_views([(TOPIC, "s")])[0].cursor
    assert state.consumers["low"].key_shared == KeySharedPolicy(LOW, True)
    assert state.consumers["low"].expires_at > clock.now_ms() + DEFAULT_LEASE_MS // 2
    again = CursorState.from_dict(state.to_dict())
    assert again.consumers["low"].key_shared == KeySharedPolicy(LOW, True)
    plain = CursorState("Key_Shared", 0, 0)
    plain.attach("x", "Key_Shared", 0, 1000, 0)
    assert plain.to_dict()["c"]["x"] == [1000, 0, 0]  # AutoSplit leases stay as small as before
    assert CursorState.from_dict(plain.to_dict()).consumers["x"].key_shared == AUTO_SPLIT


def test_policy_is_ignored_on_other_subscription_types() -> None:
    b, _ = broker()
    b.subscriptions.subscribe(TOPIC, "sh", "a", "Shared", "Earliest", key_shared=KeySharedPolicy(LOW))
    b.subscriptions.subscribe(TOPIC, "sh", "b", "Shared", "Earliest", key_shared=KeySharedPolicy(LOW))
    state = b.metadata.get_subscription_views([(TOPIC, "sh")])[0].cursor
    assert state.consumers["a"].key_shared == AUTO_SPLIT


def moved_key(first: str, second: str) -> str:
    """A key that AutoSplit gives to `second` once it joins `first` (consumers sorted by name)."""
    state = CursorState("Key_Shared", 0, 0)
    state.attach(first, "Key_Shared", 0, 1000, 0)
    state.attach(second, "Key_Shared", 0, 1000, 0)
    return next(k for k in (f"key-{i}" for i in range(1000)) if state.key_owner(key_hash(k), 1) == second)


@pytest.mark.parametrize("out_of_order", [False, True])
def test_out_of_order_delivery_lets_a_key_move_without_draining(out_of_order: bool) -> None:
    b, _ = broker()
    key = moved_key("a", "b")
    subscribe(b, "a", out_of_order=out_of_order)
    publish(b, [key])
    assert keys_received(b, "a") == [key]  # held by "a", unacknowledged
    subscribe(b, "b", out_of_order=out_of_order)
    publish(b, [key])
    if out_of_order:
        assert keys_received(b, "b") == [key]  # moves at once
    else:
        assert keys_received(b, "b") == []  # waits until "a" acknowledges (draining hash)
        keys_received(b, "a", Acks(entries=(0,)))
        assert keys_received(b, "b") == [key]
