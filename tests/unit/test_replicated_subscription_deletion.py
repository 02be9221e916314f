"""A replicated subscription deleted in one cluster takes that cluster's snapshot with it, on
in-memory ports (two clusters sharing the configuration store's snapshots): unsubscribed, deleted
through the admin API or with its topic, a later subscription of the same name in the other
cluster starts at its own initial position; a deletion that dies halfway is finished by the same
request again; a maintenance run racing the deletion leaves no snapshot and creates nothing."""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.test_replicated_subscriptions import _consume_one, _drain, _geo
from tests.unit.test_replication import Instance, T

from magnetar.core import crashpoints
from magnetar.core.broker import Broker
from magnetar.core.errors import ConfigurationUnavailable, Conflict, SubscriptionNotFound
from magnetar.core.naming import TopicName

EVERYTHING = [f"m{i}" for i in range(10)]


class CountingDeletes:
    """The configuration store's snapshot deletes of one cluster, counted."""

    def __init__(self, broker: Broker) -> None:
        self.original = broker.metadata.delete_subscription_snapshot
        self.deletes = 0
        broker.metadata.delete_subscription_snapshot = self  # type: ignore[method-assign]

    def __call__(self, topic: TopicName, subscription: str, cluster: str) -> Any:
        self.deletes += 1
        return self.original(topic, subscription, cluster)


def _acknowledged_in_east(count: int = 5) -> Instance:
    """10 messages; east's replicated subscription acknowledged `count` of them, and shared them."""
    geo = _geo(10)
    assert [_consume_one(geo.brokers["east"]) for _ in range(count)] == EVERYTHING[:count]
    assert geo.brokers["west"].metadata.get_subscription_snapshots(T, "sub")["east"].origin_acked["east"] >= 0
    return geo


def _west_from_earliest(geo: Instance) -> list[str]:
    geo.brokers["west"].subscriptions.subscribe(T, "sub", "c", "Shared", "Earliest", replicate_state=True)
    return _drain(geo.brokers["west"])


def test_unsubscribing_in_east_deletes_its_snapshot_with_one_request_and_west_starts_afresh() -> None:
    geo = _acknowledged_in_east()
    counted = CountingDeletes(geo.brokers["east"])
    geo.brokers["east"].subscriptions.unsubscribe(T, "sub", "c")
    assert counted.deletes == 1
    assert geo.brokers["west"].metadata.get_subscription_snapshots(T, "sub") == {}
    assert _west_from_earliest(geo) == EVERYTHING  # before: m5..m9 only (positioned by the deleted one)


def test_the_admin_apis_delete_is_the_same_path() -> None:
    geo = _acknowledged_in_east()
    with pytest.raises(Exception, match="active consumers"):  # the consumer's lease runs
        geo.brokers["east"].subscription_admin.delete(T, "sub")
    assert "east" in geo.brokers["east"].metadata.get_subscription_snapshots(T, "sub")  # refused: nothing deleted
    geo.brokers["east"].subscription_admin.delete(T, "sub", force=True)
    assert _west_from_earliest(geo) == EVERYTHING


def test_an_unsubscribe_refused_deletes_no_snapshot() -> None:
    geo = _acknowledged_in_east()
    east = geo.brokers["east"]
    east.subscriptions.subscribe(T, "sub", "other", "Shared", "Earliest", replicate_state=True)
    with pytest.raises(Conflict):
        east.subscriptions.unsubscribe(T, "sub", "c")
    assert "east" in east.metadata.get_subscription_snapshots(T, "sub")


def test_a_subscription_that_is_not_replicated_costs_no_snapshot_request() -> None:
    geo = _geo(3)
    east = geo.brokers["east"]
    east.subscriptions.subscribe(T, "plain", "c", "Shared", "Earliest")
    counted = CountingDeletes(east)
    east.subscriptions.unsubscribe(T, "plain", "c")
    assert counted.deletes == 0


def test_an_unsubscribe_that_dies_after_the_snapshot_is_finished_by_the_same_request() -> None:
    geo = _acknowledged_in_east()
    east = geo.brokers["east"]
    crashpoints.enable("unsubscribe.after_snapshot")
    try:
        with pytest.raises(crashpoints.SimulatedCrash):
            east.subscriptions.unsubscribe(T, "sub", "c")
    finally:
        crashpoints.disable_all()
    assert east.metadata.get_subscription_snapshots(T, "sub") == {}  # the snapshot went first
    assert east.metadata.get_subscription_view(T, "sub").cursor is not None
    east.subscriptions.unsubscribe(T, "sub", "c")  # the client's retry
    assert east.metadata.get_subscription_view(T, "sub").cursor is None
    with pytest.raises(SubscriptionNotFound):
        east.subscriptions.unsubscribe(T, "sub", "c")
    assert _west_from_earliest(geo) == EVERYTHING


def test_while_the_configuration_stores_home_is_out_the_unsubscribe_is_refused_and_deletes_nothing() -> None:
    geo = _acknowledged_in_east()
    east = geo.brokers["east"]

    def unreachable(topic: TopicName, subscription: str, cluster: str) -> None:
        raise ConfigurationUnavailable("The configuration store's home replica is unreachable; retry later")

    east.metadata.delete_subscription_snapshot = unreachable  # type: ignore[method-assign]
    with pytest.raises(ConfigurationUnavailable):  # a 503: retry it
        east.subscriptions.unsubscribe(T, "sub", "c")
    assert east.metadata.get_subscription_view(T, "sub").cursor is not None
    assert "east" in east.metadata.get_subscription_snapshots(T, "sub")


def test_a_maintenance_run_racing_the_unsubscribe_leaves_no_snapshot_and_creates_nothing_in_west() -> None:
    geo = _acknowledged_in_east()
    east = geo.brokers["east"]
    listed = east.metadata.list_cursors(T)  # the run lists the cursors, then the consumer unsubscribes
    east.subscriptions.unsubscribe(T, "sub", "c")
    assert geo.replicators["east"].share_subscriptions(T, listed) == 0  # sends nothing
    assert east.metadata.get_subscription_snapshots(T, "sub") == {}
    assert geo.brokers["west"].metadata.get_subscription_view(T, "sub").cursor is None
    assert _west_from_earliest(geo) == EVERYTHING


@pytest.mark.parametrize("crash", [None, "delete.after_items"])
def test_deleting_the_topic_in_east_deletes_easts_snapshots_only(crash: str | None) -> None:
    geo = _acknowledged_in_east()
    east, west = geo.brokers["east"], geo.brokers["west"]
    west.subscriptions.subscribe(T, "sub", "c", "Shared", "Earliest", replicate_state=True)
    _consume_one(west)  # west's own snapshot of the subscription (west keeps its topic)
    if crash:
        crashpoints.enable(crash)
        try:
            with pytest.raises(crashpoints.SimulatedCrash):
                east.deletion.delete_topic(T, force=True)
        finally:
            crashpoints.disable_all()
    report = east.deletion.delete_topic(T, force=True)
    assert report.snapshots == 1
    assert set(west.metadata.get_subscription_snapshots(T, "sub")) == {"west"}
