"""Randomized dispatch histories on in-memory ports: every subscription type keeps its promises.

Each seed interleaves appends (batches of several sizes and keys), seals, receives by several
consumers with grouped acks, consumers leaving and joining, and negative acks; then drains and
checks: every entry delivered, no fresh duplicate, Exclusive/Failover order, Key_Shared per-key
order across consumers.

The suite runs SEEDS histories per type (Key_Shared's order: a third more); MAGNETAR_PROPERTY_SEEDS
runs more, e.g. `MAGNETAR_PROPERTY_SEEDS=200 pytest tests/unit/test_dispatch_properties.py`.
"""

from __future__ import annotations

import os
import random
from collections import defaultdict
from functools import cache

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.acks import Acks
from magnetar.core.entry import Batch, Message
from magnetar.core.naming import TopicName

T = TopicName.parse("props")
SEEDS = int(os.environ.get("MAGNETAR_PROPERTY_SEEDS", "15"))


@cache  # a history is a function of its seed and type: the tests below check the same ones, each run once
def run(seed: int, sub_type: str) -> tuple[list[tuple[str, int, str | None, int]], int]:
    rng = random.Random(seed)
    clock = ManualClock()
    broker = memory_broker(clock)
    consumers = ["c0"] if sub_type == "Exclusive" else ["c0", "c1", "c2"][: rng.randint(1, 3)]
    for c in consumers:
        broker.subscriptions.subscribe(T, "s", c, sub_type, "Earliest")
    pending: dict[str, list[int]] = defaultdict(list)
    nacks: dict[str, list[int]] = defaultdict(list)
    seen: list[tuple[str, int, str | None, int]] = []  # (consumer, entry, key, redelivery count)
    appended = 0
    spare = 3
    for _ in range(120):
        r = rng.random()
        if r < 0.45:
            key = rng.choice(["a", "b", "c", "d", None])
            n = rng.choice([1, 3, 10])
            broker.writer.append(T, Batch.of([Message(b"x", key=key)] * n, batched=n > 1), "p")
            appended += 1
        elif r < 0.55:
            broker.sealer.seal(list(broker.journal.records))
        elif r < 0.62 and sub_type != "Exclusive" and len(consumers) > 1:
            gone = consumers.pop(rng.randrange(len(consumers)))
            broker.subscriptions.close_consumer(T, "s", gone)
            pending.pop(gone, None)
        elif r < 0.68 and sub_type != "Exclusive" and len(consumers) < 4:
            new = f"c{spare}"
            spare += 1
            consumers.append(new)
            broker.subscriptions.subscribe(T, "s", new, sub_type, "Earliest")
        else:
            c = rng.choice(consumers)
            acks = Acks(tuple(pending.pop(c, [])), nacks=tuple(nacks.pop(c, [])), nack_delay_ms=0, consumer=c)
            got = broker.subscriptions.receive(T, "s", c, max_messages=rng.choice([1, 10, 50]), acks=acks).entries
            for d in got:
                seen.append((c, d.entry.entry_id, d.entry.key, d.redelivery_count))
                if sub_type == "Shared" and rng.random() < 0.05:
                    nacks[c].append(d.entry.entry_id)
                else:
                    pending[c].append(d.entry.entry_id)
    for _ in range(200):  # drain: everyone keeps receiving and acking
        for c in consumers:
            acks = Acks(tuple(pending.pop(c, [])), consumer=c)
            for d in broker.subscriptions.receive(T, "s", c, max_messages=100, acks=acks).entries:
                seen.append((c, d.entry.entry_id, d.entry.key, d.redelivery_count))
                pending[c].append(d.entry.entry_id)
        clock.advance(10)
    for c in consumers:
        broker.subscriptions.acknowledge(T, "s", Acks(tuple(pending.pop(c, [])), consumer=c))
    return seen, appended


@pytest.mark.parametrize("sub_type", ["Exclusive", "Shared", "Failover", "Key_Shared"])
def test_every_entry_is_delivered_without_fresh_duplicates(sub_type: str) -> None:
    for seed in range(SEEDS):
        seen, appended = run(seed, sub_type)
        assert {e for _, e, _, _ in seen} == set(range(appended)), f"seed {seed}: lost entries"
        fresh = [e for _, e, _, n in seen if n == 0]
        assert len(fresh) == len(set(fresh)), f"seed {seed}: an entry was handed out fresh twice"


@pytest.mark.parametrize("sub_type", ["Exclusive", "Failover"])
def test_single_active_consumer_types_deliver_in_order(sub_type: str) -> None:
    for seed in range(SEEDS):
        seen, _ = run(seed, sub_type)
        fresh = [e for _, e, _, n in seen if n == 0]
        assert fresh == sorted(fresh), f"seed {seed}: {fresh}"


def test_key_shared_keeps_each_keys_order_across_consumers() -> None:
    for seed in range(SEEDS * 4 // 3):
        seen, _ = run(seed, "Key_Shared")
        by_key: dict[str | None, list[int]] = defaultdict(list)
        for _, entry, key, _ in seen:
            by_key[key].append(entry)
        for key, entries in by_key.items():
            # a key's entries arrive in id order; a redelivery may repeat an entry, never jump back past one
            first_seen = []
            for e in entries:
                if e not in first_seen:
                    first_seen.append(e)
            assert first_seen == sorted(first_seen), f"seed {seed} key {key}: {entries}"
