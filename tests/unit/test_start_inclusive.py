"""start_message_id_inclusive for consumers (core/dispatch.py subscribe) against the in-memory ports:
a subscription created at Latest starts at the last entry; an existing one and Earliest do not move."""

from __future__ import annotations

from typing import Any

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.entry import Batch, Message
from magnetar.core.naming import TopicName

TOPIC = TopicName.parse("inclusive")


def publish(b: Any, count: int) -> None:
    for i in range(count):
        b.writer.append(TOPIC, Batch.of([Message(f"m{i}".encode())], batched=False), "p")
    b.sealer.seal(list(b.journal.records))


def received(b: Any, sub: str, consumer: str = "c") -> list[int]:
    return [d.entry.entry_id for d in b.subscriptions.receive(TOPIC, sub, consumer, 100).entries]


def test_latest_inclusive_starts_at_the_last_entry_of_a_new_subscription_only() -> None:
    b = memory_broker(ManualClock())
    b.subscriptions.subscribe(TOPIC, "empty", "c", "Exclusive", "Latest", start_inclusive=True)
    publish(b, 3)
    b.subscriptions.subscribe(TOPIC, "incl", "c", "Exclusive", "Latest", start_inclusive=True)
    b.subscriptions.subscribe(TOPIC, "excl", "c", "Exclusive", "Latest")
    b.subscriptions.subscribe(TOPIC, "early", "c", "Exclusive", "Earliest", start_inclusive=True)
    assert received(b, "empty") == [0, 1, 2]  # created on an empty topic: from its first entry
    assert received(b, "incl") == [2]
    assert received(b, "excl") == []
    assert received(b, "early") == [0, 1, 2]
    publish(b, 1)
    b.subscriptions.subscribe(TOPIC, "excl", "c", "Exclusive", "Latest", start_inclusive=True)  # exists: unchanged
    assert received(b, "excl") == [3]
