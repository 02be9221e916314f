"""Authorization: Pulsar's model of superusers, tenant admins and produce/consume grants.

Who a caller is comes from outside (a token or an AWS principal, `magnetar.security`); this
module decides what that role may do:

- a **superuser** role may do everything (broker setting, `MAGNETAR_SUPERUSER_ROLES`);
- a **metrics** role may scrape `GET /metrics` and nothing else (broker setting,
  `MAGNETAR_METRICS_ROLES`; Pulsar lets superusers read its broker metrics);
- a tenant's **adminRoles** administer the tenant: its namespaces, topics, policies, permissions,
  subscriptions, and may produce and consume on its topics (Pulsar's topic-operation model);
- **grants** give a role `produce` and/or `consume` on a whole namespace or on one topic (a
  partitioned topic's grant covers its partitions); a namespace grant with `functions` lets a
  role manage the namespace's functions (Pulsar's allowFunctionOps);
- a **subscription restriction** names the roles that may consume on one subscription of the
  namespace; a subscription without one is open to every role with `consume`.

Grants live in the namespace's policies under Pulsar's field names (`auth_policies` with
`namespace_auth`, `destination_auth`, `subscription_auth_roles`), so one (cached) namespace read
answers every check. Each route declares the `Access` it needs (`magnetar.api.routes`), and
`check` is the one place that decides; with authorization off (Pulsar standalone's default)
every check passes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from magnetar.core.errors import Forbidden, InvalidInput, NotFound, RetryableError, Unauthenticated
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.ports import Clock, MetadataStore

AUTH_POLICIES = "auth_policies"
NAMESPACE_AUTH = "namespace_auth"
TOPIC_AUTH = "destination_auth"
SUBSCRIPTION_AUTH = "subscription_auth_roles"
ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages")  # Pulsar's AuthAction
CACHE_MS = 10_000  # tenant and namespace metadata are re-read at most this often per container
GRANT_WRITE_ATTEMPTS = 10  # a grant read again after a concurrent edit, this many times


class Access(StrEnum):
    """What a route requires of its caller."""

    PUBLIC = "public"  # anyone, credentials or not
    AUTHENTICATED = "authenticated"  # any authenticated role
    SUPERUSER = "superuser"
    TENANT_ADMIN = "tenant-admin"  # superuser, or one of the tenant's adminRoles
    NAMESPACE_MEMBER = "namespace-member"  # tenant admin, or any grant in the namespace
    LOOKUP = "lookup"  # tenant admin, or produce or consume on the topic
    PRODUCE = "produce"  # tenant admin, or produce on the topic
    CONSUME = "consume"  # tenant admin, or consume on the topic (and on the subscription)
    FUNCTIONS = "functions"  # tenant admin, or the namespace's `functions` grant (Pulsar's allowFunctionOps)
    METRICS = "metrics"  # superuser, or one of the metrics roles (GET /metrics)


@dataclass(frozen=True)
class Principal:
    """Who is calling: a role (token subject or AWS principal ARN), or nobody."""

    role: str | None = None
    refused: str | None = None  # why the presented credentials were refused

    @property
    def authenticated(self) -> bool:
        return self.role is not None and self.refused is None


ANONYMOUS = Principal()


@dataclass(frozen=True)
class Target:
    """What a request acts on (each field only when the route names it)."""

    tenant: str | None = None
    namespace: NamespaceName | None = None
    topic: TopicName | None = None
    subscription: str | None = None

    @classmethod
    def of_topic(cls, topic: TopicName, subscription: str | None = None) -> Target:
        return cls(topic.tenant, topic.namespace_name, topic, subscription)


@dataclass(frozen=True)
class AuthSettings:
    enabled: bool = False
    superusers: frozenset[str] = frozenset()
    metrics_roles: frozenset[str] = frozenset()  # may scrape GET /metrics


def check_actions(actions: object) -> list[str]:
    """Pulsar's grant body: a JSON array of actions."""
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise InvalidInput(f"Request body must be a JSON array of actions ({', '.join(ACTIONS)})")
    unknown = [a for a in actions if a not in ACTIONS]
    if unknown:
        raise InvalidInput(f"Unknown action(s) {', '.join(unknown)}; one of {', '.join(ACTIONS)}")
    return sorted(set(actions))


def check_roles(roles: object) -> list[str]:
    if not isinstance(roles, list) or not roles or not all(isinstance(r, str) and r for r in roles):
        raise InvalidInput("Request body must be a non-empty JSON array of roles")
    return sorted(set(roles))


class AuthorizationService:
    def __init__(self, metadata: MetadataStore, clock: Clock, settings: AuthSettings = AuthSettings()) -> None:
        self.metadata = metadata
        self.clock = clock
        self.settings = settings
        self._tenants: dict[str, tuple[int, tuple[str, ...] | None]] = {}
        self._namespaces: dict[str, tuple[int, dict[str, Any] | None]] = {}

    def forget(self) -> None:
        """Drop what this container cached (after a change made here; others expire in 10 s)."""
        self._tenants.clear()
        self._namespaces.clear()

    # --- the decision ---------------------------------------------------------------------------
    def authenticate(self, principal: Principal, access: Access) -> None:
        """Raise Unauthenticated (401) unless the caller is known (or the access needs no one)."""
        if not self.settings.enabled or access is Access.PUBLIC:
            return
        if principal.refused is not None:
            raise Unauthenticated(f"Authentication failed: {principal.refused}")
        if principal.role is None:
            raise Unauthenticated("Authentication required: send a token (Authorization: Bearer <token>), "
                                  "basic credentials (Authorization: Basic) or sign the request with AWS SigV4")

    def check(self, principal: Principal, access: Access, target: Target = Target()) -> None:
        """Raise Unauthenticated (401) or Forbidden (403) unless `principal` has `access` on `target`."""
        self.authenticate(principal, access)
        if not self.settings.enabled or access is Access.PUBLIC:
            return
        assert principal.role is not None
        if self.allowed(principal.role, access, target):
            return
        raise Forbidden(f"Role {principal.role} is not authorized to {_what(access, target)}")

    def allowed(self, role: str, access: Access, target: Target) -> bool:
        if access is Access.AUTHENTICATED or role in self.settings.superusers:
            return True
        if access is Access.METRICS:
            return role in self.settings.metrics_roles
        if access is Access.SUPERUSER or target.tenant is None:
            return False
        if role in self._admin_roles(target.tenant):
            return True
        if access is Access.TENANT_ADMIN or target.namespace is None:
            return False
        auth = self._auth_policies(target.namespace)
        if access is Access.FUNCTIONS:
            return "functions" in auth.get(NAMESPACE_AUTH, {}).get(role, ())
        if access is Access.NAMESPACE_MEMBER:
            return bool(auth.get(NAMESPACE_AUTH, {}).get(role)) or any(
                role in grants for grants in auth.get(TOPIC_AUTH, {}).values())
        if target.topic is None:
            return False
        actions = self._actions(auth, role, target.topic)
        if access is Access.LOOKUP:
            return bool(actions & {"produce", "consume"})
        if access is Access.PRODUCE:
            return "produce" in actions
        # CONSUME: the topic grant, and the subscription's restriction if it has one
        if "consume" not in actions:
            return False
        restricted = auth.get(SUBSCRIPTION_AUTH, {}).get(target.subscription or "")
        return not restricted or role in restricted

    @staticmethod
    def _actions(auth: dict[str, Any], role: str, topic: TopicName) -> set[str]:
        granted = set(auth.get(NAMESPACE_AUTH, {}).get(role, ()))
        granted.update(auth.get(TOPIC_AUTH, {}).get(str(topic.partitioned_topic), {}).get(role, ()))
        return granted

    def _admin_roles(self, tenant: str) -> tuple[str, ...]:
        now = self.clock.now_ms()
        cached = self._tenants.get(tenant)
        if cached is None or cached[0] <= now:
            info = self.metadata.get_tenant(tenant)
            cached = (now + CACHE_MS, info.admin_roles if info else None)
            self._tenants[tenant] = cached
        return cached[1] or ()

    def _auth_policies(self, namespace: NamespaceName) -> dict[str, Any]:
        now = self.clock.now_ms()
        key = str(namespace)
        cached = self._namespaces.get(key)
        if cached is None or cached[0] <= now:
            info = self.metadata.get_namespace(namespace)
            cached = (now + CACHE_MS, dict(info.policies) if info else None)
            self._namespaces[key] = cached
        auth: dict[str, Any] = (cached[1] or {}).get(AUTH_POLICIES) or {}
        return auth

    # --- grants (the admin API; stored in the namespace's policies) -----------------------------
    def _namespace_policies(self, namespace: NamespaceName) -> dict[str, Any]:
        info = self.metadata.get_namespace(namespace)
        if info is None:
            raise NotFound(f"Namespace {namespace} does not exist")
        return dict(info.policies)

    def _update(self, namespace: NamespaceName, change: Any) -> None:
        """Change the namespace's grants; the write is conditional on what was read (a grant made
        meanwhile, through this cluster or another, is read again and kept)."""
        for _ in range(GRANT_WRITE_ATTEMPTS):
            policies = self._namespace_policies(namespace)
            auth = {k: dict(v) for k, v in (policies.get(AUTH_POLICIES) or {}).items()}
            for section in (NAMESPACE_AUTH, TOPIC_AUTH, SUBSCRIPTION_AUTH):
                auth.setdefault(section, {})
            change(auth)
            if self.metadata.set_namespace_policies(namespace, {**policies, AUTH_POLICIES: auth}, policies):
                self.forget()
                return
        raise RetryableError(f"The grants of {namespace} keep changing; retry")

    def namespace_permissions(self, namespace: NamespaceName) -> dict[str, list[str]]:
        auth = self._namespace_policies(namespace).get(AUTH_POLICIES) or {}
        return dict(auth.get(NAMESPACE_AUTH) or {})

    def grant_on_namespace(self, namespace: NamespaceName, role: str, actions: Iterable[str]) -> None:
        granted = check_actions(list(actions))
        self._update(namespace, lambda auth: auth[NAMESPACE_AUTH].__setitem__(role, granted))

    def revoke_on_namespace(self, namespace: NamespaceName, role: str) -> None:
        self._update(namespace, lambda auth: auth[NAMESPACE_AUTH].pop(role, None))

    def topic_permissions(self, topic: TopicName) -> dict[str, list[str]]:
        """The roles allowed on the topic: the namespace's grants, overlaid by the topic's own."""
        auth = self._namespace_policies(topic.namespace_name).get(AUTH_POLICIES) or {}
        merged = {role: list(actions) for role, actions in (auth.get(NAMESPACE_AUTH) or {}).items()}
        for role, actions in ((auth.get(TOPIC_AUTH) or {}).get(str(topic.partitioned_topic)) or {}).items():
            merged[role] = sorted(set(merged.get(role, [])) | set(actions))
        return merged

    def grant_on_topic(self, topic: TopicName, role: str, actions: Iterable[str]) -> None:
        granted, name = check_actions(list(actions)), str(topic.partitioned_topic)
        self._update(topic.namespace_name,
                     lambda auth: auth[TOPIC_AUTH].__setitem__(name, {**auth[TOPIC_AUTH].get(name, {}), role: granted}))

    def revoke_on_topic(self, topic: TopicName, role: str) -> None:
        name = str(topic.partitioned_topic)

        def revoke(auth: dict[str, Any]) -> None:
            grants = {r: a for r, a in auth[TOPIC_AUTH].get(name, {}).items() if r != role}
            if grants:
                auth[TOPIC_AUTH][name] = grants
            else:
                auth[TOPIC_AUTH].pop(name, None)

        self._update(topic.namespace_name, revoke)

    def subscription_permissions(self, namespace: NamespaceName) -> dict[str, list[str]]:
        auth = self._namespace_policies(namespace).get(AUTH_POLICIES) or {}
        return dict(auth.get(SUBSCRIPTION_AUTH) or {})

    def grant_on_subscription(self, namespace: NamespaceName, subscription: str, roles: Iterable[str]) -> None:
        allowed = check_roles(list(roles))
        self._update(namespace, lambda auth: auth[SUBSCRIPTION_AUTH].__setitem__(
            subscription, sorted(set(auth[SUBSCRIPTION_AUTH].get(subscription, [])) | set(allowed))))

    def revoke_on_subscription(self, namespace: NamespaceName, subscription: str, role: str) -> None:
        def revoke(auth: dict[str, Any]) -> None:
            roles = [r for r in auth[SUBSCRIPTION_AUTH].get(subscription, []) if r != role]
            if roles:
                auth[SUBSCRIPTION_AUTH][subscription] = roles
            else:
                auth[SUBSCRIPTION_AUTH].pop(subscription, None)

        self._update(namespace, revoke)


def _what(access: Access, target: Target) -> str:
    if access in (Access.PRODUCE, Access.CONSUME, Access.LOOKUP) and target.topic is not None:
        verb = {"produce": "produce on", "consume": "consume from", "lookup": "look up"}[access.value]
        sub = f" (subscription {target.subscription})" if target.subscription and access is Access.CONSUME else ""
        return f"{verb} {target.topic}{sub}"
    if access is Access.SUPERUSER:
        return "do this: superusers only"
    if access is Access.METRICS:
        return "read the metrics: superusers and the metrics roles only"
    if access is Access.NAMESPACE_MEMBER and target.namespace is not None:
        return f"access namespace {target.namespace}"
    if access is Access.FUNCTIONS and target.namespace is not None:
        return f"manage the functions of namespace {target.namespace}"
    where = target.topic or target.namespace or target.tenant
    return f"administer {where}" if where else "do this"
