"""The DynamoDB adapter's index of a namespace's topics with policy overrides, on the emulator:
kept in the same transaction as the overrides, dropped (not wrong) when it is full, unknown for a
namespace from before it."""

from __future__ import annotations

from typing import Any

import pytest
from tests.e2e.emulator_fixtures import ddb_fixture, fresh_table  # noqa: F401  (the module's emulator)

from magnetar.adapters.aws.dynamodb import DynamoMetadataStore, catalog
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.ports import NamespaceInfo, TenantInfo

NS = NamespaceName("acme", "orders")


def _store(ddb: Any) -> DynamoMetadataStore:
    store = DynamoMetadataStore(fresh_table(ddb), dynamodb=ddb)
    store.create_tenant(TenantInfo("acme"))
    store.create_namespace(NamespaceInfo(NS))
    return store


def _topic(store: DynamoMetadataStore, name: str) -> TopicName:
    topic = TopicName.parse(f"persistent://acme/orders/{name}")
    assert store.create_topic(topic, 1)
    return topic


def test_the_namespace_lists_its_topics_with_overrides(ddb: Any) -> None:
    store = _store(ddb)
    plain, tuned = _topic(store, "plain"), _topic(store, "tuned")
    assert store.get_namespace(NS).topics_with_policies == frozenset()  # type: ignore[union-attr]
    assert store.set_topic_policies(tuned, {"max_message_size": 10})
    assert store.get_namespace(NS).topics_with_policies == {str(tuned)}  # type: ignore[union-attr]
    assert store.get_topic_policies(tuned) == {"max_message_size": 10} and store.get_topic_policies(plain) == {}
    assert store.set_topic_policies(tuned, {"max_message_size": None})  # removed (kept as null)
    assert store.get_namespace(NS).topics_with_policies == frozenset()  # type: ignore[union-attr]
    assert not store.set_topic_policies(TopicName.parse("persistent://acme/orders/missing"), {"x": 1})


def test_a_full_index_stops_being_one_and_the_overrides_are_still_written(
        ddb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(ddb)
    first, second = _topic(store, "a"), _topic(store, "b")
    monkeypatch.setattr(catalog, "MAX_INDEXED_TOPICS", 1)
    assert store.set_topic_policies(first, {"max_message_size": 10})
    assert store.set_topic_policies(second, {"max_message_size": 20})
    assert store.get_namespace(NS).topics_with_policies is None  # type: ignore[union-attr]  # unknown: every topic reads
    assert store.get_topic_policies(second) == {"max_message_size": 20}


def test_a_namespace_from_before_the_index_is_not_indexed(ddb: Any) -> None:
    store = _store(ddb)
    ddb.update_item(TableName=store.table, Key={"pk": {"S": "NAMESPACES#acme"}, "sk": {"S": "orders"}},
                    UpdateExpression="REMOVE policy_index")
    assert store.get_namespace(NS).topics_with_policies is None  # type: ignore[union-attr]
