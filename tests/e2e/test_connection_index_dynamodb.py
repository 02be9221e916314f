"""The WebSocket connection registry's topic index on DynamoDB (the emulator): a journal batch
finds all its topics' connections in two batch reads, whatever the number of topics."""

from __future__ import annotations

from typing import Any

from tests.e2e.emulator_fixtures import ddb_fixture, fresh_table  # noqa: F401  (the module's emulator)

from magnetar.adapters.aws.connections import INDEX_PK, DynamoConnectionRegistry
from magnetar.core.ports.push import Connection

A, B, C = (f"persistent://public/default/{n}" for n in "abc")


class _Counting:
    def __init__(self, ddb: Any) -> None:
        self.ddb = ddb
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        return getattr(self.ddb, name)


def _conn(cid: str, topic: str) -> Connection:
    return Connection(cid, "consumer", topic, 1, name=f"c-{cid}", subscription="s", subscription_type="Shared")


def test_the_connections_of_many_topics_come_in_two_batch_reads(ddb: Any) -> None:
    counting = _Counting(ddb)
    registry = DynamoConnectionRegistry(fresh_table(ddb), dynamodb=counting)
    for cid, topic in (("a1", A), ("a2", A), ("b1", B)):
        registry.add(_conn(cid, topic))
    counting.calls.clear()
    found = registry.of_topics([A, B, C])
    assert {t: sorted(c.connection_id for c in conns) for t, conns in found.items()} == {A: ["a1", "a2"], B: ["b1"]}
    assert counting.calls == ["batch_get_item", "batch_get_item"]  # the index, then the connections: no query

    registry.remove(_conn("a1", A))
    registry.remove(_conn("b1", B))
    assert {t: [c.connection_id for c in conns] for t, conns in registry.of_topics([A, B]).items()} == {A: ["a2"]}


def test_an_expired_connection_leaves_the_index_and_an_old_index_item_is_queried(ddb: Any) -> None:
    registry = DynamoConnectionRegistry(fresh_table(ddb), dynamodb=ddb)
    registry.add(_conn("a1", A))
    registry.add(_conn("a2", A))
    # a2's item expired (its $disconnect never came): read in vain once, then off the index
    ddb.delete_item(TableName=registry.table, Key={"pk": {"S": f"TP#{A}"}, "sk": {"S": "WS#a2"}})
    assert [c.connection_id for c in registry.of_topics([A])[A]] == ["a1"]
    index = ddb.get_item(TableName=registry.table, Key={"pk": {"S": INDEX_PK}, "sk": {"S": A}})["Item"]
    assert index["ids"]["SS"] == ["a1"]

    # an index item from before the ids were kept: that topic is queried
    registry.add(_conn("c1", C))
    ddb.put_item(TableName=registry.table, Item={"pk": {"S": INDEX_PK}, "sk": {"S": C}, "at": {"N": "1"}})
    assert [c.connection_id for c in registry.of_topics([C])[C]] == ["c1"]
