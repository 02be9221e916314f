"""MetadataStore on one DynamoDB table (pk, sk).

| item                 | pk                       | sk                 |
|----------------------|--------------------------|--------------------|
| tenant               | TENANTS                  | <tenant>           |
| namespace            | NAMESPACES#<tenant>      | <namespace>        |
| topic (listing)      | TOPICS#<tenant>/<ns>     | <topic>            |
| writer counter       | TP#<topic>               | WRITER             |
| seal state           | TP#<topic>               | SEAL               |
| segment              | TP#<topic>               | SEG#<last entry>   |
| cursor               | TP#<topic>               | SUB#<subscription> |

Everything a dispatch step needs about one topic partition sits under one partition key, so it
is read with one BatchGetItem; every change is a single-item conditional write or one
transaction, so any Lambda may run any step and a crash leaves either all or nothing.
"""

from __future__ import annotations

import array
import json
import random
import time
from typing import Any

from botocore.exceptions import ClientError

from magnetar.adapters.aws.clients import UNPROCESSED_ATTEMPTS, client, unprocessed_backoff
from magnetar.core.cursor import CursorState
from magnetar.core.errors import (
    BacklogQuotaExceeded,
    NotFound,
    ProducerFenced,
    RetryableError,
    TooManyRequests,
    TopicLimitReached,
    TopicNotFound,
)
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.policies import TOPIC_LIMIT_REASON
from magnetar.core.ports import (
    DedupRecord,
    JournalPosition,
    NamespaceInfo,
    ProducerActivity,
    ProducerClaim,
    RateClaim,
    Reservation,
    SealState,
    SegmentMeta,
    SubscriptionView,
    TenantInfo,
    WriterState,
)

_SEG_WIDTH = 20
_RATE_ATTRS = ("rate_tat_msgs", "rate_tat_bytes")  # publish rate: virtual clocks (ns) on the writer counter
_RATE_CACHE = 10_000
_TXN_RETRIES = 5


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _int(item: dict[str, Any], name: str, default: int = 0) -> int:
    return int(item[name]["N"]) if name in item else default


def _tp(topic: TopicName | str) -> dict[str, str]:
    return _s(f"TP#{topic}")


def _seg_sk(last_entry: int) -> str:
    return f"SEG#{last_entry:0{_SEG_WIDTH}d}"


def _condition_failed(exc: ClientError) -> bool:
    code = exc.response.get("Error", {}).get("Code", "")
    if code == "ConditionalCheckFailedException":
        return True
    if code == "TransactionCanceledException":
        reasons = exc.response.get("CancellationReasons", [])
        return any(r.get("Code") == "ConditionalCheckFailed" for r in reasons) or not reasons
    return False


class DynamoMetadataStore:
    def __init__(self, table: str, dynamodb: Any | None = None) -> None:
        self.table = table
        self.ddb = dynamodb or client("dynamodb")
        # publish rate: the virtual clocks this container last saw per topic partition, to pick the
        # form of the reservation write (a hint: a wrong guess costs one more write, never a wrong answer)
        self._rate_tats: dict[str, tuple[int, int]] = {}

    # --- small helpers -------------------------------------------------------------------
    def _if(self, operation: str, **kwargs: Any) -> bool:
        """Run a conditional write; False (and nothing written) when its condition does not hold."""
        try:
            getattr(self.ddb, operation)(**kwargs)
            return True
        except ClientError as exc:
            if _condition_failed(exc):
                return False
            raise

    def _put_new(self, item: dict[str, Any]) -> bool:
        return self._if("put_item", TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")

    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.ddb.get_item(
            TableName=self.table, Key={"pk": _s(pk), "sk": _s(sk)}, ConsistentRead=True
        ).get("Item")
        return item

    def _query_sks(self, pk: str, prefix: str = "") -> list[str]:
        out: list[str] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk" + (" AND begins_with(sk, :p)" if prefix else ""),
            "ExpressionAttributeValues": {":pk": _s(pk), **({":p": _s(prefix)} if prefix else {})},
            "ProjectionExpression": "sk",
        }
        while True:
            page = self.ddb.query(**kwargs)
            out.extend(item["sk"]["S"][len(prefix):] for item in page["Items"])
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _batch_get(self, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for start in range(0, len(keys), 100):
            request: dict[str, Any] = {self.table: {"Keys": keys[start : start + 100], "ConsistentRead": True}}
            for attempt in range(UNPROCESSED_ATTEMPTS + 1):
                if attempt:
                    unprocessed_backoff(attempt - 1)  # throttled keys: back off before asking again
                page = self.ddb.batch_get_item(RequestItems=request)
                found.extend(page["Responses"].get(self.table, []))
                request = page.get("UnprocessedKeys") or {}
                if not request:
                    break
            else:
                raise RetryableError("DynamoDB throttled a batch read; retry")
        return found

    # --- tenants, namespaces, topics -------------------------------------------------------
    def create_tenant(self, tenant: TenantInfo) -> bool:
        return self._put_new(
            {
                "pk": _s("TENANTS"),
                "sk": _s(tenant.name),
                "adminRoles": {"L": [_s(r) for r in tenant.admin_roles]},
                "allowedClusters": {"L": [_s(c) for c in tenant.allowed_clusters]},
            }
        )

    def update_tenant(self, tenant: TenantInfo) -> bool:
        return self._if(
            "update_item",
            TableName=self.table,
            Key={"pk": _s("TENANTS"), "sk": _s(tenant.name)},
            UpdateExpression="SET adminRoles = :a, allowedClusters = :c",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":a": {"L": [_s(r) for r in tenant.admin_roles]},
                                       ":c": {"L": [_s(c) for c in tenant.allowed_clusters]}},
        )

    def get_tenant(self, name: str) -> TenantInfo | None:
        item = self._get("TENANTS", name)
        if item is None:
            return None
        roles = tuple(v["S"] for v in item.get("adminRoles", {}).get("L", []))
        clusters = tuple(v["S"] for v in item.get("allowedClusters", {}).get("L", []))
        return TenantInfo(name, roles, clusters)

    def list_tenants(self) -> list[str]:
        return self._query_sks("TENANTS")

    def create_namespace(self, namespace: NamespaceInfo) -> bool:
        return self._put_new(
            {
                "pk": _s(f"NAMESPACES#{namespace.name.tenant}"),
                "sk": _s(namespace.name.namespace),
                "policies": _s(json.dumps(namespace.policies)),
            }
        )

    def get_namespace(self, name: NamespaceName) -> NamespaceInfo | None:
        item = self._get(f"NAMESPACES#{name.tenant}", name.namespace)
        if item is None:
            return None
        raw = item.get("policies", {})
        policies = json.loads(raw["S"]) if "S" in raw else {}
        return NamespaceInfo(name, policies)

    def list_namespaces(self, tenant: str) -> list[str]:
        return self._query_sks(f"NAMESPACES#{tenant}")

    def create_topic(self, topic: TopicName, now_ms: int, max_topics: int = 0) -> bool:
        return self._transact_counted(
            topic.namespace_name, 1, max_topics,
            [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {"pk": _s(f"TOPICS#{topic.namespace_name}"), "sk": _s(str(topic)), "createdAt": _n(now_ms)},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            "pk": _tp(topic),
                            "sk": _s("WRITER"),
                            "next_entry": _n(0),
                            "ledger_id": _n(0),
                            "ledger_first_entry": _n(0),
                            "ledger_opened_at": _n(now_ms),
                            "created_at": _n(now_ms),
                            "dedup_seq": {"M": {}},
                            "dedup_entry": {"M": {}},
                            "dedup_ledger": {"M": {}},
                            "dedup_at": {"M": {}},
                            "msg_in": _n(0),
                            "bytes_in": _n(0),
                            "pub_last": {"M": {}},
                            "pub_msgs": {"M": {}},
                            "pub_bytes": {"M": {}},
                            "pub_since": {"M": {}},
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ],
        )

    def _transact_counted(self, namespace: NamespaceName, added: int, max_topics: int,
                          items: list[dict[str, Any]]) -> bool:
        """Run a transaction that creates topics; with `max_topics`, the namespace's topic counter
        goes up by `added` in it, refused (TopicLimitReached) when that would pass the limit.
        False when one of `items`' own conditions failed (the topic exists)."""
        if max_topics <= 0:
            return self._if("transact_write_items", TransactItems=items)
        counter = {
            "Update": {
                "TableName": self.table,
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
                self.ddb.transact_write_items(TransactItems=[*items, counter])
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
            "update_item",
            TableName=self.table,
            Key={"pk": _s(f"NAMESPACES#{namespace.tenant}"), "sk": _s(namespace.namespace)},
            UpdateExpression="SET topic_count = :n",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":n": _n(count)},
        )

    def list_topics(self, namespace: NamespaceName) -> list[str]:
        return self._query_sks(f"TOPICS#{namespace}")

    def create_partitioned_topic(self, topic: TopicName, partitions: int, max_topics: int = 0) -> bool:
        return self._transact_counted(
            topic.namespace_name, partitions, max_topics,
            [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {"pk": _s(f"PARTITIONED#{topic.namespace_name}"), "sk": _s(str(topic)),
                                 "partitions": _n(partitions)},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": self.table,
                        "Key": {"pk": _s(f"TOPICS#{topic.namespace_name}"), "sk": _s(str(topic))},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )

    def get_partitions(self, topic: TopicName) -> int | None:
        item = self._get(f"PARTITIONED#{topic.namespace_name}", str(topic))
        return _int(item, "partitions") if item else None

    def update_partitions(self, topic: TopicName, partitions: int, max_topics: int = 0, previous: int = 0) -> bool:
        if max_topics > 0:  # the added partitions count against the namespace's limit
            return self._transact_counted(topic.namespace_name, partitions - previous, max_topics, [{
                "Update": {
                    "TableName": self.table,
                    "Key": {"pk": _s(f"PARTITIONED#{topic.namespace_name}"), "sk": _s(str(topic))},
                    "UpdateExpression": "SET #n = :n",
                    "ConditionExpression": "#n = :previous AND #n < :n",
                    "ExpressionAttributeNames": {"#n": "partitions"},
                    "ExpressionAttributeValues": {":n": _n(partitions), ":previous": _n(previous)},
                }
            }])
        return self._if(
            "update_item",
            TableName=self.table,
            Key={"pk": _s(f"PARTITIONED#{topic.namespace_name}"), "sk": _s(str(topic))},
            UpdateExpression="SET #n = :n",
            ConditionExpression="#n < :n",
            ExpressionAttributeNames={"#n": "partitions"},  # a DynamoDB reserved word
            ExpressionAttributeValues={":n": _n(partitions)},
        )

    def list_partitioned_topics(self, namespace: NamespaceName) -> list[str]:
        return self._query_sks(f"PARTITIONED#{namespace}")

    # --- writer ----------------------------------------------------------------------------
    _FENCE = "(attribute_not_exists(exclusive_producer) OR exclusive_producer = :p OR exclusive_until < :now)"

    def _reserve(self, topic: TopicName, claim: ProducerClaim, condition: str, extra: dict[str, Any]) -> Reservation:
        # The id, the topic's and the producer's counters (stats), the dedup record and the
        # publish rate's virtual clocks: one write.
        update = (
            "SET next_entry = next_entry + :one, msg_in = if_not_exists(msg_in, :zero) + :m,"
            " bytes_in = if_not_exists(bytes_in, :zero) + :b, pub_last.#p = :now,"
            " pub_msgs.#p = if_not_exists(pub_msgs.#p, :zero) + :m,"
            " pub_bytes.#p = if_not_exists(pub_bytes.#p, :zero) + :b"
        )
        values: dict[str, Any] = {
            ":one": _n(1), ":zero": _n(0), ":p": _s(claim.producer), ":now": _n(claim.now_ms),
            ":m": _n(claim.messages), ":b": _n(claim.size), **extra,
        }
        names: dict[str, str] = {"#p": claim.producer}
        if claim.deduplicate:
            update += (", dedup_seq.#p = :seq, dedup_entry.#p = next_entry, dedup_ledger.#p = ledger_id,"
                       " dedup_at.#p = :now")
            values[":seq"] = _n(claim.sequence_id)
        if claim.rate is not None:
            rate_update, rate_condition = self._rate_parts(str(topic), claim.rate, values)
            update += rate_update
            condition += rate_condition
        old = self.ddb.update_item(
            TableName=self.table,
            Key={"pk": _tp(topic), "sk": _s("WRITER")},
            UpdateExpression=update,
            ConditionExpression=condition + " AND attribute_not_exists(backlog_blocked)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_OLD",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )["Attributes"]
        if claim.rate is not None:
            self._remember_rate(str(topic), claim.rate, old)
        return Reservation(
            _int(old, "ledger_id"), _int(old, "next_entry"), _int(old, "ledger_first_entry"), _int(old, "ledger_opened_at")
        )

    # --- the publish rate: a GCRA token bucket (policies.admit) on the writer counter ----------
    # Each limited dimension keeps a virtual clock `tat` (ns). DynamoDB has no max(), so the write
    # takes one of two forms, each with the condition under which it computes policies.admit:
    # "add" (tat in [now, now + burst]: tat += cost) and "reset" (tat < now or absent:
    # tat = now + cost). Above now + burst both fail: the publish is refused. The clocks only
    # grow, so a clock this container saw is never ahead of the stored one: a guess of "add" is
    # right or refused, and a wrong "reset" (another container moved the clock meanwhile) costs
    # one retry, which the failed write's old item tells exactly.
    def _rate_parts(self, topic: str, rate: RateClaim, values: dict[str, Any]) -> tuple[str, str]:
        seen = self._rate_tats.get(topic, (0, 0))
        update = condition = ""
        for i, (attr, cost) in enumerate(zip(_RATE_ATTRS, (rate.msg_cost_ns, rate.byte_cost_ns), strict=True)):
            if not cost:
                continue
            values[":rnow"] = _n(rate.now_ns)
            if seen[i] >= rate.now_ns:  # the clock runs ahead of now: add to it
                values[f":rc{i}"] = _n(cost)
                values[":rahead"] = _n(rate.now_ns + rate.burst_ns)
                update += f", {attr} = {attr} + :rc{i}"
                condition += f" AND {attr} BETWEEN :rnow AND :rahead"
            else:  # behind now (or never set): it restarts from now
                values[f":rnew{i}"] = _n(rate.now_ns + cost)
                update += f", {attr} = :rnew{i}"
                condition += f" AND (attribute_not_exists({attr}) OR {attr} < :rnow)"
        return update, condition

    def _remember_rate(self, topic: str, rate: RateClaim, old: dict[str, Any]) -> None:
        """The clocks after a write that succeeded (old clocks plus this publish's cost)."""
        tats = []
        for attr, cost in zip(_RATE_ATTRS, (rate.msg_cost_ns, rate.byte_cost_ns), strict=True):
            tat = _int(old, attr)
            tats.append(max(tat, rate.now_ns) + cost if cost else tat)
        self._seen_rate(topic, (tats[0], tats[1]))

    def _seen_rate(self, topic: str, tats: tuple[int, int]) -> None:
        if len(self._rate_tats) >= _RATE_CACHE:
            self._rate_tats.clear()
        self._rate_tats[topic] = tats

    def _rate_refusal(self, topic: TopicName, rate: RateClaim, item: dict[str, Any]) -> bool:
        """After a failed reservation: raise TooManyRequests if the rate refused it; True if only
        this container's guess of the write's form was wrong (the stored clocks are now known)."""
        stored = (_int(item, _RATE_ATTRS[0]), _int(item, _RATE_ATTRS[1]))
        for tat, cost in zip(stored, (rate.msg_cost_ns, rate.byte_cost_ns), strict=True):
            if cost and tat > rate.now_ns + rate.burst_ns:
                self._seen_rate(str(topic), stored)
                wait_ms = (tat - rate.now_ns - rate.burst_ns) // 1_000_000 + 1
                raise TooManyRequests(
                    f"Publish rate of {topic} exceeded ({rate.description}); retry in {wait_ms} ms") from None
        guessed = self._rate_tats.get(str(topic), (0, 0))
        self._seen_rate(str(topic), stored)
        return any(cost and (g >= rate.now_ns) != (t >= rate.now_ns)
                   for g, t, cost in zip(guessed, stored, (rate.msg_cost_ns, rate.byte_cost_ns), strict=True))

    @staticmethod
    def _dedup_record(item: dict[str, Any], producer: str) -> DedupRecord | None:
        seq = item.get("dedup_seq", {}).get("M", {}).get(producer)
        if seq is None:
            return None
        return DedupRecord(
            int(seq["N"]),
            int(item["dedup_ledger"]["M"][producer]["N"]),
            int(item["dedup_entry"]["M"][producer]["N"]),
            int(item["dedup_at"]["M"][producer]["N"]),
        )

    def reserve_entry(self, topic: TopicName, claim: ProducerClaim) -> Reservation | DedupRecord:
        condition = f"attribute_exists(pk) AND {self._FENCE}"
        extra: dict[str, Any] = {}
        if claim.deduplicate:
            condition += " AND (attribute_not_exists(dedup_seq.#p) OR dedup_seq.#p < :seq)"
        for _ in range(3):  # a second try only when the publish rate's form was guessed wrong
            try:
                return self._reserve(topic, claim, condition, extra)
            except ClientError as exc:
                if not _condition_failed(exc):
                    raise
                item: dict[str, Any] | None = exc.response.get("Item")  # type: ignore[assignment]
            if not item:
                raise TopicNotFound(f"Topic {topic} not found")
            if "backlog_blocked" in item:
                policy = item["backlog_blocked"]["S"]
                raise BacklogQuotaExceeded(f"Cannot publish on {topic}: backlog quota exceeded", policy)
            holder = item.get("exclusive_producer", {}).get("S")
            if holder and holder != claim.producer and _int(item, "exclusive_until") >= claim.now_ms:
                raise ProducerFenced(f"Topic {topic} has an exclusive producer: {holder}")
            record = self._dedup_record(item, claim.producer)
            if claim.deduplicate and record is not None and record.sequence_id >= claim.sequence_id:
                return record
            if claim.rate is not None and self._rate_refusal(topic, claim.rate, item):
                continue
            if record is None:
                raise RetryableError(f"Writer state of {topic} changed meanwhile; retry")
            return record
        raise RetryableError(f"Writer state of {topic} changed meanwhile; retry")

    def replace_reservation(self, topic: TopicName, claim: ProducerClaim, lost_entry: int) -> Reservation:
        condition = f"attribute_exists(pk) AND {self._FENCE} AND dedup_entry.#p = :lost"
        try:
            return self._reserve(topic, claim, condition, {":lost": _n(lost_entry)})
        except ClientError as exc:
            if _condition_failed(exc):
                item: dict[str, Any] = exc.response.get("Item") or {}  # type: ignore[assignment]
                if "backlog_blocked" in item:
                    policy = item["backlog_blocked"]["S"]
                    raise BacklogQuotaExceeded(f"Cannot publish on {topic}: backlog quota exceeded", policy) from None
                raise RetryableError("The producer's last publish changed meanwhile; retry") from None
            raise

    def last_sequence_id(self, topic: TopicName, producer: str) -> int:
        item = self._get(f"TP#{topic}", "WRITER")
        record = self._dedup_record(item, producer) if item else None
        return record.sequence_id if record else -1

    def claim_exclusive(self, topic: TopicName, producer: str, now_ms: int, lease_ms: int) -> bool:
        return self._if(
            "update_item",
            TableName=self.table,
            Key={"pk": _tp(topic), "sk": _s("WRITER")},
            UpdateExpression="SET exclusive_producer = :p, exclusive_until = :until",
            ConditionExpression=f"attribute_exists(pk) AND {self._FENCE}",
            ExpressionAttributeValues={":p": _s(producer), ":now": _n(now_ms), ":until": _n(now_ms + lease_ms)},
        )

    def release_exclusive(self, topic: TopicName, producer: str) -> None:
        try:
            self.ddb.update_item(
                TableName=self.table,
                Key={"pk": _tp(topic), "sk": _s("WRITER")},
                UpdateExpression="REMOVE exclusive_producer, exclusive_until",
                ConditionExpression="exclusive_producer = :p",
                ExpressionAttributeValues={":p": _s(producer)},
            )
        except ClientError as exc:
            if not _condition_failed(exc):
                raise

    def set_namespace_policies(self, namespace: NamespaceName, policies: dict[str, Any]) -> None:
        self.ddb.update_item(
            TableName=self.table,
            Key={"pk": _s(f"NAMESPACES#{namespace.tenant}"), "sk": _s(namespace.namespace)},
            UpdateExpression="SET policies = :p",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":p": _s(json.dumps(policies))},
        )

    def _policy_keys(self, topic: TopicName) -> list[dict[str, Any]]:
        """Topic-level policies live on the topic's listing item (plain or partitioned topic)."""
        base = topic.partitioned_topic if topic.partition_index >= 0 else topic
        return [
            {"pk": _s(f"TOPICS#{base.namespace_name}"), "sk": _s(str(base))},
            {"pk": _s(f"PARTITIONED#{base.namespace_name}"), "sk": _s(str(base))},
        ]

    def get_topic_policies(self, topic: TopicName) -> dict[str, Any]:
        for item in self._batch_get(self._policy_keys(topic)):
            if "policies" in item:
                policies: dict[str, Any] = json.loads(item["policies"]["S"])
                return policies
        return {}

    def set_topic_policies(self, topic: TopicName, policies: dict[str, Any]) -> bool:
        for key in reversed(self._policy_keys(topic)):  # a partitioned topic's item first
            if self._if(
                "update_item",
                TableName=self.table,
                Key=key,
                UpdateExpression="SET policies = :p",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":p": _s(json.dumps(policies))},
            ):
                return True
        return False

    def set_backlog_blocked(self, topic: TopicName, policy: str) -> None:
        kwargs: dict[str, Any] = {"UpdateExpression": "REMOVE backlog_blocked"}
        if policy:
            kwargs = {"UpdateExpression": "SET backlog_blocked = :p", "ExpressionAttributeValues": {":p": _s(policy)}}
        self._if(
            "update_item",
            TableName=self.table,
            Key={"pk": _tp(topic), "sk": _s("WRITER")},
            ConditionExpression="attribute_exists(pk)",
            **kwargs,
        )

    def touch_producer(self, topic: TopicName, producer: str, now_ms: int) -> None:
        kwargs: dict[str, Any] = {  # 0: the producer closed, forget it
            "UpdateExpression": "REMOVE pub_since.#p, pub_last.#p, pub_msgs.#p, pub_bytes.#p"}
        if now_ms:
            kwargs = {"UpdateExpression": "SET pub_since.#p = if_not_exists(pub_since.#p, :now)",
                      "ExpressionAttributeValues": {":now": _n(now_ms)}}
        self._if(
            "update_item",
            TableName=self.table,
            Key={"pk": _tp(topic), "sk": _s("WRITER")},
            ConditionExpression="attribute_exists(pk) AND attribute_exists(pub_since)",
            ExpressionAttributeNames={"#p": producer},
            **kwargs,
        )

    def roll_ledger(self, topic: TopicName, expected_ledger: int, now_ms: int) -> bool:
        return self._if(
            "update_item",
            TableName=self.table,
            Key={"pk": _tp(topic), "sk": _s("WRITER")},
            UpdateExpression="SET ledger_id = ledger_id + :one, ledger_first_entry = next_entry, ledger_opened_at = :now",
            ConditionExpression="ledger_id = :expected",
            ExpressionAttributeValues={":one": _n(1), ":now": _n(now_ms), ":expected": _n(expected_ledger)},
        )

    # --- sealer ----------------------------------------------------------------------------
    @staticmethod
    def _seal_from_item(item: dict[str, Any] | None) -> SealState:
        if not item:
            return SealState()
        position = None
        if "last_shard" in item:
            position = JournalPosition(item["last_shard"]["S"], item["last_seq"]["S"])
        holes = tuple(int(v["N"]) for v in item.get("recent_holes", {}).get("L", []))
        return SealState(
            next_entry=_int(item, "next_entry"),
            last_position=position,
            recent_holes=holes,
            sealed_entries=_int(item, "sealed_entries"),
            sealed_messages=_int(item, "sealed_messages"),
            sealed_bytes=_int(item, "sealed_bytes"),
            segment_count=_int(item, "segment_count"),
            rate_msgs=float(item["rate_msgs"]["N"]) if "rate_msgs" in item else 0.0,
            rate_bytes=float(item["rate_bytes"]["N"]) if "rate_bytes" in item else 0.0,
            rate_at=_int(item, "rate_at"),
            first_entry=_int(item, "first_entry"),
            trimmed_entries=_int(item, "trimmed_entries"),
            trimmed_messages=_int(item, "trimmed_messages"),
            trimmed_bytes=_int(item, "trimmed_bytes"),
            trash=tuple(sorted(item.get("trash", {}).get("SS", []))),
        )

    def get_seal_states(self, topics: list[str]) -> dict[str, SealState]:
        items = self._batch_get([{"pk": _tp(t), "sk": _s("SEAL")} for t in topics])
        return {item["pk"]["S"][3:]: self._seal_from_item(item) for item in items}

    def commit_segment(self, segment: SegmentMeta, expected_next_entry: int, new_state: SealState) -> bool:
        # The sealer sets only its own attributes of the seal item: a trim (maintenance) may
        # change first_entry, trimmed_* and trash meanwhile, and must not be overwritten.
        values: dict[str, Any] = {
            ":expected": _n(expected_next_entry),
            ":next": _n(new_state.next_entry),
            ":holes": {"L": [_n(h) for h in new_state.recent_holes]},
            ":entries": _n(new_state.sealed_entries),
            ":messages": _n(new_state.sealed_messages),
            ":bytes": _n(new_state.sealed_bytes),
            ":segments": _n(new_state.segment_count),
            ":rate_msgs": {"N": f"{new_state.rate_msgs:.6f}"},
            ":rate_bytes": {"N": f"{new_state.rate_bytes:.3f}"},
            ":rate_at": _n(new_state.rate_at),
        }
        update = (
            "SET next_entry = :next, recent_holes = :holes, sealed_entries = :entries,"
            " sealed_messages = :messages, sealed_bytes = :bytes, segment_count = :segments,"
            " rate_msgs = :rate_msgs, rate_bytes = :rate_bytes, rate_at = :rate_at"
        )
        if new_state.last_position is not None:
            update += ", last_shard = :shard, last_seq = :seq"
            values[":shard"] = _s(new_state.last_position.shard_id)
            values[":seq"] = _s(new_state.last_position.sequence)
        condition = "next_entry = :expected"
        if expected_next_entry == 0:
            condition = "attribute_not_exists(pk) OR next_entry = :expected"
        return self._if(
            "transact_write_items",
            TransactItems=[
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            "pk": _tp(segment.topic),
                            "sk": _s(_seg_sk(segment.last_entry)),
                            "ledger_id": _n(segment.ledger_id),
                            "first_entry": _n(segment.first_entry),
                            "last_entry": _n(segment.last_entry),
                            "key": _s(segment.key),
                            "offsets": {"B": array.array("Q", segment.offsets).tobytes()},
                            "message_count": _n(segment.message_count),
                            "created_at": _n(segment.created_at),
                            "max_publish_time": _n(segment.max_publish_time),
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": {"pk": _tp(segment.topic), "sk": _s("SEAL")},
                        "UpdateExpression": update,
                        "ConditionExpression": condition,
                        "ExpressionAttributeValues": values,
                    }
                },
            ]
        )

    def trim_segments(self, topic: TopicName, segments: list[SegmentMeta], expected_first_entry: int) -> bool:
        if not segments:
            return True
        if len(segments) > 99:
            raise ValueError("a trim takes at most 99 segments (DynamoDB transactions hold 100 items)")
        deletes = [
            {
                "Delete": {
                    "TableName": self.table,
                    "Key": {"pk": _tp(topic), "sk": _s(_seg_sk(seg.last_entry))},
                    "ConditionExpression": "attribute_exists(pk)",
                }
            }
            for seg in segments
        ]
        condition = "first_entry = :expected"
        if expected_first_entry == 0:
            condition = "attribute_not_exists(first_entry) OR first_entry = :expected"
        seal_update = {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": _tp(topic), "sk": _s("SEAL")},
                "UpdateExpression": (
                    "SET first_entry = :first, trimmed_entries = if_not_exists(trimmed_entries, :zero) + :e,"
                    " trimmed_messages = if_not_exists(trimmed_messages, :zero) + :m,"
                    " trimmed_bytes = if_not_exists(trimmed_bytes, :zero) + :b ADD trash :keys"
                ),
                "ConditionExpression": f"attribute_exists(pk) AND ({condition})",
                "ExpressionAttributeValues": {
                    ":first": _n(segments[-1].last_entry + 1),
                    ":expected": _n(expected_first_entry),
                    ":zero": _n(0),
                    ":e": _n(sum(seg.last_entry - seg.first_entry + 1 for seg in segments)),
                    ":m": _n(sum(seg.message_count for seg in segments)),
                    ":b": _n(sum(seg.size for seg in segments)),
                    ":keys": {"SS": [seg.key for seg in segments]},
                },
            }
        }
        return self._if("transact_write_items", TransactItems=[*deletes, seal_update])

    def clear_trash(self, topic: TopicName, keys: list[str]) -> None:
        if keys:
            self.ddb.update_item(
                TableName=self.table,
                Key={"pk": _tp(topic), "sk": _s("SEAL")},
                UpdateExpression="DELETE trash :keys",
                ExpressionAttributeValues={":keys": {"SS": list(keys)}},
            )

    def list_segments(self, topic: TopicName, from_entry: int, limit: int) -> list[SegmentMeta]:
        page = self.ddb.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={":pk": _tp(topic), ":lo": _s(_seg_sk(max(from_entry, 0))), ":hi": _s("SEG#~")},
            Limit=limit,
            ConsistentRead=True,
        )
        out: list[SegmentMeta] = []
        for item in page["Items"]:
            offsets = array.array("Q")
            offsets.frombytes(item["offsets"]["B"])
            out.append(
                SegmentMeta(
                    str(topic),
                    _int(item, "ledger_id"),
                    _int(item, "first_entry"),
                    _int(item, "last_entry"),
                    item["key"]["S"],
                    tuple(offsets),
                    _int(item, "message_count"),
                    _int(item, "created_at"),
                    _int(item, "max_publish_time"),
                )
            )
        return out

    @staticmethod
    def _writer_from_item(item: dict[str, Any] | None) -> WriterState | None:
        if not item:
            return None

        def by_producer(name: str) -> dict[str, int]:
            return {k: int(v["N"]) for k, v in item.get(name, {}).get("M", {}).items()}

        last, msgs, sizes, since = (by_producer(n) for n in ("pub_last", "pub_msgs", "pub_bytes", "pub_since"))
        producers = {
            name: ProducerActivity(last.get(name, 0), msgs.get(name, 0), sizes.get(name, 0), since.get(name, 0))
            for name in set(last) | set(since)
        }
        return WriterState(
            _int(item, "next_entry"),
            _int(item, "ledger_id"),
            _int(item, "ledger_first_entry"),
            _int(item, "ledger_opened_at"),
            _int(item, "created_at"),
            messages_in=_int(item, "msg_in"),
            bytes_in=_int(item, "bytes_in"),
            producers=producers,
            backlog_blocked=item.get("backlog_blocked", {}).get("S", ""),
        )

    def get_topic_state(self, topic: TopicName) -> tuple[SealState, WriterState | None]:
        items = self._batch_get([{"pk": _tp(topic), "sk": _s("SEAL")}, {"pk": _tp(topic), "sk": _s("WRITER")}])
        by_sk = {item["sk"]["S"]: item for item in items}
        return self._seal_from_item(by_sk.get("SEAL")), self._writer_from_item(by_sk.get("WRITER"))

    # --- cursors ---------------------------------------------------------------------------
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
