"""`magnetar verify`: crash consistency under randomized workloads and injected crashes."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from magnetar.cli.common import AuthParams, AuthPlugin, authentication, on_off
from magnetar.cli.errors import fail

console = Console()


def verify_command(
    runs: Annotated[int | None, typer.Option(
        "--runs", "-n", min=1, help="Randomized runs (default 20; 3 with --clusters).")] = None,
    seed: Annotated[int, typer.Option("--seed", "-s", help="Seed: the same seed plans the same runs.")] = 1,
    crash_points: Annotated[str | None, typer.Option(
        "--crash-points", help="'all' (the default), 'none' or a comma list. In-process only: not with --clusters.")] = None,
    delay_points: Annotated[str | None, typer.Option(
        "--delay-points", help="Stall steps past every deadline and grace period: 'all', 'none' (the default) or a "
                               "comma list. In-process only: not with --clusters.")] = None,
    clusters: Annotated[int | None, typer.Option(
        "--clusters", min=2, max=3,
        help="Verify geo-replication instead: each run starts a local instance of 2 or 3 clusters (a process each) "
             "with the replicator's crash points armed in them, producers in every cluster and an outage of one; "
             "checks every acknowledged message is stored once in every cluster, in each producer's order, with "
             "replicated_from set on the copies, and that a replicated subscription skips nothing. Not with the "
             "in-process options (--crash-points, --delay-points, --auth-plugin, --auth-params).")] = None,
    seconds: Annotated[float, typer.Option(
        "--seconds", min=2, max=60, help="With --clusters: how long the producers publish in each run.")] = 8.0,
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
    maintenance function (retention) runs over each run's topic every 0.5 s. Delay points stall a
    step (before/after the journal write, the seal commit, cursor writes) longer than the run's
    write deadline and hole grace, which the run shortens to 0.5 s and 1.5 s."""
    if clusters is not None:
        given = [name for name, value in (("--crash-points", crash_points), ("--delay-points", delay_points),
                                          ("--auth-plugin", auth_plugin), ("--auth-params", auth_params)) if value]
        if given:
            raise typer.BadParameter(f"--clusters runs the clusters in processes of their own: not with {', '.join(given)}")
        _verify_geo(clusters, 3 if runs is None else runs, seed, seconds, on_off("--aws-limits", aws_limits), json_out)
        return
    runs = 20 if runs is None else runs
    crash_points = crash_points or "all"
    delay_points = delay_points or "none"
    credentials = authentication(auth_plugin, auth_params)
    from magnetar.local.cluster import LocalCluster, free_port
    from magnetar.local.fidelity import AwsFidelity
    from magnetar.verify.runner import CRASH_POINTS, DELAY_POINTS, Verifier

    allowed = _points(crash_points, CRASH_POINTS, "crash")
    delays = _points(delay_points, DELAY_POINTS, "delay")
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
                if json_out:  # the figures so far survive an interrupted long run
                    json_out.parent.mkdir(parents=True, exist_ok=True)
                    json_out.write_text(json.dumps(summary.as_dict() | {
                        "seed": seed, "partial": True, "seconds": round(time.monotonic() - started, 1)}, indent=2))

            summary = Verifier(cluster.url, authentication=credentials).run_all(runs, seed, allowed, on_run, delays)
    result = summary.as_dict() | {"seed": seed, "crash_points_allowed": list(allowed),
                                  "delay_points_allowed": list(delays),
                                  "seconds": round(time.monotonic() - started, 1)} | _provenance()
    table = Table(title=f"magnetar verify: {runs} runs, seed {seed}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key in ("runs", "acked", "delivered", "lost", "duplicated", "stored_twice_after_retry",
                "order_violations", "cursor_backwards", "missing_objects", "compaction_violations", "schema_violations",
                "function_violations", "function_repeats", "trimmed_segments",
                "seconds"):
        table.add_row(key.replace("_", " "), f"{result[key]:,}" if isinstance(result[key], int) else str(result[key]))
    for name in allowed:
        table.add_row(f"fired: {name}", str(result["crash_points_fired"].get(name, 0)))
    for name in delays:
        table.add_row(f"delayed: {name}", str(result["delay_points_fired"].get(name, 0)))
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
    if not result["acked"]:
        fail("nothing was acknowledged in the runs: nothing was verified")
    console.print("[green]no violations[/green]")


def _provenance() -> dict[str, str]:
    """What a results file records of the run: the command line and when it ended (UTC)."""
    return {"command": " ".join(["magnetar", *sys.argv[1:]]),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _verify_geo(clusters: int, runs: int, seed: int, seconds: float, aws_limits: bool, json_out: Path | None) -> None:
    from magnetar.verify.geo import GeoRun, GeoVerifier, summarize

    logging.getLogger("magnetar.local.esm").setLevel(logging.ERROR)
    started = time.monotonic()
    command = " ".join(["magnetar", *sys.argv[1:]])
    done: list[GeoRun] = []

    def on_run(run: GeoRun) -> None:
        done.append(run)
        r = run.as_dict()
        colour = "green" if run.ok else "red"
        console.print(f"run {r['run']} (seed {r['seed']}): [{colour}]{r['verdict']}[/{colour}]  acked {r['acked']:,}  "
                      f"stored {r['stored']}  fired {r['crash_points_fired']}  outage {r['outage']['cluster']} "
                      f"{r['outage']['seconds']}s  drain {r['drain_seconds']}s  {r['seconds']}s")
        if json_out:  # the runs so far survive an interrupted long run
            _write(json_out, summarize(done) | {"command": command, "seed": seed, "clusters": clusters,
                                                "partial": True, "seconds": round(time.monotonic() - started, 1)})

    results = GeoVerifier(clusters, seconds, aws_limits, log=lambda line: console.log(line)).run_all(runs, seed, on_run)
    result = summarize(results) | {"seed": seed, "clusters": clusters,
                                   "seconds": round(time.monotonic() - started, 1)} | _provenance()
    table = Table(title=f"magnetar verify --clusters {clusters}: {runs} runs, seed {seed}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key in ("runs", "ok_runs", "acked", "lost", "duplicated", "order_violations", "replicated_from_violations",
                "replicated_subscription_skips", "seconds"):
        table.add_row(key.replace("_", " "), f"{result[key]:,}" if isinstance(result[key], int) else str(result[key]))
    for name, count in sorted(result["crash_points_fired"].items()):
        table.add_row(f"fired: {name}", str(count))
    console.print(table)
    for error in result["errors"]:
        console.print(f"[yellow]workload error:[/yellow] {error}")
    for run in result["per_run"]:
        for sample in run["violation_samples"]:
            console.print(f"[red]violation:[/red] run {run['run']}: {sample}")
    if json_out:
        _write(json_out, result)
    if result["violations"] or result["errors"]:
        raise typer.Exit(1)
    if not result["acked"]:
        fail("nothing was acknowledged in the runs: nothing was verified")
    console.print("[green]no violations[/green]")


def _write(path: Path, result: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2))


def _points(option: str, known: tuple[str, ...], kind: str) -> tuple[str, ...]:
    """'all', 'none' or a comma list of known point names."""
    if option == "all":
        return known
    if option == "none":
        return ()
    chosen = tuple(p.strip() for p in option.split(",") if p.strip())
    unknown = [p for p in chosen if p not in known]
    if unknown:
        raise typer.BadParameter(f"unknown {kind} points {unknown}; known: {', '.join(known)}")
    return chosen
