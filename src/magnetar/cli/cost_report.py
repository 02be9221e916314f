"""What `magnetar cost` prints and writes: the bill tables, the headline, the JSON result (the
command itself is `magnetar.cli.cost`, which loads this module only when it runs)."""

from __future__ import annotations

from typing import Any, Protocol

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from magnetar.cost import (
    COMPONENTS,
    PRICES_AS_OF,
    Comparison,
    CostReport,
    FunctionCost,
    ReplicationCost,
    price_table,
)

console = Console()

STEPS = ("produce", "seal", "consume", "storage", "fixed")


def _usd(value: float) -> str:
    return f"{value:,.2f}"


def _per_million(value: float) -> str:
    return f"{value:,.4f}"


def headline_text(report: CostReport, comparison: Comparison) -> str:
    w = report.workload
    sqs = comparison.row("SQS standard, batched").usd_per_million_messages
    prov = report.provisioned.usd_per_million_messages
    od = report.on_demand.usd_per_million_messages

    def verdict(x: float) -> str:
        return "below" if x < sqs else "above"

    return (
        f"USD per million messages ({w.message_bytes:,} B, batch {w.batch_size}, produce + keep {w.retention_hours:g} h + "
        f"consume x{w.subscriptions}): Magnetar {prov:.4f} with provisioned Kinesis ({verdict(prov)} batched SQS), "
        f"{od:.4f} with on-demand Kinesis ({verdict(od)} batched SQS); batched SQS {sqs:.4f}"
    )


def replication_text(report: CostReport, replication: ReplicationCost) -> str:
    prov, od = replication.provisioned.usd_per_million_messages, replication.on_demand.usd_per_million_messages
    return (
        f"replicated to {replication.remote_clusters} remote cluster(s): +{prov:.4f} USD per million messages with "
        f"provisioned Kinesis ({report.provisioned.usd_per_million_messages + prov:.4f} in all), +{od:.4f} with "
        f"on-demand Kinesis ({report.on_demand.usd_per_million_messages + od:.4f} in all)"
    )


class _ModeBill(Protocol):
    @property
    def components(self) -> dict[str, float]: ...
    @property
    def monthly_usd(self) -> float: ...
    @property
    def usd_per_million_messages(self) -> float: ...


def _bill_table(title: str, on_demand: _ModeBill, provisioned: _ModeBill, per_million: str) -> Table:
    """An extra's monthly bill by component in both Kinesis modes, its total and its USD per million."""
    table = Table(title=title)
    table.add_column("component")
    table.add_column("on-demand Kinesis", justify="right")
    table.add_column("provisioned Kinesis", justify="right")
    for component, usd in on_demand.components.items():
        table.add_row(component, _usd(usd), _usd(provisioned.components[component]))
    table.add_section()
    table.add_row("[bold]total[/bold]", f"[bold]{_usd(on_demand.monthly_usd)}[/bold]",
                  f"[bold]{_usd(provisioned.monthly_usd)}[/bold]")
    table.add_row(f"[bold]{per_million}[/bold]", f"[bold]{_per_million(on_demand.usd_per_million_messages)}[/bold]",
                  f"[bold]{_per_million(provisioned.usd_per_million_messages)}[/bold]")
    return table


def _print_extra(out: Console, table: Table, notes: list[str], text: str) -> None:
    out.print(table)
    for note in notes:
        out.print(f"[dim]note:[/dim] {escape(note)}")
    out.print(f"[bold green]{escape(text)}[/bold green]")


def render_replication(report: CostReport, replication: ReplicationCost, out: Console) -> None:
    table = _bill_table(f"Replication to {replication.remote_clusters} remote cluster(s) (USD/month)",
                        replication.on_demand, replication.provisioned, "USD per million messages")
    _print_extra(out, table, replication.notes, replication_text(report, replication))


def function_text(report: CostReport, function: FunctionCost) -> str:
    prov, od = function.provisioned.usd_per_million_messages, function.on_demand.usd_per_million_messages
    out = function.output_topic
    return (
        f"a function on every message ({function.guarantee}, {function.batch_messages:.0f} per invocation): "
        f"+{prov:.4f} USD per million messages with provisioned Kinesis, +{od:.4f} with on-demand Kinesis; "
        f"an idle function {function.idle_usd_per_month:.2f} USD a month (nothing runs); its output topic's own "
        f"workload (not included): {out['provisioned']:.4f} and {out['on_demand']:.4f}"
    )


def render_function(report: CostReport, function: FunctionCost, out: Console) -> None:
    table = _bill_table(f"A Pulsar Function on every message, {function.guarantee} (USD/month)",
                        function.on_demand, function.provisioned, "USD per million input messages")
    table.add_row("the output topic's own workload, not in the total", _per_million(function.output_topic["on_demand"]),
                  _per_million(function.output_topic["provisioned"]))
    _print_extra(out, table, function.notes, function_text(report, function))


def result_dict(report: CostReport, comparison: Comparison, replication: ReplicationCost | None = None,
                function: FunctionCost | None = None) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if replication is not None:
        extra["replication"] = {"text": replication_text(report, replication), **replication.to_dict()}
    if function is not None:
        extra["function"] = {"text": function_text(report, function), **function.to_dict()}
    return {
        "headline": {
            "text": headline_text(report, comparison),
            "usd_per_million_messages": {
                "magnetar_provisioned_kinesis": report.provisioned.usd_per_million_messages,
                "magnetar_on_demand_kinesis": report.on_demand.usd_per_million_messages,
                "sqs_batched": comparison.row("SQS standard, batched").usd_per_million_messages,
            },
        },
        "report": report.to_dict(),
        "comparison": comparison.to_dict()["rows"],
        "prices": price_table(),
        **extra,
    }


def render(report: CostReport, comparison: Comparison, out: Console) -> None:
    w = report.workload
    out.print(
        f"[bold]{escape(w.name)}[/bold]: {escape(w.description)}\n"
        f"{w.produce_rate_msgs_per_s:,.0f} msg/s x {w.message_bytes:,} B, batch {w.batch_size}, "
        f"{w.topic_partitions} partition(s), {w.subscriptions} subscription(s), {w.retention_hours:g} h retention, "
        f"{report.messages_per_month / 1e9:,.2f} billion messages/month; us-east-1 list prices as of {PRICES_AS_OF}"
    )

    table = Table(title="Magnetar: monthly bill by component (USD/month)")
    table.add_column("component")
    table.add_column("on-demand Kinesis", justify="right")
    table.add_column("provisioned Kinesis", justify="right")
    for component in COMPONENTS:
        table.add_row(component, _usd(report.on_demand.components[component]), _usd(report.provisioned.components[component]))
    table.add_section()
    table.add_row("[bold]total[/bold]", f"[bold]{_usd(report.on_demand.monthly_usd)}[/bold]", f"[bold]{_usd(report.provisioned.monthly_usd)}[/bold]")
    table.add_row(
        "[bold]USD per million messages[/bold]",
        f"[bold]{_per_million(report.on_demand.usd_per_million_messages)}[/bold]",
        f"[bold]{_per_million(report.provisioned.usd_per_million_messages)}[/bold]",
    )
    table.add_row("Kinesis shards", str(report.on_demand.kinesis_shards), str(report.provisioned.kinesis_shards))
    if w.idle_consumer_hours_per_month:
        table.add_row(
            f"idle consumers ({w.idle_consumer_hours_per_month:,.0f} h), not in the total",
            _usd(report.on_demand.idle_usd), _usd(report.provisioned.idle_usd),
        )
    out.print(table)

    steps = Table(title="Magnetar: by step (USD/month)")
    steps.add_column("step")
    steps.add_column("on-demand Kinesis", justify="right")
    steps.add_column("provisioned Kinesis", justify="right")
    for step in STEPS:
        steps.add_row(step, _usd(sum(report.on_demand.by_step[step].values())), _usd(sum(report.provisioned.by_step[step].values())))
    out.print(steps)

    rows = Table(title="The same workload elsewhere")
    rows.add_column("system", no_wrap=True)
    rows.add_column("USD/month", justify="right", no_wrap=True)
    rows.add_column("USD per million messages", justify="right")
    for row in comparison.rows:
        rows.add_row(row.name, _usd(row.monthly_usd), _per_million(row.usd_per_million_messages))
    out.print(rows)
    for row in comparison.rows:
        out.print(f"[dim]{escape(row.name)}:[/dim] {escape(row.assumptions)}", highlight=False)

    out.print(
        f"Idle consumer ({'its idle watch and a look every few seconds' if report.workload.params().idle_watch else 'long-polling'}): "
        f"{report.idle_usd_per_consumer_hour:.4f} USD per consumer-hour "
        f"({report.idle_usd_per_consumer_hour * 730:,.2f} per consumer-month); a push consumer (WebSocket) costs "
        f"{report.websocket_idle_usd_per_consumer_hour:.6f} per hour"
    )
    for note in report.notes:
        out.print(f"[dim]note:[/dim] {escape(note)}")
    for warning in report.warnings:
        out.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    out.print(f"[bold green]{escape(headline_text(report, comparison))}[/bold green]")


def render_prices(out: Console) -> None:
    table = Table(title=f"Price table: us-east-1 list prices as of {PRICES_AS_OF}")
    for column in ("key", "price", "source", "checked"):
        table.add_column(column, overflow="fold")
    for row in price_table():
        table.add_row(row["key"], row["price"], row["source"], row["checked"])
    out.print(table)
