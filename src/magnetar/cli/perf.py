"""`magnetar perf produce|consume|e2e` (modeled on pulsar-perf)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from magnetar.cli.common import AuthParams, AuthPlugin, authentication, call, checked_service_url
from magnetar.cli.errors import fail
from magnetar.client.producer import DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS
from magnetar.config import MAX_LOCAL_SHARD_COUNT
from magnetar.core.ledger.pacing import MAX_SEAL_LATENCY_MS

console = Console()
perf_app = typer.Typer(help="Measure throughput, latency and AWS cost (like pulsar-perf).", no_args_is_help=True)

ServiceUrl = Annotated[str | None, typer.Option(
    "--service-url", "-u", help="Broker URL; without it, perf starts its own local cluster.",
    callback=checked_service_url)]
Topic = Annotated[str, typer.Option("--topic", "-t", help="Topic (default: a new one).")]
Partitions = Annotated[int, typer.Option("--partitions", "-p", help="Partitions of the topic.")]
Producers = Annotated[int, typer.Option("--producers", help="Producers.")]
Consumers = Annotated[int, typer.Option("--consumers", help="Consumers.")]
SubType = Annotated[str, typer.Option("--subscription-type", help="Exclusive, Shared, Failover or Key_Shared.")]
Rate = Annotated[float, typer.Option("--rate", "-r", help="Messages/s over all producers; 0 = as fast as possible.")]
Size = Annotated[int, typer.Option("--size", "-s", help="Message size in bytes.")]
BatchMax = Annotated[int, typer.Option("--batch-max-messages", help="Messages per batch (one entry).")]
BatchDelay = Annotated[int, typer.Option("--batch-max-delay-ms", help="Longest a message waits for its batch.")]
Compression = Annotated[str, typer.Option("--compression", help="NONE, LZ4, ZLIB, ZSTD or SNAPPY.")]
Keys = Annotated[int, typer.Option("--keys", help="Messages carry one of this many keys (0: no keys).")]
NackFraction = Annotated[float, typer.Option("--nack-fraction", help="Share of messages consumers nack once.")]
Duration = Annotated[float, typer.Option("--duration", "-d", help="Seconds to produce (or consume).")]
JsonOut = Annotated[Path | None, typer.Option("--json", help="Write the full result to this file.")]
AwsEndpoint = Annotated[
    str | None, typer.Option("--aws-endpoint", help="Endpoint whose raw limits to measure (default: the local one).")
]
NoLimits = Annotated[bool, typer.Option("--no-limits", help="Skip measuring the emulator's raw limits.")]
ReceiveBatch = Annotated[int, typer.Option("--receive-batch", help="Consumer batch_receive size.")]
ReceiveWait = Annotated[int, typer.Option("--receive-wait-ms", help="Consumer batch_receive timeout.")]
AwsLatency = Annotated[bool, typer.Option(
    "--aws-latency", help="Also run on a cluster with modeled AWS latency (local up --aws-latency) and report its "
                          "publish and end-to-end percentiles beside the emulator's; with --service-url: that cluster "
                          "runs with --aws-latency.")]
Delivery = Annotated[str, typer.Option(
    "--delivery", help="Consumers: auto (long polls on persistent topics), poll, or push (WebSocket).")]
DrainTimeout = Annotated[float, typer.Option(
    "--drain-timeout", help="e2e: seconds to wait after producing for every acknowledged message to arrive.")]
Protocol = Annotated[str, typer.Option(
    "--protocol", help="magnetar (the SDK) or pulsar: the official pulsar-client's producers and consumers through the "
                       "binary protocol proxy, measured next to the SDK's in the same run.")]
PulsarUrl = Annotated[str | None, typer.Option(
    "--pulsar-url", help="With --service-url and --protocol pulsar: the proxy's pulsar:// URL.")]
CheckDelivery = Annotated[bool, typer.Option(
    "--check-delivery", help="Tag every message with its own sequence and check that each acknowledged one arrives "
                             "exactly once (lost, duplicated).")]
AwsLimits = Annotated[str, typer.Option("--aws-limits", help="The local cluster enforces AWS's service limits: on|off.")]
SealLatency = Annotated[int | None, typer.Option(
    "--seal-latency-ms", min=0, max=MAX_SEAL_LATENCY_MS,
    help="The local cluster's seal latency target in ms (local up --seal-latency-ms; default: the cluster's).")]
JournalShards = Annotated[int | None, typer.Option(
    "--journal-shards", min=1, max=MAX_LOCAL_SHARD_COUNT,
    help="Shards of the local cluster's journal stream (local up --journal-shards; default: the cluster's).")]
BatchingWindow = Annotated[int | None, typer.Option(
    "--journal-batching-window", min=0, max=300,
    help="The local cluster's journal batching window in seconds (local up --journal-batching-window).")]

# What a serverless log on S3 Standard reaches on AWS (docs/benchmarks.md): WarpStream's default
# configuration (https://docs.warpstream.com/warpstream/configuration/low-latency-clusters).
ANCHOR = "WarpStream on S3 Standard: p99 write 400-600 ms, p99 end to end < 1.5 s"


@contextlib.contextmanager
def _service(service_url: str | None, aws_endpoint: str | None, extra_args: list[str] | None = None,
             pulsar_url: str | None = None) -> Iterator[tuple[str, str | None, tuple[int, ...], str]]:
    """(service URL, AWS endpoint, the cluster's pids, the binary protocol proxy's URL)."""
    if service_url:
        yield service_url, aws_endpoint or os.environ.get("AWS_ENDPOINT_URL"), (), pulsar_url or ""
        return
    from magnetar.local.cluster import LocalUpProcess

    console.print(f"starting a local cluster for the run (magnetar local up {' '.join(extra_args or [])})...")
    with LocalUpProcess(extra_args=extra_args) as local:
        yield local.url, local.aws_endpoint, (local.proc.pid,) if local.proc else (), local.pulsar_url or ""


MODELED_KEYS = ("publish_latency_ms", "e2e_latency_ms", "messages", "msgs_per_s", "seconds", "aws_requests_total")


def _run(mode: str, **options: Any) -> None:
    json_out = options.pop("json_out")
    aws_latency, aws_limits = options.pop("aws_latency"), options.pop("aws_limits")
    window = options.pop("journal_batching_window")
    seal_latency = options.pop("seal_latency_ms")
    shards = options.pop("journal_shards")
    if aws_limits not in ("on", "off"):
        raise typer.BadParameter("--aws-limits takes on or off")
    extra = ["--aws-limits", aws_limits]
    if window is not None:
        extra += ["--journal-batching-window", str(window)]
    if seal_latency is not None:
        extra += ["--seal-latency-ms", str(seal_latency)]
    if shards is not None:
        extra += ["--journal-shards", str(shards)]
    if aws_latency and not options["service_url"]:
        # the same workload twice: on the emulator as is, then with AWS's modeled latency
        result = _measure(mode, dict(options), extra)
        console.print("the same run with modeled AWS latency (local up --aws-latency)...")
        modeled = _measure(mode, dict(options, no_limits=True), [*extra, "--aws-latency"])
        result["modeled_aws"] = {k: modeled[k] for k in MODELED_KEYS} | {"anchor": ANCHOR}
    else:
        result = _measure(mode, options, extra)
        if aws_latency:  # the cluster at --service-url runs with --aws-latency: its figures are the modeled ones
            result["modeled_aws"] = {k: result[k] for k in MODELED_KEYS} | {"anchor": ANCHOR, "same_run": True}
    result["journal_batching_window_s"] = window  # None: the cluster's default (0 with fan-out)
    result["seal_latency_ms"] = seal_latency  # None: the cluster's default (ledger.pacing)
    result["journal_shards"] = shards  # None: the cluster's default
    _summary(result)
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2, default=str))
        console.print(f"wrote {json_out}")
    if not result.get("messages"):
        fail(empty_run(result))  # an empty run is not a measurement: one line, and the exit status says it


def empty_run(result: dict[str, Any]) -> str:
    """Why a run has no message to measure, in a line."""
    mode, topic = result["mode"], result["topic"]
    if mode != "consume" and not result.get("acked"):
        failed = f": {result['failed']:,} sends failed" if result.get("failed") else ""
        return f"no message was acknowledged to the producers of {topic} in the run{failed}"
    if mode == "consume":
        return (f"no message was delivered: {topic} had nothing to consume within the run (perf consume reads "
                "what is there: produce to it first, or run perf e2e)")
    return (f"no message was delivered in the run: {result['acked']:,} acknowledged to the producers of {topic}, "
            "none received (a journal batching window or seal latency longer than the run holds them back): "
            "run longer (--duration) or with a shorter window")


def _measure(mode: str, options: dict[str, Any], extra_args: list[str]) -> dict[str, Any]:
    from magnetar.perf.runner import PerfConfig

    aws_endpoint, no_limits = options.pop("aws_endpoint"), options.pop("no_limits")
    credentials = authentication(options.pop("auth_plugin"), options.pop("auth_params"))
    service = _service(options.pop("service_url"), aws_endpoint, extra_args, options.pop("pulsar_url"))
    with service as (url, endpoint, pids, pulsar_url):
        try:
            config = PerfConfig(mode=mode, service_url=url, watch_pids=pids, aws_endpoint=endpoint or "",
                                pulsar_url=pulsar_url, **options)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        baseline = None
        if config.protocol == "pulsar":  # the SDK's long polls first, same load, same cluster: the figure to beat
            console.print("the SDK's run (long polls) first, then the official client's through the proxy...")
            baseline = _perf(PerfConfig(**dict(vars(config), protocol="magnetar", topic="")), credentials)
        result = _perf(config, credentials)
        result["config"] = dict(vars(config))
        if baseline is not None:
            result["sdk_baseline"] = {k: baseline[k] for k in (*MODELED_KEYS, "aws_requests",
                                                               "aws_requests_per_1000_msgs")}
            if baseline["aws_requests_per_1000_msgs"] and result["aws_requests_per_1000_msgs"]:
                result["requests_ratio_to_sdk"] = (result["aws_requests_per_1000_msgs"]
                                                   / baseline["aws_requests_per_1000_msgs"])
        if endpoint and not no_limits:
            from magnetar.perf.limits import measure_all

            with console.status("measuring the emulator's raw limits..."):
                segment_bytes = config.batch_max_messages * config.size * 10
                result["limit"] = measure_all(endpoint, config.size, max(result["messages"], 1000) * config.size,
                                              segment_bytes)
            result["ratio_to_limit"] = result["msgs_per_s"] / result["limit"]["kinesis_put_records"]["per_s"]
        result["cost_usd_per_million_msgs"] = _cost(result, config)
        result["when"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return result


def _perf(config: Any, credentials: Any) -> dict[str, Any]:
    from magnetar.perf.runner import PerfRun

    with Live(console=console, refresh_per_second=2, transient=True) as live:

        def tick(s: dict[str, float]) -> None:
            live.update(
                f"[bold]{config.mode} ({config.protocol})[/bold] {s['elapsed']:5.0f}s  sent {s['sent']:,}  "
                f"acked {s['acked']:,}  received {s['received']:,}  [green]{s['rate']:,.0f} msg/s[/green]  "
                f"{s['mb_per_s']:.2f} MB/s  p99 publish {s['publish_p99']:.0f} ms  e2e {s['e2e_p99']:.0f} ms"
            )

        return dict(call(PerfRun(config, tick, credentials).run))  # a refusal (401, 403): one line, exit 1


def _cost(result: dict[str, Any], config: Any) -> dict[str, Any] | None:
    """The run's measured cost per million messages; None when nothing was delivered in it (a
    journal batching window longer than the run: no cost per message to speak of)."""
    if result.get("messages", 0) <= 0 or result.get("seconds", 0) <= 0:
        return None
    try:
        from magnetar.cost import cost_of_measured_run
    except ImportError:
        return None
    lambdas = result.get("lambda", {})
    return dict(cost_of_measured_run(
        aws_requests=result["aws_requests"],
        messages=result["messages"],
        message_bytes=config.size,
        lambda_invocations={k: int(v["invocations"]) for k, v in lambdas.items()},
        lambda_ms={k: (v["duration_ms_total"] / v["invocations"] if v["invocations"] else 0.0) for k, v in lambdas.items()},
        seconds=result["seconds"],
        item_bytes=result.get("item_bytes") or None,  # the run's own items, when it could read them
    ))


def _summary(r: dict[str, Any]) -> None:
    table = Table(title=f"magnetar perf {r['mode']}: {r['topic']}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("messages", f"{r['messages']:,} (sent {r['sent']:,}, acked {r['acked']:,}, failed {r['failed']:,})")
    table.add_row("throughput", f"{r['msgs_per_s']:,.0f} msg/s   {r['mb_per_s']:.2f} MB/s")
    modeled = r.get("modeled_aws")
    for name in ("publish_latency_ms", "e2e_latency_ms"):
        for label, figures in (("emulator", r), ("modeled AWS", modeled)):
            if modeled and modeled.get("same_run") and label == "emulator":
                continue  # the cluster at --service-url runs with --aws-latency: only modeled figures
            q = figures[name] if figures else {}
            if q.get("count"):
                suffix = f", {label}" if modeled else ""
                table.add_row(name.replace("_ms", f"{suffix} (ms)"),
                              " / ".join(f"{k} {q[k]:.1f}" for k in ("p50", "p95", "p99", "p999", "max")))
    if modeled:
        table.add_row("anchor", str(modeled["anchor"]))
    if r.get("aws_requests_per_1000_msgs") is not None:
        table.add_row("AWS requests / 1,000 msgs", f"{r['aws_requests_per_1000_msgs']:.1f}")
    base = r.get("sdk_baseline")
    if base and base.get("aws_requests_per_1000_msgs"):
        table.add_row("the SDK's (long polls), same run", f"{base['aws_requests_per_1000_msgs']:.1f} requests / "
                      f"1,000 msgs, {base['msgs_per_s']:,.0f} msg/s (ratio {r.get('requests_ratio_to_sdk', 0):.2f})")
    _scale_rows(table, r)
    if "limit" in r:
        k = r["limit"]["kinesis_put_records"]
        table.add_row("raw limit (Kinesis PutRecords)", f"{k['per_s']:,.0f} msg/s   {k['mb_per_s']:.2f} MB/s")
        table.add_row("ratio to limit", f"{r['ratio_to_limit']:.2f}")
    cost = r.get("cost_usd_per_million_msgs")
    if cost:
        for variant, value in cost.items():
            if isinstance(value, int | float):
                table.add_row(f"USD / million msgs ({variant})", f"{value:.4f}")
    console.print(table)
    if r.get("aws_requests"):
        ops = Table(title="AWS requests by operation")
        ops.add_column("operation")
        ops.add_column("requests", justify="right")
        ops.add_column("per 1,000 msgs", justify="right")
        for op, n in sorted(r["aws_requests"].items(), key=lambda kv: -kv[1]):
            ops.add_row(op, f"{n:,}", f"{n / r['messages'] * 1000:.2f}" if r["messages"] else "-")
        console.print(ops)


def _scale_rows(table: Table, r: dict[str, Any]) -> None:
    """Delivery spread and exactly-once, refusals, retries and Lambda concurrency (scale runs)."""
    d = r.get("delivery", {})
    if d.get("per_consumer") and len(d["per_consumer"]) > 1:
        table.add_row("deliveries per consumer", f"min {d['min']:,} / median {d['median']:,} / max {d['max']:,} "
                                                 f"({d['consumers_receiving']} of {len(d['per_consumer'])} received)")
    if "duplicates" in d:
        table.add_row("exactly once", f"acked {d['acked']:,}, received {d['unique_received']:,}, lost {d['lost']:,}, "
                                      f"duplicated {d['duplicates']:,}")
    if r.get("drain_timed_out"):
        table.add_row("drain", "timed out: acknowledged messages still undelivered (--drain-timeout)")
    if "refusals" in r:
        table.add_row("AWS limits refused", ", ".join(f"{k} {v:,}" for k, v in r["refusals"].items()) or "nothing")
    if "declined_conditions" in r:
        table.add_row("conditional writes declined (races lost)",
                      ", ".join(f"{k} {v:,}" for k, v in r["declined_conditions"].items()) or "none")
    retried = {role: sum(n for code, n in codes.items() if code[0] in "45") for role, codes in r["http_statuses"].items()}
    table.add_row("HTTP 4xx/5xx seen by the SDK", ", ".join(f"{k} {v:,}" for k, v in retried.items()))
    if r.get("consumer_errors"):
        table.add_row("consumer errors (retries ran out)", f"{r['consumer_errors']:,}")
    c = r.get("lambda_concurrency", {})
    if c:
        table.add_row("Lambda concurrency", f"mean {c['mean_total']:.1f}" + (f", peak {c['peak']} of {c['limit']}, "
                                                                          f"throttles {c['throttles']}" if "peak" in c else ""))


def _command(mode: str):  # type: ignore[no-untyped-def]
    def command(
        service_url: ServiceUrl = None,
        topic: Topic = "",
        partitions: Partitions = 1,
        producers: Producers = 1,
        consumers: Consumers = 1,
        subscription_type: SubType = "Shared",
        rate: Rate = 0.0,
        size: Size = 1024,
        batch_max_messages: BatchMax = 100,
        batch_max_delay_ms: BatchDelay = DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS,
        compression: Compression = "NONE",
        duration: Duration = 10.0,
        json_out: JsonOut = None,
        aws_endpoint: AwsEndpoint = None,
        no_limits: NoLimits = False,
        receive_batch: ReceiveBatch = 1000,
        receive_wait_ms: ReceiveWait = 100,
        keys: Keys = 0,
        nack_fraction: NackFraction = 0.0,
        auth_plugin: AuthPlugin = None,
        auth_params: AuthParams = None,
        aws_latency: AwsLatency = False,
        aws_limits: AwsLimits = "on",
        check_delivery: CheckDelivery = False,
        drain_timeout: DrainTimeout = 60.0,
        delivery: Delivery = "auto",
        journal_batching_window: BatchingWindow = None,
        seal_latency_ms: SealLatency = None,
        journal_shards: JournalShards = None,
        protocol: Protocol = "magnetar",
        pulsar_url: PulsarUrl = None,
    ) -> None:
        _run(mode, service_url=service_url, topic=topic, partitions=partitions, producers=producers,
             consumers=consumers if mode != "produce" else 0, subscription_type=subscription_type, rate=rate,
             size=size, batch_max_messages=batch_max_messages, batch_max_delay_ms=batch_max_delay_ms,
             compression=compression, duration_s=duration, json_out=json_out, aws_endpoint=aws_endpoint,
             no_limits=no_limits, receive_batch=receive_batch, receive_wait_ms=receive_wait_ms, keys=keys,
             nack_fraction=nack_fraction, auth_plugin=auth_plugin, auth_params=auth_params,
             aws_latency=aws_latency, aws_limits=aws_limits, check_delivery=check_delivery,
             drain_timeout_s=drain_timeout, delivery=delivery, journal_batching_window=journal_batching_window,
             seal_latency_ms=seal_latency_ms, journal_shards=journal_shards, protocol=protocol, pulsar_url=pulsar_url)

    command.__doc__ = {
        "produce": "Produce at a rate (or flat out) and measure publish latency.",
        "consume": "Consume a topic and measure throughput and end-to-end latency.",
        "e2e": "Produce and consume together: throughput, latencies, AWS requests and cost.",
    }[mode]
    return command


for _mode in ("produce", "consume", "e2e"):
    perf_app.command(_mode)(_command(_mode))
