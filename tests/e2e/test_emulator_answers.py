"""The emulator's answers with `magnetar.local.moto_fixes` applied: an item of every attribute
type comes back as it was stored through every DynamoDB operation that returns items (the fix
writes attribute values out directly instead of moto's shape walk); update expressions are still
validated as DynamoDB does (the fix builds the validators' node maps once and counts clauses from
the root); a Kinesis shard's records are read in order from any position (the fix reads them by
sequence number instead of walking the shard)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from tests.e2e.emulator_fixtures import ddb_fixture, fresh_table  # noqa: F401  (the module's emulator)

EVERY_TYPE: dict[str, Any] = {
    "pk": {"S": "p"}, "sk": {"S": "item"},
    "s": {"S": "text é"}, "empty": {"S": ""}, "n": {"N": "-12.5"},
    "b": {"B": b"\x00\x01\xffbytes"}, "bs": {"BS": [b"\x00", b"\x01\x02"]},
    "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2.5"]},
    "null": {"NULL": True}, "yes": {"BOOL": True}, "no": {"BOOL": False},
    "m": {"M": {"inner": {"M": {"deep": {"L": [{"S": "x"}, {"N": "1"}, {"B": b"\x07"}, {"M": {}}, {"L": []}]}}},
                "flag": {"BOOL": False}}},
    "l": {"L": [{"NULL": True}, {"SS": ["z"]}, {"M": {"k": {"S": "v"}}}]},
}


def _sets_sorted(item: dict[str, Any]) -> dict[str, Any]:
    """Sets come back in any order, as on DynamoDB."""
    return {k: {t: sorted(v) if t in ("SS", "NS", "BS") else v for t, v in a.items()} for k, a in item.items()}


def test_an_item_of_every_type_comes_back_as_stored_from_every_read(ddb: Any) -> None:
    table = fresh_table(ddb)
    ddb.put_item(TableName=table, Item=EVERY_TYPE)
    key = {"pk": EVERY_TYPE["pk"], "sk": EVERY_TYPE["sk"]}
    want = _sets_sorted(EVERY_TYPE)
    assert _sets_sorted(ddb.get_item(TableName=table, Key=key)["Item"]) == want
    batch = ddb.batch_get_item(RequestItems={table: {"Keys": [key]}})["Responses"][table]
    assert [_sets_sorted(i) for i in batch] == [want]
    query = ddb.query(TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p"}})
    assert [_sets_sorted(i) for i in query["Items"]] == [want]
    updated = ddb.update_item(TableName=table, Key=key, UpdateExpression="SET n = :n",
                              ExpressionAttributeValues={":n": {"N": "3"}}, ReturnValues="ALL_NEW")["Attributes"]
    assert _sets_sorted(updated) == want | {"n": {"N": "3"}}
    with pytest.raises(ClientError) as refused:
        ddb.transact_write_items(TransactItems=[{"ConditionCheck": {
            "TableName": table, "Key": key, "ConditionExpression": "attribute_not_exists(pk)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}])
    reason = refused.value.response["CancellationReasons"][0]
    assert reason["Code"] == "ConditionalCheckFailed"
    assert _sets_sorted(reason["Item"]) == want | {"n": {"N": "3"}}


def test_update_expressions_are_still_validated(ddb: Any) -> None:
    table = fresh_table(ddb)
    key = {"pk": {"S": "p"}, "sk": {"S": "counter"}}
    ddb.put_item(TableName=table, Item=key | {"n": {"N": "1"}, "s": {"S": "x"}})

    def refusal(expression: str, values: dict[str, Any]) -> str:
        with pytest.raises(ClientError) as refused:
            ddb.update_item(TableName=table, Key=key, UpdateExpression=expression, ExpressionAttributeValues=values)
        return str(refused.value.response["Error"]["Message"])

    assert "SET" in refusal("SET n = :one SET s = :s", {":one": {"N": "1"}, ":s": {"S": "y"}})
    assert "overlap" in refusal("SET n = :one, n = :two", {":one": {"N": "1"}, ":two": {"N": "2"}}).lower()
    assert "incorrect operand type" in refusal("SET n = s + :one", {":one": {"N": "1"}}).lower()
    assert "key" in refusal("SET sk = :v", {":v": {"S": "other"}}).lower()
    # an expression of every clause, many actions deep, goes through and does what it says
    ddb.update_item(TableName=table, Key=key,
                    UpdateExpression="SET n = n + :one, a = :a, b = if_not_exists(b, :a) ADD c :one REMOVE s",
                    ExpressionAttributeValues={":one": {"N": "1"}, ":a": {"S": "a"}})
    item = ddb.get_item(TableName=table, Key=key)["Item"]
    assert item == key | {"n": {"N": "2"}, "a": {"S": "a"}, "b": {"S": "a"}, "c": {"N": "1"}}


def test_a_shard_is_read_in_order_from_every_kind_of_position(ddb: Any) -> None:
    # the emulator's limits hold: 5 GetRecords a second per shard, the rest retried after a pause
    kinesis = boto3.client("kinesis", endpoint_url=ddb.meta.endpoint_url, region_name="us-east-1",
                           aws_access_key_id="test", aws_secret_access_key="test",
                           config=Config(retries={"max_attempts": 20, "mode": "standard"}))
    stream = f"s-{fresh_table(ddb)}"
    kinesis.create_stream(StreamName=stream, ShardCount=1)
    shard = kinesis.describe_stream(StreamName=stream)["StreamDescription"]["Shards"][0]["ShardId"]

    def iterator(kind: str, **at: str) -> str:
        return str(kinesis.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType=kind, **at)["ShardIterator"])

    def read(it: str, limit: int) -> tuple[list[bytes], list[int], str, int]:
        got = kinesis.get_records(ShardIterator=it, Limit=limit)
        records = got["Records"]
        return ([r["Data"] for r in records], [int(r["SequenceNumber"]) for r in records], got["NextShardIterator"],
                got["MillisBehindLatest"])

    latest = iterator("LATEST")
    sequences = [int(kinesis.put_record(StreamName=stream, Data=f"r{i}".encode(), PartitionKey="k")["SequenceNumber"])
                 for i in range(30)]
    assert sequences == sorted(sequences) and len(set(sequences)) == 30
    data, it = [], iterator("TRIM_HORIZON")
    while len(data) < 30:  # pages of 7, in order, each continuing where the last stopped
        page, numbers, it, _ = read(it, 7)
        assert page and len(page) <= 7
        data += page
    assert data == [f"r{i}".encode() for i in range(30)]
    page, _, it, behind = read(it, 7)
    assert page == [] and behind == 0, "nothing after the last record"
    page, numbers, _, _ = read(iterator("AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=str(sequences[9])), 3)
    assert page == [b"r10", b"r11", b"r12"] and numbers == sequences[10:13]
    page, _, _, _ = read(iterator("AT_SEQUENCE_NUMBER", StartingSequenceNumber=str(sequences[28])), 10)
    assert page == [b"r28", b"r29"]
    assert read(latest, 100)[0] == data, "LATEST taken before the puts reads them all"
    kinesis.put_record(StreamName=stream, Data=b"after", PartitionKey="k")
    assert read(it, 10)[0] == [b"after"], "an iterator at the end reads what comes next"
