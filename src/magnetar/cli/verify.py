"""`magnetar verify`: crash consistency under randomized workloads and injected crashes."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from magnetar.cli.common import AuthParams, AuthPlugin, authentication, on_off

console = Console()


def verify_command(
    runs: Annotated[int, typer.Option("--runs", "-n", help="Randomized runs.")] = 20,
    seed: Annotated[int, typer.Option("--seed", "-s", help="Seed: the same seed plans the same runs.")] = 1,
    crash_points: Annotated[str, typer.Option("--crash-points", help="'all', 'none' or a comma list.")] = "all",
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the summary to this file.")] = None,
    aws_limits: Annotated[str, typer.Option(
        "--aws-limits", help="The in-process cluster enforces AWS's service limits: on|off (on, as `local up`).")] = "on",
    auth_plugin: AuthPlugin = None,
    auth_params: AuthParams = None,
) -> None:
    """Run randomized workloads while firing crash points; check nothing acknowledged is lost,
    nothing is handed out twice, orders hold, cursors never move back, every segment exists.

    The cluster runs in this process with the broker settings of the environment: with
    MAGNETAR_AUTH_ENABLED=true (and a token key, superuser roles) give the workload's credentials
    with --auth-params or MAGNETAR_AUTH_TOKEN. As `magnetar local up`, it enforces AWS's service
    limits, runs the journal consumer on enhanced fan-out and reads sealed entries only; the
    maintenance function (retention) runs over each run's topic every 0.5 s."""
    credentials = authentication(auth_plugin, auth_params)
    from magnetar.local.cluster import LocalCluster, free_port
    from magnetar.local.fidelity import AwsFidelity
    from magnetar.verify.runner import CRASH_POINTS, Verifier

    if crash_points == "all":
        allowed: tuple[str, ...] = CRASH_POINTS
    elif crash_points == "none":
        allowed = ()
    else:
        allowed = tuple(p.strip() for p in crash_points.split(",") if p.strip())
        unknown = [p for p in allowed if p not in CRASH_POINTS]
        if unknown:
            raise typer.BadParameter(f"unknown crash points {unknown}; known: {', '.join(CRASH_POINTS)}")
    logging.getLogger("magnetar.local.esm").setLevel(logging.ERROR)  # retries are the point here
    started = time.monotonic()
    fidelity = AwsFidelity(limits=on_off("--aws-limits", aws_limits))
    with LocalCluster(port=free_port(), aws_port=free_port(), poll_interval_s=0.2, fidelity=fidelity) as cluster:
        progress = Progress(TextColumn("verify"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("{task.fields[status]}"), console=console)
        with progress:
            task = progress.add_task("runs", total=runs, status="")

            def on_run(run: int, summary) -> None:  # type: ignore[no-untyped-def]
                progress.update(task, advance=1, status=f"acked {summary.acked:,}  violations {summary.violations}")

            summary = Verifier(cluster.url, authentication=credentials).run_all(runs, seed, allowed, on_run)
    result = summary.as_dict() | {"seed": seed, "crash_points_allowed": list(allowed),
                                  "seconds": round(time.monotonic() - started, 1)}
    table = Table(title=f"magnetar verify: {runs} runs, seed {seed}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key in ("runs", "acked", "delivered", "lost", "duplicated", "stored_twice_after_retry",
                "order_violations", "cursor_backwards", "missing_objects", "trimmed_segments", "seconds"):
        table.add_row(key.replace("_", " "), f"{result[key]:,}" if isinstance(result[key], int) else str(result[key]))
    for name in allowed:
        table.add_row(f"fired: {name}", str(result["crash_points_fired"].get(name, 0)))
    console.print(table)
    for error in result["errors"]:
        console.print(f"[yellow]workload error:[/yellow] {error}")
    for failure in result["failures"]:
        console.print(f"[red]violation:[/red] {json.dumps(failure)}")
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2))
    if summary.violations or result["errors"]:
        raise typer.Exit(1)
    console.print("[green]no violations[/green]")
