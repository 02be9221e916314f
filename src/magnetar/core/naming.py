"""Topic, namespace and tenant names exactly as Pulsar writes them.

`persistent://tenant/namespace/topic`; a short name `orders` means
`persistent://public/default/orders`; `tenant/namespace/topic` means the persistent topic.
A partition of a partitioned topic is the topic `<name>-partition-<i>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from magnetar.core.errors import InvalidInput

DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"
PARTITION_SUFFIX = "-partition-"

# Pulsar's NamedEntity rule for tenants, namespaces and clusters.
_ENTITY = re.compile(r"^[-=:.\w]+$")
_PARTITION = re.compile(r"^(?P<base>.+)-partition-(?P<index>\d+)$")
MAX_NAME_LENGTH = 255


class TopicDomain(StrEnum):
    PERSISTENT = "persistent"
    NON_PERSISTENT = "non-persistent"


def check_entity(kind: str, value: str) -> str:
    if not value or len(value) > MAX_NAME_LENGTH or not _ENTITY.match(value):
        raise InvalidInput(f"Invalid {kind} name: {value!r}")
    return value


@dataclass(frozen=True, order=True)
class NamespaceName:
    tenant: str
    namespace: str

    @classmethod
    def of(cls, tenant: str, namespace: str) -> NamespaceName:
        return cls(check_entity("tenant", tenant), check_entity("namespace", namespace))

    @classmethod
    def parse(cls, value: str) -> NamespaceName:
        parts = value.split("/")
        if len(parts) != 2:
            raise InvalidInput(f"Invalid namespace name: {value!r} (expected tenant/namespace)")
        return cls.of(parts[0], parts[1])

    def __str__(self) -> str:
        return f"{self.tenant}/{self.namespace}"


@dataclass(frozen=True, order=True)
class TopicName:
    domain: TopicDomain
    tenant: str
    namespace: str
    local_name: str

    @classmethod
    def parse(cls, value: str) -> TopicName:
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput("Invalid topic name: empty")
        domain = TopicDomain.PERSISTENT
        rest = value
        if "://" in value:
            scheme, rest = value.split("://", 1)
            try:
                domain = TopicDomain(scheme)
            except ValueError:
                raise InvalidInput(f"Invalid topic domain {scheme!r} in {value!r}") from None
        elif "/" not in value:
            rest = f"{DEFAULT_TENANT}/{DEFAULT_NAMESPACE}/{value}"
        parts = rest.split("/", 2)
        if len(parts) != 3:
            raise InvalidInput(f"Invalid topic name: {value!r} (expected {domain}://tenant/namespace/topic)")
        return cls.of(domain, parts[0], parts[1], parts[2])

    @classmethod
    def of(cls, domain: str | TopicDomain, tenant: str, namespace: str, local_name: str) -> TopicName:
        try:
            dom = TopicDomain(domain)
        except ValueError:
            raise InvalidInput(f"Invalid topic domain: {domain!r}") from None
        check_entity("tenant", tenant)
        check_entity("namespace", namespace)
        if not local_name or "/" in local_name or len(local_name) > MAX_NAME_LENGTH:
            raise InvalidInput(f"Invalid topic name: {local_name!r}")
        if any(ch.isspace() or ord(ch) < 32 for ch in local_name):
            raise InvalidInput(f"Invalid topic name: {local_name!r} (whitespace or control character)")
        return cls(dom, tenant, namespace, local_name)

    @property
    def namespace_name(self) -> NamespaceName:
        return NamespaceName(self.tenant, self.namespace)

    @property
    def is_persistent(self) -> bool:
        return self.domain is TopicDomain.PERSISTENT

    @property
    def partition_index(self) -> int:
        """The partition this name is, or -1 for a non-partitioned topic (Pulsar's convention)."""
        match = _PARTITION.match(self.local_name)
        return int(match.group("index")) if match else -1

    @property
    def partitioned_topic(self) -> TopicName:
        match = _PARTITION.match(self.local_name)
        return TopicName(self.domain, self.tenant, self.namespace, match.group("base")) if match else self

    def partition(self, index: int) -> TopicName:
        return TopicName(self.domain, self.tenant, self.namespace, f"{self.local_name}{PARTITION_SUFFIX}{index}")

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local_name}"


def check_subscription(name: str) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_LENGTH or "/" in name:
        raise InvalidInput(f"Invalid subscription name: {name!r}")
    if any(ch.isspace() or ord(ch) < 32 for ch in name):
        raise InvalidInput(f"Invalid subscription name: {name!r}")
    return name


def check_consumer_name(name: str) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_LENGTH or "/" in name:
        raise InvalidInput(f"Invalid consumer name: {name!r}")
    return name
