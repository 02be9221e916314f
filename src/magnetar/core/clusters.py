"""Pulsar's clusters: the named members of an instance, each with its service URLs.

A cluster is a configuration-store record (`ClusterData`, Pulsar's JSON field names). Tenants
name the clusters they may use (`allowedClusters`); namespaces and topics name the clusters their
messages are replicated to (`replication_clusters`, `magnetar.core.policies.replication_clusters`).
The rules on names and URLs are Pulsar's (`NamedEntity.checkName`, `ClusterData.checkPropertiesIfPresent`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlsplit

from magnetar.core.errors import InvalidInput

STANDALONE = "standalone"  # a deployment's cluster name when none is set (Pulsar standalone's)
GLOBAL_CLUSTER = "global"  # Pulsar's pseudo-cluster: allowed in a tenant's list, never replicated to
_NAME = re.compile(r"^[-=:.\w]+$")  # Pulsar's NamedEntity
MAX_CLUSTER_NAME = 255

# field -> (Pulsar's JSON name, the URL scheme it takes, or "" for a free-form value)
_JSON = {
    "service_url": ("serviceUrl", "http"),
    "service_url_tls": ("serviceUrlTls", "https"),
    "broker_service_url": ("brokerServiceUrl", "pulsar"),
    "broker_service_url_tls": ("brokerServiceUrlTls", "pulsar+ssl"),
    "authentication_plugin": ("authenticationPlugin", ""),
    "authentication_parameters": ("authenticationParameters", ""),
}
_EXAMPLES = {"http": "http://pulsar.example.com:8080", "https": "https://pulsar.example.com:8443",
             "pulsar": "pulsar://pulsar.example.com:6650", "pulsar+ssl": "pulsar+ssl://pulsar.example.com:6651"}


@dataclass(frozen=True)
class ClusterData:
    """Pulsar's ClusterData: how to reach a cluster (its HTTP service and binary-protocol URLs,
    plain and TLS) and how another cluster authenticates to it."""

    service_url: str = ""
    service_url_tls: str = ""
    broker_service_url: str = ""
    broker_service_url_tls: str = ""
    authentication_plugin: str = ""
    authentication_parameters: str = ""

    def to_json(self) -> dict[str, str]:
        """Pulsar's ClusterData JSON (every field, "" when unset)."""
        return {json_name: getattr(self, name) for name, (json_name, _) in _JSON.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterData:
        """From Pulsar's ClusterData JSON; other Pulsar fields (proxyServiceUrl...) are ignored,
        null or absent fields are ""."""
        values = {}
        for name, (json_name, _) in _JSON.items():
            value = data.get(json_name)
            if value is not None and not isinstance(value, str):
                raise InvalidInput(f"{json_name} must be a string")
            values[name] = value or ""
        return cls(**values)

    def check(self) -> ClusterData:
        """Pulsar's checks of the URLs that are set (400 otherwise): each has its scheme and a host."""
        for f in fields(self):
            json_name, scheme = _JSON[f.name]
            value = getattr(self, f.name)
            if not scheme or not value:
                continue
            try:
                parts = urlsplit(value)
                valid = parts.scheme == scheme and bool(parts.hostname)
            except ValueError:
                valid = False
            if not valid:
                raise InvalidInput(f"Illegal {json_name} {value!r}, example: {_EXAMPLES[scheme]}")
        return self


def valid_cluster_name(name: str) -> bool:
    """Pulsar's rule for a cluster name (a NamedEntity): letters, digits, `_ - = : .`; no `/`."""
    return bool(name) and len(name) <= MAX_CLUSTER_NAME and _NAME.match(name) is not None
