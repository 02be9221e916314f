"""Idle topics cost a maintenance run one state read: a settled (empty) ledger is skipped, and the
skip never hides work (the next publish, a trash left behind, a backlog block to lift)."""

from __future__ import annotations

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.acks import Acks
from magnetar.core.entry import Batch, Message
from magnetar.core.lifecycle import settled
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.policies import MESSAGE_TTL
from magnetar.core.ports import SealState, WriterState

T = TopicName.parse("idle-lifecycle")
NS = NamespaceName("public", "default")


def publish(broker, n: int) -> None:  # type: ignore[no-untyped-def]
    start = len(broker.journal.records)
    for _ in range(n):
        broker.writer.append(T, Batch.of([Message(b"x" * 100)], batched=False), "p")
    assert broker.sealer.seal(broker.journal.records[start:]).retry_from is None


def ack_everything(broker, upto: int) -> None:  # type: ignore[no-untyped-def]
    broker.subscriptions.subscribe(T, "s", "c", "Exclusive", "Earliest")
    broker.subscriptions.receive(T, "s", "c", max_messages=1000)
    broker.subscriptions.acknowledge(T, "s", Acks(cumulative=(upto - 1, 1, -1)))


def writer(next_entry: int, blocked: str = "") -> WriterState:
    return WriterState(next_entry=next_entry, ledger_id=0, ledger_first_entry=0, ledger_opened_at=0, created_at=0,
                       backlog_blocked=blocked)


def test_settled_means_an_empty_ledger_with_nothing_left_to_finish() -> None:
    assert settled(SealState(), writer(0))
    assert not settled(SealState(), writer(1)), "an entry not sealed yet"
    assert settled(SealState(first_entry=7, next_entry=7), writer(7))
    assert not settled(SealState(first_entry=7, next_entry=7, trash=("k",)), writer(7))
    assert not settled(SealState(), writer(0, "producer_exception"))


def test_an_emptied_topic_is_skipped_until_the_next_publish_gives_it_work() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.subscriptions.subscribe(T, "s", "c", "Exclusive", "Earliest")
    publish(broker, 5)
    ack_everything(broker, 5)
    assert broker.maintenance.run().trimmed_segments == 1
    assert settled(*broker.metadata.get_topic_state(T))
    broker.admin.set_policy(NS, MESSAGE_TTL, 60)
    publish(broker, 3)
    assert not settled(*broker.metadata.get_topic_state(T))
    clock.advance(90_000)
    assert broker.maintenance.run().expired_entries == 3, "the new entries are maintained again"


def test_a_backlog_block_left_on_an_empty_topic_is_lifted() -> None:
    broker = memory_broker()
    publish(broker, 2)
    broker.maintenance.run()  # no subscription: everything counts as acknowledged and goes
    broker.metadata.set_backlog_blocked(T, "producer_exception")  # e.g. a quota removed while blocked
    broker.maintenance.run()
    _, writer = broker.metadata.get_topic_state(T)
    assert writer is not None and writer.backlog_blocked == ""
