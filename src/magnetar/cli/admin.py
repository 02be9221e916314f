"""`magnetar admin`: pulsar-admin's tenants, namespaces and topics verbs (permissions and schemas
register theirs from their own modules)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from magnetar.cli.clusters import register as register_cluster_commands
from magnetar.cli.common import (
    DEFAULT_URL,
    AuthParams,
    AuthPlugin,
    ServiceUrl,
    admin_client,
    call,
    split_list,
)
from magnetar.cli.permissions import register as register_permission_commands
from magnetar.cli.schemas import register as register_schema_commands
from magnetar.client.admin import AdminClient

console = Console()
T = TypeVar("T")

admin_app = typer.Typer(help="Administer clusters, tenants, namespaces and topics.", no_args_is_help=True)
tenants_app = typer.Typer(help="Tenants.", no_args_is_help=True)
namespaces_app = typer.Typer(help="Namespaces.", no_args_is_help=True)
topics_app = typer.Typer(help="Topics.", no_args_is_help=True)
admin_app.add_typer(tenants_app, name="tenants")
admin_app.add_typer(namespaces_app, name="namespaces")
admin_app.add_typer(topics_app, name="topics")


def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run an SDK call; a refusal becomes a one-line error and exit code 1."""
    return call(fn, *args, **kwargs)


def _admin(service_url: str, auth_plugin: str | None = None, auth_params: str | None = None) -> AdminClient:
    """An admin client with the command's credentials (--auth-plugin/--auth-params, or the environment)."""
    return admin_client(service_url, auth_plugin, auth_params)


Force = Annotated[bool, typer.Option("--force", "-f", help="Delete even while in use (or not empty).")]


def _print_list(title: str, items: list[str]) -> None:
    table = Table(title=title, show_header=False)
    for item in items:
        table.add_row(item)
    console.print(table if items else f"(no {title.lower()})")


@tenants_app.command("list")
def tenants_list(service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                 auth_params: AuthParams = None) -> None:
    _print_list("Tenants", _call(_admin(service_url, auth_plugin, auth_params).tenants))


@tenants_app.command("create")
def tenants_create(
    tenant: str,
    admin_roles: Annotated[list[str] | None, typer.Option("--admin-roles", "-r")] = None,
    allowed_clusters: Annotated[list[str] | None, typer.Option("--allowed-clusters", "-c")] = None,
    service_url: ServiceUrl = DEFAULT_URL,
    auth_plugin: AuthPlugin = None,
    auth_params: AuthParams = None,
) -> None:
    _call(_admin(service_url, auth_plugin, auth_params).create_tenant, tenant, split_list(admin_roles),
          split_list(allowed_clusters) or None)
    console.print(f"created tenant {tenant}")


@tenants_app.command("delete")
def tenants_delete(tenant: str, force: Force = False, service_url: ServiceUrl = DEFAULT_URL,
                   auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
    """Delete a tenant; with --force, its namespaces and their topics too (pulsar-admin tenants delete)."""
    _call(_admin(service_url, auth_plugin, auth_params).delete_tenant, tenant, force)
    console.print(f"deleted tenant {tenant}")


@namespaces_app.command("list")
def namespaces_list(tenant: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                    auth_params: AuthParams = None) -> None:
    _print_list("Namespaces", _call(_admin(service_url, auth_plugin, auth_params).namespaces, tenant))


@namespaces_app.command("create")
def namespaces_create(namespace: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                      auth_params: AuthParams = None) -> None:
    _call(_admin(service_url, auth_plugin, auth_params).create_namespace, namespace)
    console.print(f"created namespace {namespace}")


@namespaces_app.command("delete")
def namespaces_delete(namespace: str, force: Force = False, service_url: ServiceUrl = DEFAULT_URL,
                      auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
    """Delete a namespace; with --force, its topics too (pulsar-admin namespaces delete)."""
    _call(_admin(service_url, auth_plugin, auth_params).delete_namespace, namespace, force)
    console.print(f"deleted namespace {namespace}")


@topics_app.command("list")
def topics_list(namespace: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                auth_params: AuthParams = None) -> None:
    _print_list("Topics", _call(_admin(service_url, auth_plugin, auth_params).topics, namespace))


@topics_app.command("create")
def topics_create(topic: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                  auth_params: AuthParams = None) -> None:
    _call(_admin(service_url, auth_plugin, auth_params).create_topic, topic)
    console.print(f"created topic {topic}")


@topics_app.command("delete")
def topics_delete(topic: str, force: Force = False, service_url: ServiceUrl = DEFAULT_URL,
                  auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
    """Delete a non-partitioned topic, refused while producers or consumers are active unless --force
    (pulsar-admin topics delete)."""
    _call(_admin(service_url, auth_plugin, auth_params).delete_topic, topic, force)
    console.print(f"deleted topic {topic}")


@topics_app.command("delete-partitioned-topic")
def topics_delete_partitioned(topic: str, force: Force = False, service_url: ServiceUrl = DEFAULT_URL,
                              auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
    """Delete a partitioned topic and all its partitions (pulsar-admin topics delete-partitioned-topic)."""
    _call(_admin(service_url, auth_plugin, auth_params).delete_partitioned_topic, topic, force)
    console.print(f"deleted partitioned topic {topic}")


@topics_app.command("create-partitioned-topic")
def topics_create_partitioned(
    topic: str,
    partitions: Annotated[int, typer.Option("--partitions", "-p", help="Number of partitions.")],
    service_url: ServiceUrl = DEFAULT_URL,
    auth_plugin: AuthPlugin = None,
    auth_params: AuthParams = None,
) -> None:
    _call(_admin(service_url, auth_plugin, auth_params).create_partitioned_topic, topic, partitions)
    console.print(f"created partitioned topic {topic} with {partitions} partitions")


@topics_app.command("update-partitioned-topic")
def topics_update_partitioned(
    topic: str,
    partitions: Annotated[int, typer.Option("--partitions", "-p", help="New number of partitions (only grows).")],
    service_url: ServiceUrl = DEFAULT_URL,
    auth_plugin: AuthPlugin = None,
    auth_params: AuthParams = None,
) -> None:
    _call(_admin(service_url, auth_plugin, auth_params).update_partitioned_topic, topic, partitions)
    console.print(f"{topic} now has {partitions} partitions")


@topics_app.command("get-partitioned-topic-metadata")
def topics_partition_metadata(topic: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                              auth_params: AuthParams = None) -> None:
    console.print_json(data={"partitions": _call(_admin(service_url, auth_plugin, auth_params).partitioned_topic_metadata, topic)})


@topics_app.command("lookup")
def topics_lookup(topic: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                  auth_params: AuthParams = None) -> None:
    """The binary protocol URL a topic is served at (pulsar-admin topics lookup): the cluster's proxy."""
    console.print(_call(_admin(service_url, auth_plugin, auth_params).lookup_topic, topic))


@topics_app.command("stats")
def topics_stats(topic: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                 auth_params: AuthParams = None) -> None:
    """A topic's (or a partition's) stats: rates, counters, publishers, subscriptions (pulsar-admin topics stats)."""
    console.print_json(data=_call(_admin(service_url, auth_plugin, auth_params).topic_stats, topic))


@topics_app.command("stats-internal")
def topics_stats_internal(topic: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                          auth_params: AuthParams = None) -> None:
    """A topic's internal stats: ledgers, segments, cursors' positions (pulsar-admin topics stats-internal)."""
    console.print_json(data=_call(_admin(service_url, auth_plugin, auth_params).topic_internal_stats, topic))


@topics_app.command("compact")
def topics_compact(topic: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                   auth_params: AuthParams = None) -> None:
    """Start compacting a persistent topic (pulsar-admin topics compact)."""
    _call(_admin(service_url, auth_plugin, auth_params).trigger_compaction, topic)
    console.print(f"Compaction of {topic} triggered")


@topics_app.command("compaction-status")
def topics_compaction_status(topic: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                             auth_params: AuthParams = None) -> None:
    """The status of a topic's compaction: NOT_RUN, RUNNING, SUCCESS or ERROR (pulsar-admin topics compaction-status)."""
    console.print_json(data=_call(_admin(service_url, auth_plugin, auth_params).compaction_status, topic))


@topics_app.command("partitioned-stats")
def topics_partitioned_stats(
    topic: str,
    per_partition: Annotated[
        bool, typer.Option("--per-partition/--no-per-partition", help="Include each partition's stats.")
    ] = True,
    service_url: ServiceUrl = DEFAULT_URL,
    auth_plugin: AuthPlugin = None,
    auth_params: AuthParams = None,
) -> None:
    """A partitioned topic's stats summed over its partitions (pulsar-admin topics partitioned-stats)."""
    console.print_json(data=_call(_admin(service_url, auth_plugin, auth_params).partitioned_topic_stats, topic, per_partition))


@namespaces_app.command("set-deduplication")
def namespaces_set_deduplication(
    namespace: str,
    enable: Annotated[bool, typer.Option("--enable/--disable", help="Turn deduplication on or off.")],
    service_url: ServiceUrl = DEFAULT_URL,
    auth_plugin: AuthPlugin = None,
    auth_params: AuthParams = None,
) -> None:
    _call(_admin(service_url, auth_plugin, auth_params).set_deduplication, namespace, enable)
    console.print(f"deduplication {'enabled' if enable else 'disabled'} on {namespace}")


@namespaces_app.command("get-deduplication")
def namespaces_get_deduplication(namespace: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                                 auth_params: AuthParams = None) -> None:
    console.print_json(data=_call(_admin(service_url, auth_plugin, auth_params).get_deduplication, namespace))


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_SIZES = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def _seconds(text: str) -> int:
    """Pulsar's CLI durations: 45 (seconds), 10m, 3h, 2d, 1w; -1: infinite."""
    text = text.strip().lower()
    if text.lstrip("-").isdigit():
        return int(text)
    if len(text) > 1 and text[-1] in _UNITS and text[:-1].isdigit():
        return int(text[:-1]) * _UNITS[text[-1]]
    raise typer.BadParameter(f"{text!r} is not a duration (e.g. 60, 10m, 3h, 2d, -1)")


def _bytes(text: str) -> int:
    """Pulsar's CLI sizes: 1024 (bytes), 10K, 5M, 2G, 1T; -1: infinite."""
    text = text.strip().lower()
    if text.lstrip("-").isdigit():
        return int(text)
    if len(text) > 1 and text[-1] in _SIZES and text[:-1].isdigit():
        return int(text[:-1]) * _SIZES[text[-1]]
    raise typer.BadParameter(f"{text!r} is not a size (e.g. 1024, 10M, 2G, -1)")


Target = Annotated[str, typer.Argument(help="tenant/namespace")]


@namespaces_app.command("set-retention")
def namespaces_set_retention(
    namespace: Target,
    time: Annotated[str, typer.Option("--time", "-t", help="Retention time: 10m, 3h, 2d, -1 (infinite), 0.")],
    size: Annotated[str, typer.Option("--size", "-s", help="Retention size: 10M, 2G, -1 (infinite), 0.")],
    service_url: ServiceUrl = DEFAULT_URL,
    auth_plugin: AuthPlugin = None,
    auth_params: AuthParams = None,
) -> None:
    """Keep acknowledged messages this long and up to this size (Pulsar's set-retention)."""
    minutes, size_bytes = _seconds(time), _bytes(size)
    minutes = minutes if minutes <= 0 else max(1, minutes // 60)
    size_mb = size_bytes if size_bytes <= 0 else max(1, size_bytes // 1024**2)
    _call(_admin(service_url, auth_plugin, auth_params).set_retention, namespace, minutes, size_mb)
    console.print(f"retention of {namespace}: {minutes} minutes, {size_mb} MB")


@namespaces_app.command("get-retention")
def namespaces_get_retention(namespace: Target, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                             auth_params: AuthParams = None) -> None:
    console.print_json(data=_call(_admin(service_url, auth_plugin, auth_params).get_retention, namespace))


@namespaces_app.command("set-message-ttl")
def namespaces_set_message_ttl(
    namespace: Target,
    ttl: Annotated[str, typer.Option("--messageTTL", "-ttl", help="Message TTL: 60, 10m, 1h; 0: never expire.")],
    service_url: ServiceUrl = DEFAULT_URL,
    auth_plugin: AuthPlugin = None,
    auth_params: AuthParams = None,
) -> None:
    """Messages older than this are acknowledged for every subscription (Pulsar's set-message-ttl)."""
    seconds = _seconds(ttl)
    _call(_admin(service_url, auth_plugin, auth_params).set_message_ttl, namespace, seconds)
    console.print(f"message TTL of {namespace}: {seconds} s")


@namespaces_app.command("get-message-ttl")
def namespaces_get_message_ttl(namespace: Target, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                               auth_params: AuthParams = None) -> None:
    console.print_json(data=_call(_admin(service_url, auth_plugin, auth_params).get_message_ttl, namespace))


@namespaces_app.command("set-backlog-quota")
def namespaces_set_backlog_quota(
    namespace: Target,
    policy: Annotated[str, typer.Option("--policy", "-p",
                                        help="producer_request_hold | producer_exception | consumer_backlog_eviction")],
    limit_size: Annotated[str, typer.Option("--limitSize", "-l", help="Backlog size limit: 10M, 2G; -1: none.")] = "-1",
    limit_time: Annotated[str, typer.Option("--limitTime", "-lt", help="Backlog age limit: 60, 10m, 1h; -1: none.")] = "-1",
    quota_type: Annotated[str, typer.Option("--type", help="destination_storage | message_age")] = "destination_storage",
    service_url: ServiceUrl = DEFAULT_URL,
    auth_plugin: AuthPlugin = None,
    auth_params: AuthParams = None,
) -> None:
    """Limit the backlog of every topic in the namespace (Pulsar's set-backlog-quota)."""
    _call(_admin(service_url, auth_plugin, auth_params).set_backlog_quota, namespace, _bytes(limit_size), _seconds(limit_time), policy, quota_type)
    console.print(f"backlog quota of {namespace}: {quota_type} {policy}")


@namespaces_app.command("get-backlog-quotas")
def namespaces_get_backlog_quotas(namespace: Target, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                                  auth_params: AuthParams = None) -> None:
    console.print_json(data=_call(_admin(service_url, auth_plugin, auth_params).get_backlog_quotas, namespace))


@namespaces_app.command("remove-backlog-quota")
def namespaces_remove_backlog_quota(
    namespace: Target,
    quota_type: Annotated[str, typer.Option("--type", help="destination_storage | message_age")] = "destination_storage",
    service_url: ServiceUrl = DEFAULT_URL,
    auth_plugin: AuthPlugin = None,
    auth_params: AuthParams = None,
) -> None:
    _call(_admin(service_url, auth_plugin, auth_params).remove_backlog_quota, namespace, quota_type)
    console.print(f"removed the {quota_type} backlog quota of {namespace}")


def _count_policy(command: str, path: str, what: str) -> None:
    @namespaces_app.command(f"set-{command}", help=f"Set the {what} (0: no limit).")
    def set_count(namespace: Target, value: Annotated[int, typer.Argument(help="The limit; 0: none.")],
                  service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                  auth_params: AuthParams = None) -> None:
        _call(_admin(service_url, auth_plugin, auth_params).set_policy, namespace, path, value)
        console.print(f"{what} of {namespace}: {value}")

    @namespaces_app.command(f"get-{command}", help=f"Get the {what}.")
    def get_count(namespace: Target, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                  auth_params: AuthParams = None) -> None:
        console.print_json(data=_call(_admin(service_url, auth_plugin, auth_params).get_policy, namespace, path))


_count_policy("max-producers-per-topic", "maxProducersPerTopic", "maximum producers per topic")
_count_policy("max-consumers-per-topic", "maxConsumersPerTopic", "maximum consumers per topic")
_count_policy("max-message-size", "maxMessageSize", "maximum message size in bytes")
register_permission_commands(tenants_app, namespaces_app, topics_app)
register_schema_commands(admin_app)
register_cluster_commands(admin_app, namespaces_app, topics_app)
