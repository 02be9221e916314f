"""Pulsar Functions on DynamoDB: the registry in the configuration store, the state in this
cluster's table.

| item                       | table  | pk                          | sk     | attributes |
|----------------------------|--------|-----------------------------|--------|------------|
| function                   | config | FUNCTIONS#<tenant>/<ns>     | <name> | config (FunctionConfig JSON), version, state, created_at, updated_at, code_key, code_size, code_sha256, code_cluster, inputs, topics_pattern |
| input index                | config | FNINPUT#<topic>             | <fqfn> | (none)     |
| pattern index              | config | FNPATTERNS#<tenant>/<ns>    | <fqfn> | pattern    |
| state key                  | table  | FNSTATE#<fqfn>              | <key>  | value (B) or counter (N), version (N) |
| dispatch lease             | table  | FNLEASE#<fqfn>              | lease  | owner, until (ms) |

A create, update or delete writes the function item and its index items in one transaction
(all or nothing); an update is conditional on the version it read. A counter moves with one
`UpdateItem` `ADD` (atomic, no read).
"""

from __future__ import annotations

from typing import Any

from magnetar.adapters.aws.dynamodb.base import DynamoBase, _int, _n, _s
from magnetar.core.errors import RetryableError
from magnetar.core.ports.functions import FunctionRecord, StateValue

_FUNCTIONS = "FUNCTIONS#"
_INPUT = "FNINPUT#"
_PATTERNS = "FNPATTERNS#"
_STATE = "FNSTATE#"
_LEASE = "FNLEASE#"


def _index_items(record: FunctionRecord) -> list[dict[str, Any]]:
    """The index items of a function: one per input topic, one for its pattern."""
    from magnetar.core.functions.registry import pattern_namespace

    items = [{"pk": _s(_INPUT + topic), "sk": _s(record.fqfn)} for topic in record.inputs]
    if record.topics_pattern:
        items.append({"pk": _s(_PATTERNS + pattern_namespace(record)), "sk": _s(record.fqfn),
                      "pattern": _s(record.topics_pattern)})
    return items


def _key(item: dict[str, Any]) -> dict[str, Any]:
    return {"pk": item["pk"], "sk": item["sk"]}


class FunctionItems(DynamoBase):
    """The functions' registry items (configuration store) and state items (this cluster)."""

    def _function_item(self, record: FunctionRecord) -> dict[str, Any]:
        item: dict[str, Any] = {
            "pk": _s(f"{_FUNCTIONS}{record.tenant}/{record.namespace}"), "sk": _s(record.name),
            "config": _s(record.config), "version": _n(record.version), "state": _s(record.state),
            "created_at": _n(record.created_at), "updated_at": _n(record.updated_at),
            "code_key": _s(record.code_key), "code_size": _n(record.code_size),
            "code_sha256": _s(record.code_sha256), "code_cluster": _s(record.code_cluster),
            "inputs": {"L": [_s(t) for t in record.inputs]}, "topics_pattern": _s(record.topics_pattern),
        }
        return item

    @staticmethod
    def _record(item: dict[str, Any]) -> FunctionRecord:
        tenant, namespace = item["pk"]["S"][len(_FUNCTIONS):].split("/", 1)
        return FunctionRecord(
            tenant, namespace, item["sk"]["S"], item["config"]["S"], _int(item, "version", 1),
            item.get("state", {}).get("S", "RUNNING"), _int(item, "created_at"), _int(item, "updated_at"),
            item.get("code_key", {}).get("S", ""), _int(item, "code_size"), item.get("code_sha256", {}).get("S", ""),
            item.get("code_cluster", {}).get("S", ""), tuple(v["S"] for v in item.get("inputs", {}).get("L", [])),
            item.get("topics_pattern", {}).get("S", ""))

    def _registry_write(self, items: list[dict[str, Any]]) -> bool:
        """One transaction on the configuration store: True applied; False when the function
        item's condition (item 0) failed; a conflict with another transaction is retryable."""
        failed = self._transact(items, config=True)
        if failed is None:
            return True
        if failed.get(0) == "ConditionalCheckFailed":
            return False
        raise RetryableError(f"The function registry write was cancelled ({', '.join(sorted(set(failed.values())))}); retry")

    def create_function(self, record: FunctionRecord) -> bool:
        table = self.config_table
        items = [{"Put": {"TableName": table, "Item": self._function_item(record),
                          "ConditionExpression": "attribute_not_exists(pk)"}}]
        items += [{"Put": {"TableName": table, "Item": item}} for item in _index_items(record)]
        return self._registry_write(items)

    def update_function(self, record: FunctionRecord, previous: FunctionRecord) -> bool:
        table = self.config_table
        items: list[dict[str, Any]] = [{"Put": {
            "TableName": table, "Item": self._function_item(record),
            "ConditionExpression": "version = :v", "ExpressionAttributeValues": {":v": _n(previous.version)}}}]
        new = {(i["pk"]["S"], i["sk"]["S"]): i for i in _index_items(record)}
        old = {(i["pk"]["S"], i["sk"]["S"]): i for i in _index_items(previous)}
        items += [{"Delete": {"TableName": table, "Key": _key(i)}} for k, i in old.items() if k not in new]
        items += [{"Put": {"TableName": table, "Item": i}} for k, i in new.items() if old.get(k) != i]
        return self._registry_write(items)

    def get_function(self, tenant: str, namespace: str, name: str) -> FunctionRecord | None:
        item = self._get(f"{_FUNCTIONS}{tenant}/{namespace}", name, config=True)
        return None if item is None else self._record(item)

    def list_functions(self, tenant: str, namespace: str) -> list[str]:
        return self._query_sks(f"{_FUNCTIONS}{tenant}/{namespace}", config=True)

    def set_function_state(self, tenant: str, namespace: str, name: str, state: str) -> bool:
        return self._if(
            "update_item", True, TableName=self.config_table,
            Key={"pk": _s(f"{_FUNCTIONS}{tenant}/{namespace}"), "sk": _s(name)},
            UpdateExpression="SET #s = :s", ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#s": "state"}, ExpressionAttributeValues={":s": _s(state)})

    def delete_function(self, record: FunctionRecord) -> bool:
        table = self.config_table
        items = [{"Delete": {"TableName": table, "Key": _key(self._function_item(record)),
                             "ConditionExpression": "attribute_exists(pk)"}}]
        items += [{"Delete": {"TableName": table, "Key": _key(i)}} for i in _index_items(record)]
        return self._registry_write(items)

    def functions_of_input(self, topic: str) -> list[str]:
        return self._query_sks(_INPUT + topic, config=True)

    def function_patterns(self, namespace: str) -> dict[str, str]:
        out: dict[str, str] = {}
        kwargs: dict[str, Any] = {"TableName": self.config_table, "KeyConditionExpression": "pk = :pk",
                                  "ExpressionAttributeValues": {":pk": _s(_PATTERNS + namespace)}}
        while True:
            page = self.config_ddb.query(**kwargs)
            out.update({item["sk"]["S"]: item["pattern"]["S"] for item in page["Items"]})
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # --- state (this cluster's table) ---------------------------------------------------------------
    def get_function_state(self, fqfn: str, key: str) -> StateValue | None:
        item = self._get(_STATE + fqfn, key)
        if item is None:
            return None
        value = item["value"]["B"] if "value" in item else None
        counter = int(item["counter"]["N"]) if "counter" in item else None
        return StateValue(key, bytes(value) if value is not None else None, counter, _int(item, "version"))

    def _state_update(self, fqfn: str, key: str, expression: str, values: dict[str, Any]) -> dict[str, Any]:
        attributes: dict[str, Any] = self.ddb.update_item(
            TableName=self.table, Key={"pk": _s(_STATE + fqfn), "sk": _s(key)}, UpdateExpression=expression,
            ExpressionAttributeNames={"#v": "value", "#c": "counter", "#ver": "version"},
            ExpressionAttributeValues={":one": _n(1), **values}, ReturnValues="UPDATED_NEW")["Attributes"]
        return attributes

    def put_function_state(self, fqfn: str, key: str, value: bytes) -> int:
        new = self._state_update(fqfn, key, "SET #v = :val ADD #ver :one REMOVE #c", {":val": {"B": value}})
        return int(new["version"]["N"])

    def set_function_counter(self, fqfn: str, key: str, value: int) -> int:
        new = self._state_update(fqfn, key, "SET #c = :val ADD #ver :one REMOVE #v", {":val": _n(value)})
        return int(new["version"]["N"])

    def incr_function_counter(self, fqfn: str, key: str, amount: int) -> int:
        new = self._state_update(fqfn, key, "ADD #c :amount, #ver :one REMOVE #v", {":amount": _n(amount)})
        return int(new["counter"]["N"])

    def delete_function_state(self, fqfn: str, key: str) -> bool:
        return self._if("delete_item", False, TableName=self.table, Key={"pk": _s(_STATE + fqfn), "sk": _s(key)},
                        ConditionExpression="attribute_exists(pk)")

    def claim_function_lease(self, fqfn: str, owner: str, now_ms: int, lease_ms: int) -> bool:
        return self._if("put_item", TableName=self.table,
                        Item={"pk": _s(_LEASE + fqfn), "sk": _s("lease"), "owner": _s(owner),
                              "until": _n(now_ms + lease_ms)},
                        ConditionExpression="attribute_not_exists(pk) OR #o = :me OR #u < :now",
                        ExpressionAttributeNames={"#o": "owner", "#u": "until"},
                        ExpressionAttributeValues={":me": _s(owner), ":now": _n(now_ms)})

    def release_function_lease(self, fqfn: str, owner: str) -> None:
        self._if("delete_item", TableName=self.table, Key={"pk": _s(_LEASE + fqfn), "sk": _s("lease")},
                 ConditionExpression="#o = :me", ExpressionAttributeNames={"#o": "owner"},
                 ExpressionAttributeValues={":me": _s(owner)})

    def clear_function_state(self, fqfn: str) -> int:
        keys = self._query_sks(_STATE + fqfn)
        for start in range(0, len(keys), 25):
            request = {self.table: [{"DeleteRequest": {"Key": {"pk": _s(_STATE + fqfn), "sk": _s(k)}}}
                                    for k in keys[start:start + 25]]}
            for _ in range(10):  # unprocessed deletes (throttling) are sent again
                request = self.ddb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
                if not request:
                    break
        return len(keys)
