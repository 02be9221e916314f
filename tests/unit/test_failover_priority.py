"""Failover consumers' priority levels (Pulsar's priorityLevel, 0 the highest) against the in-memory
ports: the active consumers are those of the highest level attached, sorted by name, partition i
going to the i mod n-th; a lower level takes over when they are gone; levels survive the item."""

from __future__ import annotations

from typing import Any

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.cursor import CursorState
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import InvalidInput
from magnetar.core.naming import TopicName

TOPIC = TopicName.parse("failover-priority")


def broker() -> tuple[Any, ManualClock]:
    clock = ManualClock()
    return memory_broker(clock), clock


def subscribe(b: Any, consumer: str, level: int, topic: TopicName = TOPIC) -> CursorState:
    state: CursorState = b.subscriptions.subscribe(topic, "s", consumer, "Failover", "Earliest", priority_level=level)
    return state


def test_the_highest_level_is_active_whatever_the_names() -> None:
    b, _ = broker()
    b.writer.append(TOPIC, Batch.of([Message(b"x")], batched=False), "p")
    b.sealer.seal(list(b.journal.records))
    subscribe(b, "a-standby", 1)
    state = subscribe(b, "z-primary", 0)
    assert state.active_consumer(0, -1) == "z-primary"  # by name alone "a-standby" would be
    assert b.subscriptions.receive(TOPIC, "s", "a-standby", 10).entries == []
    assert len(b.subscriptions.receive(TOPIC, "s", "z-primary", 10).entries) == 1
    b.subscriptions.close_consumer(TOPIC, "s", "z-primary")  # the standby takes over what it held
    assert len(b.subscriptions.receive(TOPIC, "s", "a-standby", 10).entries) == 1


def test_partitions_spread_over_the_highest_level_only() -> None:
    b, _ = broker()
    topics = [TopicName.parse("failover-priority-partitioned").partition(i) for i in range(4)]
    for t in topics:
        for name, level in (("a", 0), ("b", 0), ("c", 2)):
            state = subscribe(b, name, level, t)
    assert [state.active_consumer(0, i) for i in range(4)] == ["a", "b", "a", "b"]


def test_levels_survive_the_stored_item_and_renewals_keep_them() -> None:
    b, _ = broker()
    subscribe(b, "x", 0)
    state = subscribe(b, "y", 3)
    restored = CursorState.from_dict(state.to_dict())
    assert {k: v.priority for k, v in restored.consumers.items()} == {"x": 0, "y": 3}
    restored.attach("y", "Failover", 1, 1_000, 0)  # a renewal (no level given) keeps the level
    assert restored.consumers["y"].priority == 3
    legacy = {k: v for k, v in state.to_dict().items() if k != "cp"}  # an item written before levels
    assert {k: v.priority for k, v in CursorState.from_dict(legacy).consumers.items()} == {"x": 0, "y": 0}


def test_a_negative_level_is_refused() -> None:
    b, _ = broker()
    with pytest.raises(InvalidInput, match="priority level"):
        subscribe(b, "x", -1)
