"""Geo-replication between the clusters of an instance: a replicated subscription's position,
as another cluster's replicator tells it (superusers only: the other clusters' replicators)."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from magnetar.adapters.aws import build_replicator
from magnetar.api.access import guarded
from magnetar.api.http import DOMAINS, body, json_response, topic_name
from magnetar.api.models import ReplicatedAcksRequest, ReplicatedAcksResponse
from magnetar.config import REPLICATED_SUBSCRIPTIONS_PATH
from magnetar.core.authz import Access
from magnetar.core.naming import check_subscription

router = Router()  # type: ignore[no-untyped-call]


def _bind(domain: str) -> None:
    @guarded(router, "POST", f"{REPLICATED_SUBSCRIPTIONS_PATH}/{domain}/<tenant>/<namespace>/<topic>/<subscription>",
             Access.SUPERUSER, domain, request=ReplicatedAcksRequest, response=ReplicatedAcksResponse)
    def replicated_acks(tenant: str, namespace: str, topic: str, subscription: str) -> Response[str]:
        """A replicated subscription acknowledged this in another cluster: move it here past what that covers."""
        request = body(ReplicatedAcksRequest)
        name = topic_name(domain, tenant, namespace, topic)
        position = build_replicator().subscriptions.apply_remote_acks(
            name, check_subscription(unquote(subscription)), request.subscriptionType, request.originAcked)
        return json_response(ReplicatedAcksResponse(markDeletePosition=position).model_dump())


for _domain in DOMAINS:
    _bind(_domain)
