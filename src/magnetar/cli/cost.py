"""`magnetar cost --workload bench/workloads/X.yaml`: the modeled monthly AWS bill of a workload.

Prints Magnetar's bill by component and by step for both Kinesis capacity modes, the same workload
on SQS, Kinesis directly and Pulsar on EC2, and the headline: USD per million messages end to end
(produce, keep for the retention window, consume once per subscription). `--replicated-to N`
adds geo-replication to N remote clusters of an instance (magnetar.cost.replication; with
`--replicated-subscriptions R`, R replicated subscriptions' snapshots), `--function` a Pulsar
Function consuming every message (magnetar.cost.functions: `--function-batch`, `--function-ms`,
`--function-memory-mb`, `--processing-guarantees`, `--function-parallelism`,
`--function-state-writes`). `--json PATH`
also writes everything as JSON (`--json -` prints only the JSON). Runs standalone too:
`python -m magnetar.cli.cost --workload bench/workloads/baseline-1kb-batch100.yaml`.

The cost model and the report (`magnetar.cli.cost_report`) are imported when the command runs: a
quarter of a second that every other `magnetar` command would otherwise pay at start.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from magnetar.cli.errors import fail


def cost_command(
    workload: Annotated[Path, typer.Option("--workload", "-w", help="Workload YAML file (see bench/workloads/).")],
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the whole result as JSON to this file ('-': print only JSON).")
    ] = None,
    prices: Annotated[bool, typer.Option("--prices", help="Also print the price table with its sources.")] = False,
    replicated_to: Annotated[int, typer.Option(
        "--replicated-to", min=0,
        help="Also price geo-replication of every message to this many remote clusters of the instance.")] = 0,
    replicated_subscriptions: Annotated[int | None, typer.Option(
        "--replicated-subscriptions", min=0,
        help="With --replicated-to: how many of the subscriptions replicate their state (default: the "
             "workload's replicated_subscriptions).")] = None,
    function: Annotated[bool, typer.Option(
        "--function", help="Also price a Pulsar Function consuming every message of the workload.")] = False,
    function_batch: Annotated[float | None, typer.Option(
        "--function-batch", min=1,
        help="With --function: input messages per invocation (default: what a seal brings, at most 100).")] = None,
    function_ms: Annotated[float | None, typer.Option(
        "--function-ms", help="With --function: mean billed ms of one invocation of the function (default 50).")] = None,
    function_memory_mb: Annotated[int | None, typer.Option(
        "--function-memory-mb", help="With --function: the function's Lambda memory (default 1024).")] = None,
    processing_guarantees: Annotated[str | None, typer.Option(
        "--processing-guarantees",
        help="With --function: ATLEAST_ONCE (default), ATMOST_ONCE or EFFECTIVELY_ONCE.")] = None,
    function_parallelism: Annotated[int | None, typer.Option(
        "--function-parallelism", help="With --function: its dispatch slots (default 1).")] = None,
    function_state_writes: Annotated[float | None, typer.Option(
        "--function-state-writes",
        help="With --function: put_state / incr_counter calls per message (default 0).")] = None,
) -> None:
    """Model the monthly AWS bill of a workload and compare it with SQS, Kinesis and Pulsar on EC2."""
    from magnetar.cli.cost_report import (
        console,
        render,
        render_function,
        render_prices,
        render_replication,
        result_dict,
    )
    from magnetar.cost import (
        WorkloadError,
        compare,
        function_cost,
        load_workload,
        monthly_cost,
        replication_cost,
    )
    from magnetar.cost.functions import DEFAULT_FUNCTION_MEMORY_MB, DEFAULT_FUNCTION_MS
    from magnetar.functions.config import ProcessingGuarantees

    function_options = {"--function-batch": function_batch, "--function-ms": function_ms,
                        "--function-memory-mb": function_memory_mb, "--processing-guarantees": processing_guarantees,
                        "--function-parallelism": function_parallelism,
                        "--function-state-writes": function_state_writes}
    stray = [name for name, value in function_options.items() if value is not None]
    if stray and not function:
        fail(f"{', '.join(stray)} describe(s) the function of --function: add --function")
    if replicated_subscriptions is not None and not replicated_to:
        fail("--replicated-subscriptions prices the snapshots of geo-replication: add --replicated-to N")
    try:
        loaded = load_workload(workload)
    except WorkloadError as exc:
        fail(str(exc))
    report = monthly_cost(loaded)
    comparison = compare(loaded, report)
    try:
        replication = replication_cost(loaded, replicated_to, replicated_subscriptions=replicated_subscriptions) \
            if replicated_to else None
        priced_function = function_cost(
            loaded, batch_messages=function_batch,
            function_ms=DEFAULT_FUNCTION_MS if function_ms is None else function_ms,
            function_memory_mb=DEFAULT_FUNCTION_MEMORY_MB if function_memory_mb is None else function_memory_mb,
            guarantee=processing_guarantees or ProcessingGuarantees.ATLEAST_ONCE.value,
            parallelism=1 if function_parallelism is None else function_parallelism,
            state_writes_per_message=function_state_writes or 0.0,
        ) if function else None
    except ValueError as exc:
        fail(str(exc))
    result = result_dict(report, comparison, replication, priced_function)
    if json_path is not None and str(json_path) == "-":
        typer.echo(json.dumps(result, indent=2))
        return
    render(report, comparison, console)
    if replication is not None:
        render_replication(report, replication, console)
    if priced_function is not None:
        render_function(report, priced_function, console)
    if prices:
        render_prices(console)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        console.print(f"JSON written to {json_path}")


app = typer.Typer(add_completion=False, help="Magnetar's modeled AWS bill for a workload.")
app.command()(cost_command)

if __name__ == "__main__":
    app()
