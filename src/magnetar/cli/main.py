"""`magnetar`: local cluster, produce/consume (pulsar-client's verbs), admin (pulsar-admin's)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from magnetar.cli.common import (
    DEFAULT_URL,
    SERVICE_URL_ENV,
    AuthParams,
    AuthPlugin,
    ServiceUrl,
    admin_client,
    authentication,
    call,
    on_off,
    split_list,
)
from magnetar.cli.cost import cost_command
from magnetar.cli.perf import perf_app
from magnetar.cli.permissions import register as register_permission_commands
from magnetar.cli.schemas import register as register_schema_commands
from magnetar.cli.spark import spark_app
from magnetar.cli.tokens import tokens_app
from magnetar.cli.verify import verify_command
from magnetar.client.admin import AdminClient
from magnetar.config import DEFAULT_SUPERUSER_ROLE, MAINTENANCE_INTERVAL_S, MAX_JOURNAL_BATCHING_WINDOW_S
from magnetar.local.fidelity import DEFAULT_LAMBDA_CONCURRENCY, AwsFidelity

console = Console()
LOCAL_TOKEN_KEY = Path.home() / ".magnetar" / "local-token-secret.key"
err = Console(stderr=True)
T = TypeVar("T")

app = typer.Typer(help="Magnetar: Apache Pulsar's messaging model on AWS serverless.", no_args_is_help=True)
local_app = typer.Typer(help="Run Magnetar on this machine.", no_args_is_help=True)
admin_app = typer.Typer(help="Administer tenants, namespaces and topics.", no_args_is_help=True)
tenants_app = typer.Typer(help="Tenants.", no_args_is_help=True)
namespaces_app = typer.Typer(help="Namespaces.", no_args_is_help=True)
topics_app = typer.Typer(help="Topics.", no_args_is_help=True)
app.add_typer(local_app, name="local")
app.add_typer(admin_app, name="admin")
app.add_typer(perf_app, name="perf")
app.add_typer(tokens_app, name="tokens")
app.add_typer(spark_app, name="spark")
app.command("verify")(verify_command)
app.command("cost")(cost_command)
admin_app.add_typer(tenants_app, name="tenants")
admin_app.add_typer(namespaces_app, name="namespaces")
admin_app.add_typer(topics_app, name="topics")


def _fail(message: str) -> None:
    err.print(f"[red]error:[/red] {message}")
    raise typer.Exit(1)


def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run an SDK call; a refusal becomes a one-line error and exit code 1."""
    return call(fn, *args, **kwargs)


@local_app.command("up")
def local_up(
    port: Annotated[int, typer.Option(help="Port of the HTTP API.")] = 8080,
    aws_port: Annotated[int, typer.Option(help="Port of the embedded AWS emulator.")] = 4566,
    aws_endpoint: Annotated[
        str | None, typer.Option(help="Use this AWS endpoint (e.g. a running LocalStack) instead of starting moto.")
    ] = None,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    maintenance_interval: Annotated[
        float, typer.Option(help="Seconds between runs of the maintenance function (TTL, quotas, retention); 0: never.")
    ] = MAINTENANCE_INTERVAL_S,
    auth: Annotated[bool, typer.Option("--auth", help="Require authentication and enforce authorization.")] = False,
    token_secret_key: Annotated[
        str | None, typer.Option(help="HS256 secret key file tokens are verified with (--auth; default: "
                                      f"generated once at {LOCAL_TOKEN_KEY}).")
    ] = None,
    superuser_role: Annotated[
        list[str], typer.Option(help="Superuser role (repeatable; --auth).")
    ] = [DEFAULT_SUPERUSER_ROLE],  # noqa: B006 - typer reads the default, nothing mutates it
    aws_limits: Annotated[
        str, typer.Option(help="Enforce AWS's service limits (Kinesis, DynamoDB, S3, Lambda, API Gateway): on|off.")
    ] = "on",
    aws_latency: Annotated[bool, typer.Option("--aws-latency", help="Add modeled AWS latency per operation.")] = False,
    lambda_concurrency: Annotated[
        int, typer.Option(help="Lambda concurrency limit with --aws-limits on (a new account's quota by default).")
    ] = DEFAULT_LAMBDA_CONCURRENCY,
    journal_fan_out: Annotated[bool, typer.Option(
        "--journal-fan-out/--no-journal-fan-out",
        help="The journal consumer reads the stream through enhanced fan-out (emulated: its own 2 MiB/s per shard, "
             "~70 ms push, not counted against the shared 5 GetRecords/s), as the stack deploys it.")
    ] = True,
    tail_reads: Annotated[str | None, typer.Option(
        help="Consumers read unsealed entries from the journal's tail: on|off (MAGNETAR_TAIL_READS for the "
             "functions; default: off with the fan-out journal consumer, on without, as the stack sets it).")
    ] = None,
    journal_batching_window: Annotated[int | None, typer.Option(
        min=0, max=MAX_JOURNAL_BATCHING_WINDOW_S,
        help="Seconds the journal mapping gathers a shard's records before invoking the journal consumer (the "
             "stack's journalBatchingWindow): fewer, larger seals, that much more end-to-end latency. "
             "Default: 0 with the fan-out journal consumer, 1 without.")] = None,
    pulsar_port: Annotated[int, typer.Option(
        help="Port of Pulsar's binary protocol (the official clients: pulsar://host:port); 0: off.")] = 6650,
) -> None:
    """Start the AWS emulator, the resources, the HTTP API, the journal consumer and the maintenance
    schedule; Ctrl-C stops all."""
    from magnetar.local.cluster import LocalCluster

    key_file = None
    if auth:
        key_file = token_secret_key or _local_token_key()
    cluster = LocalCluster(host=host, port=port, aws_port=aws_port, aws_endpoint=aws_endpoint,
                           maintenance_interval_s=maintenance_interval, auth=auth, token_secret_key=key_file,
                           superuser_roles=tuple(superuser_role),
                           fidelity=AwsFidelity(on_off("--aws-limits", aws_limits), aws_latency, lambda_concurrency),
                           journal_fan_out=journal_fan_out, journal_batching_window_s=journal_batching_window,
                           tail_reads=None if tail_reads is None else on_off("--tail-reads", tail_reads),
                           pulsar_port=pulsar_port or None)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with console.status("starting the local cluster..."):
            cluster.start()
        console.print(f"[green]Magnetar is up[/green]  HTTP API [bold]{cluster.url}[/bold]  AWS endpoint {cluster.endpoint}")
        console.print(f"  export {SERVICE_URL_ENV}={cluster.url}    (Ctrl-C to stop)")
        if cluster.pulsar_url:
            console.print(f"  Pulsar binary protocol [bold]{cluster.pulsar_url}[/bold]  (the official clients)")
        elif pulsar_port:
            console.print(f"  [yellow]Pulsar binary protocol off: port {pulsar_port} is in use[/yellow] (--pulsar-port)")
        if auth and key_file is not None:
            from magnetar.security.tokens import create_token, read_key_material

            token = create_token(superuser_role[0], secret_key=read_key_material(key_file))
            console.print(f"  authentication on: token secret key {key_file}, superuser role {superuser_role[0]}")
            console.print(f"  export MAGNETAR_AUTH_TOKEN={token}", soft_wrap=True)
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
        console.print("stopped")


def _local_token_key() -> str:
    """The local cluster's token key: generated on first use, then kept (tokens survive restarts)."""
    from magnetar.security.tokens import new_secret_key

    if not LOCAL_TOKEN_KEY.exists():
        LOCAL_TOKEN_KEY.parent.mkdir(parents=True, exist_ok=True)
        LOCAL_TOKEN_KEY.touch(mode=0o600)
        LOCAL_TOKEN_KEY.write_bytes(new_secret_key())
    return str(LOCAL_TOKEN_KEY)


@app.command()
def produce(
    topic: str,
    messages: Annotated[list[str], typer.Option("--messages", "-m", help="Message text (repeatable).")],
    num_produce: Annotated[int, typer.Option("--num-produce", "-n", help="Times to send each message.")] = 1,
    key: Annotated[str | None, typer.Option("--key", "-k", help="Partition key.")] = None,
    service_url: ServiceUrl = DEFAULT_URL,
    auth_plugin: AuthPlugin = None,
    auth_params: AuthParams = None,
) -> None:
    """Produce messages to a topic (pulsar-client produce)."""
    import magnetar

    client = magnetar.Client(service_url, authentication(auth_plugin, auth_params))
    try:
        producer = _call(client.create_producer, topic)
        sent = 0
        for _ in range(num_produce):
            for text in messages:
                _call(producer.send_async, text.encode(), None, partition_key=key)
                sent += 1
        _call(producer.flush)
        console.print(f"{sent} messages successfully produced")
    finally:
        client.close()


@app.command()
def consume(
    topic: str,
    subscription: Annotated[str, typer.Option("--subscription-name", "-s", help="Subscription name.")],
    num_messages: Annotated[int, typer.Option("--num-messages", "-n", help="Messages to consume (0: forever).")] = 1,
    subscription_type: Annotated[str, typer.Option("--subscription-type", "-t")] = "Exclusive",
    position: Annotated[str, typer.Option("--subscription-position", "-p", help="Latest or Earliest.")] = "Latest",
    timeout_s: Annotated[int, typer.Option("--timeout", help="Give up after this many seconds without a message.")] = 30,
    service_url: ServiceUrl = DEFAULT_URL,
    auth_plugin: AuthPlugin = None,
    auth_params: AuthParams = None,
) -> None:
    """Consume messages from a topic (pulsar-client consume)."""
    import magnetar

    try:
        ctype = {t.value: t for t in magnetar.ConsumerType}[subscription_type.replace("KeyShared", "Key_Shared")]
        initial = magnetar.InitialPosition[position]
    except KeyError:
        _fail(f"unknown subscription type or position: {subscription_type}, {position}")
    client = magnetar.Client(service_url, authentication(auth_plugin, auth_params))
    try:
        consumer = _call(client.subscribe, topic, subscription, consumer_type=ctype, initial_position=initial)
        count = 0
        while num_messages == 0 or count < num_messages:
            try:
                msg = consumer.receive(timeout_millis=timeout_s * 1000)
            except magnetar.exceptions.Timeout:
                _fail(f"no message within {timeout_s}s ({count} consumed)")
            console.print(f"----- got message -----\nkey:[{msg.partition_key()}], properties:{msg.properties()}, "
                          f"content:{msg.data().decode(errors='replace')}")
            consumer.acknowledge(msg)
            count += 1
        console.print(f"{count} messages successfully consumed")
    finally:
        client.close()


def _admin(service_url: str, auth_plugin: str | None = None, auth_params: str | None = None) -> AdminClient:
    """An admin client with the command's credentials (--auth-plugin/--auth-params, or the environment)."""
    return admin_client(service_url, auth_plugin, auth_params)


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


@namespaces_app.command("list")
def namespaces_list(tenant: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                    auth_params: AuthParams = None) -> None:
    _print_list("Namespaces", _call(_admin(service_url, auth_plugin, auth_params).namespaces, tenant))


@namespaces_app.command("create")
def namespaces_create(namespace: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                      auth_params: AuthParams = None) -> None:
    _call(_admin(service_url, auth_plugin, auth_params).create_namespace, namespace)
    console.print(f"created namespace {namespace}")


@topics_app.command("list")
def topics_list(namespace: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                auth_params: AuthParams = None) -> None:
    _print_list("Topics", _call(_admin(service_url, auth_plugin, auth_params).topics, namespace))


@topics_app.command("create")
def topics_create(topic: str, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                  auth_params: AuthParams = None) -> None:
    _call(_admin(service_url, auth_plugin, auth_params).create_topic, topic)
    console.print(f"created topic {topic}")


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


def main() -> None:  # pragma: no cover - console entry point
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    app()


if __name__ == "__main__":
    main()
