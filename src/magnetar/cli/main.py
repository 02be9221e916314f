"""`magnetar`: local cluster, produce/consume (pulsar-client's verbs); admin (pulsar-admin's) in `cli.admin`."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

from magnetar.cli.admin import admin_app
from magnetar.cli.common import (
    DEFAULT_URL,
    SERVICE_URL_ENV,
    AuthParams,
    AuthPlugin,
    ServiceUrl,
    authentication,
    call,
    client,
    on_off,
)
from magnetar.cli.cost import cost_command
from magnetar.cli.errors import CliGroup, fail
from magnetar.cli.functions import functions_app
from magnetar.cli.instance import outage_command
from magnetar.cli.perf import perf_app
from magnetar.cli.spark import spark_app
from magnetar.cli.tokens import tokens_app
from magnetar.cli.verify import verify_command
from magnetar.config import (
    CLUSTER_NAME,
    DEFAULT_SUPERUSER_ROLE,
    LOCAL_RESOURCES,
    LOCAL_SHARD_COUNT,
    MAINTENANCE_INTERVAL_S,
    MAX_JOURNAL_BATCHING_WINDOW_S,
    MAX_LOCAL_SHARD_COUNT,
    ResourceNames,
)
from magnetar.core.clusters import valid_cluster_name
from magnetar.core.ledger.pacing import DEFAULT_SEAL_LATENCY_MS, MAX_SEAL_LATENCY_MS
from magnetar.local.fidelity import DEFAULT_LAMBDA_CONCURRENCY, GLOBAL_TABLE_REPLICATION_MS, AwsFidelity
from magnetar.local.fidelity import inter_region_rtt_ms as inter_region_rtt_ms_of

if TYPE_CHECKING:
    from magnetar.local.cluster import LocalCluster

console = Console()
# Ctrl-C's limit: the parts' own bounded joins add up to ~30 s at worst
STOP_DEADLINE_S = float(os.environ.get("MAGNETAR_STOP_DEADLINE_S", "40"))
LOCAL_TOKEN_KEY = Path.home() / ".magnetar" / "local-token-secret.key"
T = TypeVar("T")

app = typer.Typer(help="Magnetar: Apache Pulsar's messaging model on AWS serverless.", no_args_is_help=True,
                  cls=CliGroup)
local_app = typer.Typer(help="Run Magnetar on this machine.", no_args_is_help=True)
app.add_typer(local_app, name="local")
app.add_typer(admin_app, name="admin")
app.add_typer(perf_app, name="perf")
app.add_typer(tokens_app, name="tokens")
app.add_typer(spark_app, name="spark")
app.add_typer(functions_app, name="functions")
app.command("verify")(verify_command)
app.command("cost")(cost_command)
local_app.command("outage")(outage_command)


_fail = fail


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
    metrics_role: Annotated[
        list[str] | None, typer.Option(help="A role that may scrape GET /metrics besides the superusers (repeatable; --auth).")
    ] = None,
    topic_level_metrics: Annotated[bool | None, typer.Option(
        "--topic-level-metrics/--namespace-level-metrics",
        help="GET /metrics reports each topic and subscription (Pulsar's exposeTopicLevelMetricsInPrometheus) or "
             "each namespace (MAGNETAR_TOPIC_LEVEL_METRICS; default: namespace level); ?topics= overrides it per scrape.")
    ] = None,
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
    seal_latency_ms: Annotated[int | None, typer.Option(
        min=0, max=MAX_SEAL_LATENCY_MS,
        help="How long the journal consumer may hold a busy shard's small batch before sealing it, in ms (the "
             f"stack's sealLatencyMs; default {DEFAULT_SEAL_LATENCY_MS}): seals follow the load. 0: seal every batch at once.")
    ] = None,
    journal_shards: Annotated[int, typer.Option(
        min=1, max=MAX_LOCAL_SHARD_COUNT, help="Shards of the journal stream (each takes 1 MiB/s or 1,000 records/s in).")
    ] = LOCAL_SHARD_COUNT,
    pulsar_port: Annotated[int, typer.Option(
        help="Port of Pulsar's binary protocol (the official clients: pulsar://host:port); 0: off.")] = 6650,
    pulsar_tls_port: Annotated[int | None, typer.Option(
        help="Also serve the binary protocol over TLS (pulsar+ssl://host:port) on this port (6651 as Pulsar), "
             "with --pulsar-tls-cert and --pulsar-tls-key (PEM). On AWS the load balancer terminates TLS.")] = None,
    pulsar_tls_cert: Annotated[Path | None, typer.Option(help="PEM certificate chain for --pulsar-tls-port.")] = None,
    pulsar_tls_key: Annotated[Path | None, typer.Option(help="PEM private key for --pulsar-tls-port.")] = None,
    cluster_name: Annotated[str, typer.Option(
        help="This cluster's name in the instance (Pulsar's clusterName, MAGNETAR_CLUSTER_NAME): registered with "
             "its URLs at start and allowed to tenant public.")] = CLUSTER_NAME,
    clusters: Annotated[str | None, typer.Option(
        help="Run an instance of several clusters (comma-separated names, e.g. east,west): each in a process and "
             "a region of its own, on consecutive ports from --port and --pulsar-port, sharing one configuration "
             "store.")] = None,
    instance_dir: Annotated[Path | None, typer.Option(hidden=True, help="The instance this cluster is part of.")] = None,
    logs_dir: Annotated[Path | None, typer.Option(
        help="Where the functions' logs go (their stdout: log lines and EMF metric lines), one file per function. "
             "Default: <temp dir>/magnetar-<port>/logs.")] = None,
    tracing: Annotated[bool, typer.Option(
        "--tracing", help="Trace the functions with X-Ray (MAGNETAR_TRACING=on): segments go to the X-Ray daemon at "
                          "AWS_XRAY_DAEMON_ADDRESS (127.0.0.1:2000); off by default, as no daemon runs locally.")
    ] = False,
    config_replication_delay_ms: Annotated[int, typer.Option(
        min=0, max=600_000,
        help="With --clusters: how long a configuration change (tenants, namespaces and their policies, topic "
             "listings, schemas) made at the configuration store's home replica, in the first cluster's region, "
             "takes to reach the other clusters' replicas, in ms (a DynamoDB global table's is about a second). "
             "A cluster reads its own replica only while the home region is out of its reach.")
    ] = GLOBAL_TABLE_REPLICATION_MS,
    inter_region_rtt_ms: Annotated[float | None, typer.Option(
        min=0, help="With --clusters: the round trip added to each request a cluster's replicator makes to another "
                    "(the regions' distance; the clusters share this machine), in ms. Default: 75 with "
                    "--aws-latency, else 0.")] = None,
) -> None:
    """Start the AWS emulator, the resources, the HTTP API, the journal consumer and the maintenance
    schedule; Ctrl-C stops all."""
    from magnetar.local.cluster import LocalCluster

    if pulsar_tls_port is not None and not (pulsar_tls_cert and pulsar_tls_key):
        _fail("--pulsar-tls-port needs --pulsar-tls-cert and --pulsar-tls-key")
    if not valid_cluster_name(cluster_name):
        _fail(f"--cluster-name {cluster_name!r}: a cluster name is letters, digits and _ - = : . only")
    key_file = None
    if auth:
        key_file = token_secret_key or _local_token_key()
    if clusters is not None:
        from magnetar.cli.instance import run_instance

        forwarded = [*(["--auth", "--token-secret-key", str(key_file)] if auth else []),
                     *[a for role in superuser_role for a in ("--superuser-role", role)],
                     *[a for role in metrics_role or [] for a in ("--metrics-role", role)],
                     *([] if topic_level_metrics is None else
                       ["--topic-level-metrics" if topic_level_metrics else "--namespace-level-metrics"]),
                     "--maintenance-interval", str(maintenance_interval), "--aws-limits", aws_limits,
                     *(["--aws-latency"] if aws_latency else []), "--lambda-concurrency", str(lambda_concurrency),
                     "--journal-fan-out" if journal_fan_out else "--no-journal-fan-out",
                     *(["--journal-batching-window", str(journal_batching_window)]
                       if journal_batching_window is not None else []),
                     *(["--seal-latency-ms", str(seal_latency_ms)] if seal_latency_ms is not None else []),
                     "--journal-shards", str(journal_shards), *(["--tail-reads", tail_reads] if tail_reads else []),
                     *(["--inter-region-rtt-ms", str(inter_region_rtt_ms)] if inter_region_rtt_ms is not None else [])]
        run_instance([c.strip() for c in clusters.split(",") if c.strip()], host, port, pulsar_port, aws_port,
                     aws_endpoint, AwsFidelity(on_off("--aws-limits", aws_limits), aws_latency, lambda_concurrency),
                     forwarded, config_replication_delay_ms)
        return
    names, network = LOCAL_RESOURCES, None
    if instance_dir is not None:  # a cluster of `local up --clusters`
        from magnetar.local.network import LocalNetwork

        network = LocalNetwork.read(instance_dir)
        base = ResourceNames.from_env()
        names = ResourceNames(base.table, f"{base.bucket}-{cluster_name}", base.stream, base.config_table,
                              base.config_region)
    cluster = LocalCluster(names=names, network=network, host=host, port=port, aws_port=aws_port, aws_endpoint=aws_endpoint,
                           maintenance_interval_s=maintenance_interval, auth=auth, token_secret_key=key_file,
                           superuser_roles=tuple(superuser_role), metrics_roles=tuple(metrics_role or ()),
                           topic_level_metrics=topic_level_metrics,
                           fidelity=AwsFidelity(on_off("--aws-limits", aws_limits), aws_latency, lambda_concurrency),
                           journal_fan_out=journal_fan_out, journal_batching_window_s=journal_batching_window,
                           seal_latency_ms=seal_latency_ms, journal_shards=journal_shards,
                           tail_reads=None if tail_reads is None else on_off("--tail-reads", tail_reads),
                           pulsar_port=pulsar_port or None, pulsar_tls_port=pulsar_tls_port,
                           pulsar_tls_cert_file=str(pulsar_tls_cert or ""), pulsar_tls_key_file=str(pulsar_tls_key or ""),
                           cluster_name=cluster_name, logs_dir=str(logs_dir) if logs_dir else None,
                           inter_region_rtt_ms=inter_region_rtt_ms_of(
                               AwsFidelity(on_off("--aws-limits", aws_limits), aws_latency), inter_region_rtt_ms))
    if tracing:
        from magnetar.adapters.aws.telemetry import ENV_TRACING

        os.environ[ENV_TRACING] = "on"
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # Ctrl-C stops it even when started as a background job of a script, whose shell hands it
    # SIGINT ignored (Python then keeps ignoring it)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with console.status("starting the local cluster..."):
            cluster.start()
    except BaseException as exc:  # what did start stops (a port in use: nothing did), the error is said
        cluster.stop()
        if isinstance(exc, KeyboardInterrupt):
            console.print("stopped")
            return
        raise
    try:
        console.print(f"[green]Magnetar is up[/green]  cluster [bold]{cluster.cluster_name}[/bold]  "
                      f"HTTP API [bold]{cluster.url}[/bold]  AWS endpoint {cluster.endpoint}")
        console.print(f"  export {SERVICE_URL_ENV}={cluster.url}    (Ctrl-C to stop)")
        if cluster.function_logs is not None:
            console.print(f"  function logs (and EMF metrics) in {cluster.function_logs.directory}")
        if cluster.pulsar_url:
            console.print(f"  Pulsar binary protocol [bold]{cluster.pulsar_url}[/bold]  (the official clients)")
            if cluster.pulsar_tls_url:
                console.print(f"  Pulsar binary protocol over TLS [bold]{cluster.pulsar_tls_url}[/bold]")
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
        console.print("stopping...")
        _end_if_stuck(cluster, STOP_DEADLINE_S)
        cluster.stop()
        console.print("stopped")


def _end_if_stuck(cluster: LocalCluster, deadline_s: float) -> None:
    """Ctrl-C ends the process: a stop that hangs (in the cluster's stop, or at the interpreter's
    exit, which joins worker threads) is cut after `deadline_s`, with every thread's stack on
    stderr (what hung), the emulator killed and exit status 1."""

    def watch() -> None:
        time.sleep(deadline_s)
        console.print(f"[red]still stopping after {deadline_s:.0f} s; every thread's stack follows[/red]")
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        if cluster.emulator is not None:
            cluster.emulator.kill()
        os._exit(1)

    threading.Thread(target=watch, name="stop-deadline", daemon=True).start()


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
    sdk = client(service_url, authentication(auth_plugin, auth_params))
    try:
        producer = _call(sdk.create_producer, topic)
        sent = 0
        for _ in range(num_produce):
            for text in messages:
                _call(producer.send_async, text.encode(), None, partition_key=key)
                sent += 1
        _call(producer.flush)
        console.print(f"{sent} messages successfully produced")
    finally:
        sdk.close()


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
    sdk = client(service_url, authentication(auth_plugin, auth_params))
    try:
        consumer = _call(sdk.subscribe, topic, subscription, consumer_type=ctype, initial_position=initial)
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
        sdk.close()


def main() -> None:  # pragma: no cover - console entry point
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    app()


if __name__ == "__main__":
    main()
