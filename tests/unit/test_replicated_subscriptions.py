"""Replicated subscriptions shared by the acknowledgement path, on in-memory ports: a snapshot at
most every SNAPSHOT_INTERVAL_MS while the subscription acknowledges, none while idle; the other
cluster applies it when a consumer subscribes there; never a skip, even when a snapshot write
fails halfway (the maintenance run writes it)."""

from __future__ import annotations

from typing import Any

from tests.unit.test_replication import Instance, T, instance

from magnetar.core.acks import Acks
from magnetar.core.broker import Broker
from magnetar.core.naming import TopicName
from magnetar.core.ports import SubscriptionSnapshot
from magnetar.core.replicated_subscriptions import SNAPSHOT_INTERVAL_MS


def _consume_one(broker: Broker, subscription: str = "sub") -> str:
    received = broker.subscriptions.receive(T, subscription, "c", max_messages=1)
    assert received.entries, "nothing to receive"
    entry = received.entries[0].entry
    broker.subscriptions.acknowledge(T, subscription, Acks((entry.entry_id,), consumer="c"))
    return entry.messages[0].payload.decode()


def _drain(broker: Broker, subscription: str = "sub") -> list[str]:
    got: list[str] = []
    while True:
        received = broker.subscriptions.receive(T, subscription, "c", max_messages=100)
        if not received.entries:
            return got
        for d in received.entries:
            got.extend(m.payload.decode() for m in d.entry.messages)
            broker.subscriptions.acknowledge(T, subscription, Acks((d.entry.entry_id,), consumer="c"))


def _geo(count: int) -> Instance:
    geo = instance("east", "west")
    geo.brokers["east"].subscriptions.subscribe(T, "sub", "c", "Shared", "Earliest", replicate_state=True)
    geo.publish("east", "pe", [f"m{i}" for i in range(count)])
    geo.settle()
    return geo


class CountingSnapshots:
    """The configuration store's snapshot writes, counted (and failed, when asked)."""

    def __init__(self, broker: Broker) -> None:
        self.metadata = broker.metadata
        self.original = self.metadata.put_subscription_snapshot
        self.writes = 0
        self.failing = False
        self.metadata.put_subscription_snapshot = self  # type: ignore[method-assign]

    def __call__(self, topic: TopicName, subscription: str, cluster: str, snapshot: SubscriptionSnapshot) -> Any:
        if self.failing:
            raise ConnectionError("the configuration store's home is unreachable")
        self.writes += 1
        return self.original(topic, subscription, cluster, snapshot)


def test_a_consumer_moved_to_west_resumes_where_east_shared_without_a_maintenance_run() -> None:
    geo = _geo(10)
    east, west = geo.brokers["east"], geo.brokers["west"]
    first = [_consume_one(east) for _ in range(5)]  # m0..m4: the first acknowledgement shares at once
    geo.clock.advance(SNAPSHOT_INTERVAL_MS)
    first.append(_consume_one(east))  # its receive's write shares m0..m4 (the interval has passed)
    first.append(_consume_one(east))  # m5, m6: acknowledged within the interval, not shared yet
    west.subscriptions.subscribe(T, "sub", "c", "Shared", "Earliest", replicate_state=True)
    rest = _drain(west)
    assert first == [f"m{i}" for i in range(7)]
    assert rest == ["m5", "m6", "m7", "m8", "m9"]  # m5, m6 again (the last interval's), nothing skipped


def test_at_most_one_snapshot_per_interval_while_acknowledging_and_none_while_idle() -> None:
    geo = _geo(100)
    east = geo.brokers["east"]
    counted = CountingSnapshots(east)
    for _ in range(100):  # 10 s of acknowledgements, one every 100 ms
        _consume_one(east)
        geo.clock.advance(100)
    assert 4 <= counted.writes <= 10_000 // SNAPSHOT_INTERVAL_MS + 1
    writes = counted.writes
    for _ in range(20):  # idle: polls that find nothing, for 20 s
        assert east.subscriptions.receive(T, "sub", "c", max_messages=10).entries == []
        geo.clock.advance(1000)
    assert counted.writes <= writes + 1  # at most the last interval's acknowledgements (a lease renewal's write)
    writes = counted.writes
    for _ in range(60):
        assert east.subscriptions.receive(T, "sub", "c", max_messages=10).entries == []
        geo.clock.advance(1000)
    assert counted.writes == writes


def test_a_snapshot_never_moves_back() -> None:
    geo = _geo(1)
    store = geo.brokers["east"].metadata
    assert store.put_subscription_snapshot(T, "sub", "east", SubscriptionSnapshot({"east": 10, "west": 3}, 1))
    assert not store.put_subscription_snapshot(T, "sub", "east", SubscriptionSnapshot({"east": 9, "west": 3}, 2))
    assert store.get_subscription_snapshots(T, "sub")["east"] == SubscriptionSnapshot({"east": 10, "west": 3}, 1)


def test_a_snapshot_not_written_after_its_cursor_write_is_written_by_the_maintenance_run() -> None:
    geo = _geo(6)
    east, west = geo.brokers["east"], geo.brokers["west"]
    counted = CountingSnapshots(east)
    counted.failing = True  # the cursor is written, the snapshot is not (the process died, the home is out)
    first = [_consume_one(east) for _ in range(4)]
    assert west.metadata.get_subscription_snapshots(T, "sub") == {}
    counted.failing = False
    geo.replicators["east"].share_subscriptions(T, east.metadata.list_cursors(T))  # the maintenance run
    assert west.metadata.get_subscription_snapshots(T, "sub")["east"].origin_acked["east"] >= 3
    west.subscriptions.subscribe(T, "sub", "c2", "Shared", "Earliest", replicate_state=True)
    assert first + _drain_as(west, "c2") == [f"m{i}" for i in range(6)]


def _drain_as(broker: Broker, consumer: str) -> list[str]:
    got: list[str] = []
    while (received := broker.subscriptions.receive(T, "sub", consumer, max_messages=100)).entries:
        for d in received.entries:
            got.extend(m.payload.decode() for m in d.entry.messages)
            broker.subscriptions.acknowledge(T, "sub", Acks((d.entry.entry_id,), consumer=consumer))
    return got


def test_a_subscription_of_a_topic_without_other_clusters_writes_no_snapshot() -> None:
    geo = _geo(3)
    east = geo.brokers["east"]
    east.admin.set_policy(T.namespace_name, "replication_clusters", ["east"])
    counted = CountingSnapshots(east)
    for _ in range(3):
        _consume_one(east)
        geo.clock.advance(SNAPSHOT_INTERVAL_MS)
    assert counted.writes == 0


def test_a_cursor_stored_before_snapshots_reads_as_never_shared() -> None:
    from magnetar.core.cursor import CursorState

    state = CursorState("Shared", 5, 5, replicated=True, origin_scanned=5, origin_acked={"east": 4})
    data = state.to_dict()
    data["rs"] = data["rs"][:2]  # as written before the acknowledgement path shared
    old = CursorState.from_dict(data)
    assert (old.snapshot_at, old.origin_sent, old.origin_acked) == (0, {}, {"east": 4})
    state.snapshot_at, state.origin_sent = 7, {"east": 4}
    assert CursorState.from_dict(state.to_dict()) == state
