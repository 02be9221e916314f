"""Geo-replication on in-memory ports: two or three clusters, each a broker of its own, the
replicators appending to the others through their writers (the remote clusters' port on memory)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.acks import Acks
from magnetar.core.broker import Broker
from magnetar.core.entry import Batch, Entry, Message
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.replication import RemoteUnavailable, Replicator, replicator_name

T = TopicName.parse("persistent://public/default/geo")
NS = NamespaceName("public", "default")


@dataclass
class MemoryRemotes:
    """The remote clusters' port on memory: an append is the remote writer's group append."""

    brokers: dict[str, Broker]
    replicators: dict[str, Replicator] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)
    fail_after_append: bool = False  # the answer is lost: stored remotely, the replicator does not know
    appends: int = 0

    def append(self, cluster: str, topic: TopicName, batches: list[Batch]) -> None:
        if cluster in self.down:
            raise RemoteUnavailable(f"{cluster} unreachable")
        self.appends += 1
        self.brokers[cluster].writer.append_group(topic, batches, replicator_name(self.source))
        if self.fail_after_append:
            raise RemoteUnavailable("the answer was lost")

    def acknowledge(self, cluster: str, topic: TopicName, subscription: str, subscription_type: str,
                    origin_acked: dict[str, int]) -> None:
        if cluster in self.down:
            raise RemoteUnavailable(f"{cluster} unreachable")
        self.replicators[cluster].subscriptions.apply_remote_acks(topic, subscription, subscription_type, origin_acked)

    source: str = ""


@dataclass
class Instance:
    clock: ManualClock
    brokers: dict[str, Broker]
    replicators: dict[str, Replicator]
    remotes: dict[str, MemoryRemotes]

    def publish(self, cluster: str, producer: str, texts: list[str], **batch: object) -> None:
        for i, text in enumerate(texts):
            self.brokers[cluster].writer.append(T, Batch.of([Message(text.encode())], sequence_id=i, **batch),
                                                producer)

    def seal_and_replicate(self, cluster: str) -> None:
        broker = self.brokers[cluster]
        records = list(broker.journal.records)
        broker.sealer.seal(records)
        self.replicators[cluster].replicate_batch(records, broker.cache)

    def settle(self, rounds: int = 3) -> None:
        for _ in range(rounds):
            for name in self.brokers:
                self.seal_and_replicate(name)

    def stored(self, cluster: str) -> list[Entry]:
        broker = self.brokers[cluster]
        broker.sealer.seal(list(broker.journal.records))
        if broker.metadata.get_topic_state(T)[1] is None:
            return []  # nothing replicated there yet: the topic was never created
        return [e for e in broker.read_entries(T, 0, 1000) if not e.hole]


def instance(*names: str) -> Instance:
    clock = ManualClock()
    brokers = {n: memory_broker(clock, cluster_name=n) for n in names}
    snapshots = next(iter(brokers.values())).metadata.snapshots  # the configuration store's: one for all
    for broker in brokers.values():
        broker.metadata.snapshots = snapshots
    remotes = {n: MemoryRemotes(brokers, source=n) for n in names}
    replicators = {n: Replicator(b.metadata, b.reader, clock, n, remotes[n], b.writer.policies)
                   for n, b in brokers.items()}
    for broker in brokers.values():
        broker.admin.set_policy(NS, "replication_clusters", list(names))
    for remote in remotes.values():
        remote.replicators = replicators
    return Instance(clock, brokers, replicators, remotes)


def texts(entries: list[Entry]) -> list[str]:
    return [m.payload.decode() for e in entries for m in e.messages]


def test_every_message_reaches_the_other_cluster_once_in_order_with_its_origin() -> None:
    geo = instance("east", "west")
    geo.publish("east", "p-east", [f"e{i}" for i in range(5)])
    geo.settle()
    west = geo.stored("west")
    assert texts(west) == [f"e{i}" for i in range(5)]
    assert {e.replicated_from for e in west} == {"east"}
    assert [e.producer_name for e in west] == ["p-east"] * 5  # the origin's producer and sequence ids
    assert [e.sequence_id for e in west] == list(range(5))
    assert [e.origin.entry_id for e in west if e.origin] == list(range(5))
    assert all(e.origin is None for e in geo.stored("east"))


def test_a_full_mesh_of_three_has_no_loops() -> None:
    geo = instance("a", "b", "c")
    geo.publish("a", "pa", ["a0", "a1"])
    geo.publish("b", "pb", ["b0"])
    geo.publish("c", "pc", ["c0", "c1", "c2"])
    geo.settle(rounds=4)
    for name in ("a", "b", "c"):
        got = sorted(texts(geo.stored(name)))
        assert got == sorted(["a0", "a1", "b0", "c0", "c1", "c2"]), name  # each message once in each


def test_a_lost_answer_or_a_retried_batch_stores_nothing_twice() -> None:
    geo = instance("east", "west")
    geo.publish("east", "p", ["m0", "m1", "m2"])
    geo.remotes["east"].fail_after_append = True  # stored in west, the replicator does not know
    geo.seal_and_replicate("east")
    geo.remotes["east"].fail_after_append = False
    geo.clock.advance(10_000)  # past the replicator's pause of that remote
    geo.settle()
    geo.seal_and_replicate("east")  # a replayed batch
    assert texts(geo.stored("west")) == ["m0", "m1", "m2"]
    assert geo.remotes["east"].appends == 2  # the lost one and its deduplicated repeat


def test_an_unreachable_cluster_leaves_a_backlog_that_drains_when_it_returns() -> None:
    geo = instance("east", "west")
    geo.remotes["east"].down.add("west")
    geo.publish("east", "p", ["m0", "m1"])
    geo.seal_and_replicate("east")
    view = geo.brokers["east"].metadata.get_subscription_view(T, replicator_name("west"))
    assert view.cursor is not None and view.cursor.backlog(view.seal.next_entry) == 2  # counted as a subscription
    geo.publish("east", "p2", ["m2"])
    geo.seal_and_replicate("east")  # paused: not even tried
    assert texts(geo.stored("west")) == []
    geo.remotes["east"].down.clear()
    geo.clock.advance(10_000)
    report = geo.brokers["east"].maintenance
    report.replication = geo.replicators["east"]
    geo.brokers["east"].maintenance.maintain(T)  # the maintenance run sends the backlog
    assert texts(geo.stored("west")) == ["m0", "m1", "m2"]


def test_a_topic_first_sealed_while_its_remote_is_paused_keeps_its_head_as_backlog() -> None:
    geo = instance("east", "west")
    geo.remotes["east"].down.add("west")
    geo.publish("east", "p", ["m0"])
    geo.seal_and_replicate("east")  # west fails: paused
    other = TopicName.parse(f"persistent://{NS}/other")
    geo.brokers["east"].writer.append(other, Batch.of([Message(b"o0")], sequence_id=0), "q")
    geo.seal_and_replicate("east")  # a topic first sealed during the pause: its replicator is made, at its head
    view = geo.brokers["east"].metadata.get_subscription_view(other, replicator_name("west"))
    assert view.cursor is not None and view.cursor.backlog(view.seal.next_entry) == 1
    geo.remotes["east"].down.clear()
    geo.clock.advance(10_000)
    geo.replicators["east"].catch_up(other)  # the maintenance run: the head is sent, not skipped
    broker = geo.brokers["west"]
    broker.sealer.seal(list(broker.journal.records))
    assert texts([e for e in broker.read_entries(other, 0, 10) if not e.hole]) == ["o0"]


def test_replication_clusters_of_a_publish_are_honoured() -> None:
    geo = instance("a", "b", "c")
    geo.publish("a", "p", ["everywhere"])
    geo.publish("a", "q", ["only-b"], replicate_to=("a", "b"))
    geo.publish("a", "r", ["local"], replicate_to=())
    geo.settle(rounds=2)
    assert texts(geo.stored("b")) == ["everywhere", "only-b"]
    assert texts(geo.stored("c")) == ["everywhere"]


def test_a_namespace_without_other_clusters_costs_nothing() -> None:
    geo = instance("east", "west")
    geo.brokers["east"].admin.set_policy(NS, "replication_clusters", ["east"])
    geo.publish("east", "p", ["m0"])
    geo.seal_and_replicate("east")
    assert geo.remotes["east"].appends == 0
    assert replicator_name("west") not in geo.brokers["east"].metadata.list_subscriptions(T)


def test_a_publish_mixing_copies_and_new_entries_is_refused() -> None:
    from magnetar.core.entry import Origin
    from magnetar.core.errors import InvalidInput

    broker = memory_broker()
    copy = Batch.of([Message(b"x")], sequence_id=0, origin=Origin("east", 0, 0, "p", 0, 0, 1))
    with pytest.raises(InvalidInput):
        broker.writer.append_group(T, [copy, Batch.of([Message(b"y")])], "p")


def _consume(broker: Broker, count: int, subscription: str = "sub") -> list[str]:
    """Receive and acknowledge `count` messages of the subscription (a Shared consumer `c`)."""
    got: list[str] = []
    while len(got) < count:
        received = broker.subscriptions.receive(T, subscription, "c", max_messages=1)
        assert received.entries, f"only {got} of {count}"
        for d in received.entries:
            got.extend(m.payload.decode() for m in d.entry.messages)
            broker.subscriptions.acknowledge(T, subscription, Acks((d.entry.entry_id,), consumer="c"))
    return got


def _share(geo: Instance, cluster: str) -> None:
    broker = geo.brokers[cluster]
    geo.replicators[cluster].share_subscriptions(T, broker.metadata.list_cursors(T))


def test_a_replicated_subscription_moved_to_the_other_cluster_skips_nothing() -> None:
    geo = instance("east", "west")
    east, west = geo.brokers["east"], geo.brokers["west"]
    for broker in (east, west):
        broker.subscriptions.subscribe(T, "sub", "c", "Shared", "Earliest", replicate_state=True)
    geo.publish("east", "pe", [f"e{i}" for i in range(6)])
    geo.publish("west", "pw", [f"w{i}" for i in range(4)])
    geo.settle()
    first = _consume(east, 7)  # the first seven in east's order, acknowledged there
    _share(geo, "east")
    rest = _consume(west, 3)  # the consumer moves to west: it gets the three east never gave it
    assert sorted(first + rest) == sorted([f"e{i}" for i in range(6)] + [f"w{i}" for i in range(4)])
    assert west.subscriptions.receive(T, "sub", "c", max_messages=10).entries == []


def test_acknowledgements_for_a_topic_deleted_here_are_topic_not_found_not_contention() -> None:
    from magnetar.core.errors import TopicNotFound

    geo = instance("east", "west")
    geo.publish("west", "pw", ["w0"])
    geo.settle()
    geo.brokers["west"].deletion.delete_topic(T, force=True)
    with pytest.raises(TopicNotFound, match="deleted"):  # a 404 the replicator understands, not a 503 to retry
        geo.replicators["west"].subscriptions.apply_remote_acks(T, "sub", "Shared", {"east": 3})


def test_a_subscription_not_replicated_stays_where_it_is() -> None:
    geo = instance("east", "west")
    geo.brokers["east"].subscriptions.subscribe(T, "plain", "c", "Shared", "Earliest")
    geo.publish("east", "p", ["m0", "m1"])
    geo.settle()
    _consume(geo.brokers["east"], 2, "plain")
    _share(geo, "east")
    assert "plain" not in geo.brokers["west"].metadata.list_subscriptions(T)


def test_a_remote_failing_unexpectedly_pauses_it_and_never_fails_the_journal_batch() -> None:
    geo = instance("east", "west")

    def broken(cluster: str, topic: TopicName, batches: list[Batch]) -> None:
        raise AttributeError("no such thing")  # not a RemoteUnavailable: a fault of the remote's client

    geo.replicators["east"].remotes = type("Broken", (), {"append": staticmethod(broken)})()
    geo.publish("east", "p", ["m0", "m1"])
    geo.seal_and_replicate("east")  # does not raise
    view = geo.brokers["east"].metadata.get_subscription_view(T, replicator_name("west"))
    assert view.cursor is not None and view.cursor.mark_delete == 0  # nothing sent: the backlog stays
    geo.replicators["east"].remotes = geo.remotes["east"]
    geo.clock.advance(10_000)
    geo.settle()
    assert texts(geo.stored("west")) == ["m0", "m1"]


def test_a_consumer_cannot_take_a_replicators_subscription() -> None:
    from magnetar.core.errors import InvalidInput

    broker = memory_broker()
    with pytest.raises(InvalidInput, match="reserved"):
        broker.subscriptions.subscribe(T, replicator_name("west"), "c", "Shared", "Earliest")
