"""The broker Lambda: the HTTP API (admin v2, produce, consume) behind API Gateway (payload v2).

Only parsing and shaping happen here; every decision is the core's (`magnetar.core`).
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any, TypeVar
from urllib.parse import unquote

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ValidationError

from magnetar.adapters.aws import build_broker
from magnetar.api.models import (
    AckRequest,
    ProduceRequest,
    ProduceResponse,
    ProducerRequest,
    PublishResult,
    ReadRequest,
    ReceiveRequest,
    SeekRequest,
    SubscribeRequest,
    TenantRequest,
)
from magnetar.api.resolver import HttpApiResolver
from magnetar.api.wire import acks_from_request, batch_from_request, entry_messages, entry_to_wire
from magnetar.core.dispatch import NO_ACKS
from magnetar.core.entry import MessageIdData
from magnetar.core.errors import InvalidInput, MagnetarError
from magnetar.core.naming import NamespaceName, TopicName

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


def _topic(domain: str, tenant: str, namespace: str, topic: str) -> TopicName:
    return TopicName.of(domain, unquote(tenant), unquote(namespace), unquote(topic))


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


@app.post("/admin/v2/namespaces/<tenant>/<namespace>/deduplication")
def set_deduplication(tenant: str, namespace: str) -> Response[str]:
    enabled = _json_body()
    if not isinstance(enabled, bool):
        raise InvalidInput("Request body must be true or false")
    build_broker().admin.set_policy(NamespaceName.of(unquote(tenant), unquote(namespace)), "deduplicationEnabled", enabled)
    return Response(status_code=204)


@app.get("/admin/v2/namespaces/<tenant>/<namespace>/deduplication")
def get_deduplication(tenant: str, namespace: str) -> Response[str]:
    info = build_broker().admin.get_namespace(NamespaceName.of(unquote(tenant), unquote(namespace)))
    return _json(bool(info.policies.get("deduplicationEnabled", False)))


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
            state = build_broker().subscriptions.seek(
                _topic(domain, tenant, namespace, topic), unquote(subscription), entry_id, request.timestamp
            )
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

    _bind(_domain)


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
