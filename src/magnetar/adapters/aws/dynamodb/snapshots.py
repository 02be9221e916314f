"""Replicated subscriptions' snapshots: one item per (topic, subscription, cluster) in the
configuration store, a global table, so that every cluster of the instance reads what a
subscription acknowledged in the others (`core.replicated_subscriptions`)."""

from __future__ import annotations

import json
from typing import Any

from magnetar.adapters.aws.dynamodb.base import DynamoBase, _n, _s
from magnetar.core.naming import TopicName
from magnetar.core.ports import SubscriptionSnapshot

_PK = "RSUB#"


class SnapshotItems(DynamoBase):
    """The RSUB items (pk RSUB#<topic>, sk <subscription>#<cluster>): `acked` (origin cluster ->
    highest origin id acknowledged, JSON), `total` (the sum of those ids: a snapshot only ever
    grows, so a write is conditional on a larger total and never moves one back) and `at` (ms).
    A subscription deleted in a cluster takes its item with it (one DeleteItem); a topic partition
    deleted there, every item of that cluster under its key (one Query, one BatchWriteItem per 25)."""

    def put_subscription_snapshot(self, topic: TopicName, subscription: str, cluster: str,
                                  snapshot: SubscriptionSnapshot) -> bool:
        total = sum(snapshot.origin_acked.values())
        item: dict[str, Any] = {"pk": _s(f"{_PK}{topic}"), "sk": _s(f"{subscription}#{cluster}"),
                                "acked": _s(json.dumps(snapshot.origin_acked, sort_keys=True)),
                                "total": _n(total), "at": _n(snapshot.at_ms)}
        return self._if("put_item", True, TableName=self.config_table, Item=item,
                        ConditionExpression="attribute_not_exists(pk) OR #t < :t",
                        ExpressionAttributeNames={"#t": "total"}, ExpressionAttributeValues={":t": _n(total)})

    def get_subscription_snapshots(self, topic: TopicName, subscription: str) -> dict[str, SubscriptionSnapshot]:
        prefix = f"{subscription}#"
        kwargs: dict[str, Any] = {
            "TableName": self.config_table, "ConsistentRead": True,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
            "ExpressionAttributeValues": {":pk": _s(f"{_PK}{topic}"), ":p": _s(prefix)},
        }
        out: dict[str, SubscriptionSnapshot] = {}
        while True:
            page = self.config_ddb.query(**kwargs)
            for item in page["Items"]:
                name, _, cluster = item["sk"]["S"].rpartition("#")
                if name == subscription:  # (another subscription's name may start with this one's)
                    out[cluster] = SubscriptionSnapshot({k: int(v) for k, v in json.loads(item["acked"]["S"]).items()},
                                                        int(item["at"]["N"]))
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def delete_subscription_snapshot(self, topic: TopicName, subscription: str, cluster: str) -> None:
        self.config_ddb.delete_item(TableName=self.config_table,
                                    Key={"pk": _s(f"{_PK}{topic}"), "sk": _s(f"{subscription}#{cluster}")})

    def delete_topic_snapshots(self, topic: TopicName, cluster: str) -> int:
        pk = f"{_PK}{topic}"
        mine = [sk for sk in self._query_sks(pk, config=True, consistent=True) if sk.rpartition("#")[2] == cluster]
        self._batch_delete([{"pk": _s(pk), "sk": _s(sk)} for sk in mine], config=True)
        return len(mine)
