"""The Grafana dashboard (infra/grafana/magnetar.json) is valid JSON and queries only what
`GET /metrics` exposes (the catalog, `magnetar.core.metrics`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from magnetar.core.metrics import CATALOG, exposed_names

DASHBOARD = Path(__file__).resolve().parents[2] / "infra" / "grafana" / "magnetar.json"
NAME = re.compile(r"\b(?:pulsar|magnetar)_[a-z0-9_]+\b")


def _queries(dashboard: dict[str, Any]) -> Iterator[str]:
    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield variable["definition"]


def test_every_metric_the_dashboard_queries_is_exposed() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = list(_queries(dashboard))
    assert len(queries) > 30
    used = {name for query in queries for name in NAME.findall(query)}
    assert used, "the dashboard queries Magnetar's metrics"
    assert used <= exposed_names(), f"not exposed by GET /metrics: {sorted(used - exposed_names())}"
    for query in queries:  # well formed as far as brackets go
        for opening, closing in ("()", "{}", "[]"):
            assert query.count(opening) == query.count(closing), query
    # the dashboard shows every Pulsar topic metric and every container counter at least once
    wanted = {spec.sample for spec in CATALOG if spec.scope in ("topic", "subscription", "namespace", "container")
              and "_le_" not in spec.name and spec.name != "pulsar_subscription_blocked_on_unacked_messages"}
    assert wanted <= used, f"not on the dashboard: {sorted(wanted - used)}"


def test_panels_have_unique_ids_and_a_query_each() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    assert all(p["targets"] for p in panels if p["type"] != "row")
    assert dashboard["uid"] and dashboard["title"] == "Magnetar"
