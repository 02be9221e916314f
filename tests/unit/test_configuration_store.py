"""The configuration store's client: reads fall back to this region's replica when the home
region is unreachable; writes never do (a retryable refusal)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from magnetar.adapters.aws.dynamodb import DynamoMetadataStore
from magnetar.adapters.aws.dynamodb.base import ConfigurationReplicas
from magnetar.core.errors import ConfigurationUnavailable
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
    with pytest.raises(ConfigurationUnavailable, match="configuration store's home replica"):
        store.update_tenant(TenantInfo("acme", (), ("east",)))
    assert local.calls == 0
    assert ConfigurationUnavailable.status == 503


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_unreachable_home_is_left_alone_for_the_pause_then_tried_again() -> None:
    home, local, clock = Region({}, reachable=False), Region({("TENANTS", "acme"): TENANT}), Clock()
    store = DynamoMetadataStore("metadata", dynamodb=local, config_table="config",
                                config_dynamodb=ConfigurationReplicas(home, local, pause_s=5, clock=clock))
    assert store.get_tenant("acme") is not None
    assert (home.calls, local.calls) == (1, 1)
    clock.now += 4  # within the pause: the replica at once, a write refused at once
    assert store.get_tenant("acme") is not None
    with pytest.raises(ConfigurationUnavailable):
        store.update_tenant(TenantInfo("acme", (), ("east",)))
    assert (home.calls, local.calls) == (1, 2)
    home.reachable, home.items = True, {("TENANTS", "acme"): {**TENANT, "allowedClusters": {"L": []}}}
    clock.now += 2  # past it: the home again
    assert store.get_tenant("acme") == TenantInfo("acme", (), ())
    store.update_tenant(TenantInfo("acme", (), ("east",)))
    assert (home.calls, local.calls) == (3, 2)
