"""CompactionStore on the metadata table (items beside the topic partition's others).

| item                   | pk         | sk                                   |
|------------------------|------------|--------------------------------------|
| compaction state       | TP#<topic> | COMPACTION                           |
| compacted object index | TP#<topic> | CMP#<generation:08x>#<last entry:016x> |

The state is one item written conditionally on its version; an object's index is one item
(entry ids, offsets, masks: msgpack, at most `OBJECT_ENTRIES` entries, far under 400 KB).
"""

from __future__ import annotations

from typing import Any

from magnetar.adapters.aws.clients import UNPROCESSED_ATTEMPTS, unprocessed_backoff
from magnetar.adapters.aws.dynamodb.base import DynamoBase, _n, _s, _tp
from magnetar.core.compaction import CompactedObject, CompactionState
from magnetar.core.errors import RetryableError
from magnetar.core.naming import TopicName

STATE_SK = "COMPACTION"


def _object_sk(generation: int, last_entry: int) -> str:
    return f"CMP#{generation:08x}#{last_entry:016x}"


class DynamoCompactionStore(DynamoBase):
    def get_state(self, topic: TopicName) -> CompactionState:
        item = self._get(f"TP#{topic}", STATE_SK)
        if not item:
            return CompactionState()
        return CompactionState.from_bytes(bytes(item["data"]["B"]), int(item["version"]["N"]))

    def put_state(self, topic: TopicName, state: CompactionState, expected_version: int) -> bool:
        condition = "attribute_not_exists(pk)" if expected_version == 0 else "version = :v"
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "Item": {"pk": _tp(topic), "sk": _s(STATE_SK), "data": {"B": state.to_bytes()},
                     "version": _n(expected_version + 1)},
            "ConditionExpression": condition,
        }
        if expected_version:
            kwargs["ExpressionAttributeValues"] = {":v": _n(expected_version)}
        return self._if("put_item", **kwargs)

    def put_object(self, topic: TopicName, obj: CompactedObject) -> None:
        self.ddb.put_item(TableName=self.table, Item={
            "pk": _tp(topic), "sk": _s(_object_sk(obj.generation, obj.last_entry)), "data": {"B": obj.to_bytes()}})

    def list_objects(self, topic: TopicName, generation: int, from_entry: int, limit: int) -> list[CompactedObject]:
        page = self.ddb.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={":pk": _tp(topic), ":lo": _s(_object_sk(generation, max(from_entry, 0))),
                                       ":hi": _s(_object_sk(generation, 2**63 - 1))},
            ConsistentRead=True, Limit=limit,
        )
        return [CompactedObject.from_bytes(bytes(item["data"]["B"])) for item in page["Items"]]

    def delete_objects(self, topic: TopicName, objects: list[CompactedObject]) -> None:
        keys = [{"pk": _tp(topic), "sk": _s(_object_sk(o.generation, o.last_entry))} for o in objects]
        for start in range(0, len(keys), 25):
            request: dict[str, Any] = {self.table: [{"DeleteRequest": {"Key": k}} for k in keys[start:start + 25]]}
            for attempt in range(UNPROCESSED_ATTEMPTS + 1):
                if attempt:
                    unprocessed_backoff(attempt - 1, "BatchWriteItem")
                response = self.ddb.batch_write_item(RequestItems=request)
                request = response.get("UnprocessedItems") or {}
                if not request:
                    break
            else:
                raise RetryableError("DynamoDB throttled a batch delete; retry")
