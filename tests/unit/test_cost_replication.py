"""`magnetar cost --replicated-to N`: geo-replication priced per journal batch and per remote cluster."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from magnetar.cli.cost import app
from magnetar.cost import (
    COMPONENTS,
    MODES,
    PRICES,
    GiB,
    Workload,
    apigw_units,
    load_workload,
    price_table,
    replication_cost,
    wru,
)
from magnetar.cost.magnetar import _shape
from magnetar.cost.replication import DATA_TRANSFER, DEFAULT_REPLICATION_CALL_MS

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "bench" / "workloads" / "baseline-1kb-batch100.yaml"
runner = CliRunner()


def baseline(**changes: object) -> Workload:
    return Workload.model_validate({**load_workload(BASELINE).model_dump(), **changes})


def test_inter_region_transfer_has_a_price_and_a_source() -> None:
    price = PRICES["transfer.inter_region_gb"]
    assert (price.usd, price.per, price.unit) == (0.02, 1.0, "GB")
    assert price.source.startswith("https://aws.amazon.com/")
    assert price.checked.startswith("confirmed")
    assert any(row["key"] == "transfer.inter_region_gb" for row in price_table())


def test_no_remote_cluster_costs_nothing() -> None:
    cost = replication_cost(baseline(), 0)
    assert cost.on_demand.monthly_usd == cost.provisioned.monthly_usd == 0.0
    assert cost.transfer_gb_per_month == 0.0


def test_a_negative_count_is_refused() -> None:
    with pytest.raises(ValueError):
        replication_cost(baseline(), -1)


def test_the_cost_grows_linearly_with_the_remote_clusters() -> None:
    one, three = replication_cost(baseline(), 1), replication_cost(baseline(), 3)
    for mode in MODES:
        assert three.mode(mode).monthly_usd == pytest.approx(3 * one.mode(mode).monthly_usd, rel=1e-9)
    assert three.batches_per_s == pytest.approx(one.batches_per_s)


def test_each_batch_is_one_request_invocation_reservation_and_cursor_write() -> None:
    w = baseline()
    p = w.params()
    cost = replication_cost(w, 2)
    s = _shape(w, p, "on_demand")
    batches = s.seal_invocations_per_s * s.partitions_per_seal  # journal batches of a topic per second
    assert cost.batches_per_s == pytest.approx(batches)
    assert cost.entries_per_batch == pytest.approx(s.entries_per_segment)
    per_million = 1e6 / w.produce_rate_msgs_per_s
    requests = cost.requests_per_million_messages
    assert requests["apigateway.HttpRequest"] == pytest.approx(2 * batches * per_million)
    assert requests["lambda.Invoke.broker"] == pytest.approx(2 * batches * per_million)
    assert requests["dynamodb.UpdateItem"] == pytest.approx(2 * batches * per_million)  # the remote reservation
    assert requests["dynamodb.PutItem"] == pytest.approx(2 * batches * per_million)  # the replicator's cursor
    assert requests["kinesis.PutRecord"] >= requests["apigateway.HttpRequest"]


def test_the_line_items_add_up_from_the_prices() -> None:
    w = baseline()
    p = w.params()
    cost = replication_cost(w, 1)
    month_s = w.hours_per_month * 3600
    n = cost.batches_per_s * month_s
    transfer_usd = cost.transfer_gb_per_month * 0.02
    assert cost.transfer_gb_per_month == pytest.approx(n * cost.request_bytes / GiB)
    assert cost.on_demand.components[DATA_TRANSFER] == pytest.approx(transfer_usd)
    assert cost.on_demand.components["api_gateway"] == pytest.approx(n * apigw_units(cost.request_bytes) * 1e-6)
    assert cost.on_demand.components["lambda_requests"] == pytest.approx(n * 0.2e-6)
    gb_s = (w.produce_lambda_ms + DEFAULT_REPLICATION_CALL_MS) / 1000 * w.lambda_memory_mb / 1024
    assert cost.on_demand.components["lambda_compute"] == pytest.approx(
        PRICES[f"lambda.{w.lambda_architecture}.gb_second"].cost(n * gb_s))
    assert cost.on_demand.components["dynamodb"] == pytest.approx(
        n * (wru(p.writer_item_bytes) + wru(p.cursor_item_bytes)) * 0.625e-6)
    assert set(cost.on_demand.components) == {*COMPONENTS, DATA_TRANSFER}
    assert cost.provisioned.usd_per_million_messages == pytest.approx(
        cost.provisioned.monthly_usd / (w.messages_per_month / 1e6))


def test_a_batch_over_the_kinesis_record_limit_takes_several_records() -> None:
    cost = replication_cost(baseline(), 1)
    w = baseline()
    s = _shape(w, w.params(), "on_demand")
    records = math.ceil(s.entries_per_segment * s.record_bytes / (1024 * 1024))
    per_batch = cost.requests_per_million_messages["kinesis.PutRecord"] / cost.requests_per_million_messages[
        "apigateway.HttpRequest"]
    assert per_batch == pytest.approx(max(1, records))


def test_larger_batches_cost_less_per_message() -> None:
    small = replication_cost(baseline(batch_size=1, message_bytes=1024), 1)
    large = replication_cost(baseline(batch_size=100, message_bytes=1024), 1)
    assert large.provisioned.usd_per_million_messages < small.provisioned.usd_per_million_messages


def test_cli_replicated_to_prints_and_writes_the_replication(tmp_path: Path) -> None:
    out = tmp_path / "cost.json"
    result = runner.invoke(app, ["--workload", str(BASELINE), "--replicated-to", "2", "--json", str(out)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Replication to 2 remote cluster(s)" in text
    assert "replicated to 2 remote cluster(s)" in text
    data = json.loads(out.read_text())
    assert data["replication"]["remote_clusters"] == 2
    assert data["replication"]["provisioned"]["components"][DATA_TRANSFER] > 0
    plain = runner.invoke(app, ["--workload", str(BASELINE), "--json", "-"])
    assert "replication" not in json.loads(plain.stdout)
    refused = runner.invoke(app, ["--workload", str(BASELINE), "--replicated-to", "-1"])
    assert refused.exit_code != 0


# --- replicated subscriptions: their snapshots in the configuration store (a global table) -----------
def test_global_table_replicated_writes_have_a_price_and_a_source() -> None:
    price = PRICES["dynamodb.ondemand.replicated_wru"]
    assert (price.usd, price.per) == (0.625, 1e6)  # priced as a single-region write unit, in every replica
    assert price.source.startswith("https://aws.amazon.com/") and price.checked.startswith("confirmed")
    assert "global-tables-billing" in price.checked


def test_snapshots_are_a_replicated_write_in_every_region_at_most_every_two_seconds() -> None:
    w = baseline(subscriptions=3, replicated_subscriptions=2)
    plain, snapshotted = replication_cost(baseline(subscriptions=3), 2), replication_cost(w, 2)
    # a subscription writes its cursor with every receive (baseline: 1,000 msg/s in receives of 5 entries of
    # 100: 2 a second), so its snapshot is written at the 2 s ceiling: 0.5 a second, 1 a second for two
    assert snapshotted.snapshot_writes_per_s == pytest.approx(1.0)
    month_s = w.hours_per_month * 3600
    extra = snapshotted.on_demand.components["dynamodb"] - plain.on_demand.components["dynamodb"]
    assert extra == pytest.approx(1.0 * month_s * 3 * 0.625e-6)  # 3 replicas: this region and 2 remote ones
    per_million = 1e6 / w.produce_rate_msgs_per_s
    assert snapshotted.requests_per_million_messages["dynamodb.PutItem.snapshot"] == pytest.approx(per_million)
    assert snapshotted.transfer_gb_per_month > plain.transfer_gb_per_month  # the items cross to 2 regions
    # a slow subscription writes a snapshot with each cursor write, fewer than one per 2 s
    slow = baseline(produce_rate_msgs_per_s=100, replicated_subscriptions=1)
    assert replication_cost(slow, 1).snapshot_writes_per_s == pytest.approx(100 / 100 / 5)
    # nothing without a remote cluster, nor with no replicated subscription
    assert replication_cost(w, 0).snapshot_writes_per_s == 0.0
    assert replication_cost(w, 2, replicated_subscriptions=0).snapshot_writes_per_s == 0.0


def test_more_replicated_than_subscriptions_is_refused() -> None:
    with pytest.raises(ValueError, match="replicated_subscriptions"):
        baseline(subscriptions=1, replicated_subscriptions=2)
    with pytest.raises(ValueError, match="replicated subscriptions: 3"):
        replication_cost(baseline(), 1, replicated_subscriptions=3)


def test_cli_prices_the_snapshots_of_replicated_subscriptions() -> None:
    result = runner.invoke(app, ["--workload", str(BASELINE), "--replicated-to", "1", "--replicated-subscriptions",
                                 "1", "--json", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["replication"]
    assert data["snapshot_writes_per_s"] == pytest.approx(0.5)


def test_the_snapshot_interval_is_the_acknowledgement_paths() -> None:
    from magnetar.core.replicated_subscriptions import SNAPSHOT_INTERVAL_MS
    from magnetar.cost import DEFAULT_PARAMETERS

    assert DEFAULT_PARAMETERS.snapshot_interval_s == SNAPSHOT_INTERVAL_MS / 1000
