"""DynamoDB's limits (`X-Amz-Target: DynamoDB_20120810.*`).

Item ≤ 400 KB (ValidationException), transactions ≤ 100 items and 4 MB, BatchWriteItem ≤ 25;
per partition key value ~1,000 write units/s and ~3,000 read units/s (writes ceil(KB),
transactional x2; reads ceil(4 KB), eventually consistent half). A hot key answers
ProvisionedThroughputExceededException (on-demand wording, with `ThrottlingReasons`); a
transaction touching one is cancelled (TransactionCanceledException, reason ThrottlingError);
BatchWriteItem returns the throttled items as UnprocessedItems.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from magnetar.local.aws_limits.base import (
    KB,
    MIB,
    EndpointBase,
    Response,
    _b64_len,
    _json_response,
    _PassThrough,
    _refused,
)
from magnetar.local.aws_limits.buckets import Bucket

# DynamoDB (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html)
DDB_MAX_ITEM = 400 * KB
DDB_PARTITION_WCU_S = 1000
DDB_PARTITION_RCU_S = 3000
DDB_TXN_MAX_ITEMS = 100
DDB_TXN_MAX_BYTES = 4 * MIB
DDB_BATCH_WRITE_MAX = 25

DDB_THROTTLED = ("Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling "
                 "your table or index so please try again shortly. If exceptions persist, check if you have a hot "
                 "key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html.")
DDB_ITEM_TOO_LARGE = "Item size has exceeded the maximum allowed size"
DDB_UPDATE_TOO_LARGE = "Item size to update has exceeded the maximum allowed size"

_WRITE_OPS = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
_EQUALITY = re.compile(r"(#?[\w.]+)\s*=\s*(:\w+)")


def _number_size(n: str) -> int:
    digits = n.lstrip("-").replace(".", "").lstrip("0").rstrip("0") or "0"
    return (len(digits) + 1) // 2 + 1


def attribute_size(value: dict[str, Any]) -> int:
    """DynamoDB's size of one attribute value (developerguide/CapacityUnitCalculations.html)."""
    if len(value) != 1:
        return 1
    kind, v = next(iter(value.items()))
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return _number_size(v)
    if kind == "B":  # base64 on the wire; bytes as boto3 answers them
        return len(v) if isinstance(v, bytes | bytearray) else _b64_len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(x.encode()) for x in v)
    if kind == "NS":
        return sum(_number_size(x) for x in v)
    if kind == "BS":
        return sum(len(x) if isinstance(x, bytes | bytearray) else _b64_len(x) for x in v)
    if kind == "L":
        return 3 + sum(1 + attribute_size(x) for x in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + attribute_size(x) for k, x in v.items())
    return 0


def item_size(item: dict[str, Any]) -> int:
    """DynamoDB's billed size of an item (its attribute names and values), as the wire or boto3 gives it."""
    return sum(len(name.encode()) + attribute_size(value) for name, value in item.items())


def dynamodb_error(code: str, message: str, **extra: Any) -> Response:
    prefix = "com.amazon.coral.validate#" if code == "ValidationException" else "com.amazonaws.dynamodb.v20120810#"
    return _refused(_json_response("400 Bad Request", {"__type": prefix + code, "message": message, **extra},
                                   "application/x-amz-json-1.0", crc=True), code)


class DynamoDbLimits(EndpointBase):
    """The endpoint's DynamoDB operations (a mixin of `AwsEndpoint`)."""

    _key_schemas: dict[tuple[str, str, str], tuple[str, str | None]]

    def _key_schema(self, account: str, region: str, table: str) -> tuple[str, str | None]:
        key = (account, region, table)
        schema = self._key_schemas.get(key)
        if schema is None:
            from moto.dynamodb.models import dynamodb_backends

            with self.backend_lock:
                try:
                    t = dynamodb_backends[account][region].tables[table]
                except KeyError:
                    raise _PassThrough from None
                schema = (t.hash_key_attr, t.range_key_attr)
            self._key_schemas[key] = schema
        return schema

    def _stored_size(self, account: str, region: str, table: str, key: dict[str, Any]) -> int:
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodb.models.dynamo_type import DynamoType

        hash_attr, range_attr = self._key_schema(account, region, table)
        try:
            with self.backend_lock:
                t = dynamodb_backends[account][region].tables[table]
                item = t.get_item(DynamoType(key[hash_attr]), DynamoType(key[range_attr]) if range_attr else None)
                return int(item.size()) if item is not None else 0
        except Exception:
            return 0

    def _partition(self, account: str, region: str, table: str, item_or_key: dict[str, Any]) -> tuple[str, ...]:
        hash_attr, _ = self._key_schema(account, region, table)
        value = json.dumps(item_or_key.get(hash_attr), sort_keys=True)
        return account, region, table, value

    def _dynamodb(self, environ: dict[str, Any], operation: str, body: bytes) -> Response:
        if operation not in _WRITE_OPS and operation not in ("GetItem", "Query", "BatchGetItem", "TransactGetItems"):
            return self._forward(environ)
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return self._forward(environ)
        account, region = self._scope(environ)
        if operation in ("GetItem", "Query"):
            return self._read(environ, operation, request, account, region)
        if operation in ("BatchGetItem", "TransactGetItems"):
            return self._multi_read(environ, operation, request, account, region)
        if operation == "BatchWriteItem":
            return self._batch_write(environ, request, account, region)
        if operation == "TransactWriteItems":
            return self._transact_write(environ, request, account, region)
        table = str(request.get("TableName", ""))
        if operation == "PutItem":
            size = item_size(request.get("Item") or {})
            if size > DDB_MAX_ITEM:
                return dynamodb_error("ValidationException", DDB_ITEM_TOO_LARGE)
            partition = self._partition(account, region, table, request.get("Item") or {})
        else:
            key = request.get("Key") or {}
            partition = self._partition(account, region, table, key)
            stored = self._stored_size(account, region, table, key)
            if operation == "UpdateItem":
                added = item_size(request.get("ExpressionAttributeValues") or {}) + sum(
                    item_size({k: v.get("Value", {"NULL": True})}) for k, v in (request.get("AttributeUpdates") or {}).items())
                if added > DDB_MAX_ITEM:
                    return dynamodb_error("ValidationException", DDB_UPDATE_TOO_LARGE)
                size = min(stored + added, DDB_MAX_ITEM)  # moto checks the resulting item's size itself
            else:
                size = stored
        units = max(1, math.ceil(size / KB))
        if not self._take_writes([(partition, units)]):
            return self._throttled(table, account, region, "TableWriteKeyRangeThroughputExceeded")
        return self._forward(environ, body)

    def _throttled(self, table: str, account: str, region: str, reason: str) -> Response:
        arn = f"arn:aws:dynamodb:{region}:{account}:table/{table}"
        return dynamodb_error("ProvisionedThroughputExceededException", DDB_THROTTLED,
                              ThrottlingReasons=[{"reason": reason, "resource": arn}])

    def _take_writes(self, charges: list[tuple[tuple[str, ...], int]]) -> bool:
        """All or nothing: every partition has the units, then they are taken."""
        now = self.clock()
        with self.state.lock:
            needed: dict[tuple[str, ...], int] = {}
            for partition, units in charges:
                needed[partition] = needed.get(partition, 0) + units
            buckets = {p: self.state.bucket(("dw", *p), DDB_PARTITION_WCU_S, now) for p in needed}
            if any(buckets[p].level(now) < min(n, DDB_PARTITION_WCU_S) for p, n in needed.items()):
                return False
            for p, n in needed.items():
                buckets[p].tokens -= n
            return True

    def _writes_available(self, partition: tuple[str, ...], units: int) -> bool:
        now = self.clock()
        with self.state.lock:
            return self.state.bucket(("dw", *partition), DDB_PARTITION_WCU_S, now).level(now) >= units

    def _read_bucket(self, partition: tuple[str, ...], now: float) -> Bucket:
        return self.state.bucket(("dr", *partition), DDB_PARTITION_RCU_S, now)

    def _read(self, environ: dict[str, Any], operation: str, request: dict[str, Any], account: str,
              region: str) -> Response:
        table = str(request.get("TableName", ""))
        if operation == "GetItem":
            partition = self._partition(account, region, table, request.get("Key") or {})
        else:
            partition = self._query_partition(request, account, region, table)
        now = self.clock()
        with self.state.lock:
            bucket = self._read_bucket(partition, now)
            refused = bucket.level(now) <= 0
        if refused:
            return self._throttled(table, account, region, "TableReadKeyRangeThroughputExceeded")
        status, headers, data = self._forward(environ)
        if status.startswith("200"):  # units of what was read (the answer's length: a slight over-estimate)
            units = max(1, math.ceil(len(data) / (4 * KB)))
            factor = 1.0 if request.get("ConsistentRead") else 0.5
            with self.state.lock:
                bucket.charge(units * factor, self.clock())
        return status, headers, data

    def _query_partition(self, request: dict[str, Any], account: str, region: str, table: str) -> tuple[str, ...]:
        if request.get("IndexName"):
            raise _PassThrough  # an index's partitions are not the table's: not modeled
        hash_attr, _ = self._key_schema(account, region, table)
        names = request.get("ExpressionAttributeNames") or {}
        values = request.get("ExpressionAttributeValues") or {}
        for name, placeholder in _EQUALITY.findall(str(request.get("KeyConditionExpression", ""))):
            if names.get(name, name) == hash_attr and placeholder in values:
                return account, region, table, json.dumps(values[placeholder], sort_keys=True)
        conditions = request.get("KeyConditions") or {}
        if hash_attr in conditions:
            return account, region, table, json.dumps((conditions[hash_attr].get("AttributeValueList") or [None])[0],
                                                      sort_keys=True)
        raise _PassThrough

    def _multi_read(self, environ: dict[str, Any], operation: str, request: dict[str, Any], account: str,
                    region: str) -> Response:
        """BatchGetItem, TransactGetItems: the sizes, and read units charged per key (no partial answers)."""
        reads: list[tuple[str, dict[str, Any], float]] = []
        if operation == "TransactGetItems":
            items = request.get("TransactItems") or []
            if len(items) > DDB_TXN_MAX_ITEMS:
                return dynamodb_error("ValidationException", "1 validation error detected: Value at 'transactItems' "
                                      "failed to satisfy constraint: Member must have length less than or equal to 100")
            reads = [(str(i.get("Get", {}).get("TableName", "")), i.get("Get", {}).get("Key") or {}, 2.0) for i in items]
        else:
            for table, spec in (request.get("RequestItems") or {}).items():
                factor = 1.0 if spec.get("ConsistentRead") else 0.5
                reads += [(str(table), k, factor) for k in spec.get("Keys") or []]
        charges = [(self._partition(account, region, t, k), f) for t, k, f in reads]
        now = self.clock()
        with self.state.lock:
            buckets = [(self._read_bucket(p, now), f) for p, f in charges]
            hot = [i for i, (b, _) in enumerate(buckets) if b.level(now) <= 0]
            if not hot:
                for b, f in buckets:
                    b.charge(f, now)
        if hot:
            table = reads[hot[0]][0]
            if operation == "TransactGetItems":
                return self._cancelled(len(reads), hot)
            return self._throttled(table, account, region, "TableReadKeyRangeThroughputExceeded")
        return self._forward(environ)

    def _cancelled(self, n: int, hot: list[int]) -> Response:
        reasons = [{"Code": "ThrottlingError", "Message": DDB_THROTTLED} if i in hot else {"Code": "None"}
                   for i in range(n)]
        codes = ", ".join(r["Code"] for r in reasons)
        return _refused(_json_response("400 Bad Request", {
            "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "Message": f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
            "CancellationReasons": reasons,
        }, "application/x-amz-json-1.0", crc=True), "TransactionCanceledException(ThrottlingError)")

    def _batch_write(self, environ: dict[str, Any], request: dict[str, Any], account: str, region: str) -> Response:
        requests = [(str(table), r) for table, rs in (request.get("RequestItems") or {}).items() for r in rs or []]
        if len(requests) > DDB_BATCH_WRITE_MAX:
            return dynamodb_error("ValidationException", "Too many items requested for the BatchWriteItem call")
        admitted: dict[str, list[dict[str, Any]]] = {}
        unprocessed: dict[str, list[dict[str, Any]]] = {}
        for table, r in requests:
            if "PutRequest" in r:
                item = r["PutRequest"].get("Item") or {}
                size = item_size(item)
                if size > DDB_MAX_ITEM:
                    return dynamodb_error("ValidationException", DDB_ITEM_TOO_LARGE)
                partition = self._partition(account, region, table, item)
            else:
                key = (r.get("DeleteRequest") or {}).get("Key") or {}
                partition = self._partition(account, region, table, key)
                size = self._stored_size(account, region, table, key)
            ok = self._take_writes([(partition, max(1, math.ceil(size / KB)))])
            (admitted if ok else unprocessed).setdefault(table, []).append(r)
        if not unprocessed:
            return self._forward(environ)
        if not admitted:
            return self._throttled(requests[0][0], account, region, "TableWriteKeyRangeThroughputExceeded")
        status, headers, data = self._forward(environ, json.dumps({**request, "RequestItems": admitted}).encode())
        if not status.startswith("200"):
            return status, headers, data
        answer = json.loads(data)
        left = answer.get("UnprocessedItems") or {}
        for table, rs in unprocessed.items():
            left.setdefault(table, []).extend(rs)
        answer["UnprocessedItems"] = left
        return _refused(_json_response("200 OK", answer, "application/x-amz-json-1.0", crc=True),
                        "UnprocessedItems", sum(len(rs) for rs in unprocessed.values()))

    def _transact_write(self, environ: dict[str, Any], request: dict[str, Any], account: str, region: str) -> Response:
        items = request.get("TransactItems") or []
        if len(items) > DDB_TXN_MAX_ITEMS:
            return dynamodb_error("ValidationException", "1 validation error detected: Value at 'transactItems' failed "
                                  "to satisfy constraint: Member must have length less than or equal to 100")
        charges: list[tuple[tuple[str, ...], int]] = []
        total = 0
        for entry in items:
            (kind, op), = entry.items() if len(entry) == 1 else (("", {}),)
            table = str(op.get("TableName", ""))
            if kind == "Put":
                size = item_size(op.get("Item") or {})
                if size > DDB_MAX_ITEM:
                    return dynamodb_error("ValidationException", DDB_ITEM_TOO_LARGE)
                partition = self._partition(account, region, table, op.get("Item") or {})
            else:
                key = op.get("Key") or {}
                partition = self._partition(account, region, table, key)
                size = item_size(key) + item_size(op.get("ExpressionAttributeValues") or {})
                if kind == "Update" and size > DDB_MAX_ITEM:
                    return dynamodb_error("ValidationException", DDB_UPDATE_TOO_LARGE)
                if kind in ("Update", "Delete"):
                    size = min(DDB_MAX_ITEM, size + self._stored_size(account, region, table, key))
            total += size
            charges.append((partition, 2 * max(1, math.ceil(size / KB))))
        if total > DDB_TXN_MAX_BYTES:
            return dynamodb_error("ValidationException", "Transaction request cannot be larger than 4 MB")
        if not self._take_writes(charges):
            hot = [i for i, (p, n) in enumerate(charges) if not self._writes_available(p, n)]
            return self._cancelled(len(items), hot or [0])
        return self._forward(environ)
