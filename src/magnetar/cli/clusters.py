"""`magnetar admin clusters` and the replication-cluster verbs: pulsar-admin's names and options.

    magnetar admin clusters list
    magnetar admin clusters get CLUSTER
    magnetar admin clusters create CLUSTER --url http://host:8080 --broker-url pulsar://host:6650
    magnetar admin clusters update CLUSTER --url ... [--url-secure ...] [--broker-url-secure ...]
    magnetar admin clusters delete CLUSTER
    magnetar admin namespaces set-clusters tenant/ns --clusters a,b
    magnetar admin namespaces get-clusters tenant/ns
    magnetar admin topics set-replication-clusters TOPIC --clusters a,b
    magnetar admin topics get-replication-clusters TOPIC [--applied]
    magnetar admin topics remove-replication-clusters TOPIC

`clusters create|update` take the cluster's own `--auth-plugin`/`--auth-parameters` (how other
clusters authenticate to it), as pulsar-admin: the caller's credentials then come from
`--auth-params` or the environment (MAGNETAR_AUTH_PLUGIN, MAGNETAR_AUTH_PARAMS, MAGNETAR_AUTH_TOKEN).
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from magnetar.cli.common import (
    AUTH_PLUGIN_ENV,
    DEFAULT_URL,
    AuthParams,
    AuthPlugin,
    ServiceUrl,
    admin_client,
    call,
    split_list,
)

console = Console()
clusters_app = typer.Typer(help="Clusters of the instance.", no_args_is_help=True)
Cluster = Annotated[str, typer.Argument(help="The cluster's name.")]
Namespace = Annotated[str, typer.Argument(help="tenant/namespace")]
Topic = Annotated[str, typer.Argument(help="persistent://tenant/namespace/topic (or a short name)")]
Clusters = Annotated[list[str], typer.Option("--clusters", "-c", help="Comma-separated cluster names.")]
Url = Annotated[str | None, typer.Option("--url", help="The cluster's HTTP service URL (http://host:port).")]
UrlSecure = Annotated[str | None, typer.Option("--url-secure", help="Its HTTPS service URL (https://host:port).")]
BrokerUrl = Annotated[str | None, typer.Option("--broker-url", help="Its binary protocol URL (pulsar://host:port).")]
BrokerUrlSecure = Annotated[str | None, typer.Option(
    "--broker-url-secure", help="Its binary protocol TLS URL (pulsar+ssl://host:port).")]
ClusterAuthPlugin = Annotated[str | None, typer.Option(
    "--auth-plugin", help="The authentication plugin other clusters use to reach this cluster.")]
ClusterAuthParameters = Annotated[str | None, typer.Option(
    "--auth-parameters", help="Its authentication parameters.")]


def _cluster_data(url: str | None, url_secure: str | None, broker_url: str | None, broker_url_secure: str | None,
                  auth_plugin: str | None, auth_parameters: str | None) -> dict[str, Any]:
    """Pulsar's ClusterData JSON of the options given."""
    fields = {"serviceUrl": url, "serviceUrlTls": url_secure, "brokerServiceUrl": broker_url,
              "brokerServiceUrlTls": broker_url_secure, "authenticationPlugin": auth_plugin,
              "authenticationParameters": auth_parameters}
    return {name: value for name, value in fields.items() if value is not None}


def _list(title: str, items: list[str]) -> None:
    table = Table(title=title, show_header=False)
    for item in items:
        table.add_row(item)
    console.print(table if items else f"(no {title.lower()})")


def _clusters(values: list[str]) -> list[str]:
    clusters = split_list(values)
    if not clusters:
        raise typer.BadParameter("give at least one cluster, e.g. --clusters east,west", param_hint="--clusters")
    return clusters


@clusters_app.command("list")
def clusters_list(service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                  auth_params: AuthParams = None) -> None:
    """The clusters of the instance."""
    _list("Clusters", call(admin_client(service_url, auth_plugin, auth_params).clusters))


@clusters_app.command("get")
def clusters_get(cluster: Cluster, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                 auth_params: AuthParams = None) -> None:
    """A cluster's data (Pulsar's ClusterData JSON)."""
    console.print_json(data=call(admin_client(service_url, auth_plugin, auth_params).get_cluster, cluster))


@clusters_app.command("create")
def clusters_create(cluster: Cluster, url: Url = None, url_secure: UrlSecure = None, broker_url: BrokerUrl = None,
                    broker_url_secure: BrokerUrlSecure = None, auth_plugin: ClusterAuthPlugin = None,
                    auth_parameters: ClusterAuthParameters = None, service_url: ServiceUrl = DEFAULT_URL,
                    auth_params: AuthParams = None) -> None:
    """Create a cluster (superusers)."""
    admin = admin_client(service_url, os.environ.get(AUTH_PLUGIN_ENV), auth_params)
    call(admin.create_cluster, cluster,
         _cluster_data(url, url_secure, broker_url, broker_url_secure, auth_plugin, auth_parameters))
    console.print(f"created cluster {cluster}")


@clusters_app.command("update")
def clusters_update(cluster: Cluster, url: Url = None, url_secure: UrlSecure = None, broker_url: BrokerUrl = None,
                    broker_url_secure: BrokerUrlSecure = None, auth_plugin: ClusterAuthPlugin = None,
                    auth_parameters: ClusterAuthParameters = None, service_url: ServiceUrl = DEFAULT_URL,
                    auth_params: AuthParams = None) -> None:
    """Replace a cluster's data (superusers): the options not given become empty, as pulsar-admin."""
    admin = admin_client(service_url, os.environ.get(AUTH_PLUGIN_ENV), auth_params)
    call(admin.update_cluster, cluster,
         _cluster_data(url, url_secure, broker_url, broker_url_secure, auth_plugin, auth_parameters))
    console.print(f"updated cluster {cluster}")


@clusters_app.command("delete")
def clusters_delete(cluster: Cluster, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                    auth_params: AuthParams = None) -> None:
    """Delete a cluster no tenant allows and nothing replicates to (superusers)."""
    call(admin_client(service_url, auth_plugin, auth_params).delete_cluster, cluster)
    console.print(f"deleted cluster {cluster}")


def register(admin_app: typer.Typer, namespaces_app: typer.Typer, topics_app: typer.Typer) -> None:
    """Add `clusters` to `magnetar admin`, and the replication-cluster verbs to namespaces and topics."""
    admin_app.add_typer(clusters_app, name="clusters")

    @namespaces_app.command("set-clusters")
    def namespaces_set_clusters(namespace: Namespace, clusters: Clusters, service_url: ServiceUrl = DEFAULT_URL,
                                auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
        """Set the clusters the namespace's messages are replicated to."""
        wanted = _clusters(clusters)
        call(admin_client(service_url, auth_plugin, auth_params).set_namespace_replication_clusters, namespace, wanted)
        console.print(f"replication clusters of {namespace}: {', '.join(wanted)}")

    @namespaces_app.command("get-clusters")
    def namespaces_get_clusters(namespace: Namespace, service_url: ServiceUrl = DEFAULT_URL,
                                auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
        """The namespace's replication clusters."""
        admin = admin_client(service_url, auth_plugin, auth_params)
        console.print_json(data=call(admin.get_namespace_replication_clusters, namespace))

    @topics_app.command("set-replication-clusters")
    def topics_set_replication_clusters(topic: Topic, clusters: Clusters, service_url: ServiceUrl = DEFAULT_URL,
                                        auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
        """Set the topic's own replication clusters (over its namespace's)."""
        wanted = _clusters(clusters)
        call(admin_client(service_url, auth_plugin, auth_params).set_replication_clusters, topic, wanted)
        console.print(f"replication clusters of {topic}: {', '.join(wanted)}")

    @topics_app.command("get-replication-clusters")
    def topics_get_replication_clusters(
        topic: Topic,
        applied: Annotated[bool, typer.Option("--applied", help="The list in effect (the namespace's if unset).")] = False,
        service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None, auth_params: AuthParams = None,
    ) -> None:
        """The topic's replication clusters (null: none of its own)."""
        admin = admin_client(service_url, auth_plugin, auth_params)
        console.print_json(data=call(admin.get_replication_clusters, topic, applied))

    @topics_app.command("remove-replication-clusters")
    def topics_remove_replication_clusters(topic: Topic, service_url: ServiceUrl = DEFAULT_URL,
                                           auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
        """Remove the topic's own replication clusters (its namespace's apply)."""
        call(admin_client(service_url, auth_plugin, auth_params).remove_replication_clusters, topic)
        console.print(f"removed the replication clusters of {topic}")
