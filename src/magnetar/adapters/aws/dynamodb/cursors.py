"""Subscriptions' cursors (TP#<topic>, SUB#<subscription>): versioned conditional writes, listings,
and a subscription's view (cursor, seal and writer state in one BatchGetItem)."""

from __future__ import annotations

import json
from typing import Any

from magnetar.adapters.aws.dynamodb.base import DynamoBase, _int, _n, _s, _tp
from magnetar.core.cursor import CursorState
from magnetar.core.naming import TopicName
from magnetar.core.ports import SubscriptionView


class CursorItems(DynamoBase):
    """The SUB# items of each topic partition."""

    def get_subscription_view(self, topic: TopicName, subscription: str) -> SubscriptionView:
        items = self._batch_get(
            [
                {"pk": _tp(topic), "sk": _s(f"SUB#{subscription}")},
                {"pk": _tp(topic), "sk": _s("SEAL")},
                {"pk": _tp(topic), "sk": _s("WRITER")},
            ]
        )
        by_sk = {item["sk"]["S"]: item for item in items}
        cursor_item = by_sk.get(f"SUB#{subscription}")
        cursor = CursorState.from_dict(json.loads(cursor_item["state"]["S"])) if cursor_item else None
        version = _int(cursor_item, "version") if cursor_item else 0
        seal = self._seal_from_item(by_sk.get("SEAL"))
        return SubscriptionView(cursor, version, seal, self._writer_from_item(by_sk.get("WRITER")))

    def put_cursor(self, topic: TopicName, subscription: str, state: CursorState, expected_version: int) -> bool:
        item = {
            "pk": _tp(topic),
            "sk": _s(f"SUB#{subscription}"),
            "state": _s(json.dumps(state.to_dict(), separators=(",", ":"))),
            "version": _n(expected_version + 1),
        }
        kwargs: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        if expected_version:
            kwargs = {"ConditionExpression": "version = :v", "ExpressionAttributeValues": {":v": _n(expected_version)}}
        return self._if("put_item", TableName=self.table, Item=item, **kwargs)

    def delete_cursor(self, topic: TopicName, subscription: str, expected_version: int) -> bool:
        return self._if(
            "delete_item",
            TableName=self.table,
            Key={"pk": _tp(topic), "sk": _s(f"SUB#{subscription}")},
            ConditionExpression="version = :v",
            ExpressionAttributeValues={":v": _n(expected_version)},
        )

    def list_subscriptions(self, topic: TopicName) -> list[str]:
        return self._query_sks(f"TP#{topic}", "SUB#")

    def list_cursors(self, topic: TopicName) -> dict[str, tuple[CursorState, int]]:
        out: dict[str, tuple[CursorState, int]] = {}
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": _tp(topic), ":prefix": _s("SUB#")},
            "ConsistentRead": True,
        }
        while True:
            page = self.ddb.query(**kwargs)
            for item in page["Items"]:
                state = CursorState.from_dict(json.loads(item["state"]["S"]))
                out[item["sk"]["S"][4:]] = (state, _int(item, "version"))
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
