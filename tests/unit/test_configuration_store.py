"""The configuration store's client: reads fall back to this region's replica when the home
region is unreachable; writes never do."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from magnetar.adapters.aws.dynamodb import DynamoMetadataStore
from magnetar.adapters.aws.dynamodb.base import ConfigurationReplicas
from magnetar.core.ports import TenantInfo


class Region:
    """A region's DynamoDB endpoint as boto3's client answers it: reachable or not (botocore's own error)."""

    def __init__(self, items: dict[tuple[str, str], dict[str, Any]], reachable: bool = True) -> None:
        self.items, self.reachable, self.calls = items, reachable, 0

    def _check(self) -> None:
        self.calls += 1
        if not self.reachable:
            raise EndpointConnectionError(endpoint_url="https://dynamodb.home.amazonaws.com")

    def get_item(self, TableName: str, Key: dict[str, Any], **_: Any) -> dict[str, Any]:
        self._check()
        item = self.items.get((Key["pk"]["S"], Key["sk"]["S"]))
        return {"Item": item} if item else {}

    def update_item(self, **_: Any) -> dict[str, Any]:
        self._check()
        return {}


TENANT = {"pk": {"S": "TENANTS"}, "sk": {"S": "acme"}, "adminRoles": {"L": []},
          "allowedClusters": {"L": [{"S": "east"}]}}


def test_a_read_goes_to_the_home_replica_while_it_answers() -> None:
    home, local = Region({("TENANTS", "acme"): TENANT}), Region({})
    store = DynamoMetadataStore("metadata", dynamodb=local, config_table="config",
                                config_dynamodb=ConfigurationReplicas(home, local))
    assert store.get_tenant("acme") == TenantInfo("acme", (), ("east",))
    assert (home.calls, local.calls) == (1, 0)


def test_a_read_falls_back_to_the_local_replica_when_the_home_region_is_unreachable() -> None:
    home, local = Region({}, reachable=False), Region({("TENANTS", "acme"): TENANT})
    store = DynamoMetadataStore("metadata", dynamodb=local, config_table="config",
                                config_dynamodb=ConfigurationReplicas(home, local))
    assert store.get_tenant("acme") == TenantInfo("acme", (), ("east",))
    assert (home.calls, local.calls) == (1, 1)


def test_a_write_never_falls_back() -> None:
    home, local = Region({}, reachable=False), Region({})
    store = DynamoMetadataStore("metadata", dynamodb=local, config_table="config",
                                config_dynamodb=ConfigurationReplicas(home, local))
    with pytest.raises(EndpointConnectionError):
        store.update_tenant(TenantInfo("acme", (), ("east",)))
    assert local.calls == 0
