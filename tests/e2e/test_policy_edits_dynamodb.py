"""Namespace policy edits on the emulator's DynamoDB: each write is conditional on the policies it
read, so two edits made at once (through two containers, or two clusters of an instance writing
the configuration store's home replica) are both kept."""

from __future__ import annotations

from typing import Any

import pytest
from tests.e2e.emulator_fixtures import ddb_fixture, fresh_table  # noqa: F401  (the module's emulator)

from magnetar.adapters.aws.dynamodb import DynamoMetadataStore
from magnetar.config import BOOTSTRAP_ITEMS
from magnetar.core.admin import AdminService
from magnetar.core.naming import NamespaceName
from magnetar.core.ports import NamespaceInfo, SystemClock, TenantInfo

NS = NamespaceName("acme", "orders")


def _store(ddb: Any, table: str | None = None) -> DynamoMetadataStore:
    store = DynamoMetadataStore(table or fresh_table(ddb), dynamodb=ddb)
    if table is None:
        store.create_tenant(TenantInfo("acme"))
        store.create_namespace(NamespaceInfo(NS))
    return store


def test_a_write_based_on_a_stale_read_is_refused_and_nothing_is_written(ddb: Any) -> None:
    first = _store(ddb)
    second = _store(ddb, first.table)  # another container (or cluster) on the same store
    read = first.get_namespace(NS)
    assert read is not None and read.policies == {}
    assert second.set_namespace_policies(NS, {"deduplicationEnabled": True}, {})
    assert not first.set_namespace_policies(NS, {"message_ttl_in_seconds": 60}, read.policies)
    assert first.get_namespace(NS).policies == {"deduplicationEnabled": True}  # type: ignore[union-attr]


def test_two_admins_editing_at_once_keep_both_edits(ddb: Any) -> None:
    first = _store(ddb)
    second = _store(ddb, first.table)
    a, b = AdminService(first, SystemClock()), AdminService(second, SystemClock())
    stale = first.get_namespace(NS)
    b.set_policy(NS, "deduplicationEnabled", True)
    a.update_policies(NS, lambda p: {**p, "message_ttl_in_seconds": 60}, stale)  # its first read was stale
    assert first.get_namespace(NS).policies == {  # type: ignore[union-attr]
        "deduplicationEnabled": True, "message_ttl_in_seconds": 60}


def test_the_bootstrap_namespace_takes_its_first_policy(ddb: Any) -> None:
    table = fresh_table(ddb)
    for item in BOOTSTRAP_ITEMS:  # policies stored as an empty map, as the stack's bootstrap writes them
        ddb.put_item(TableName=table, Item=item)
    store = DynamoMetadataStore(table, dynamodb=ddb)
    AdminService(store, SystemClock()).set_policy(NamespaceName("public", "default"), "deduplicationEnabled", True)
    assert store.get_namespace(NamespaceName("public", "default")).policies == {  # type: ignore[union-attr]
        "deduplicationEnabled": True}


def test_two_edits_of_a_topics_policies_at_once_keep_both(ddb: Any) -> None:
    from magnetar.core.errors import StalePolicies
    from magnetar.core.naming import TopicName

    first = _store(ddb)
    second = _store(ddb, first.table)
    topic = TopicName.parse("persistent://acme/orders/t")
    assert first.create_topic(topic, 1)
    stale = first.get_topic_policies(topic)
    assert second.set_topic_policies(topic, {"messageTTL": 60}, {})
    with pytest.raises(StalePolicies):  # based on the read before the other edit: refused, nothing written
        first.set_topic_policies(topic, {"maxProducers": 3}, stale)
    AdminService(first, SystemClock()).set_topic_policy(topic, "maxProducers", 3)  # reads again: both kept
    assert first.get_topic_policies(topic) == {"messageTTL": 60, "maxProducers": 3}
