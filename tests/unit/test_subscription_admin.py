"""Subscription administration (create at a position, delete, skip, clear, reset) and the paged
topic listing, on in-memory ports."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.acks import Acks
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import (
    AlreadyExists,
    InvalidInput,
    NotFound,
    PreconditionFailed,
    SubscriptionNotFound,
)
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.schema.types import SchemaData, StoredSchema
from magnetar.core.schema.values import ValueDecoder
from magnetar.core.subscription_admin import EARLIEST, Position

T = TopicName.parse("persistent://public/default/admin-subs")
NS = NamespaceName("public", "default")


def publish(broker: Any, count: int, topic: TopicName = T) -> None:
    for i in range(count):
        broker.writer.append(topic, Batch.of([Message(f"m{i}".encode())], batched=False), "p")


def cursor(broker: Any, subscription: str, topic: TopicName = T) -> Any:
    view = broker.metadata.get_subscription_view(topic, subscription)
    assert view.cursor is not None
    return view.cursor


def backlog(broker: Any, subscription: str, topic: TopicName = T) -> int:
    return int(broker.stats.topic_stats(topic)["subscriptions"][subscription]["msgBacklog"])


def test_create_at_earliest_latest_and_an_entry_then_refuse_a_second_create() -> None:
    broker = memory_broker(ManualClock())
    publish(broker, 5)
    admin = broker.subscription_admin
    admin.create(T, "from-start", Position(EARLIEST))
    admin.create(T, "from-end")
    admin.create(T, "from-3", Position.entry(3))
    assert backlog(broker, "from-start") == 5
    assert backlog(broker, "from-end") == 0
    assert backlog(broker, "from-3") == 2
    with pytest.raises(AlreadyExists):
        admin.create(T, "from-end", Position(EARLIEST))
    assert backlog(broker, "from-end") == 0, "a refused create leaves the subscription as it was"
    with pytest.raises(InvalidInput):
        admin.create(T, "beyond", Position.entry(99))
    with pytest.raises(InvalidInput):
        admin.create(T, "pulsar.repl.east")
    with pytest.raises(NotFound):
        admin.create(TopicName.parse("persistent://public/default/never-written"), "s")


def test_a_consumer_attaches_to_a_created_subscription_and_receives_its_backlog() -> None:
    broker = memory_broker(ManualClock())
    publish(broker, 3)
    broker.subscription_admin.create(T, "made", Position(EARLIEST))
    broker.subscriptions.subscribe(T, "made", "c1", "Shared")
    got = broker.subscriptions.receive(T, "made", "c1", max_messages=10)
    assert [d.entry.entry_id for d in got.entries] == [0, 1, 2]


def test_skip_counts_unacknowledged_entries_and_clear_empties_the_backlog() -> None:
    broker = memory_broker(ManualClock())
    publish(broker, 10)
    admin = broker.subscription_admin
    admin.create(T, "s", Position(EARLIEST))
    broker.subscriptions.subscribe(T, "s", "c1", "Shared")
    broker.subscriptions.receive(T, "s", "c1", max_messages=10)
    broker.subscriptions.acknowledge(T, "s", Acks(entries=(1, 2)))  # 0 and 3.. still unacknowledged
    assert admin.skip(T, "s", 2) == 2  # entries 0 and 3: the acknowledged 1 and 2 do not count
    state = cursor(broker, "s")
    assert state.mark_delete == 4
    assert backlog(broker, "s") == 6
    assert admin.skip(T, "s", 100) == 6  # no further than the end
    assert backlog(broker, "s") == 0
    publish(broker, 4)
    assert admin.clear_backlog(T, "s") == 4
    assert backlog(broker, "s") == 0 and cursor(broker, "s").mark_delete == 14
    with pytest.raises(SubscriptionNotFound):
        admin.clear_backlog(T, "missing")
    with pytest.raises(InvalidInput):
        admin.skip(T, "s", 0)


def test_reset_by_time_and_to_an_entry_redelivers() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    publish(broker, 3)
    clock.advance(10_000)
    middle = clock.now
    publish(broker, 3)
    admin = broker.subscription_admin
    admin.create(T, "s")
    assert backlog(broker, "s") == 0
    admin.reset_to_time(T, "s", middle)
    assert cursor(broker, "s").mark_delete == 3 and backlog(broker, "s") == 3
    admin.reset_to_entry(T, "s", 1)
    assert backlog(broker, "s") == 5
    epoch = cursor(broker, "s").epoch
    admin.reset_to_time(T, "s", 0)
    assert backlog(broker, "s") == 6 and cursor(broker, "s").epoch == epoch + 1


def test_delete_is_refused_with_consumers_attached_unless_forced() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    publish(broker, 1)
    admin = broker.subscription_admin
    broker.subscriptions.subscribe(T, "busy", "c1", "Shared")
    with pytest.raises(PreconditionFailed):
        admin.delete(T, "busy")
    admin.delete(T, "busy", force=True)
    assert "busy" not in broker.admin.list_subscriptions(T)
    with pytest.raises(SubscriptionNotFound):
        admin.delete(T, "busy")


def test_a_partitioned_topic_is_administered_on_every_partition() -> None:
    broker = memory_broker(ManualClock())
    parted = TopicName.parse("persistent://public/default/admin-parted")
    broker.admin.create_partitioned_topic(parted, 3)
    for i in range(3):
        publish(broker, i + 1, parted.partition(i))
    admin = broker.subscription_admin
    admin.create(parted, "all", Position(EARLIEST))
    assert [backlog(broker, "all", parted.partition(i)) for i in range(3)] == [1, 2, 3]
    assert admin.clear_backlog(parted, "all") == 6
    with pytest.raises(InvalidInput):
        admin.skip(parted, "all", 1)  # a count names one partition's entries
    admin.reset_to_entry(parted.partition(2), "all", 0)
    assert [backlog(broker, "all", parted.partition(i)) for i in range(3)] == [0, 0, 3]
    admin.delete(parted, "all")
    assert all("all" not in broker.admin.list_subscriptions(parted.partition(i)) for i in range(3))


def test_topic_pages_follow_each_other_and_search_any_case() -> None:
    broker = memory_broker(ManualClock())
    names = [f"page-{i:03d}" for i in range(25)] + ["Orders-EU", "orders-us"]
    for name in names:
        broker.admin.create_topic(TopicName.of("persistent", "public", "default", name))
    broker.admin.create_topic(TopicName.of("non-persistent", "public", "default", "page-np"))
    seen: list[str] = []
    after = ""
    while True:
        page = broker.admin.list_topics_page(NS, "persistent", start_after=after, limit=10)
        seen += page
        if len(page) < 10:
            break
        after = page[-1]
    assert seen == sorted(f"persistent://public/default/{n}" for n in names)
    assert broker.admin.list_topics_page(NS, "persistent", search="ORDERS") == [
        "persistent://public/default/Orders-EU", "persistent://public/default/orders-us"]
    assert broker.admin.list_topics_page(NS, "persistent", search="page-02", start_after="page-020", limit=3) == [
        f"persistent://public/default/page-02{i}" for i in (1, 2, 3)]
    assert broker.admin.list_topics_page(NS, "non-persistent", search="page") == [
        "non-persistent://public/default/page-np"]
    with pytest.raises(InvalidInput):
        broker.admin.list_topics_page(NS, "persistent", limit=0)
    with pytest.raises(NotFound):
        broker.admin.list_topics_page(NamespaceName("public", "nope"), "persistent")


def test_values_decode_with_the_version_they_were_written_with() -> None:
    avro = ('{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"},'
            ' {"name": "note", "type": "bytes"}]}')
    decoder = ValueDecoder([
        StoredSchema(0, SchemaData("STRING"), 1),
        StoredSchema(1, SchemaData("AVRO", avro), 2),
        StoredSchema(2, SchemaData("STRING"), 3, deleted=True),
        StoredSchema(3, SchemaData("JSON", avro), 4),
    ])
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(json.loads(avro)), {"id": 7, "note": b"\x01"})
    assert decoder.decode(buffer.getvalue(), 1) == {"value": {"id": 7, "note": "AQ=="}, "schemaType": "AVRO"}
    assert decoder.decode("héllo".encode(), 0) == {"value": "héllo", "schemaType": "STRING"}
    assert decoder.decode(b'{"id": 1}', None) == {"value": {"id": 1}, "schemaType": "JSON"}  # the current one
    assert "valueError" in decoder.decode(b"not json", 3)
    assert ValueDecoder([]).decode(b"raw", None) == {}
