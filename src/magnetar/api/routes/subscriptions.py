"""Pulsar's subscription administration on persistent topics
(`/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription/{subscription}...`): create at a
position, delete, skip entries, clear the backlog, reset the cursor by time or to a message id.
What each does is the core's (`core/subscription_admin.py`); every call needs consume on the
topic (and on the subscription, where subscriptions are restricted to roles), as in Pulsar."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from magnetar.adapters.aws import build_broker
from magnetar.adapters.aws.connections import build_push
from magnetar.api.access import guarded
from magnetar.api.http import body, flag_query, has_body, json_response, no_content, topic_name
from magnetar.api.models import INT64_MAX, MessageIdBody
from magnetar.api.openapi import COUNT, Content, Param
from magnetar.core.authz import Access
from magnetar.core.errors import InvalidInput
from magnetar.core.naming import TopicName
from magnetar.core.subscription_admin import EARLIEST, LATEST, Position

router = Router()  # type: ignore[no-untyped-call]
DOMAIN = "persistent"  # non-persistent topics keep no cursors to administer
SUB = f"/admin/v2/{DOMAIN}/<tenant>/<namespace>/<topic>/subscription/<subscription>"
MESSAGE_ID = MessageIdBody.model_json_schema()
SKIPPED = {"type": "object", "properties": {"skipped": COUNT}}


def _position(message_id: MessageIdBody | None) -> Position:
    if message_id is None or message_id.ledgerId == INT64_MAX or message_id.entryId == INT64_MAX:
        return Position(LATEST)
    if message_id.entryId < 0:
        return Position(EARLIEST)
    return Position.entry(message_id.entryId)


def _number(text: str, what: str) -> int:
    if not text.isdigit() or len(text) > 18:
        raise InvalidInput(f"{what} must be a non-negative integer, not {unquote(text)!r}")
    return int(text)


def _after_seek(name: TopicName, subscription: str) -> None:
    """A moved cursor's WebSocket consumers start over, on each partition it moved."""
    partitions = build_broker().metadata.get_partitions(name) if name.partition_index < 0 else None
    for target in [name] if partitions is None else [name.partition(i) for i in range(partitions)]:
        build_push().after_seek(target, subscription)


@guarded(router, "PUT", SUB, Access.CONSUME, DOMAIN, request=Content("application/json", MESSAGE_ID, required=False),
         query={"replicated": Param({"type": "boolean"}, description="Not supported: false only")})
def create_subscription(tenant: str, namespace: str, topic: str, subscription: str) -> Response[str]:
    """Create a subscription at a message id (earliest: -1:-1; latest, the default: no body)."""
    if flag_query("replicated", default=False):
        raise InvalidInput("Replicated subscriptions are made by their consumers (replicate_subscription_state)")
    start = body(MessageIdBody) if has_body() else None
    build_broker().subscription_admin.create(topic_name(DOMAIN, tenant, namespace, topic), unquote(subscription),
                                             _position(start))
    return no_content()


@guarded(router, "DELETE", SUB, Access.CONSUME, DOMAIN,
         query={"force": Param({"type": "boolean"}, description="Delete even with consumers attached")})
def delete_subscription(tenant: str, namespace: str, topic: str, subscription: str) -> Response[str]:
    """Delete a subscription (412 while consumers are attached, unless force)."""
    build_broker().subscription_admin.delete(topic_name(DOMAIN, tenant, namespace, topic), unquote(subscription),
                                             flag_query("force", default=False))
    return no_content()


@guarded(router, "POST", f"{SUB}/skip_all", Access.CONSUME, DOMAIN, response=SKIPPED)
def clear_backlog(tenant: str, namespace: str, topic: str, subscription: str) -> Response[str]:
    """Clear the subscription's backlog (acknowledge everything written so far)."""
    name = topic_name(DOMAIN, tenant, namespace, topic)
    skipped = build_broker().subscription_admin.clear_backlog(name, unquote(subscription))
    return json_response({"skipped": skipped})


@guarded(router, "POST", f"{SUB}/skip/<numMessages>", Access.CONSUME, DOMAIN, response=SKIPPED)
def skip_messages(tenant: str, namespace: str, topic: str, subscription: str, numMessages: str) -> Response[str]:
    """Skip the next entries of the subscription's backlog (a batch is one entry)."""
    count = _number(numMessages, "numMessages")
    name = topic_name(DOMAIN, tenant, namespace, topic)
    return json_response({"skipped": build_broker().subscription_admin.skip(name, unquote(subscription), count)})


@guarded(router, "POST", f"{SUB}/resetcursor/<timestamp>", Access.CONSUME, DOMAIN)
def reset_cursor_to_time(tenant: str, namespace: str, topic: str, subscription: str, timestamp: str) -> Response[str]:
    """Reset the subscription to the first message published at or after a time (ms)."""
    name, sub = topic_name(DOMAIN, tenant, namespace, topic), unquote(subscription)
    build_broker().subscription_admin.reset_to_time(name, sub, _number(timestamp, "timestamp"))
    _after_seek(name, sub)
    return no_content()


@guarded(router, "POST", f"{SUB}/resetcursor", Access.CONSUME, DOMAIN, request=MessageIdBody)
def reset_cursor_to_message(tenant: str, namespace: str, topic: str, subscription: str) -> Response[str]:
    """Reset the subscription to a message id (that message is delivered again)."""
    name, sub = topic_name(DOMAIN, tenant, namespace, topic), unquote(subscription)
    target = body(MessageIdBody)
    if target.entryId < 0:
        raise InvalidInput("Reset to a message id needs its entryId")
    if target.partitionIndex >= 0 and name.partition_index < 0:
        name = name.partition(target.partitionIndex)
    build_broker().subscription_admin.reset_to_entry(name, sub, target.entryId)
    _after_seek(name, sub)
    return no_content()
