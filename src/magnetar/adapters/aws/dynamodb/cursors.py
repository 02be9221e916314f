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

from botocore.exceptions import ClientError

from magnetar.adapters.aws.dynamodb.base import DynamoBase, _int, _n, _s, _tp
from magnetar.core.cursor import CursorState
from magnetar.core.naming import TopicName
from magnetar.core.ports import CursorWrite, SubscriptionView

TRANSACTION_ITEMS = 100  # DynamoDB's limit per TransactWriteItems
TRANSACTION_BYTES = 3_500_000  # under its 4 MB, with room for the keys and conditions


class CursorItems(DynamoBase):
    """The SUB# items of each topic partition."""

    def get_subscription_view(self, topic: TopicName, subscription: str) -> SubscriptionView:
        return self.get_subscription_views([topic], subscription)[0]

    def get_subscription_views(self, topics: list[TopicName], subscription: str) -> list[SubscriptionView]:
        sks = (f"SUB#{subscription}", "SEAL", "WRITER")
        items = self._batch_get([{"pk": _tp(topic), "sk": _s(sk)} for topic in topics for sk in sks])
        found = {(item["pk"]["S"], item["sk"]["S"]): item for item in items}
        views: list[SubscriptionView] = []
        for topic in topics:
            pk = f"TP#{topic}"
            cursor_item = found.get((pk, sks[0]))
            cursor = CursorState.from_dict(json.loads(cursor_item["state"]["S"])) if cursor_item else None
            version = _int(cursor_item, "version") if cursor_item else 0
            seal = self._seal_from_item(found.get((pk, "SEAL")))
            views.append(SubscriptionView(cursor, version, seal, self._writer_from_item(found.get((pk, "WRITER")))))
        return views

    def put_cursor(self, topic: TopicName, subscription: str, state: CursorState, expected_version: int) -> bool:
        return self._if("put_item", TableName=self.table, **_cursor_put(CursorWrite(topic, subscription, state,
                                                                                   expected_version)))

    def put_cursors(self, writes: list[CursorWrite]) -> list[bool]:
        done = [False] * len(writes)
        puts = [_cursor_put(w) for w in writes]
        for group in _transaction_groups(puts):
            if len(group) == 1:  # a plain conditional put costs half a transaction's write units
                done[group[0]] = self._if("put_item", TableName=self.table, **puts[group[0]])
                continue
            while group:
                failed = self._transact_puts([puts[i] for i in group])
                if failed is None:
                    for i in group:
                        done[i] = True
                    break
                group = [i for n, i in enumerate(group) if n not in failed]
                if len(group) == 1:
                    done[group[0]] = self._if("put_item", TableName=self.table, **puts[group[0]])
                    break
        return done

    def _transact_puts(self, puts: list[dict[str, Any]]) -> set[int] | None:
        """One TransactWriteItems of conditional puts; None when it was applied, else the
        positions whose condition failed (nothing was written)."""
        try:
            self.ddb.transact_write_items(TransactItems=[{"Put": {"TableName": self.table, **p}} for p in puts])
            return None
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            # a failed condition, a conflicting transaction, a throttled item: those are not
            # written now (the caller steps them again on their own); the others go again
            reasons = exc.response.get("CancellationReasons") or []
            failed = {n for n, r in enumerate(reasons) if r.get("Code") not in (None, "None")}
            return failed or set(range(len(puts)))

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


def _transaction_groups(puts: list[dict[str, Any]]) -> list[list[int]]:
    """Positions of `puts` grouped under a transaction's item and size limits."""
    groups: list[list[int]] = []
    size = 0
    for i, put in enumerate(puts):
        length = len(put["Item"]["state"]["S"]) + 200
        if not groups or len(groups[-1]) >= TRANSACTION_ITEMS or size + length > TRANSACTION_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += length
    return groups
