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
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ValidationError

from magnetar.adapters.aws import build_broker
from magnetar.api.models import (
    AckRequest,
    ConsumerMessage,
    MessagesResponse,
    ProduceRequest,
    ProduceResponse,
    PublishResult,
    ReadRequest,
    ReceiveRequest,
    SubscribeRequest,
    TenantRequest,
    decode_b64,
)
from magnetar.core.dispatch import NO_ACKS, Acks, DeliveredEntry
from magnetar.core.entry import Entry, Message, MessageIdData
from magnetar.core.errors import InvalidInput, MagnetarError
from magnetar.core.naming import NamespaceName, TopicName

logger = Logger()
app = APIGatewayHttpResolver()
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


def _topic(domain: str, tenant: str, namespace: str, topic: str) -> TopicName:
    return TopicName.of(domain, unquote(tenant), unquote(namespace), unquote(topic))


def _acks(request: AckRequest) -> Acks:
    entries = tuple(sorted({MessageIdData.parse(m).entry_id for m in request.messageIds}))
    cumulative = MessageIdData.parse(request.cumulative).entry_id if request.cumulative else None
    return Acks(entries, cumulative)


def _messages(topic: TopicName, delivered: list[DeliveredEntry]) -> list[dict[str, Any]]:
    return [m.model_dump() for d in delivered for m in _entry_messages(topic, d.entry, d.redelivery_count)]


def _entry_messages(topic: TopicName, entry: Entry, redelivery_count: int) -> list[ConsumerMessage]:
    partition = topic.partition_index
    return [
        ConsumerMessage(
            messageId=str(entry.message_id(partition, i)),
            payload=base64.b64encode(m.payload).decode(),
            properties=m.properties,
            publishTime=entry.publish_time,
            eventTime=m.event_time,
            redeliveryCount=redelivery_count,
            key=m.key,
            producerName=entry.producer_name,
            topic=str(topic),
        )
        for i, m in enumerate(entry.messages)
    ]


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

        @app.get(f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>/subscriptions")
        def list_subscriptions(tenant: str, namespace: str, topic: str) -> Response[str]:
            return _json(build_broker().admin.list_subscriptions(_topic(domain, tenant, namespace, topic)))

        # --- produce (Pulsar's REST producer) ----------------------------------------------
        @app.post(f"/topics/{domain}/<tenant>/<namespace>/<topic>")
        def produce(tenant: str, namespace: str, topic: str) -> Response[str]:
            name = _topic(domain, tenant, namespace, topic)
            request = _body(ProduceRequest)
            messages = [Message(decode_b64(m.payload), m.key, m.properties, m.eventTime) for m in request.messages]
            result = build_broker().writer.append(
                name, messages, request.producerName, request.sequenceId, request.batched
            )
            response = ProduceResponse(
                messagePublishResults=[PublishResult(messageId=str(i)) for i in result.message_ids],
                ledgerId=result.ledger_id,
                entryId=result.entry_id,
            )
            return _json(response.model_dump())

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
            return _json({"subscriptionType": state.subscription_type, "consumers": sorted(state.consumers)})

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
            delivered = build_broker().subscriptions.receive(
                name,
                unquote(subscription),
                unquote(consumer),
                request.maxMessages,
                request.waitMs,
                request.requestId or str(uuid.uuid4()),
                _acks(request.acks) if request.acks else NO_ACKS,
                request.minMessages,
            )
            return _json({"messages": _messages(name, delivered)})

        @app.post(f"{base}/ack")
        def acknowledge(tenant: str, namespace: str, topic: str, subscription: str) -> Response[str]:
            acks = _acks(_body(AckRequest))
            state = build_broker().subscriptions.acknowledge(
                _topic(domain, tenant, namespace, topic), unquote(subscription), list(acks.entries), acks.cumulative
            )
            return _json({"markDeleteEntryId": state.mark_delete - 1})

        # --- non-durable reads (readers, Spark) ----------------------------------------------
        @app.post(f"/magnetar/v1/reader/{domain}/<tenant>/<namespace>/<topic>/read")
        def read(tenant: str, namespace: str, topic: str) -> Response[str]:
            name = _topic(domain, tenant, namespace, topic)
            request = _body(ReadRequest)
            entries = build_broker().read_entries(name, request.startEntryId, request.maxEntries)
            messages = [m.model_dump() for e in entries if not e.hole for m in _entry_messages(name, e, 0)]
            next_entry = entries[-1].entry_id + 1 if entries else request.startEntryId
            return _json(MessagesResponse.model_validate({"messages": messages, "nextEntryId": next_entry}).model_dump())

        @app.get(f"/admin/v2/{domain}/<tenant>/<namespace>/<topic>/lastMessageId")
        def last_message_id(tenant: str, namespace: str, topic: str) -> Response[str]:
            last = build_broker().last_entry(_topic(domain, tenant, namespace, topic))
            return _json({"ledgerId": last[0], "entryId": last[1], "partitionIndex": -1})

    _bind(_domain)


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
