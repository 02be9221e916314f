"""Topic stats on in-memory ports: exact figures for a known workload, and the requests a call costs."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.acks import Acks
from magnetar.core.entry import Batch, Message, encode_messages
from magnetar.core.errors import NotFound, TopicNotFound
from magnetar.core.ledger import PRODUCER_IDLE_MS
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.stats import iso_time

T = TopicName.parse("persistent://public/default/stats")
PAYLOAD = b"x" * 100
ENTRY_BYTES = len(encode_messages([Message(PAYLOAD)]))  # what the writer counts: the stored batch payload


def publish(broker: Any, producer: str, count: int, topic: TopicName = T) -> None:
    for _ in range(count):
        broker.writer.append(topic, Batch.of([Message(PAYLOAD)], batched=False), producer)


def seal_all(broker: Any) -> None:
    broker.sealer.seal(list(broker.journal.records))


def test_counters_publishers_and_sizes_after_known_publishes() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.writer.attach_producer(T, "p1", "Shared", 30_000)
    attached_at = clock.now
    clock.advance(1_000)
    publish(broker, "p1", 6)
    publish(broker, "p2", 4)  # a REST producer: it never attached
    stats = broker.stats.topic_stats(T)
    assert stats["msgInCounter"] == 10 and stats["bytesInCounter"] == 10 * ENTRY_BYTES
    assert stats["averageMsgSize"] == ENTRY_BYTES
    publishers = {p["producerName"]: p for p in stats["publishers"]}
    assert sorted(publishers) == ["p1", "p2"]
    assert publishers["p1"]["msgInCounter"] == 6 and publishers["p2"]["bytesInCounter"] == 4 * ENTRY_BYTES
    assert publishers["p1"]["connectedSince"] == iso_time(attached_at)
    assert publishers["p2"]["connectedSince"] == iso_time(clock.now)  # its last publish stands in
    assert stats["subscriptions"] == {} and stats["replication"] == {}
    assert stats["deduplicationStatus"] == "Disabled"
    # nothing sealed: the tail is estimated (1 KB an entry before anything is sealed); without a
    # subscription there is no backlog, as in Pulsar (no slowest cursor)
    assert stats["storageSize"] == 10 * 1024 and stats["backlogSize"] == 0
    seal_all(broker)
    sealed = broker.metadata.get_seal_states([str(T)])[str(T)].sealed_bytes
    stats = broker.stats.topic_stats(T)
    assert stats["storageSize"] == sealed > 10 * ENTRY_BYTES
    clock.advance(PRODUCER_IDLE_MS)
    assert broker.stats.topic_stats(T)["publishers"] == [], "idle producers are no longer publishers"
    broker.admin.set_policy(NamespaceName("public", "default"), "deduplicationEnabled", True)
    assert broker.stats.topic_stats(T)["deduplicationStatus"] == "Enabled"


def _shared_and_exclusive(clock: ManualClock) -> Any:
    """10 entries; Shared `sh`: c1 got 4 and acked 0, 1 and 3, c2 got 3; Exclusive `ex` got nothing."""
    broker = memory_broker(clock)
    broker.subscriptions.subscribe(T, "sh", "c1", "Shared", "Earliest")
    broker.subscriptions.subscribe(T, "sh", "c2", "Shared", "Earliest")
    broker.subscriptions.subscribe(T, "ex", "e1", "Exclusive", "Earliest")
    publish(broker, "p1", 10)
    seal_all(broker)
    got1 = broker.subscriptions.receive(T, "sh", "c1", max_messages=4).entries
    got2 = broker.subscriptions.receive(T, "sh", "c2", max_messages=3).entries
    assert [d.entry.entry_id for d in got1] == [0, 1, 2, 3] and [d.entry.entry_id for d in got2] == [4, 5, 6]
    broker.subscriptions.acknowledge(T, "sh", Acks(entries=(0, 1, 3), consumer="c1"))
    return broker


def test_backlog_unacked_and_consumers_after_partial_acks() -> None:
    clock = ManualClock()
    broker = _shared_and_exclusive(clock)
    stats = broker.stats.topic_stats(T)
    sh, ex = stats["subscriptions"]["sh"], stats["subscriptions"]["ex"]
    assert sh["type"] == "Shared" and ex["type"] == "Exclusive"
    assert sh["msgBacklog"] == 7 and ex["msgBacklog"] == 10
    assert sh["unackedMessages"] == 4 and ex["unackedMessages"] == 0
    consumers = {c["consumerName"]: c["unackedMessages"] for c in sh["consumers"]}
    assert consumers == {"c1": 1, "c2": 3}
    assert [c["consumerName"] for c in ex["consumers"]] == ["e1"] and ex["activeConsumerName"] == "e1"
    assert sh["msgOutCounter"] == 7 and sh["bytesOutCounter"] == 7 * ENTRY_BYTES
    assert stats["msgOutCounter"] == 7 and ex["msgOutCounter"] == 0
    assert sh["nonContiguousDeletedMessagesRanges"] == 1 == stats["nonContiguousDeletedMessagesRanges"]
    sealed = broker.metadata.get_seal_states([str(T)])[str(T)].sealed_bytes
    assert stats["backlogSize"] == sealed, "ex has acknowledged nothing: the whole topic is its backlog"

    internal = broker.stats.internal_stats(T)
    assert internal["cursors"]["sh"]["markDeletePosition"] == "0:1"
    assert internal["cursors"]["sh"]["individuallyDeletedMessages"] == "[(0:2..0:3]]"
    assert internal["cursors"]["sh"]["readPosition"] == "0:7"
    assert internal["cursors"]["ex"]["markDeletePosition"] == "0:-1"
    assert internal["cursors"]["ex"]["individuallyDeletedMessages"] == "[]"

    # a consumer whose lease ran out holds nothing: its entries go back to the subscription
    clock.advance(20_000)
    broker.subscriptions.subscribe(T, "sh", "c2", "Shared", "Earliest")  # c2 renews its lease, c1 does not
    clock.advance(11_000)
    sh = broker.stats.topic_stats(T)["subscriptions"]["sh"]
    assert [c["consumerName"] for c in sh["consumers"]] == ["c2"] and sh["unackedMessages"] == 3


def test_a_cumulative_ack_moves_the_mark_delete_position() -> None:
    broker = _shared_and_exclusive(ManualClock())
    broker.subscriptions.receive(T, "ex", "e1", max_messages=10)
    broker.subscriptions.acknowledge(T, "ex", Acks(cumulative=(5, 1, -1), consumer="e1"))
    cursor = broker.stats.internal_stats(T)["cursors"]["ex"]
    assert cursor["markDeletePosition"] == "0:5" and cursor["messagesConsumedCounter"] == 6
    sub = broker.stats.topic_stats(T)["subscriptions"]["ex"]
    assert sub["msgBacklog"] == 4 and sub["unackedMessages"] == 4


def test_rates_are_one_minute_averages_decaying_with_the_clock() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.subscriptions.subscribe(T, "s", "c1", "Exclusive", "Earliest")
    publish(broker, "p1", 30)
    seal_all(broker)
    broker.subscriptions.receive(T, "s", "c1", max_messages=30)
    stats = broker.stats.topic_stats(T)
    assert stats["msgRateIn"] == pytest.approx(30 / 60) and stats["msgRateOut"] == pytest.approx(30 / 60)
    sealed = broker.metadata.get_seal_states([str(T)])[str(T)].sealed_bytes
    assert stats["msgThroughputIn"] == pytest.approx(sealed / 60)
    clock.advance(60_000)
    later = broker.stats.topic_stats(T)
    assert later["msgRateIn"] == pytest.approx(30 / 60 / math.e)
    assert later["msgRateOut"] == pytest.approx(30 / 60 / math.e)
    assert later["subscriptions"]["s"]["msgThroughputOut"] == pytest.approx(
        stats["subscriptions"]["s"]["msgThroughputOut"] / math.e)
    assert later["msgInCounter"] == 30, "counters do not decay"


def test_redeliveries_make_the_redeliver_rate_and_survive_the_cursor_item() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.subscriptions.subscribe(T, "s", "c1", "Shared", "Earliest")
    publish(broker, "p1", 10)
    seal_all(broker)
    first = broker.subscriptions.receive(T, "s", "c1", max_messages=10).entries
    assert len(first) == 10
    assert broker.stats.topic_stats(T)["subscriptions"]["s"]["msgRateRedeliver"] == 0.0, "first deliveries"
    nacked = tuple(d.entry.entry_id for d in first[:4])
    broker.subscriptions.acknowledge(T, "s", Acks(entries=tuple(d.entry.entry_id for d in first[4:]),
                                                  nacks=nacked, consumer="c1"))
    again = broker.subscriptions.receive(T, "s", "c1", max_messages=10).entries
    assert [d.entry.entry_id for d in again] == list(nacked) and all(d.redelivery_count == 1 for d in again)
    sub = broker.stats.topic_stats(T)["subscriptions"]["s"]
    assert sub["msgRateRedeliver"] == pytest.approx(4 / 60, rel=1e-3)  # stored to 4 decimals
    assert sub["msgRateOut"] == pytest.approx(14 / 60, rel=1e-3) and sub["msgOutCounter"] == 14
    clock.advance(60_000)
    later = broker.stats.topic_stats(T)["subscriptions"]["s"]
    assert later["msgRateRedeliver"] == pytest.approx(4 / 60 / math.e, rel=1e-3)


def test_internal_stats_group_segments_by_ledger_and_estimate_the_unsealed_tail() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    publish(broker, "p1", 3)
    assert broker.metadata.roll_ledger(T, 0, clock.now)
    publish(broker, "p1", 2)
    seal_all(broker)
    publish(broker, "p1", 2)  # entries 5 and 6: in the journal only
    seal = broker.metadata.get_seal_states([str(T)])[str(T)]
    internal = broker.stats.internal_stats(T)
    assert internal["entriesAddedCounter"] == 7 and internal["numberOfEntries"] == 7
    assert internal["lastConfirmedEntry"] == "1:6" and internal["state"] == "LedgerOpened"
    assert internal["currentLedgerEntries"] == 4
    ledgers = {le["ledgerId"]: le for le in internal["ledgers"]}
    assert sorted(ledgers) == [0, 1]
    assert ledgers[0]["entries"] == 3 and ledgers[1]["entries"] == 4
    assert [(s["firstEntry"], s["lastEntry"]) for s in ledgers[0]["segments"]] == [(0, 2)]
    assert [(s["firstEntry"], s["lastEntry"]) for s in ledgers[1]["segments"]] == [(3, 4)]
    average = seal.sealed_bytes // seal.sealed_entries
    assert ledgers[0]["size"] + ledgers[1]["size"] == seal.sealed_bytes + 2 * average
    assert internal["totalSize"] == broker.stats.topic_stats(T)["storageSize"] == seal.sealed_bytes + 2 * average
    assert internal["currentLedgerSize"] == ledgers[1]["size"]


def test_partitioned_stats_sum_the_partitions_and_list_each() -> None:
    broker = memory_broker()
    base = TopicName.parse("persistent://public/default/parts")
    broker.admin.create_partitioned_topic(base, 3)
    for i, count in ((0, 4), (1, 6)):
        broker.subscriptions.subscribe(base.partition(i), "s", "c1", "Exclusive", "Earliest")
        publish(broker, f"p-{i}", count, base.partition(i))
    broker.subscriptions.receive(base.partition(1), "s", "c1", max_messages=2)
    stats = broker.stats.partitioned_stats(base)
    assert stats["metadata"] == {"partitions": 3}
    assert sorted(stats["partitions"]) == [str(base.partition(i)) for i in range(3)]
    assert stats["msgInCounter"] == 10 and stats["bytesInCounter"] == 10 * ENTRY_BYTES
    assert sorted(p["producerName"] for p in stats["publishers"]) == ["p-0", "p-1"]
    assert stats["subscriptions"]["s"]["msgBacklog"] == 10 and stats["subscriptions"]["s"]["unackedMessages"] == 2
    assert len(stats["subscriptions"]["s"]["consumers"]) == 2
    unused = stats["partitions"][str(base.partition(2))]
    assert unused["msgInCounter"] == 0 and unused["subscriptions"] == {} and unused["storageSize"] == 0
    assert broker.stats.partitioned_stats(base, per_partition=False)["partitions"] == {}
    assert broker.stats.topic_stats(base.partition(2))["msgInCounter"] == 0, "an unused partition answers zeros"
    internal = broker.stats.partitioned_internal_stats(base)
    assert internal["partitions"][str(base.partition(1))]["entriesAddedCounter"] == 6


def test_unknown_topics_and_partitioned_names_are_404() -> None:
    broker = memory_broker()
    with pytest.raises(TopicNotFound):
        broker.stats.topic_stats(TopicName.parse("ghost"))
    with pytest.raises(TopicNotFound):
        broker.stats.internal_stats(TopicName.parse("ghost"))
    base = TopicName.parse("persistent://public/default/parted")
    broker.admin.create_partitioned_topic(base, 2)
    with pytest.raises(TopicNotFound, match="partitioned-stats"):
        broker.stats.topic_stats(base)
    with pytest.raises(TopicNotFound):
        broker.stats.topic_stats(base.partition(2))  # beyond the partition count
    publish(broker, "p", 1)
    with pytest.raises(NotFound, match="Partitioned Topic not found"):
        broker.stats.partitioned_stats(T)


def test_a_stats_call_costs_a_few_metadata_requests() -> None:
    clock = ManualClock()
    broker = _shared_and_exclusive(clock)
    publish(broker, "p1", 2)  # an unsealed tail too
    broker.stats.topic_stats(T)  # warms the per-container policy cache
    calls: Counter[str] = Counter()
    metadata = broker.metadata
    for name in ("get_topic_state", "list_cursors", "list_segments", "get_namespace", "get_topic_policies",
                 "get_partitions", "list_topics", "get_seal_states", "get_subscription_view"):
        original = getattr(metadata, name)

        def counted(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _original(*args, **kwargs)

        setattr(metadata, name, counted)
    broker.stats.topic_stats(T)
    assert calls == Counter(get_topic_state=1, list_cursors=1, list_segments=1)
    calls.clear()
    broker.stats.internal_stats(T)
    assert calls == Counter(get_topic_state=1, list_cursors=1, list_segments=1)
