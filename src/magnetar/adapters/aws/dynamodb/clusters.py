"""The instance's clusters: one CLUSTERS item each in the configuration store, its ClusterData as
Pulsar's JSON."""

from __future__ import annotations

import json

from magnetar.adapters.aws.dynamodb.base import DynamoBase, _s
from magnetar.core.clusters import ClusterData

_PK = "CLUSTERS"


class ClusterItems(DynamoBase):
    """The CLUSTERS items (pk CLUSTERS, sk the cluster's name, `data` its ClusterData JSON)."""

    def _key(self, name: str) -> dict[str, dict[str, str]]:
        return {"pk": _s(_PK), "sk": _s(name)}

    def create_cluster(self, name: str, data: ClusterData) -> bool:
        return self._put_new({**self._key(name), "data": _s(json.dumps(data.to_json()))}, config=True)

    def update_cluster(self, name: str, data: ClusterData) -> bool:
        return self._if(
            "update_item", True,
            TableName=self.config_table,
            Key=self._key(name),
            UpdateExpression="SET #d = :d",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#d": "data"},  # a DynamoDB reserved word
            ExpressionAttributeValues={":d": _s(json.dumps(data.to_json()))},
        )

    def get_cluster(self, name: str) -> ClusterData | None:
        item = self._get(_PK, name, config=True)
        if item is None:
            return None
        raw = item.get("data", {}).get("S")
        return ClusterData.from_json(json.loads(raw)) if raw else ClusterData()

    def list_clusters(self) -> list[str]:
        return self._query_sks(_PK, config=True)

    def delete_cluster(self, name: str) -> bool:
        return self._if("delete_item", True, TableName=self.config_table, Key=self._key(name),
                        ConditionExpression="attribute_exists(pk)")
