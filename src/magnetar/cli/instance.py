"""`magnetar local up --clusters a,b` (a local instance of several clusters) and
`magnetar local outage NAME --on|--off` (take a cluster off the network, bring it back)."""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import httpx
import typer
from rich.console import Console

from magnetar.cli.common import DEFAULT_URL, SERVICE_URL_ENV
from magnetar.cli.errors import fail
from magnetar.local.fidelity import GLOBAL_TABLE_REPLICATION_MS, AwsFidelity

console = Console()


def run_instance(clusters: list[str], host: str, port: int, pulsar_port: int, aws_port: int,
                 aws_endpoint: str | None, fidelity: AwsFidelity, cluster_args: list[str],
                 config_replication_delay_ms: int = GLOBAL_TABLE_REPLICATION_MS) -> None:
    from magnetar.local.instance import LocalInstance, check_cluster_names

    try:
        check_cluster_names(clusters)
    except ValueError as exc:
        fail(str(exc))
    instance = LocalInstance(clusters, host, port, pulsar_port, aws_port, aws_endpoint, fidelity, cluster_args,
                             config_replication_delay_ms)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with console.status(f"starting the clusters {', '.join(clusters)}..."):
            instance.start()
        console.print(f"[green]Magnetar instance is up[/green]  {len(clusters)} clusters, AWS endpoint "
                      f"{instance.endpoint}, configuration store shared (home replica in "
                      f"{instance.processes[0].region}, {config_replication_delay_ms} ms to the other replicas)")
        for process in instance.processes:
            line = f"  cluster [bold]{process.name}[/bold] ({process.region})  HTTP API [bold]{process.url}[/bold]"
            if process.pulsar_url:
                line += f"  Pulsar [bold]{process.pulsar_url}[/bold]"
            console.print(line)
        first = instance.processes[0]
        console.print(f"  export {SERVICE_URL_ENV}={first.url}    (Ctrl-C to stop)")
        console.print(f"  an outage: magnetar local outage {first.name} --on   (--off brings it back)")
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        console.print("stopping...")
        instance.stop()
        console.print("stopped")


def outage_command(
    cluster: Annotated[str, typer.Argument(help="The cluster to take off the network or bring back.")],
    on: Annotated[bool, typer.Option("--on/--off", help="--on: off the network; --off: back on it.")] = True,
    service_url: Annotated[str, typer.Option(
        "--url", envvar=SERVICE_URL_ENV, help="Any cluster of the local instance.")] = DEFAULT_URL,
) -> None:
    """Stage an outage of a cluster of a local instance (`local up --clusters`): its ports refuse
    connections, replication to and from it fails and its region is cut off from the others (for
    the first cluster: the configuration store's home replica), until `--off`."""
    path = f"{service_url.rstrip('/')}/_magnetar/local/clusters/{cluster}/outage"
    try:
        response = httpx.request("POST" if on else "DELETE", path, timeout=10)
    except httpx.HTTPError as exc:
        fail(f"{service_url} unreachable ({exc}); name another cluster's URL with --url")
    if response.status_code >= 300:
        reason = response.json().get("reason", response.text) if response.content else response.status_code
        fail(str(reason))
    console.print(f"cluster {cluster} is {'off' if on else 'back on'} the network")
