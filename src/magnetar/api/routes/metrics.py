"""`GET /metrics`: Prometheus' exposition of Pulsar's metrics and Magnetar's own (docs/metrics.md).

The core reads and names everything (`magnetar.core.metrics`); this route takes the scrape's
options, hands the core what only this container knows (its AWS requests and their cost) and
shapes the answer (the format the `Accept` header asks for, gzip when accepted).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from magnetar.adapters.aws import build_broker
from magnetar.adapters.aws.clients import REQUESTS
from magnetar.api.access import guarded
from magnetar.api.http import flag_query, query
from magnetar.api.openapi import Content, Param
from magnetar.api.resolver import current_event
from magnetar.config import topic_level_metrics_from_env
from magnetar.core.authz import Access
from magnetar.core.errors import InvalidInput
from magnetar.core.metrics.container import COUNTERS
from magnetar.core.naming import NamespaceName

if TYPE_CHECKING:
    from magnetar.core.metrics.families import ContainerFigures

router = Router()  # type: ignore[no-untyped-call]
# Lambda answers at most 6 MB (6,291,556 bytes with the response's envelope): a bigger exposition
# goes out gzipped (a 1,000-topic namespace at topic level: ~5 MB of text, ~120 KB gzipped)
MAX_PLAIN_BYTES = 6_000_000

QUERY = {
    "topics": Param({"type": "boolean"}, description=(
        "true: a series per topic partition and per subscription (Pulsar's exposeTopicLevelMetricsInPrometheus); "
        "false: per namespace. Default: the deployment's MAGNETAR_TOPIC_LEVEL_METRICS (false unless set).")),
    "namespace": Param({"type": "string", "pattern": r"^[-=:.\w]+/[-=:.\w]+(,[-=:.\w]+/[-=:.\w]+)*$"},
                       description="Only these namespaces (tenant/namespace, comma-separated or repeated); "
                                   "default: every namespace."),
}


@guarded(router, "GET", "/metrics", Access.METRICS, response=Content("text/plain", {"type": "string"}),
         query=QUERY, errors=(400, 404))
def metrics() -> Response[str]:
    """Prometheus metrics: Pulsar's names by namespace (or topic), and this container's counters."""
    # imported on the first scrape, not at every broker container's start (prometheus_client, the cost model)
    from magnetar.core.metrics.families import render, scrape_families
    from magnetar.core.metrics.scrape import MetricsReader

    topic_level = flag_query("topics", topic_level_metrics_from_env())
    asked = query("namespace")
    namespaces = None
    if asked is not None:
        namespaces = list(dict.fromkeys(NamespaceName.parse(n.strip()) for n in asked.split(",")))
    broker = build_broker()
    started = time.perf_counter()
    with REQUESTS.scoped() as scrape_requests:
        figures = MetricsReader(broker.metadata, broker.stats).read(namespaces)
    seconds = time.perf_counter() - started
    families = scrape_families(figures, broker.cluster_name, topic_level, _container(), dict(scrape_requests),
                               seconds, time.time())
    headers = current_event().headers
    body, content_type = render(families, headers.get("accept"))
    if len(body) > MAX_PLAIN_BYTES and "gzip" not in (headers.get("accept-encoding") or ""):
        raise InvalidInput(f"The metrics are {len(body):,} bytes, over what a Lambda function may answer: send "
                           "Accept-Encoding: gzip (Prometheus does), or scrape fewer namespaces (?namespace=) or "
                           "at namespace level (?topics=false)")
    # text (not bytes: no base64), gzipped when the client accepts it (Prometheus does)
    return Response(status_code=200, content_type=content_type, body=body.decode(), compress=True)


def _container() -> ContainerFigures:
    """This container's counters, AWS requests and their estimated cost."""
    from magnetar.core.metrics.families import ContainerFigures
    from magnetar.cost.measured import cost_of_counted_requests

    counters = COUNTERS.snapshot()
    aws = REQUESTS.by_operation()
    requests = {f"{service}.{operation}": n for (service, operation), n in aws["requests"].items()}
    brokers = sum(n for function, n in counters.invocations.items() if "broker" in function.lower())
    cost = cost_of_counted_requests(requests, sum(counters.gb_seconds.values()), sum(counters.invocations.values()),
                                    brokers)
    return ContainerFigures(counters, aws, cost)
