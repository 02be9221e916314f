"""The ledger lifecycle on in-memory ports: TTL, retention trimming, backlog quotas, crash safety."""

from __future__ import annotations

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core import crashpoints
from magnetar.core.acks import Acks
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import BacklogQuotaExceeded, TooManyRequests
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.policies import BACKLOG_QUOTA, MESSAGE_TTL, RETENTION

T = TopicName.parse("lifecycle")
NS = NamespaceName("public", "default")


def publish_segment(broker, n: int, size: int = 100) -> None:  # type: ignore[no-untyped-def]
    """n entries of one message each, then seal them into one segment of their own."""
    start = len(broker.journal.records)
    for _ in range(n):
        broker.writer.append(T, Batch.of([Message(b"x" * size)], batched=False), "p")
    outcome = broker.sealer.seal(broker.journal.records[start:])
    assert outcome.retry_from is None


def consume_and_ack(broker, subscription: str, upto: int) -> None:  # type: ignore[no-untyped-def]
    """Receive everything, then acknowledge cumulatively up to entry `upto` - 1."""
    broker.subscriptions.subscribe(T, subscription, "c", "Exclusive", "Earliest")  # renews the lease
    broker.subscriptions.receive(T, subscription, "c", max_messages=1000)
    broker.subscriptions.acknowledge(T, subscription, Acks(cumulative=(upto - 1, 1, -1)))
    broker.subscriptions.redeliver_unacknowledged(T, subscription, "c")


def segments(broker) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    return [(s.first_entry, s.last_entry) for s in broker.metadata.list_segments(T, 0, 100)]


def set_policy(broker, name: str, value: object) -> None:  # type: ignore[no-untyped-def]
    broker.admin.set_policy(NS, name, value)


def test_without_retention_acknowledged_segments_go_and_needed_ones_stay() -> None:
    broker = memory_broker()
    broker.subscriptions.subscribe(T, "s", "c", "Exclusive", "Earliest")
    for _ in range(3):
        publish_segment(broker, 5)
    consume_and_ack(broker, "s", 7)  # entries 0..6 acknowledged: only the first segment is all acked
    report = broker.maintenance.run()
    assert report.trimmed_segments == 1
    assert segments(broker) == [(5, 9), (10, 14)]
    seal, _ = broker.metadata.get_topic_state(T)
    assert seal.first_entry == 5 and seal.trimmed_entries == 5 and seal.trash == ()
    assert len(broker.segments.objects) == 2, "the trimmed segment's object is deleted"
    # the cursor still reads everything it has not acknowledged
    got = broker.subscriptions.receive(T, "s", "c", max_messages=100).entries
    assert [d.entry.entry_id for d in got] == list(range(7, 15))


def test_retention_time_keeps_acknowledged_data_until_it_is_old_enough() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    set_policy(broker, RETENTION, {"retentionTimeInMinutes": 10, "retentionSizeInMB": -1})
    broker.subscriptions.subscribe(T, "s", "c", "Exclusive", "Earliest")
    publish_segment(broker, 5)
    clock.advance(5 * 60_000)
    publish_segment(broker, 5)
    consume_and_ack(broker, "s", 10)
    assert broker.maintenance.run().trimmed_segments == 0, "both segments are inside the retention window"
    clock.advance(6 * 60_000)  # the first segment is now 11 minutes old, the second 6
    assert broker.maintenance.run().trimmed_segments == 1
    assert segments(broker) == [(5, 9)]
    # a reader at a retained position still reads it
    assert [e.entry_id for e in broker.read_entries(T, 0, 100)] == list(range(5, 10))


def test_retention_size_keeps_the_newest_acknowledged_segments() -> None:
    broker = memory_broker()
    set_policy(broker, RETENTION, {"retentionTimeInMinutes": -1, "retentionSizeInMB": 1})
    for _ in range(3):
        publish_segment(broker, 4, size=200_000)  # ~0.8 MB per segment
    # no subscription: everything counts as acknowledged
    broker.maintenance.run()
    assert segments(broker) == [(8, 11)], "only what fits in 1 MB is retained"


def test_infinite_retention_never_trims() -> None:
    broker = memory_broker()
    set_policy(broker, RETENTION, {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
    publish_segment(broker, 3)
    assert broker.maintenance.run().trimmed_segments == 0
    assert len(segments(broker)) == 1


def test_message_ttl_acknowledges_old_messages_for_every_subscription() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    set_policy(broker, RETENTION, {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
    set_policy(broker, MESSAGE_TTL, 60)
    for sub in ("a", "b"):
        broker.subscriptions.subscribe(T, sub, "c", "Shared", "Earliest")
    publish_segment(broker, 4)
    clock.advance(90_000)
    publish_segment(broker, 3)  # entries 4..6 are younger than the TTL
    report = broker.maintenance.run()
    assert report.expired_entries == 8  # 4 per subscription
    for sub in ("a", "b"):
        broker.subscriptions.subscribe(T, sub, "c", "Shared", "Earliest")  # renews the lease
        got = broker.subscriptions.receive(T, sub, "c", max_messages=100).entries
        assert [d.entry.entry_id for d in got] == [4, 5, 6]


def test_ttl_counts_only_entries_not_acknowledged_yet() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    set_policy(broker, MESSAGE_TTL, 10)
    broker.subscriptions.subscribe(T, "s", "c", "Shared", "Earliest")
    publish_segment(broker, 5)
    broker.subscriptions.receive(T, "s", "c", max_messages=1000)
    broker.subscriptions.acknowledge(T, "s", Acks(entries=(1, 3)))
    clock.advance(20_000)
    assert broker.maintenance.run().expired_entries == 3


def test_backlog_quota_producer_exception_refuses_until_consumers_catch_up() -> None:
    broker = memory_broker()
    set_policy(broker, BACKLOG_QUOTA, {"destination_storage": {"limitSize": 1000, "limitTime": -1,
                                                               "policy": "producer_exception"}})
    broker.subscriptions.subscribe(T, "slow", "c", "Exclusive", "Earliest")
    publish_segment(broker, 20)  # ~20 entries over 100 bytes each: over 1000 bytes
    report = broker.maintenance.run()
    assert report.blocked_topics == [str(T)]
    with pytest.raises(BacklogQuotaExceeded):
        broker.writer.append(T, Batch.of([Message(b"y")], batched=False), "p")
    with pytest.raises(BacklogQuotaExceeded):
        broker.writer.attach_producer(T, "p2", "Shared", 30_000)
    consume_and_ack(broker, "slow", 20)
    broker.clock.sleep(2)  # past the per-container re-check interval
    result = broker.writer.append(T, Batch.of([Message(b"y")], batched=False), "p")
    assert result.entry_id == 20, "the refused producer's next publish re-checks and the block is lifted"


def test_backlog_quota_producer_request_hold_holds_then_answers_429() -> None:
    broker = memory_broker()
    set_policy(broker, BACKLOG_QUOTA, {"destination_storage": {"limitSize": 1000, "limitTime": -1,
                                                               "policy": "producer_request_hold"}})
    broker.subscriptions.subscribe(T, "slow", "c", "Exclusive", "Earliest")
    publish_segment(broker, 20)
    broker.maintenance.run()
    started = broker.clock.now_ms()
    with pytest.raises(TooManyRequests):
        broker.writer.append(T, Batch.of([Message(b"y")], batched=False), "p")
    assert broker.clock.now_ms() - started >= 10_000, "the publish was held before the refusal"


def test_backlog_quota_consumer_backlog_eviction_moves_the_slow_cursor() -> None:
    broker = memory_broker()
    set_policy(broker, BACKLOG_QUOTA, {"destination_storage": {"limitSize": 1000, "limitTime": -1,
                                                               "policy": "consumer_backlog_eviction"}})
    broker.subscriptions.subscribe(T, "slow", "c", "Exclusive", "Earliest")
    publish_segment(broker, 20)
    report = broker.maintenance.run()
    assert report.evicted_entries > 0 and report.blocked_topics == []
    assert broker.maintenance.quota_exceeded(T) is False
    got = broker.subscriptions.receive(T, "slow", "c", max_messages=100).entries
    assert got and got[0].entry.entry_id > 0 and got[-1].entry.entry_id == 19, "the oldest backlog was evicted"
    # and producers were never blocked
    assert broker.writer.append(T, Batch.of([Message(b"y")], batched=False), "p").entry_id == 20


def test_backlog_quota_by_age() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    set_policy(broker, BACKLOG_QUOTA, {"message_age": {"limitSize": -1, "limitTime": 30,
                                                       "policy": "producer_exception"}})
    broker.subscriptions.subscribe(T, "slow", "c", "Exclusive", "Earliest")
    publish_segment(broker, 2)
    assert broker.maintenance.run().blocked_topics == []
    clock.advance(31_000)
    assert broker.maintenance.run().blocked_topics == [str(T)]


@pytest.mark.parametrize("point", ["trim.after_commit", "trim.after_delete"])
def test_a_trim_interrupted_anywhere_leaves_no_metadata_pointing_to_a_missing_object(point: str) -> None:
    broker = memory_broker()
    for _ in range(3):
        publish_segment(broker, 5)
    crashpoints.enable(point)
    with pytest.raises(crashpoints.SimulatedCrash):
        broker.maintenance.maintain(T)
    for seg in broker.metadata.list_segments(T, 0, 100):  # every listed segment still has its object
        assert seg.key in broker.segments.objects
    broker.maintenance.run()  # the next run finishes the deletion
    seal, _ = broker.metadata.get_topic_state(T)
    assert seal.trash == () and broker.segments.objects == {}
    assert seal.first_entry == 15


def test_a_runs_scope_is_what_its_input_names() -> None:
    from magnetar.core.errors import InvalidInput
    from magnetar.core.lifecycle import MaintenanceScope

    assert MaintenanceScope.of({"source": "aws.events"}) == MaintenanceScope(None, None)  # the schedule's: all
    assert MaintenanceScope.of({"topics": ["t"]}) == MaintenanceScope(["t"], [])  # no function
    assert MaintenanceScope.of({"functions": ["a/b/c"]}) == MaintenanceScope([], ["a/b/c"])  # no topic
    for bad in ({"topics": "t"}, {"functions": ["a/b"]}, {"functions": ["a//c"]}, {"functions": [1]}):
        with pytest.raises(InvalidInput):
            MaintenanceScope.of(bad)
