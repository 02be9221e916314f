"""The broker Lambda: the HTTP API (admin v2, produce, consume) behind API Gateway (payload v2).

Only parsing and shaping happen here; every decision is the core's (`magnetar.core`).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ValidationError

from magnetar.adapters.aws import build_broker
from magnetar.adapters.aws.connections import build_push
from magnetar.api.models import (
    AckRequest,
    BacklogQuotaRequest,
    ProduceRequest,
    ProduceResponse,
    ProducerRequest,
    PublishResult,
    ReadRequest,
    ReceiveRequest,
    RetentionPolicies,
    SeekRequest,
    SubscribeRequest,
    TenantRequest,
)
from magnetar.api.resolver import HttpApiResolver
from magnetar.api.wire import acks_from_request, batch_from_request, entry_messages, entry_to_wire
from magnetar.core import policies as policy_rules
from magnetar.core.compression import decompress
from magnetar.core.dispatch import NO_ACKS
from magnetar.core.entry import MessageIdData, decode_messages
from magnetar.core.errors import InvalidInput, MagnetarError, NotAllowed
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.push import NON_PERSISTENT_POLL_REASON

logger = Logger()
app = HttpApiResolver()
DOMAINS = ("persistent", "non-persistent")
M = TypeVar("M", bound=BaseModel)


# --- errors: Pulsar's {"reason": ...} with the right status, never a 500 for bad input ---------
@app.exception_handler(MagnetarError)
def _refused(exc: MagnetarError) -> Response[str]:
    return _json({"reason": exc.reason}, exc.status)


@app.exception_handler(ValidationError)
def _invalid(exc: ValidationError) -> Response[str]:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "body"
    return _json({"reason": f"Invalid request body: {where}: {first.get('msg')}"}, 400)


@app.not_found
def _no_route(exc: Exception) -> Response[str]:
    event = app.current_event
    return _json({"reason": f"No such endpoint: {event.http_method} {event.path}"}, 404)


def _json(body: Any, status: int = 200) -> Response[str]:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=json.dumps(body))


def _body(model: type[M]) -> M:
    raw = app.current_event.body or "{}"
    if app.current_event.is_base64_encoded:
        raw = base64.b64decode(raw).decode("utf-8", errors="replace") or "{}"
    try:
        json.loads(raw)
    except ValueError:
        raise InvalidInput("Request body is not valid JSON") from None
    return model.model_validate_json(raw)


def _json_body() -> Any:
    """Pulsar's admin API sends bare JSON values (a partition count, true/false)."""
    raw = (app.current_event.body or "").strip()
    if app.current_event.is_base64_encoded:
        raw = base64.b64decode(raw).decode("utf-8", errors="replace").strip()
    try:
        return json.loads(raw)
    except ValueError:
        raise InvalidInput("Request body is not valid JSON") from None


def _int_body() -> int:
    value = _json_body()
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInput("Request body must be a JSON integer")
    return value


def _push_only(domain: str) -> None:
    """Non-persistent topics store nothing to poll: their consumers are WebSocket (push) consumers."""
    if domain != "persistent":
        raise NotAllowed(NON_PERSISTENT_POLL_REASON)


def _publish_non_persistent(name: TopicName, request: ProduceRequest) -> dict[str, Any]:
    batch = batch_from_request(request)
    if batch.chunk is not None:
        raise InvalidInput("Chunked messages are not supported on non-persistent topics")
    messages = list(decode_messages(decompress(batch.compression, batch.payload, batch.uncompressed_size)))
    ids = build_push().publish_non_persistent(name, messages, request.producerName)
    first = next((i for i in ids if i.entry_id >= 0), ids[0])
    return ProduceResponse(messagePublishResults=[PublishResult(messageId=str(i)) for i in ids],
                           ledgerId=first.ledger_id, entryId=first.entry_id).model_dump()


def _topic(domain: str, tenant: str, namespace: str, topic: str) -> TopicName:
    return TopicName.of(domain, unquote(tenant), unquote(namespace), unquote(topic))


def _flag_query(name: str, default: bool) -> bool:
    """A true/false query parameter (Pulsar's ?perPartition=false)."""
    value = app.current_event.get_query_string_value(name)
    if value is None or value == "":
        return default
    if value.lower() not in ("true", "false"):
        raise InvalidInput(f"Query parameter {name} must be true or false")
    return value.lower() == "true"


# --- admin v2 ---------------------------------------------------------------------------------
@app.get("/admin/v2/brokers/health")
def health() -> Response[str]:
    return Response(status_code=200, content_type=content_types.TEXT_PLAIN, body="ok")


@app.get("/admin/v2/tenants")
def list_tenants() -> Response[str]:
    return _json(build_broker().admin.list_tenants())


@app.get("/admin/v2/tenants/<tenant>")
def get_tenant(tenant: str) -> Response[str]:
    info = build_broker().admin.get_tenant(unquote(tenant))
    return _json({"adminRoles": list(info.admin_roles), "allowedClusters": list(info.allowed_clusters)})


@app.put("/admin/v2/tenants/<tenant>")
def create_tenant(tenant: str) -> Response[str]:
    request = _body(TenantRequest)
    build_broker().admin.create_tenant(unquote(tenant), request.adminRoles, request.allowedClusters)
    return Response(status_code=204)


@app.get("/admin/v2/namespaces/<tenant>")
def list_namespaces(tenant: str) -> Response[str]:
    return _json(build_broker().admin.list_namespaces(unquote(tenant)))


@app.put("/admin/v2/namespaces/<tenant>/<namespace>")
def create_namespace(tenant: str, namespace: str) -> Response[str]:
    build_broker().admin.create_namespace(NamespaceName.of(unquote(tenant), unquote(namespace)))
    return Response(status_code=204)


@app.get("/admin/v2/namespaces/<tenant>/<namespace>")
def get_namespace(tenant: str, namespace: str) -> Response[str]:
    info = build_broker().admin.get_namespace(NamespaceName.of(unquote(tenant), unquote(namespace)))
    return _json(info.policies)


# --- policies: namespace level and topic level (Pulsar's paths and JSON shapes) --------------
@dataclass(frozen=True)
class _Policy:
    field: str  # Pulsar's Policies field the value is stored under
    namespace_path: str
    topic_path: str
    read: Callable[[], Any]  # parses and checks the request body


def _read_retention() -> dict[str, int]:
    body = _body(RetentionPolicies)
    return policy_rules.check_retention(body.retentionTimeInMinutes, body.retentionSizeInMB)


def _read_backlog_quota() -> dict[str, Any]:
    body = _body(BacklogQuotaRequest)
    quota_type = app.current_event.get_query_string_value("backlogQuotaType") or "destination_storage"
    return {quota_type: policy_rules.check_backlog_quota(body.limitSize, body.limitTime, body.policy, quota_type)}


def _read_count(name: str) -> Callable[[], int]:
    def read() -> int:
        query = app.current_event.get_query_string_value(name)  # Pulsar's topic API also takes ?messageTTL=
        if query is not None and (app.current_event.body or "").strip() == "":
            if not query.lstrip("-").isdigit():
                raise InvalidInput(f"Query parameter {name} must be an integer")
            return policy_rules.check_non_negative(name, int(query))
        return policy_rules.check_non_negative(name, _int_body())

    return read


def _read_flag() -> bool:
    value = _json_body()
    if not isinstance(value, bool):
        raise InvalidInput("Request body must be true or false")
    return value


POLICIES = (
    _Policy(policy_rules.RETENTION, "retention", "retention", _read_retention),
    _Policy(policy_rules.MESSAGE_TTL, "messageTTL", "messageTTL", _read_count("messageTTL")),
    _Policy(policy_rules.BACKLOG_QUOTA, "backlogQuota", "backlogQuota", _read_backlog_quota),
    _Policy(policy_rules.DEDUPLICATION, "deduplication", "deduplicationEnabled", _read_flag),
    _Policy(policy_rules.MAX_PRODUCERS, "maxProducersPerTopic", "maxProducers", _read_count("maxProducers")),
    _Policy(policy_rules.MAX_CONSUMERS, "maxConsumersPerTopic", "maxConsumers", _read_count("maxConsumers")),
    _Policy(policy_rules.MAX_MESSAGE_SIZE, "maxMessageSize", "maxMessageSize", _read_count("maxMessageSize")),
)


def _quota_type() -> str | None:
    return app.current_event.get_query_string_value("backlogQuotaType")


def _bind_policy(policy: _Policy) -> None:
    ns_path = f"/admin/v2/namespaces/<tenant>/<namespace>/{policy.namespace_path}"
    getters = [ns_path] + ([f"{ns_path}Map"] if policy.field == policy_rules.BACKLOG_QUOTA else [])

    def ns(tenant: str, namespace: str) -> NamespaceName:
        return NamespaceName.of(unquote(tenant), unquote(namespace))

    def set_ns(tenant: str, namespace: str) -> Response[str]:
        build_broker().admin.set_policy(ns(tenant, namespace), policy.field, policy.read())
        return Response(status_code=204)

    def get_ns(tenant: str, namespace: str) -> Response[str]:
        value = build_broker().admin.policy(ns(tenant, namespace), policy.field)
        if value is None and policy.field == policy_rules.BACKLOG_QUOTA:
            value = {}
        return _json(value)

    def remove_ns(tenant: str, namespace: str) -> Response[str]:
        build_broker().admin.remove_policy(ns(tenant, namespace), policy.field, _quota_type())
        return Response(status_code=204)

    app.post(ns_path)(set_ns)
    for path in getters:
        app.get(path)(get_ns)
    app.delete(ns_path)(remove_ns)

    for domain in DOMAINS:
        topic_path = f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>/{policy.topic_path}"

        def set_topic(tenant: str, namespace: str, topic: str, domain: str = domain) -> Response[str]:
            build_broker().admin.set_topic_policy(_topic(domain, tenant, namespace, topic), policy.field, policy.read())
            return Response(status_code=204)

        def get_topic(tenant: str, namespace: str, topic: str, domain: str = domain) -> Response[str]:
            policies = build_broker().admin.topic_policies(_topic(domain, tenant, namespace, topic))
            value = policies.get(policy.field)
            if value is None and policy.field == policy_rules.BACKLOG_QUOTA:
                value = {}
            return _json(value)

        def remove_topic(tenant: str, namespace: str, topic: str, domain: str = domain) -> Response[str]:
            build_broker().admin.remove_topic_policy(_topic(domain, tenant, namespace, topic), policy.field,
                                                     _quota_type())
            return Response(status_code=204)

        app.post(topic_path)(set_topic)
        app.get(topic_path)(get_topic)
        if policy.field == policy_rules.BACKLOG_QUOTA:
            app.get(f"{topic_path}Map")(get_topic)
        app.delete(topic_path)(remove_topic)


for _policy in POLICIES:
    _bind_policy(_policy)


for _domain in DOMAINS:

    def _bind(domain: str) -> None:
        @app.get(f"/admin/v2/{domain}/<tenant>/<namespace>")
        def list_topics(tenant: str, namespace: str) -> Response[str]:
            ns = NamespaceName.of(unquote(tenant), unquote(namespace))
            return _json(build_broker().admin.list_topics(ns, domain))

        @app.put(f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>")
        def create_topic(tenant: str, namespace: str, topic: str) -> Response[str]:
            build_broker().admin.create_topic(_topic(domain, tenant, namespace, topic))
            return Response(status_code=204)

        @app.get(f"/admin/v2/{domain}/<tenant>/<namespace>/partitioned")
        def list_partitioned(tenant: str, namespace: str) -> Response[str]:
            ns = NamespaceName.of(unquote(tenant), unquote(namespace))
            return _json(build_broker().admin.list_partitioned_topics(ns))

        @app.put(f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>/partitions")
        def create_partitioned(tenant: str, namespace: str, topic: str) -> Response[str]:
            build_broker().admin.create_partitioned_topic(_topic(domain, tenant, namespace, topic), _int_body())
            return Response(status_code=204)

        @app.post(f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>/partitions")
        def update_partitioned(tenant: str, namespace: str, topic: str) -> Response[str]:
            build_broker().admin.update_partitioned_topic(_topic(domain, tenant, namespace, topic), _int_body())
            return Response(status_code=204)

        @app.get(f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>/partitions")
        def partition_metadata(tenant: str, namespace: str, topic: str) -> Response[str]:
            return _json({"partitions": build_broker().admin.partitions(_topic(domain, tenant, namespace, topic))})

        @app.get(f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>/subscriptions")
        def list_subscriptions(tenant: str, namespace: str, topic: str) -> Response[str]:
            return _json(build_broker().admin.list_subscriptions(_topic(domain, tenant, namespace, topic)))

        # --- produce (Pulsar's REST producer) ----------------------------------------------
        @app.post(f"/topics/{domain}/<tenant>/<namespace>/<topic>")
        def produce(tenant: str, namespace: str, topic: str) -> Response[str]:
            name = _topic(domain, tenant, namespace, topic)
            request = _body(ProduceRequest)
            if not name.is_persistent:  # fanned out at once to the WebSocket consumers attached now
                return _json(_publish_non_persistent(name, request))
            result = build_broker().writer.append(name, batch_from_request(request), request.producerName)
            response = ProduceResponse(
                messagePublishResults=[PublishResult(messageId=str(i)) for i in result.message_ids],
                ledgerId=result.ledger_id,
                entryId=result.entry_id,
                duplicate=result.duplicate,
            )
            return _json(response.model_dump())

        producer_base = f"/magnetar/v1/producer/{domain}/<tenant>/<namespace>/<topic>/<producer>"

        @app.put(producer_base)
        def attach_producer(tenant: str, namespace: str, topic: str, producer: str) -> Response[str]:
            request = _body(ProducerRequest)
            name = _topic(domain, tenant, namespace, topic)
            writer = build_broker().writer
            writer.attach_producer(name, unquote(producer), request.accessMode, request.leaseMs)
            return _json({"lastSequenceId": writer.metadata.last_sequence_id(name, unquote(producer))})

        @app.delete(producer_base)
        def detach_producer(tenant: str, namespace: str, topic: str, producer: str) -> Response[str]:
            build_broker().writer.detach_producer(_topic(domain, tenant, namespace, topic), unquote(producer))
            return Response(status_code=204)

        # --- consume -------------------------------------------------------------------------
        base = f"/magnetar/v1/consumer/{domain}/<tenant>/<namespace>/<topic>/<subscription>"

        @app.put(f"{base}/<consumer>")
        def subscribe(tenant: str, namespace: str, topic: str, subscription: str, consumer: str) -> Response[str]:
            _push_only(domain)
            request = _body(SubscribeRequest)
            state = build_broker().subscriptions.subscribe(
                _topic(domain, tenant, namespace, topic),
                unquote(subscription),
                unquote(consumer),
                request.subscriptionType,
                request.initialPosition,
                request.ackTimeoutMs,
            )
            return _json({"subscriptionType": state.subscription_type, "consumers": sorted(state.consumers),
                          "epoch": state.epoch})

        @app.delete(f"{base}/<consumer>")
        def close_consumer(tenant: str, namespace: str, topic: str, subscription: str, consumer: str) -> Response[str]:
            build_broker().subscriptions.close_consumer(
                _topic(domain, tenant, namespace, topic), unquote(subscription), unquote(consumer)
            )
            return Response(status_code=204)

        @app.post(f"{base}/<consumer>/receive")
        def receive(tenant: str, namespace: str, topic: str, subscription: str, consumer: str) -> Response[str]:
            _push_only(domain)
            name = _topic(domain, tenant, namespace, topic)
            request = _body(ReceiveRequest)
            result = build_broker().subscriptions.receive(
                name,
                unquote(subscription),
                unquote(consumer),
                request.maxMessages,
                request.waitMs,
                request.requestId or str(uuid.uuid4()),
                acks_from_request(request.acks, unquote(consumer)) if request.acks else NO_ACKS,
                request.minMessages,
            )
            partition = name.partition_index
            entries = [entry_to_wire(d.entry, partition, d.redelivery_count, d.acked_indexes) for d in result.entries]
            return _json({"entries": entries, "epoch": result.epoch})

        @app.post(f"{base}/<consumer>/ack")
        def acknowledge(tenant: str, namespace: str, topic: str, subscription: str, consumer: str) -> Response[str]:
            acks = acks_from_request(_body(AckRequest), unquote(consumer))
            state = build_broker().subscriptions.acknowledge(
                _topic(domain, tenant, namespace, topic), unquote(subscription), acks
            )
            return _json({"markDeleteEntryId": state.mark_delete - 1, "epoch": state.epoch})

        @app.post(f"{base}/<consumer>/redeliver")
        def redeliver(tenant: str, namespace: str, topic: str, subscription: str, consumer: str) -> Response[str]:
            build_broker().subscriptions.redeliver_unacknowledged(
                _topic(domain, tenant, namespace, topic), unquote(subscription), unquote(consumer)
            )
            return Response(status_code=204)

        @app.delete(f"{base}/<consumer>/subscription")
        def unsubscribe(tenant: str, namespace: str, topic: str, subscription: str, consumer: str) -> Response[str]:
            build_broker().subscriptions.unsubscribe(
                _topic(domain, tenant, namespace, topic), unquote(subscription), unquote(consumer)
            )
            return Response(status_code=204)

        @app.post(f"{base}/seek")
        def seek(tenant: str, namespace: str, topic: str, subscription: str) -> Response[str]:
            request = _body(SeekRequest)
            entry_id = MessageIdData.parse(request.messageId).entry_id if request.messageId else None
            name = _topic(domain, tenant, namespace, topic)
            state = build_broker().subscriptions.seek(name, unquote(subscription), entry_id, request.timestamp)
            build_push().after_seek(name, unquote(subscription))  # its WebSocket consumers start over
            return _json({"position": state.read_position, "epoch": state.epoch})

        # --- non-durable reads (readers, Spark) ----------------------------------------------
        @app.post(f"/magnetar/v1/reader/{domain}/<tenant>/<namespace>/<topic>/read")
        def read(tenant: str, namespace: str, topic: str) -> Response[str]:
            name = _topic(domain, tenant, namespace, topic)
            request = _body(ReadRequest)
            entries = build_broker().read_entries(name, request.startEntryId, request.maxEntries)
            next_entry = entries[-1].entry_id + 1 if entries else request.startEntryId
            live = [e for e in entries if not e.hole]
            body: dict[str, Any] = {"nextEntryId": next_entry}
            if request.format == "entries":
                body["entries"] = [entry_to_wire(e, name.partition_index, 0, []) for e in live]
            else:
                body["messages"] = [m for e in live for m in entry_messages(str(name), name.partition_index, e)]
            return _json(body)

        @app.get(f"/magnetar/v1/reader/{domain}/<tenant>/<namespace>/<topic>/position")
        def position_at(tenant: str, namespace: str, topic: str) -> Response[str]:
            timestamp = app.current_event.get_query_string_value("timestamp")
            if timestamp is None or not timestamp.isdigit():
                raise InvalidInput("Query parameter timestamp (ms) is required")
            entry_id = build_broker().entry_at_time(_topic(domain, tenant, namespace, topic), int(timestamp))
            return _json({"entryId": entry_id})

        @app.get(f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>/lastMessageId")
        def last_message_id(tenant: str, namespace: str, topic: str) -> Response[str]:
            last = build_broker().last_entry(_topic(domain, tenant, namespace, topic))
            return _json({"ledgerId": last[0], "entryId": last[1], "partitionIndex": -1})

        # --- topic stats (Pulsar's TopicStats, internal stats, partitioned stats) --------------
        @app.get(f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>/stats")
        def topic_stats(tenant: str, namespace: str, topic: str) -> Response[str]:
            return _json(build_broker().stats.topic_stats(_topic(domain, tenant, namespace, topic)))

        @app.get(f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>/internalStats")
        def internal_stats(tenant: str, namespace: str, topic: str) -> Response[str]:
            return _json(build_broker().stats.internal_stats(_topic(domain, tenant, namespace, topic)))

        @app.get(f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>/partitioned-stats")
        def partitioned_stats(tenant: str, namespace: str, topic: str) -> Response[str]:
            per_partition = _flag_query("perPartition", default=True)
            name = _topic(domain, tenant, namespace, topic)
            return _json(build_broker().stats.partitioned_stats(name, per_partition))

        @app.get(f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>/partitioned-internalStats")
        def partitioned_internal_stats(tenant: str, namespace: str, topic: str) -> Response[str]:
            return _json(build_broker().stats.partitioned_internal_stats(_topic(domain, tenant, namespace, topic)))

    _bind(_domain)


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
