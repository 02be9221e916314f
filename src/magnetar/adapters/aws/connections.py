"""Push delivery on AWS: WebSocket connections in the DynamoDB table, pushes through API Gateway.

| item               | pk                  | sk                  | what                                      |
|--------------------|---------------------|---------------------|-------------------------------------------|
| topic connection   | TP#<topic>          | WS#<connection id>  | the connection and its counters           |
| connection         | CONN#<connection id>| CONN                | the same fields as at connect, plus topic |
| topic index        | WSTOPICS            | <topic>             | time of the topic's last connect, the ids |

A topic's connections come with one Query (they share the topic's partition key with its cursors
and seal state); a journal batch's topics' connections with two BatchGetItems per 100 topics
(their index items, then the connections the index names: `of_topics`), so topics without
connections cost no query and many topics no query each; a frame's connection with one GetItem
(and a container remembers it: nothing in it changes); the maintenance run finds the topics with
connections in the index. Connect writes the topic's and the id's items with one BatchWriteItem,
then adds the id to the topic's index item (after the connection's item: an id the index names
has its item, unless it was removed since); disconnect deletes the topic's item and then takes
the id off the index (the connection's item stays, so a frame that arrives after $disconnect is
still understood). An index item without ids (written before they were kept) makes `of_topics`
query that topic. The items carry
`expiresAt` (the table's TTL attribute) past API Gateway's 2 h connection limit, so a connection
whose $disconnect never came disappears by itself.

Pushes are API Gateway management API PostToConnection calls (one per message: Pulsar's clients
expect one message per frame), on the endpoint named by MAGNETAR_WS_ENDPOINT; everything else
about the client (credentials, retries) is the standard SDK configuration.
"""

from __future__ import annotations

import contextlib
import json
import os
from functools import cache
from typing import Any

import boto3
from botocore.exceptions import ClientError

from magnetar.adapters.aws.clients import (
    _CONFIG,
    UNPROCESSED_ATTEMPTS,
    client,
    count_requests,
    unprocessed_backoff,
)
from magnetar.adapters.aws.dynamodb.base import DynamoBase
from magnetar.config import ENV_WS_ENDPOINT, ResourceNames
from magnetar.core.errors import RetryableError
from magnetar.core.metrics.container import COUNTERS
from magnetar.core.ports.push import Connection
from magnetar.core.push import PushService
from magnetar.core.websocket import MAX_CONNECTION_MS

INDEX_PK = "WSTOPICS"
_NAMES = ("#permits", "#pos", "#skip", "#inflight", "#acks")  # attribute names, aliased (reserved words)
_EXPIRY_MARGIN_S = 15 * 60


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _topic_key(topic: str, connection_id: str) -> dict[str, Any]:
    return {"pk": _s(f"TP#{topic}"), "sk": _s(f"WS#{connection_id}")}


def _index_key(topic: str) -> dict[str, Any]:
    return {"pk": _s(INDEX_PK), "sk": _s(topic)}


def _conn_key(connection_id: str) -> dict[str, Any]:
    return {"pk": _s(f"CONN#{connection_id}"), "sk": _s("CONN")}


def _item(c: Connection) -> dict[str, Any]:
    return {
        "cid": _s(c.connection_id), "role": _s(c.role), "topic": _s(c.topic), "at": _n(c.connected_at),
        "name": _s(c.name), "sub": _s(c.subscription), "stype": _s(c.subscription_type),
        "pull": {"BOOL": c.pull_mode}, "queue": _n(c.queue_size), "nack": _n(c.nack_delay_ms),
        "permits": _n(c.permits), "pos": _n(c.position), "skip": _n(c.skip), "inflight": _n(c.inflight),
        "ackto": _n(c.ack_timeout_ms),
        "expiresAt": _n((c.connected_at + MAX_CONNECTION_MS) // 1000 + _EXPIRY_MARGIN_S),
        **({"enc": _s(c.encryption_keys)} if c.encryption_keys else {}),
    }


def _connection(item: dict[str, Any]) -> Connection:
    def n(name: str, default: int = 0) -> int:
        return int(item[name]["N"]) if name in item else default

    return Connection(
        item["cid"]["S"], item["role"]["S"], item["topic"]["S"], n("at"), item["name"]["S"], item["sub"]["S"],
        item["stype"]["S"], bool(item.get("pull", {}).get("BOOL", False)), n("queue", 1000), n("nack", 60_000),
        n("ackto"), n("permits"), n("pos"), n("skip", -1), n("inflight"),
        frozenset(item.get("acks", {}).get("SS", [])), item.get("enc", {}).get("S", ""),
    )


class DynamoConnectionRegistry(DynamoBase):
    """The connection items, in the metadata table (`DynamoBase`: its client, its batch read)."""

    def add(self, connection: Connection) -> None:
        item = _item(connection)
        puts = [
            {**_topic_key(connection.topic, connection.connection_id), **item},
            {**_conn_key(connection.connection_id), **item},
        ]
        self._batch_write([{"PutRequest": {"Item": p}} for p in puts])
        self.ddb.update_item(TableName=self.table, Key=_index_key(connection.topic),
                             UpdateExpression="SET #at = :at, ids_kept = :kept ADD ids :id",
                             ExpressionAttributeNames={"#at": "at"},
                             ExpressionAttributeValues={":at": _n(connection.connected_at), ":kept": _n(1),
                                                        ":id": {"SS": [connection.connection_id]}})

    def get(self, connection_id: str) -> Connection | None:
        item = self.ddb.get_item(TableName=self.table, Key=_conn_key(connection_id), ConsistentRead=True).get("Item")
        return _connection(item) if item else None

    def of_topic(self, topic: str) -> list[Connection]:
        out: list[Connection] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :ws)",
            "ExpressionAttributeValues": {":pk": _s(f"TP#{topic}"), ":ws": _s("WS#")},
            "ConsistentRead": True,
        }
        while True:
            page = self.ddb.query(**kwargs)
            out.extend(_connection(item) for item in page["Items"])
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def of_topics(self, topics: list[str]) -> dict[str, list[Connection]]:
        index = {item["sk"]["S"]: item for item in self._batch_get([_index_key(t) for t in dict.fromkeys(topics)])}
        out: dict[str, list[Connection]] = {}
        keys: list[dict[str, Any]] = []
        listed: dict[str, set[str]] = {}
        for topic, item in index.items():
            if "ids_kept" in item:  # (an emptied string set is no attribute at all)
                listed[topic] = set(item.get("ids", {}).get("SS", []))
                keys.extend(_topic_key(topic, cid) for cid in listed[topic])
            else:  # an index item from before the ids were kept
                conns = self.of_topic(topic)
                if conns:
                    out[topic] = conns
        for found in self._batch_get(keys):
            conn = _connection(found)
            out.setdefault(conn.topic, []).append(conn)
            listed[conn.topic].discard(conn.connection_id)
        for topic, gone in listed.items():  # items expired (their $disconnect never came): off the index
            if gone:
                with contextlib.suppress(ClientError):
                    self.ddb.update_item(TableName=self.table, Key=_index_key(topic), UpdateExpression="DELETE ids :gone",
                                         ConditionExpression="attribute_exists(pk)",
                                         ExpressionAttributeValues={":gone": {"SS": sorted(gone)}})
        return out

    def current(self, connection: Connection) -> Connection | None:
        item = self.ddb.get_item(
            TableName=self.table, Key=_topic_key(connection.topic, connection.connection_id), ConsistentRead=True
        ).get("Item")
        return _connection(item) if item else None

    def remove(self, connection: Connection) -> Connection | None:
        # the CONN# item stays until its expiresAt: a frame that arrives after $disconnect still
        # finds its topic and subscription (an acknowledgement sent just before closing counts)
        old = self.ddb.delete_item(TableName=self.table, Key=_topic_key(connection.topic, connection.connection_id),
                                   ReturnValues="ALL_OLD").get("Attributes")
        try:
            self.ddb.update_item(TableName=self.table, Key=_index_key(connection.topic), UpdateExpression="DELETE ids :id",
                                 ConditionExpression="attribute_exists(pk)",
                                 ExpressionAttributeValues={":id": {"SS": [connection.connection_id]}})
        except ClientError as exc:  # the maintenance run forgot the topic already
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        return _connection(old) if old else None

    def add_acks(self, connection: Connection, acks: list[str]) -> Connection | None:
        return self._update(connection, "ADD #acks :acks", {":acks": {"SS": sorted(set(acks))}})

    def clear_acks(self, connection: Connection, acks: frozenset[str]) -> None:
        if acks:
            self._update(connection, "DELETE #acks :acks", {":acks": {"SS": sorted(acks)}})

    def _update(self, connection: Connection, expression: str, values: dict[str, Any],
                condition: str = "attribute_exists(pk)") -> Connection | None:
        try:
            item = self.ddb.update_item(
                TableName=self.table, Key=_topic_key(connection.topic, connection.connection_id),
                UpdateExpression=expression, ConditionExpression=condition, ExpressionAttributeValues=values,
                ExpressionAttributeNames={k: k[1:] for k in _NAMES if k in expression or k in condition},
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return None
            raise
        return _connection(item)

    def add_permits(self, connection: Connection, count: int) -> Connection | None:
        return self._update(connection, "ADD #permits :n", {":n": _n(count)})

    def take_permits(self, connection: Connection, count: int, need: int) -> bool:
        return self._update(connection, "ADD #permits :minus", {":minus": _n(-count), ":need": _n(need)},
                            "attribute_exists(pk) AND #permits >= :need") is not None

    def advance_reader(self, connection: Connection, position: int, skip: int, sent: int) -> bool:
        return self._update(
            connection, "SET #pos = :pos, #skip = :skip ADD #inflight :sent",
            {":pos": _n(position), ":skip": _n(skip), ":sent": _n(sent), ":was": _n(connection.position),
             ":wasskip": _n(connection.skip)},
            "attribute_exists(pk) AND #pos = :was AND #skip = :wasskip",
        ) is not None

    def reader_acked(self, connection: Connection, count: int) -> Connection | None:
        current = self._update(connection, "ADD #inflight :minus", {":minus": _n(-count)})
        if current is not None and current.inflight < 0:  # more acks than messages: never below zero
            current = self._update(connection, "SET #inflight = :zero", {":zero": _n(0)}) or current
        return current

    def topics(self) -> dict[str, int]:
        out: dict[str, int] = {}
        kwargs: dict[str, Any] = {
            "TableName": self.table, "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": _s(INDEX_PK)},
        }
        while True:
            page = self.ddb.query(**kwargs)
            out.update({item["sk"]["S"]: int(item["at"]["N"]) for item in page["Items"]})
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def forget_topic(self, topic: str, last_connect: int) -> None:
        try:
            self.ddb.delete_item(TableName=self.table, Key={"pk": _s(INDEX_PK), "sk": _s(topic)},
                                 ConditionExpression="#at = :at", ExpressionAttributeNames={"#at": "at"},
                                 ExpressionAttributeValues={":at": _n(last_connect)})
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        pending: dict[str, Any] = {self.table: requests}
        for attempt in range(UNPROCESSED_ATTEMPTS + 1):
            if attempt:
                unprocessed_backoff(attempt - 1, "BatchWriteItem")  # throttled items: back off before writing them again
            pending = self.ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            if not pending:
                return
        raise RetryableError("DynamoDB throttled a batch write; retry")


class ApiGatewayPushGateway:
    """PostToConnection / GetConnection / DeleteConnection on the WebSocket API's stage."""

    def __init__(self, endpoint: str | None = None, api: Any | None = None) -> None:
        self.endpoint = endpoint or os.environ.get(ENV_WS_ENDPOINT, "")
        self._api = api

    @property
    def api(self) -> Any:
        if self._api is None:
            if not self.endpoint:
                raise RuntimeError(f"{ENV_WS_ENDPOINT} is not set: no WebSocket API to push to")
            session = boto3.session.Session()
            api = session.client("apigatewaymanagementapi", endpoint_url=self.endpoint, config=_CONFIG)
            count_requests(api)
            self._api = api
        return self._api

    def send(self, connection_id: str, frames: list[str]) -> int:
        sent = 0
        try:
            for frame in frames:
                try:
                    self.api.post_to_connection(ConnectionId=connection_id, Data=frame.encode())
                except ClientError as exc:
                    if _gone(exc):
                        return sent
                    raise
                sent += 1
            return sent
        finally:
            COUNTERS.pushed(sent)  # each frame is one message (`magnetar_push_deliveries`)

    def connected(self, connection_id: str) -> bool:
        try:
            self.api.get_connection(ConnectionId=connection_id)
            return True
        except ClientError as exc:
            if _gone(exc):
                return False
            raise

    def close(self, connection_id: str) -> None:
        try:
            self.api.delete_connection(ConnectionId=connection_id)
        except ClientError as exc:
            if not _gone(exc):
                raise


def _gone(exc: ClientError) -> bool:
    error = exc.response.get("Error", {})
    return error.get("Code") in ("GoneException", "410") or exc.response.get("ResponseMetadata", {}).get(
        "HTTPStatusCode") == 410


class LambdaSelfInvoker:
    """Invokes a function asynchronously (the WebSocket function, to push a backlog once the
    connection it just accepted is open)."""

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        client("lambda").invoke(FunctionName=function, InvocationType="Event", Payload=json.dumps(payload).encode())


@cache
def build_push() -> PushService:
    """The push service of this process (one per warm Lambda container), wired from the environment."""
    from magnetar.adapters.aws import build_broker

    return PushService(build_broker(), DynamoConnectionRegistry(ResourceNames.from_env().table), ApiGatewayPushGateway())
