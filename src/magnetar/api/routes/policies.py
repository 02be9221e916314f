"""Namespace and topic policies on Pulsar's paths and JSON shapes (retention, TTL, quotas...).

One table, `POLICIES`, names each policy's Pulsar field, its namespace and topic paths and how
its body is read; the routes for both levels are generated from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from magnetar.adapters.aws import build_broker
from magnetar.api.access import guarded
from magnetar.api.http import (
    DOMAINS,
    body,
    has_body,
    int_body,
    json_body,
    json_response,
    namespace_name,
    no_content,
    query,
    topic_name,
)
from magnetar.api.models import (
    BacklogQuotaRequest,
    DispatchRateRequest,
    PublishRateRequest,
    RetentionPolicies,
)
from magnetar.api.openapi import COUNT, Content, Param, Schema, nullable
from magnetar.core import policies as rules
from magnetar.core.authz import Access
from magnetar.core.errors import InvalidInput

router = Router()  # type: ignore[no-untyped-call]


@dataclass(frozen=True)
class Policy:
    field: str  # Pulsar's Policies field the value is stored under
    namespace_path: str
    topic_path: str  # "": a namespace policy only (maxTopicsPerNamespace)
    read: Callable[[], Any]  # parses and checks the request body
    # what the OpenAPI document says: the body POST takes, what GET answers, query parameters
    request: Schema = None
    response: dict[str, Any] | None = None
    query: tuple[str, ...] = ()


def _read_retention() -> dict[str, int]:
    request = body(RetentionPolicies)
    return rules.check_retention(request.retentionTimeInMinutes, request.retentionSizeInMB)


def _read_backlog_quota() -> dict[str, Any]:
    request = body(BacklogQuotaRequest)
    quota_type = query("backlogQuotaType") or "destination_storage"
    return {quota_type: rules.check_backlog_quota(request.limitSize, request.limitTime, request.policy, quota_type)}


def _read_count(name: str) -> Callable[[], int]:
    def read() -> int:
        value = query(name)  # Pulsar's topic API also takes ?messageTTL=
        if value is not None and not has_body():
            if not value.lstrip("-").isdigit():
                raise InvalidInput(f"Query parameter {name} must be an integer")
            return rules.check_non_negative(name, int(value))
        return rules.check_non_negative(name, int_body())

    return read


def _read_limit(name: str) -> Callable[[], int]:
    """A count policy Pulsar keeps as a Java int (maxTopicsPerNamespace, maxSubscriptionsPerTopic)."""
    read_count = _read_count(name)

    def read() -> int:
        return rules.check_limit(name, read_count())

    return read


def _read_publish_rate() -> dict[str, int]:
    request = body(PublishRateRequest)
    return rules.check_publish_rate(request.publishThrottlingRateInMsg, request.publishThrottlingRateInByte)


def _read_dispatch_rate() -> dict[str, Any]:
    request = body(DispatchRateRequest)
    return rules.check_dispatch_rate(request.dispatchThrottlingRateInMsg, request.dispatchThrottlingRateInByte,
                                     request.ratePeriodInSecond, request.relativeToPublishRate)


def _read_flag() -> bool:
    value = json_body()
    if not isinstance(value, bool):
        raise InvalidInput("Request body must be true or false")
    return value


_QUOTA = {"type": "object", "properties": {"limitSize": {"type": "integer"}, "limitTime": {"type": "integer"},
                                            "policy": {"type": "string"}}}
_QUOTAS = {"type": "object", "additionalProperties": _QUOTA, "description": "Quota type -> backlog quota."}
_RETENTION = {"type": "object", "properties": {"retentionTimeInMinutes": {"type": "integer"},
                                               "retentionSizeInMB": {"type": "integer"}}}
_COUNT = nullable(COUNT)
_COUNT_BODY = Content("application/json", COUNT, required=False)  # or the ?query parameter
POLICIES = (
    Policy(rules.RETENTION, "retention", "retention", _read_retention, RetentionPolicies, nullable(_RETENTION)),
    Policy(rules.MESSAGE_TTL, "messageTTL", "messageTTL", _read_count("messageTTL"), _COUNT_BODY, _COUNT,
           ("messageTTL",)),
    Policy(rules.BACKLOG_QUOTA, "backlogQuota", "backlogQuota", _read_backlog_quota, BacklogQuotaRequest, _QUOTAS,
           ("backlogQuotaType",)),
    Policy(rules.DEDUPLICATION, "deduplication", "deduplicationEnabled", _read_flag, {"type": "boolean"},
           nullable({"type": "boolean"})),
    Policy(rules.MAX_PRODUCERS, "maxProducersPerTopic", "maxProducers", _read_count("maxProducers"), _COUNT_BODY, _COUNT,
           ("maxProducers",)),
    Policy(rules.MAX_CONSUMERS, "maxConsumersPerTopic", "maxConsumers", _read_count("maxConsumers"), _COUNT_BODY, _COUNT,
           ("maxConsumers",)),
    Policy(rules.MAX_MESSAGE_SIZE, "maxMessageSize", "maxMessageSize", _read_count("maxMessageSize"), _COUNT_BODY,
           _COUNT, ("maxMessageSize",)),
    # noisy neighbours: rates and limits (Pulsar's PublishRate / DispatchRate bodies, bare counts)
    Policy(rules.PUBLISH_RATE, "publishRate", "publishRate", _read_publish_rate, PublishRateRequest,
           nullable({"type": "object"})),
    Policy(rules.DISPATCH_RATE, "dispatchRate", "dispatchRate", _read_dispatch_rate, DispatchRateRequest,
           nullable({"type": "object"})),
    Policy(rules.MAX_TOPICS, "maxTopicsPerNamespace", "", _read_limit("maxTopicsPerNamespace"),
           _COUNT_BODY, _COUNT),
    Policy(rules.MAX_SUBSCRIPTIONS, "maxSubscriptionsPerTopic", "maxSubscriptionsPerTopic",
           _read_limit("maxSubscriptionsPerTopic"), _COUNT_BODY, _COUNT),
    # topic compaction: the bytes past the compaction horizon that start a run (Pulsar's long)
    Policy(rules.COMPACTION_THRESHOLD, "compactionThreshold", "compactionThreshold",
           _read_count("compactionThreshold"), _COUNT_BODY, _COUNT),
)
_QUERY = {
    "backlogQuotaType": Param({"enum": ["destination_storage", "message_age"]}),
    **{name: Param(COUNT, description="The value, instead of a body") for name in
       ("messageTTL", "maxProducers", "maxConsumers", "maxMessageSize")},
}


def _documented(policy: Policy, level: str) -> dict[str, Any]:
    """What guarded() documents of a policy's POST, GET and DELETE routes."""
    query = {name: _QUERY[name] for name in policy.query}
    remove_query = {k: v for k, v in query.items() if k == "backlogQuotaType"}
    name = policy.namespace_path if level == "namespace" else policy.topic_path
    return {
        "POST": {"request": policy.request, "query": query, "summary": f"Set the {level}'s {name} policy"},
        "GET": {"response": policy.response or {}, "summary": f"The {level}'s {name} policy"},
        "DELETE": {"query": remove_query, "summary": f"Remove the {level}'s {name} policy"},
    }


def _shown(policy: Policy, value: Any) -> Any:
    return {} if value is None and policy.field == rules.BACKLOG_QUOTA else value


def _bind_namespace_policy(policy: Policy) -> None:
    path = f"/admin/v2/namespaces/<tenant>/<namespace>/{policy.namespace_path}"
    getters = [path] + ([f"{path}Map"] if policy.field == rules.BACKLOG_QUOTA else [])

    def set_policy(tenant: str, namespace: str) -> Response[str]:
        build_broker().admin.set_policy(namespace_name(tenant, namespace), policy.field, policy.read())
        return no_content()

    def get_policy(tenant: str, namespace: str) -> Response[str]:
        return json_response(_shown(policy, build_broker().admin.policy(namespace_name(tenant, namespace), policy.field)))

    def remove_policy(tenant: str, namespace: str) -> Response[str]:
        build_broker().admin.remove_policy(namespace_name(tenant, namespace), policy.field, query("backlogQuotaType"))
        return no_content()

    doc = _documented(policy, "namespace")
    guarded(router, "POST", path, Access.TENANT_ADMIN, **doc["POST"])(set_policy)
    for getter in getters:
        guarded(router, "GET", getter, Access.TENANT_ADMIN, **doc["GET"])(get_policy)
    guarded(router, "DELETE", path, Access.TENANT_ADMIN, **doc["DELETE"])(remove_policy)


def _bind_topic_policy(policy: Policy, domain: str) -> None:
    path = f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>/{policy.topic_path}"
    getters = [path] + ([f"{path}Map"] if policy.field == rules.BACKLOG_QUOTA else [])

    def set_policy(tenant: str, namespace: str, topic: str) -> Response[str]:
        build_broker().admin.set_topic_policy(topic_name(domain, tenant, namespace, topic), policy.field, policy.read())
        return no_content()

    def get_policy(tenant: str, namespace: str, topic: str) -> Response[str]:
        policies = build_broker().admin.topic_policies(topic_name(domain, tenant, namespace, topic))
        return json_response(_shown(policy, policies.get(policy.field)))

    def remove_policy(tenant: str, namespace: str, topic: str) -> Response[str]:
        build_broker().admin.remove_topic_policy(topic_name(domain, tenant, namespace, topic), policy.field,
                                                 query("backlogQuotaType"))
        return no_content()

    doc = _documented(policy, "topic")
    guarded(router, "POST", path, Access.TENANT_ADMIN, domain, **doc["POST"])(set_policy)
    for getter in getters:
        guarded(router, "GET", getter, Access.TENANT_ADMIN, domain, **doc["GET"])(get_policy)
    guarded(router, "DELETE", path, Access.TENANT_ADMIN, domain, **doc["DELETE"])(remove_policy)


for _policy in POLICIES:
    _bind_namespace_policy(_policy)
    for _domain in DOMAINS if _policy.topic_path else ():
        _bind_topic_policy(_policy, _domain)
