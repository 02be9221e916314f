"""Clusters of the instance (`/admin/v2/clusters`) and the replication clusters of namespaces and
topics (`.../replication`), on Pulsar's paths, bodies and status codes."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from magnetar.adapters.aws import build_broker
from magnetar.api.access import guarded
from magnetar.api.http import (
    body,
    flag_query,
    json_body,
    json_response,
    namespace_name,
    no_content,
    topic_name,
)
from magnetar.api.models import ClusterDataRequest, ClusterDataResponse
from magnetar.api.openapi import STRINGS, Param, nullable
from magnetar.core.authz import Access
from magnetar.core.clusters import ClusterData

router = Router()  # type: ignore[no-untyped-call]
CLUSTER = "/admin/v2/clusters/<cluster>"
CLUSTER_LIST = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1,
                "description": "Cluster names."}


def _cluster_data() -> ClusterData:
    request = body(ClusterDataRequest)
    return ClusterData.from_json(request.model_dump())


@guarded(router, "GET", "/admin/v2/clusters", Access.AUTHENTICATED, response=STRINGS)
def list_clusters() -> Response[str]:
    """The clusters of the instance."""
    return json_response(build_broker().admin.list_clusters())


@guarded(router, "GET", CLUSTER, Access.SUPERUSER, response=ClusterDataResponse)
def get_cluster(cluster: str) -> Response[str]:
    """A cluster's data (its service URLs)."""
    return json_response(build_broker().admin.get_cluster(unquote(cluster)).to_json())


@guarded(router, "PUT", CLUSTER, Access.SUPERUSER, request=ClusterDataRequest, errors=(412,))
def create_cluster(cluster: str) -> Response[str]:
    """Create a cluster."""
    build_broker().admin.create_cluster(unquote(cluster), _cluster_data())
    return no_content()


@guarded(router, "POST", CLUSTER, Access.SUPERUSER, request=ClusterDataRequest)
def update_cluster(cluster: str) -> Response[str]:
    """Replace a cluster's data."""
    build_broker().admin.update_cluster(unquote(cluster), _cluster_data())
    return no_content()


@guarded(router, "DELETE", CLUSTER, Access.SUPERUSER, errors=(412,))
def delete_cluster(cluster: str) -> Response[str]:
    """Delete a cluster no tenant allows and nothing replicates to."""
    build_broker().admin.delete_cluster(unquote(cluster))
    return no_content()


# --- replication clusters ----------------------------------------------------------------------
NS_REPLICATION = "/admin/v2/namespaces/<tenant>/<namespace>/replication"
TOPIC_REPLICATION = "/admin/v2/persistent/<tenant>/<namespace>/<topic>/replication"


@guarded(router, "POST", NS_REPLICATION, Access.TENANT_ADMIN, request=CLUSTER_LIST, errors=(412,))
def set_namespace_replication(tenant: str, namespace: str) -> Response[str]:
    """Set the clusters the namespace's messages are replicated to."""
    build_broker().admin.set_replication_clusters(namespace_name(tenant, namespace), json_body())
    return no_content()


@guarded(router, "GET", NS_REPLICATION, Access.TENANT_ADMIN, response=STRINGS)
def get_namespace_replication(tenant: str, namespace: str) -> Response[str]:
    """The namespace's replication clusters (this cluster alone when never set)."""
    return json_response(build_broker().admin.namespace_replication_clusters(namespace_name(tenant, namespace)))


@guarded(router, "POST", TOPIC_REPLICATION, Access.TENANT_ADMIN, "persistent", request=CLUSTER_LIST, errors=(412,))
def set_topic_replication(tenant: str, namespace: str, topic: str) -> Response[str]:
    """Set the topic's own replication clusters (over its namespace's)."""
    build_broker().admin.set_topic_replication_clusters(topic_name("persistent", tenant, namespace, topic), json_body())
    return no_content()


@guarded(router, "GET", TOPIC_REPLICATION, Access.TENANT_ADMIN, "persistent", response=nullable(STRINGS),
         query={"applied": Param({"type": "boolean"}, description="The list in effect (else the topic's own, "
                                                                 "null when unset)")})
def get_topic_replication(tenant: str, namespace: str, topic: str) -> Response[str]:
    """The topic's replication clusters."""
    name = topic_name("persistent", tenant, namespace, topic)
    return json_response(build_broker().admin.topic_replication_clusters(name, flag_query("applied", False)))


@guarded(router, "DELETE", TOPIC_REPLICATION, Access.TENANT_ADMIN, "persistent")
def remove_topic_replication(tenant: str, namespace: str, topic: str) -> Response[str]:
    """Remove the topic's own replication clusters (its namespace's apply)."""
    build_broker().admin.remove_topic_replication_clusters(topic_name("persistent", tenant, namespace, topic))
    return no_content()
