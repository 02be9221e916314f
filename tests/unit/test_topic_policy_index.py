"""A namespace's index of its topics with policy overrides: a publish to any other topic reads no
policies of its own (Pulsar's brokers load a namespace's topic policies at once)."""

from __future__ import annotations

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import PayloadTooLarge
from magnetar.core.ledger.policy_cache import POLICY_CACHE_MS
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.policies import MAX_MESSAGE_SIZE


def test_only_a_topic_its_namespace_lists_reads_its_own_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    quiet, tuned = TopicName.parse("quiet"), TopicName.parse("tuned")
    for topic in (quiet, tuned):
        broker.writer.append(topic, Batch.of([Message(b"x" * 100)]), "p")
    reads: list[str] = []
    read = broker.metadata.get_topic_policies
    monkeypatch.setattr(broker.metadata, "get_topic_policies", lambda t: reads.append(str(t)) or read(t))

    broker.admin.set_topic_policy(tuned, MAX_MESSAGE_SIZE, 50)
    namespace = broker.metadata.get_namespace(NamespaceName("public", "default"))
    assert namespace is not None and namespace.topics_with_policies == {str(tuned)}
    clock.advance(POLICY_CACHE_MS + 1)
    reads.clear()
    broker.writer.append(quiet, Batch.of([Message(b"x" * 100)]), "p")  # the namespace's default applies
    with pytest.raises(PayloadTooLarge):
        broker.writer.append(tuned, Batch.of([Message(b"x" * 100)]), "p")  # its own override applies
    assert reads == [str(tuned)]  # only the listed topic read its overrides

    broker.admin.remove_topic_policy(tuned, MAX_MESSAGE_SIZE)
    namespace = broker.metadata.get_namespace(NamespaceName("public", "default"))
    assert namespace is not None and namespace.topics_with_policies == frozenset()
    clock.advance(POLICY_CACHE_MS + 1)
    broker.writer.append(tuned, Batch.of([Message(b"x" * 100)]), "p")
