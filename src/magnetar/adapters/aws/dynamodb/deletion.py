"""Deletions (`magnetar.core.deletion`, the port `core.ports.deletion`): the writer counter as the
fence of a topic partition's deletion, the partition's items deleted under that fence, and the
listings, schemas, namespaces and tenants of the configuration store.

The fence is the WRITER item's `deleted_at` (when the deletion began; kept) and `deletion_done`
(set once it finished). Every reservation, lease and cursor creation is conditional on
`attribute_not_exists(deleted_at)`, and `_writer_from_item` reads a fenced counter as no topic.
A topic created again revives the item (`CatalogItems.create_topic`): one UpdateItem,
conditional on `deletion_done`, that continues the entry ids from the fence and opens ledger
`ledger_id + 1`.

Requests of deleting one topic partition with N items (segments, cursors, compacted index,
connections) and K objects: 1 UpdateItem (fence), 1 TransactWriteItems (seal fence), 1 GetItem +
1 PutItem (compaction fence, when it was ever compacted), ceil(N / 1,000 KB) Query pages,
ceil(N / 99) TransactWriteItems, ceil(K / 1,000) ListObjectsV2 and DeleteObjects, 1
TransactWriteItems (listing, namespace index and counter), 1 UpdateItem (finish).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from magnetar.adapters.aws.dynamodb.base import DynamoBase, _condition_failed, _int, _n, _s, _tp
from magnetar.core.errors import RetryableError
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.ports.deletion import TopicFence

DELETE_BATCH = 99  # items per TransactWriteItems, beside the fence's condition (DynamoDB: 100)
_KEPT = ("WRITER", "SEAL", "COMPACTION")  # the fence, the seal fence, the compaction fence
LIVE = "attribute_not_exists(deleted_at)"  # a writer counter no deletion fenced (or none at all)


class DeletionItems(DynamoBase):
    """The fence on the WRITER item, the partition's items, and configuration-store deletions."""

    @staticmethod
    def _fence_of(item: dict[str, Any] | None) -> TopicFence | None:
        if not item or "deleted_at" not in item:
            return None
        return TopicFence(_int(item, "next_entry"), _int(item, "ledger_id"), _int(item, "deleted_at"),
                          "deletion_done" in item)

    def fence_topic(self, topic: TopicName, now_ms: int) -> TopicFence | None:
        # a finished deletion's fence is kept as it is: a writer counter revived since is live
        # again (no deleted_at) and is fenced anew
        try:
            item = self.ddb.update_item(
                TableName=self.table,
                Key={"pk": _tp(topic), "sk": _s("WRITER")},
                UpdateExpression="SET deleted_at = :now",
                ConditionExpression=f"attribute_exists(pk) AND {LIVE}",
                ExpressionAttributeValues={":now": _n(now_ms)},
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )["Attributes"]
        except ClientError as exc:
            if not _condition_failed(exc):
                raise
            item = exc.response.get("Item")  # absent, or fenced already
        return self._fence_of(item)

    def get_fence(self, topic: TopicName) -> TopicFence | None:
        return self._fence_of(self._get(f"TP#{topic}", "WRITER"))

    def is_listed(self, topic: TopicName) -> bool:
        return self._get(f"TOPICS#{topic.namespace_name}", str(topic), config=True) is not None

    def _unfinished(self, topic: TopicName, fence: TopicFence) -> dict[str, Any]:
        """The condition that this deletion (the fence begun at `fence.started_at`) is unfinished."""
        return {
            "ConditionCheck": {
                "TableName": self.table,
                "Key": {"pk": _tp(topic), "sk": _s("WRITER")},
                "ConditionExpression": "deleted_at = :at AND attribute_not_exists(deletion_done)",
                "ExpressionAttributeValues": {":at": _n(fence.started_at)},
            }
        }

    def fence_seal(self, topic: TopicName, fence: TopicFence) -> None:
        start = _n(fence.next_entry)
        seal = {"pk": _tp(topic), "sk": _s("SEAL"), "next_entry": start, "first_entry": start}
        if fence.next_entry:  # (an incarnation that took no id leaves nothing a stale commit could hit)
            seal["fence_base"] = start
        self._transact([{"Put": {"TableName": self.table, "Item": seal}}, self._unfinished(topic, fence)])

    def topic_item_keys(self, topic: TopicName) -> list[str]:
        return [sk for sk in self._query_sks(f"TP#{topic}") if sk not in _KEPT]

    def delete_topic_items(self, topic: TopicName, fence: TopicFence, keys: list[str]) -> bool:
        for start in range(0, len(keys), DELETE_BATCH):
            deletes = [{"Delete": {"TableName": self.table, "Key": {"pk": _tp(topic), "sk": _s(sk)}}}
                       for sk in keys[start:start + DELETE_BATCH]]
            failed = self._transact([*deletes, self._unfinished(topic, fence)])
            if failed is not None:
                if failed.get(len(deletes)) == "ConditionalCheckFailed":
                    return False  # finished by another run of this deletion
                raise RetryableError(f"deleting the items of {topic} conflicted with a write; retry")
        if not keys:  # nothing to delete: the fence is still checked
            return self.get_fence(topic) == fence
        return True

    def finish_fence(self, topic: TopicName, fence: TopicFence) -> None:
        self._if(
            "update_item",
            TableName=self.table,
            Key={"pk": _tp(topic), "sk": _s("WRITER")},
            UpdateExpression="SET deletion_done = :yes",
            ConditionExpression="deleted_at = :at",
            ExpressionAttributeValues={":yes": {"BOOL": True}, ":at": _n(fence.started_at)},
        )

    # --- the configuration store ----------------------------------------------------------------
    def _forget_listing(self, pk: str, topic: TopicName, counted: int) -> bool:
        namespace = topic.namespace_name
        update = "DELETE topics_with_policies :t"
        values: dict[str, Any] = {":t": {"SS": [str(topic)]}}
        if counted > 0:  # the namespace's topic counter (kept while maxTopicsPerNamespace is set)
            update += " SET topic_count = if_not_exists(topic_count, :n) - :n"
            values[":n"] = _n(counted)
        failed = self._transact([
            {"Delete": {"TableName": self.config_table, "Key": {"pk": _s(pk), "sk": _s(str(topic))},
                        "ConditionExpression": "attribute_exists(pk)"}},
            {"Update": {"TableName": self.config_table,
                        "Key": {"pk": _s(f"NAMESPACES#{namespace.tenant}"), "sk": _s(namespace.namespace)},
                        "UpdateExpression": update, "ExpressionAttributeValues": values}},
        ], config=True)
        if failed is None:
            return True
        if failed.get(0) == "ConditionalCheckFailed":
            return False  # not listed (any more)
        raise RetryableError(f"the listing of {topic} was not deleted (a conflicting write); retry")

    def forget_topic(self, topic: TopicName, counted: int) -> bool:
        return self._forget_listing(f"TOPICS#{topic.namespace_name}", topic, counted)

    def forget_partitioned_topic(self, topic: TopicName, counted: int) -> bool:
        return self._forget_listing(f"PARTITIONED#{topic.namespace_name}", topic, counted)

    def delete_schemas(self, schema_id: str) -> int:
        keys = [{"pk": _s(f"SCHEMA#{schema_id}"), "sk": _s(sk)}
                for sk in self._query_sks(f"SCHEMA#{schema_id}", config=True)]
        self._batch_delete(keys, config=True)
        return len(keys)

    def delete_namespace(self, name: NamespaceName) -> bool:
        return self._if("delete_item", True, TableName=self.config_table,
                        Key={"pk": _s(f"NAMESPACES#{name.tenant}"), "sk": _s(name.namespace)},
                        ConditionExpression="attribute_exists(pk)")

    def delete_tenant(self, name: str) -> bool:
        return self._if("delete_item", True, TableName=self.config_table,
                        Key={"pk": _s("TENANTS"), "sk": _s(name)}, ConditionExpression="attribute_exists(pk)")
