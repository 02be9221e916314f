"""The schema registry's items: one per schema version, under the topic's schema id.

| pk                | sk                   | attributes                                    |
|-------------------|----------------------|-----------------------------------------------|
| SCHEMA#<t>/<ns>/<topic> | V#<version, 19 digits> | type, data, props (JSON), ts, deleted |

A topic's versions are one Query (sorted by the zero-padded version); a new version is one
conditional PutItem (refused when another writer took that version first).
"""

from __future__ import annotations

import json
from typing import Any

from magnetar.adapters.aws.dynamodb.base import DynamoBase, _int, _n, _s
from magnetar.core.schema.types import SchemaData, StoredSchema


class SchemaItems(DynamoBase):
    """The SCHEMA# items."""

    def get_schemas(self, schema_id: str) -> list[StoredSchema]:
        out: list[StoredSchema] = []
        kwargs: dict[str, Any] = {
            "TableName": self.config_table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :v)",
            "ExpressionAttributeValues": {":pk": _s(f"SCHEMA#{schema_id}"), ":v": _s("V#")},
            "ConsistentRead": True,
        }
        while True:
            page = self.config_ddb.query(**kwargs)
            for item in page["Items"]:
                schema = SchemaData(item["type"]["S"], item.get("data", {}).get("S", ""),
                                    json.loads(item.get("props", {}).get("S", "{}")))
                out.append(StoredSchema(_int(item, "version"), schema, _int(item, "ts"),
                                        item.get("deleted", {}).get("BOOL", False)))
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def put_schema(self, schema_id: str, schema: StoredSchema) -> bool:
        return self._put_new({
            "pk": _s(f"SCHEMA#{schema_id}"),
            "sk": _s(f"V#{schema.version:019d}"),
            "version": _n(schema.version),
            "type": _s(schema.schema.type),
            "data": _s(schema.schema.data),
            "props": _s(json.dumps(schema.schema.properties, sort_keys=True)),
            "ts": _n(schema.timestamp),
            "deleted": {"BOOL": schema.deleted},
        }, config=True)
