"""Pulsar's HTTP lookup service (`/lookup/v2/topic/{persistent|non-persistent}/{tenant}/{namespace}/{topic}`):
where a client given an `http://` service URL connects for a topic's binary protocol. The official
clients ask it before a producer or consumer connects, then speak the binary protocol to the
`brokerUrl` (or `brokerUrlTls`) it answers: this cluster's proxy."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from magnetar.adapters.aws import build_broker
from magnetar.api.access import guarded
from magnetar.api.http import DOMAINS, json_response, topic_name
from magnetar.api.models import TopicLookupData
from magnetar.core.authz import Access

router = Router()  # type: ignore[no-untyped-call]


def _bind(domain: str) -> None:
    @guarded(router, "GET", f"/lookup/v2/topic/{domain}/<tenant>/<namespace>/<topic>", Access.LOOKUP, domain,
             response=TopicLookupData, errors=(404,))
    def lookup_topic(tenant: str, namespace: str, topic: str) -> Response[str]:
        """Where the topic is served over the binary protocol: this cluster's proxy."""
        data = build_broker().admin.lookup(topic_name(domain, tenant, namespace, topic))
        return json_response({"brokerUrl": data.broker_service_url, "brokerUrlTls": data.broker_service_url_tls,
                              "httpUrl": data.service_url, "httpUrlTls": data.service_url_tls,
                              "nativeUrl": data.broker_service_url or data.broker_service_url_tls})


for _domain in DOMAINS:
    _bind(_domain)
