"""Pending acknowledgements (client/acks.py `AckGroup`), as the long-polling and the push consumer
keep them: the flusher's event, take-and-clear, restore after a failed send, a seek's clear."""

from __future__ import annotations

import threading

from magnetar.client.acks import AckGroup, Taken
from magnetar.client.message import MessageId


def test_an_idle_group_has_nothing_to_wake_for_and_the_first_ack_wakes_the_flusher() -> None:
    group = AckGroup()
    assert not group.wake.is_set() and group.since == 0.0
    assert group.take().empty()
    assert group.ack([("a", 0)]) == 1
    assert group.wake.is_set() and group.since > 0
    since = group.since
    group.wake.clear()  # the flusher woke; more acks before it takes them do not wake it again
    assert group.ack([("b", 3), ("c", 0)]) == 3
    assert group.nack(["d"]) == 1
    assert not group.wake.is_set() and group.since == since


def test_take_clears_and_the_next_ack_wakes_again() -> None:
    group = AckGroup()
    group.ack([("a", 0), ("b", 5)])
    group.nack(["c"])
    group.ack_cumulative(MessageId(0, 1, 7))
    group.ack_cumulative(MessageId(0, 1, 4))  # behind the first: the furthest one wins
    group.wake.clear()
    taken = group.take()
    assert taken.acks == {"a": 0, "b": 5} and taken.nacks == {"c"} and taken.cumulative == MessageId(0, 1, 7)
    assert group.since == 0.0 and group.take().empty()
    group.nack(["d"])
    assert group.wake.is_set()


def test_restore_merges_with_acks_made_meanwhile() -> None:
    group = AckGroup()
    group.ack([("a", 0)])
    group.ack_cumulative(MessageId(0, 1, 3))
    taken = group.take()
    group.wake.clear()
    group.ack([("b", 0)])
    group.ack_cumulative(MessageId(0, 1, 9))
    group.restore(taken)
    again = group.take()
    assert again.acks == {"a": 0, "b": 0} and again.cumulative == MessageId(0, 1, 9)


def test_restore_after_a_failed_send_wakes_the_flusher() -> None:
    group = AckGroup()
    group.nack(["x"])
    taken = group.take()
    group.wake.clear()
    group.restore(taken)
    assert group.wake.is_set() and group.since > 0
    group.wake.clear()
    group.take()
    group.restore(Taken())  # nothing to restore: nothing to wake for
    assert not group.wake.is_set() and group.since == 0.0


def test_clear_drops_everything_pending() -> None:
    group = AckGroup()
    group.ack([("a", 0)])
    group.nack(["b"])
    group.ack_cumulative(MessageId(0, 1, 1))
    group.clear()
    assert group.since == 0.0 and group.take().empty()


def test_no_ack_is_lost_while_another_thread_takes() -> None:
    group = AckGroup()
    sent: list[str] = []
    done = threading.Event()

    def flusher() -> None:
        while not done.is_set():
            group.wake.wait(0.01)
            group.wake.clear()
            sent.extend(group.take().acks)
        sent.extend(group.take().acks)

    thread = threading.Thread(target=flusher)
    thread.start()
    for i in range(5000):
        group.ack([(str(i), 0)])
    done.set()
    thread.join(timeout=10)
    sent.extend(group.take().acks)
    assert sorted(sent, key=int) == [str(i) for i in range(5000)]


def test_grouped_acknowledgements_wait_for_the_next_poll() -> None:
    """An application acking between receives starts its next poll at once: its acks ride on it,
    no request of their own; alone only after the grouping time with no poll, or the longest delay."""
    from magnetar.client.acks import ACK_GROUP_S, ACK_MAX_DELAY_S, ack_flush_due

    assert not ack_flush_due(0.001, polling=False)  # just acked: the next receive carries them
    assert ack_flush_due(ACK_GROUP_S, polling=False)  # nobody polled for the grouping time
    assert not ack_flush_due(ACK_GROUP_S, polling=True)  # a poll in flight carries them... or the next one
    assert ack_flush_due(ACK_MAX_DELAY_S, polling=True)
