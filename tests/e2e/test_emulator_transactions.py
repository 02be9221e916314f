"""The emulator's TransactWriteItems: all or nothing, with the rollback of `magnetar.local.moto_fixes`
(the items the transaction names are put back; moto's own rollback copied whole tables), and the
DynamoDB adapter's grouped transactions on it (seal commits of many topics, one conflict among them)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from tests.e2e.emulator_fixtures import ddb_fixture, fresh_table  # noqa: F401  (the module's emulator)

from magnetar.core.naming import TopicName


def _items(ddb: Any, table: str) -> dict[str, str]:
    return {i["sk"]["S"]: i.get("v", {}).get("S", "") for i in ddb.scan(TableName=table)["Items"]}


def test_a_cancelled_transaction_leaves_every_item_as_it_was(ddb: Any) -> None:
    table = fresh_table(ddb)
    for sk, v in (("a", "1"), ("d", "keep")):
        ddb.put_item(TableName=table, Item={"pk": {"S": "p"}, "sk": {"S": sk}, "v": {"S": v}})
    with pytest.raises(ClientError) as refused:
        ddb.transact_write_items(TransactItems=[
            {"Update": {"TableName": table, "Key": {"pk": {"S": "p"}, "sk": {"S": "a"}},
                        "UpdateExpression": "SET v = :v", "ExpressionAttributeValues": {":v": {"S": "2"}}}},
            {"Put": {"TableName": table, "Item": {"pk": {"S": "p"}, "sk": {"S": "b"}, "v": {"S": "new"}}}},
            {"Delete": {"TableName": table, "Key": {"pk": {"S": "p"}, "sk": {"S": "d"}}}},
            {"ConditionCheck": {"TableName": table, "Key": {"pk": {"S": "p"}, "sk": {"S": "c"}},
                                "ConditionExpression": "attribute_exists(pk)"}},
        ])
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    reasons = [r["Code"] for r in refused.value.response["CancellationReasons"]]
    assert reasons == ["None", "None", "None", "ConditionalCheckFailed"]
    assert _items(ddb, table) == {"a": "1", "d": "keep"}, "the update, the put and the delete were undone"


def test_a_transaction_that_passes_writes_every_item(ddb: Any) -> None:
    table = fresh_table(ddb)
    ddb.put_item(TableName=table, Item={"pk": {"S": "p"}, "sk": {"S": "a"}, "v": {"S": "1"}})
    ddb.transact_write_items(TransactItems=[
        {"Update": {"TableName": table, "Key": {"pk": {"S": "p"}, "sk": {"S": "a"}},
                    "UpdateExpression": "SET v = :v", "ConditionExpression": "v = :old",
                    "ExpressionAttributeValues": {":v": {"S": "2"}, ":old": {"S": "1"}}}},
        {"Put": {"TableName": table, "Item": {"pk": {"S": "p"}, "sk": {"S": "b"}, "v": {"S": "new"}}}},
    ])
    assert _items(ddb, table) == {"a": "2", "b": "new"}
    # the table object moto keeps is still the one later calls use (no copy swapped in)
    with pytest.raises(ClientError):
        ddb.transact_write_items(TransactItems=[
            {"Put": {"TableName": table, "Item": {"pk": {"S": "p"}, "sk": {"S": "c"}}}},
            {"Put": {"TableName": table, "Item": {"pk": {"S": "p"}, "sk": {"S": "a"}},
                     "ConditionExpression": "attribute_not_exists(pk)"}},
        ])
    ddb.put_item(TableName=table, Item={"pk": {"S": "p"}, "sk": {"S": "e"}, "v": {"S": "after"}})
    assert _items(ddb, table) == {"a": "2", "b": "new", "e": "after"}


def test_a_query_reads_its_partition_only_and_pages_like_dynamodb(ddb: Any) -> None:
    """moto_fixes hands moto's query the queried partition (moto sorted the whole table per query)."""
    table = fresh_table(ddb)
    for pk in ("a", "b", "c"):
        for i in range(5):
            ddb.put_item(TableName=table, Item={"pk": {"S": pk}, "sk": {"S": f"{i:02d}"}, "v": {"S": pk * 3}})
    query = {"TableName": table, "KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "b"}}}
    assert [i["sk"]["S"] for i in ddb.query(**query)["Items"]] == ["00", "01", "02", "03", "04"]
    assert [i["sk"]["S"] for i in ddb.query(**query, ScanIndexForward=False)["Items"]] == ["04", "03", "02", "01", "00"]
    first = ddb.query(**query, Limit=2)
    assert [i["sk"]["S"] for i in first["Items"]] == ["00", "01"]
    rest = ddb.query(**query, ExclusiveStartKey=first["LastEvaluatedKey"])
    assert [i["sk"]["S"] for i in rest["Items"]] == ["02", "03", "04"]
    ranged = ddb.query(TableName=table, KeyConditionExpression="pk = :p AND sk BETWEEN :lo AND :hi",
                       ExpressionAttributeValues={":p": {"S": "c"}, ":lo": {"S": "01"}, ":hi": {"S": "03"}})
    assert [(i["pk"]["S"], i["sk"]["S"]) for i in ranged["Items"]] == [("c", "01"), ("c", "02"), ("c", "03")]
    assert ddb.query(**{**query, "ExpressionAttributeValues": {":p": {"S": "nope"}}})["Items"] == []
    assert len(ddb.scan(TableName=table)["Items"]) == 15, "a query of a missing partition adds nothing"


class _Counting:
    """The DynamoDB client, counting the transactions it is asked for."""

    def __init__(self, ddb: Any) -> None:
        self.ddb = ddb
        self.transactions: list[int] = []

    def transact_write_items(self, **kwargs: Any) -> Any:
        self.transactions.append(len(kwargs["TransactItems"]))
        return self.ddb.transact_write_items(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ddb, name)


def _commit(topic: str, expected: int, entries: int = 2) -> Any:
    from magnetar.core.ports import SealState, SegmentCommit, SegmentMeta

    last = expected + entries - 1
    meta = SegmentMeta(topic, 0, expected, last, f"seg/{topic}/{expected}-{last}", tuple(range(0, 10 * (entries + 1), 10)),
                       entries, 1, 1)
    return SegmentCommit(meta, expected, SealState(next_entry=last + 1, sealed_entries=last + 1))


def test_the_seal_commits_of_many_topics_go_in_few_transactions_and_a_conflict_costs_only_its_own(ddb: Any) -> None:
    from magnetar.adapters.aws.dynamodb import DynamoMetadataStore

    table = fresh_table(ddb)
    counting = _Counting(ddb)
    store = DynamoMetadataStore(table, dynamodb=counting)
    topics = [f"persistent://t/ns/many-{i}" for i in range(120)]
    assert store.commit_segments([_commit(t, 0) for t in topics]) == [True] * 120
    assert counting.transactions == [100, 100, 40]  # 50 topics (segment + seal state) per transaction

    counting.transactions.clear()
    # topic 7 is expected at the wrong entry (another sealer moved it): only its commit is refused
    commits = [_commit(t, 5 if n == 7 else 2) for n, t in enumerate(topics[:10])]
    assert store.commit_segments(commits) == [n != 7 for n in range(10)]
    assert counting.transactions == [20, 18]  # cancelled once, sent again without it
    states = store.get_seal_states(topics[:10])
    assert [states[t].next_entry for t in topics[:10]] == [2 if n == 7 else 4 for n in range(10)]
    assert [s.last_entry for s in store.list_segments(TopicName.parse(topics[7]), 0, 10)] == [1]
    assert [s.last_entry for s in store.list_segments(TopicName.parse(topics[8]), 0, 10)] == [1, 3]
