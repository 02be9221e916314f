"""Tenants, namespaces, topics and partitioned topics (their listing items, the namespace's topic
counter and limit), and namespace- and topic-level policies."""

from __future__ import annotations

import json
import random
import time
from typing import Any

from botocore.exceptions import ClientError

from magnetar.adapters.aws.dynamodb.base import DynamoBase, _int, _n, _s, _tp
from magnetar.core.errors import (
    ConfigurationUnavailable,
    NotFound,
    RetryableError,
    StalePolicies,
    TopicLimitReached,
)
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.policies import TOPIC_LIMIT_REASON, has_overrides
from magnetar.core.ports import NamespaceInfo, TenantInfo

_TXN_RETRIES = 5
# a namespace lists its topics with policy overrides while they are fewer (names of ~100 bytes: an
# item of ~200 KB at most, within DynamoDB's 400 KB); past it, every topic's overrides are read
MAX_INDEXED_TOPICS = 2_000


class CatalogItems(DynamoBase):
    """The TENANTS, NAMESPACES#, TOPICS# and PARTITIONED# items."""

    # --- tenants, namespaces, topics -------------------------------------------------------
    def create_tenant(self, tenant: TenantInfo) -> bool:
        return self._put_new(
            {
                "pk": _s("TENANTS"),
                "sk": _s(tenant.name),
                "adminRoles": {"L": [_s(r) for r in tenant.admin_roles]},
                "allowedClusters": {"L": [_s(c) for c in tenant.allowed_clusters]},
            },
            config=True,
        )

    def update_tenant(self, tenant: TenantInfo, expected: TenantInfo | None = None) -> bool:
        condition, values = "attribute_exists(pk)", {":a": {"L": [_s(r) for r in tenant.admin_roles]},
                                                      ":c": {"L": [_s(c) for c in tenant.allowed_clusters]}}
        if expected is not None:  # conditional on what was read: two clusters joining at once both stay
            condition += " AND adminRoles = :oa AND allowedClusters = :oc"
            values |= {":oa": {"L": [_s(r) for r in expected.admin_roles]},
                       ":oc": {"L": [_s(c) for c in expected.allowed_clusters]}}
        return self._if(
            "update_item", True,
            TableName=self.config_table,
            Key={"pk": _s("TENANTS"), "sk": _s(tenant.name)},
            UpdateExpression="SET adminRoles = :a, allowedClusters = :c",
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )

    def get_tenant(self, name: str) -> TenantInfo | None:
        item = self._get("TENANTS", name, config=True)
        if item is None:
            return None
        roles = tuple(v["S"] for v in item.get("adminRoles", {}).get("L", []))
        clusters = tuple(v["S"] for v in item.get("allowedClusters", {}).get("L", []))
        return TenantInfo(name, roles, clusters)

    def list_tenants(self) -> list[str]:
        return self._query_sks("TENANTS", config=True)

    def create_namespace(self, namespace: NamespaceInfo) -> bool:
        return self._put_new(
            {
                "pk": _s(f"NAMESPACES#{namespace.name.tenant}"),
                "sk": _s(namespace.name.namespace),
                "policies": _s(json.dumps(namespace.policies)),
                "policy_index": _n(1),  # topics_with_policies is kept from the start (absent: none)
            },
            config=True,
        )

    def get_namespace(self, name: NamespaceName) -> NamespaceInfo | None:
        item = self._get(f"NAMESPACES#{name.tenant}", name.namespace, config=True)
        if item is None:
            return None
        raw = item.get("policies", {})
        policies = json.loads(raw["S"]) if "S" in raw else {}
        indexed = None
        if "policy_index" in item:
            indexed = frozenset(item.get("topics_with_policies", {}).get("SS", []))
        return NamespaceInfo(name, policies, indexed)

    def list_namespaces(self, tenant: str) -> list[str]:
        return self._query_sks(f"NAMESPACES#{tenant}", config=True)

    def create_topic(self, topic: TopicName, now_ms: int, max_topics: int = 0) -> bool:
        """The topic's listing (configuration store, with the namespace's counter) then its writer
        counter (this cluster's table). Two writes, each safe to repeat: a topic listed by another
        cluster of the instance, or whose writer counter a crash left unwritten, gets its counter
        here (False: it was listed already)."""
        listing = {"pk": _s(f"TOPICS#{topic.namespace_name}"), "sk": _s(str(topic))}
        try:
            listed = self._transact_counted(
                topic.namespace_name, 1, max_topics,
                [{"Put": {"TableName": self.config_table, "Item": {**listing, "createdAt": _n(now_ms)},
                          "ConditionExpression": "attribute_not_exists(pk)"}}],
            )
        except ConfigurationUnavailable:
            # the home replica is out of reach: a topic another cluster listed (as this region's
            # replica shows) still gets its writer counter here, so it can be used in this cluster
            if self._get(listing["pk"]["S"], listing["sk"]["S"], config=True) is None:
                raise
            listed = False
        self._create_writer(topic, now_ms)
        return listed

    def _create_writer(self, topic: TopicName, now_ms: int) -> None:
        """The writer counter: new, or revived from a finished deletion's fence (`dynamodb.deletion`),
        continuing its entry ids and opening the ledger after its last; nothing when a live one, or an
        unfinished deletion, is there. One conditional UpdateItem."""
        empty: dict[str, Any] = {"M": {}}
        self._if(
            "update_item",
            TableName=self.table,
            Key={"pk": _tp(topic), "sk": _s("WRITER")},
            UpdateExpression=(
                "SET next_entry = if_not_exists(next_entry, :zero), ledger_id = if_not_exists(ledger_id, :before) + :one,"
                " ledger_first_entry = if_not_exists(next_entry, :zero), ledger_opened_at = :now, created_at = :now,"
                " dedup_seq = :empty, dedup_entry = :empty, dedup_ledger = :empty, dedup_at = :empty,"
                " msg_in = :zero, bytes_in = :zero, pub_last = :empty, pub_msgs = :empty, pub_bytes = :empty,"
                " pub_since = :empty"
                " REMOVE deleted_at, deletion_done, exclusive_producer, exclusive_until, backlog_blocked,"
                " rate_tat_msgs, rate_tat_bytes"
            ),
            ConditionExpression="attribute_not_exists(pk) OR deletion_done = :yes",
            ExpressionAttributeValues={":zero": _n(0), ":before": _n(-1), ":one": _n(1), ":now": _n(now_ms),
                                       ":empty": empty, ":yes": {"BOOL": True}},
        )

    def _transact_counted(self, namespace: NamespaceName, added: int, max_topics: int,
                          items: list[dict[str, Any]]) -> bool:
        """Run a transaction that creates topics; with `max_topics`, the namespace's topic counter
        goes up by `added` in it, refused (TopicLimitReached) when that would pass the limit.
        False when one of `items`' own conditions failed (the topic exists)."""
        if max_topics <= 0:
            return self._if("transact_write_items", True, TransactItems=items)
        counter = {
            "Update": {
                "TableName": self.config_table,
                "Key": {"pk": _s(f"NAMESPACES#{namespace.tenant}"), "sk": _s(namespace.namespace)},
                "UpdateExpression": "SET topic_count = if_not_exists(topic_count, :zero) + :added",
                "ConditionExpression": "attribute_exists(pk) AND"
                                       " (attribute_not_exists(topic_count) OR topic_count <= :room)",
                "ExpressionAttributeValues": {":zero": _n(0), ":added": _n(added), ":room": _n(max_topics - added)},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        for attempt in range(_TXN_RETRIES):
            try:
                self.config_ddb.transact_write_items(TransactItems=[*items, counter])
                return True
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                    raise
                reasons = exc.response.get("CancellationReasons", [])
                codes = [r.get("Code", "None") for r in reasons]
                if not reasons or any(code == "ConditionalCheckFailed" for code in codes[: len(items)]):
                    return False
                if len(codes) > len(items) and codes[len(items)] == "ConditionalCheckFailed":
                    if not reasons[len(items)].get("Item"):
                        raise NotFound(f"Namespace {namespace} does not exist") from None
                    raise TopicLimitReached(TOPIC_LIMIT_REASON) from None
                # TransactionConflict: another creation in the namespace moved its counter; again
                time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
        raise RetryableError(f"Too many topics created at once in {namespace}; retry")

    def set_topic_count(self, namespace: NamespaceName, count: int) -> None:
        self._if(
            "update_item", True,
            TableName=self.config_table,
            Key={"pk": _s(f"NAMESPACES#{namespace.tenant}"), "sk": _s(namespace.namespace)},
            UpdateExpression="SET topic_count = :n",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":n": _n(count)},
        )

    def list_topics(self, namespace: NamespaceName) -> list[str]:
        return self._query_sks(f"TOPICS#{namespace}", config=True)

    def list_topics_page(self, namespace: NamespaceName, prefix: str, start_after: str, limit: int,
                         contains: str = "") -> list[str]:
        """One Query of `limit` + 1 keys from `start_after` on (the listing is sorted by name);
        with `contains`, further pages until the page is full (the match is made here,
        case-insensitively: a filter expression would read as much)."""
        table, ddb = self._db(True)
        pk = f"TOPICS#{namespace}"
        kwargs: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
            "ExpressionAttributeValues": {":pk": _s(pk), ":p": _s(prefix)},
            "ProjectionExpression": "sk",
            "Limit": min(limit + 1, 1000) if not contains else 1000,
        }
        if start_after.startswith(prefix) and start_after > prefix:
            kwargs["ExclusiveStartKey"] = {"pk": _s(pk), "sk": _s(start_after)}
        wanted = contains.lower()
        out: list[str] = []
        while len(out) < limit:
            page = ddb.query(**kwargs)
            for item in page["Items"]:
                name: str = item["sk"]["S"]
                if name > start_after and wanted in name[len(prefix):].lower():
                    out.append(name)
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return out[:limit]

    def create_partitioned_topic(self, topic: TopicName, partitions: int, max_topics: int = 0) -> bool:
        return self._transact_counted(
            topic.namespace_name, partitions, max_topics,
            [
                {
                    "Put": {
                        "TableName": self.config_table,
                        "Item": {"pk": _s(f"PARTITIONED#{topic.namespace_name}"), "sk": _s(str(topic)),
                                 "partitions": _n(partitions)},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": self.config_table,
                        "Key": {"pk": _s(f"TOPICS#{topic.namespace_name}"), "sk": _s(str(topic))},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )

    def get_partitions(self, topic: TopicName) -> int | None:
        item = self._get(f"PARTITIONED#{topic.namespace_name}", str(topic), config=True)
        return _int(item, "partitions") if item else None

    def update_partitions(self, topic: TopicName, partitions: int, max_topics: int = 0, previous: int = 0) -> bool:
        if max_topics > 0:  # the added partitions count against the namespace's limit
            return self._transact_counted(topic.namespace_name, partitions - previous, max_topics, [{
                "Update": {
                    "TableName": self.config_table,
                    "Key": {"pk": _s(f"PARTITIONED#{topic.namespace_name}"), "sk": _s(str(topic))},
                    "UpdateExpression": "SET #n = :n",
                    "ConditionExpression": "#n = :previous AND #n < :n",
                    "ExpressionAttributeNames": {"#n": "partitions"},
                    "ExpressionAttributeValues": {":n": _n(partitions), ":previous": _n(previous)},
                }
            }])
        return self._if(
            "update_item", True,
            TableName=self.config_table,
            Key={"pk": _s(f"PARTITIONED#{topic.namespace_name}"), "sk": _s(str(topic))},
            UpdateExpression="SET #n = :n",
            ConditionExpression="#n < :n",
            ExpressionAttributeNames={"#n": "partitions"},  # a DynamoDB reserved word
            ExpressionAttributeValues={":n": _n(partitions)},
        )

    def list_partitioned_topics(self, namespace: NamespaceName) -> list[str]:
        return self._query_sks(f"PARTITIONED#{namespace}", config=True)

    # --- policies ------------------------------------------------------------------------------
    def set_namespace_policies(self, namespace: NamespaceName, policies: dict[str, Any],
                               expected: dict[str, Any]) -> bool:
        """Conditional on the policies read (their stored text): two edits made at once, through
        one cluster or two, are serialized here, never one silently lost."""
        key = {"pk": _s(f"NAMESPACES#{namespace.tenant}"), "sk": _s(namespace.namespace)}
        condition = "policies = :old"
        if not expected:  # a namespace that never had a policy (the bootstrap's stores an empty map)
            condition = "(attribute_not_exists(policies) OR attribute_type(policies, :map) OR policies = :old)"
        values = {":p": _s(json.dumps(policies)), ":old": _s(json.dumps(expected))}
        if not expected:
            values[":map"] = _s("M")
        if self._if("update_item", True, TableName=self.config_table, Key=key, UpdateExpression="SET policies = :p",
                    ConditionExpression=f"attribute_exists(pk) AND {condition}", ExpressionAttributeValues=values):
            return True
        if self._get(f"NAMESPACES#{namespace.tenant}", namespace.namespace, config=True) is None:
            raise NotFound(f"Namespace {namespace} does not exist")
        return False

    def _policy_keys(self, topic: TopicName) -> list[dict[str, Any]]:
        """Topic-level policies live on the topic's listing item (plain or partitioned topic)."""
        base = topic.partitioned_topic if topic.partition_index >= 0 else topic
        return [
            {"pk": _s(f"TOPICS#{base.namespace_name}"), "sk": _s(str(base))},
            {"pk": _s(f"PARTITIONED#{base.namespace_name}"), "sk": _s(str(base))},
        ]

    def get_topic_policies(self, topic: TopicName) -> dict[str, Any]:
        for item in self._batch_get(self._policy_keys(topic), config=True):
            if "policies" in item:
                policies: dict[str, Any] = json.loads(item["policies"]["S"])
                return policies
        return {}

    def set_topic_policies(self, topic: TopicName, policies: dict[str, Any],
                           expected: dict[str, Any] | None = None) -> bool:
        base = topic.partitioned_topic if topic.partition_index >= 0 else topic
        namespace_key = {"pk": _s(f"NAMESPACES#{base.namespace_name.tenant}"), "sk": _s(base.namespace_name.namespace)}
        if has_overrides(policies):  # listed in the namespace's index, while it holds fewer than the cap
            index_update: dict[str, Any] = {
                "UpdateExpression": "ADD topics_with_policies :t",
                "ConditionExpression": ("attribute_exists(pk) AND (attribute_not_exists(topics_with_policies)"
                                        " OR size(topics_with_policies) < :cap)"),
                "ExpressionAttributeValues": {":t": {"SS": [str(base)]}, ":cap": _n(MAX_INDEXED_TOPICS)},
            }
        else:
            index_update = {"UpdateExpression": "DELETE topics_with_policies :t", "ConditionExpression": "attribute_exists(pk)",
                            "ExpressionAttributeValues": {":t": {"SS": [str(base)]}}}
        condition, values = "attribute_exists(pk)", {":p": _s(json.dumps(policies))}
        if expected is not None:  # conditional on the overrides read: a concurrent edit is never lost
            condition += (" AND policies = :old" if expected else
                          " AND (attribute_not_exists(policies) OR policies = :old OR policies = :none)")
            values |= {":old": _s(json.dumps(expected))} | ({} if expected else {":none": _s("{}")})
        for key in reversed(self._policy_keys(topic)):  # a partitioned topic's item first
            listing_update = {
                "TableName": self.config_table, "Key": key, "UpdateExpression": "SET policies = :p",
                "ConditionExpression": condition, "ExpressionAttributeValues": values,
            }
            failed = self._transact([{"Update": listing_update},
                                     {"Update": {"TableName": self.config_table, "Key": namespace_key, **index_update}}], config=True)
            if failed is None:
                return True
            if any(code != "ConditionalCheckFailed" for code in failed.values()):
                raise RetryableError("topic policies not written (a conflicting write); retry")
            if 0 in failed and expected is not None and self._get(key["pk"]["S"], key["sk"]["S"], config=True):
                raise StalePolicies(f"The policies of {base} changed meanwhile")
            if 0 in failed:
                continue  # not this kind of topic
            # the index is full (or the namespace item is gone): it stops being an index first
            # (a failure here raises: overrides written while the index still claimed to list
            # every such topic would be ignored), then the overrides are written alone (every
            # publish reads its topic's overrides again)
            self._if("update_item", True, TableName=self.config_table, Key=namespace_key, UpdateExpression="REMOVE policy_index",
                     ConditionExpression="attribute_exists(pk)")
            return self._if("update_item", True, **listing_update)
        return False
