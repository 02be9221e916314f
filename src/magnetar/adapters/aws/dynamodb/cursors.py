"""Subscriptions' cursors (TP#<topic>, SUB#<subscription>): versioned conditional writes, listings,
and a subscription's view (cursor, seal and writer state in one BatchGetItem).

A consumer of a partitioned topic reads the views of all its partitions in one BatchGetItem
(3 keys each, 100 per request) and writes the cursors that changed in one TransactWriteItems:
each write keeps its own version condition, and a write whose condition fails is dropped from
the transaction, which is sent again with the others (a transaction is all or nothing, and the
others' claims are still valid), so one contended partition never costs the others their step.
"""

from __future__ import annotations

import json
from typing import Any

from magnetar.adapters.aws.dynamodb.base import DynamoBase, _int, _n, _s, _tp
from magnetar.adapters.aws.dynamodb.deletion import LIVE
from magnetar.core.cursor import CursorState
from magnetar.core.naming import TopicName
from magnetar.core.ports import CursorWrite, SubscriptionView


class CursorItems(DynamoBase):
    """The SUB# items of each topic partition."""

    def get_subscription_view(self, topic: TopicName, subscription: str) -> SubscriptionView:
        return self.get_subscription_views([(topic, subscription)])[0]

    def get_subscription_views(self, keys: list[tuple[TopicName, str]]) -> list[SubscriptionView]:
        wanted = {(f"TP#{topic}", sk) for topic, subscription in keys for sk in (f"SUB#{subscription}", "SEAL", "WRITER")}
        items = self._batch_get([{"pk": _s(pk), "sk": _s(sk)} for pk, sk in sorted(wanted)])
        found = {(item["pk"]["S"], item["sk"]["S"]): item for item in items}
        views: list[SubscriptionView] = []
        for topic, subscription in keys:
            pk = f"TP#{topic}"
            cursor_item = found.get((pk, f"SUB#{subscription}"))
            cursor = CursorState.from_dict(json.loads(cursor_item["state"]["S"])) if cursor_item else None
            version = _int(cursor_item, "version") if cursor_item else 0
            seal = self._seal_from_item(found.get((pk, "SEAL")))
            views.append(SubscriptionView(cursor, version, seal, self._writer_from_item(found.get((pk, "WRITER")))))
        return views

    def put_cursor(self, topic: TopicName, subscription: str, state: CursorState, expected_version: int) -> bool:
        return self.put_cursors([CursorWrite(topic, subscription, state, expected_version)])[0]

    def put_cursors(self, writes: list[CursorWrite]) -> list[bool]:
        puts = [_cursor_put(w) for w in writes]
        # a new cursor is created only beside a writer counter no deletion fenced (a subscribe
        # that read the topic before its deletion began cannot leave a cursor behind it): a
        # transaction of two items; a cursor that exists is one conditional PutItem
        units = [[{"Put": {"TableName": self.table, **put}}, *([] if w.expected_version else [self._not_fenced(w.topic)])]
                 for w, put in zip(writes, puts, strict=True)]
        return self._transact_units(
            units, [len(put["Item"]["state"]["S"]) + 200 for put in puts],
            alone=lambda i: (self._if("put_item", TableName=self.table, **puts[i]) if writes[i].expected_version
                             else self._transact(units[i]) is None),  # lost to another write: read again
        )

    def _not_fenced(self, topic: TopicName) -> dict[str, Any]:
        return {"ConditionCheck": {"TableName": self.table, "Key": {"pk": _tp(topic), "sk": _s("WRITER")},
                                   "ConditionExpression": LIVE}}

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

    def list_cursors(self, topic: TopicName, consistent: bool = True) -> dict[str, tuple[CursorState, int]]:
        out: dict[str, tuple[CursorState, int]] = {}
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": _tp(topic), ":prefix": _s("SUB#")},
            "ConsistentRead": consistent,
        }
        while True:
            page = self.ddb.query(**kwargs)
            for item in page["Items"]:
                state = CursorState.from_dict(json.loads(item["state"]["S"]))
                out[item["sk"]["S"][4:]] = (state, _int(item, "version"))
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _cursor_put(w: CursorWrite) -> dict[str, Any]:
    """The conditional put of a cursor: version `expected_version` (0: absent) becomes the next."""
    item = {
        "pk": _tp(w.topic),
        "sk": _s(f"SUB#{w.subscription}"),
        "state": _s(json.dumps(w.state.to_dict(), separators=(",", ":"))),
        "version": _n(w.expected_version + 1),
    }
    if w.expected_version:
        return {"Item": item, "ConditionExpression": "version = :v",
                "ExpressionAttributeValues": {":v": _n(w.expected_version)}}
    return {"Item": item, "ConditionExpression": "attribute_not_exists(pk)"}
