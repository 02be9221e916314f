"""`/metrics` on in-memory ports: Pulsar's figures equal topic stats, namespace and topic level,
the seal state's histograms and holes, what a scrape reads, the metrics role, the container's
counters and the request counter's throttles, retries and scopes."""

from __future__ import annotations

import dataclasses
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from magnetar.adapters.aws.clients import RequestCounter
from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core.acks import Acks
from magnetar.core.authz import Access, AuthorizationService, AuthSettings, Principal
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import Forbidden, NotFound
from magnetar.core.ledger import HOLE_GRACE_MS
from magnetar.core.metrics import CATALOG, COUNTER, exposed_names
from magnetar.core.metrics.container import COUNTERS, ContainerCounters, ContainerSnapshot, counted
from magnetar.core.metrics.families import ContainerFigures, render, scrape_families
from magnetar.core.metrics.scrape import MetricsReader
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.ports import NamespaceInfo, ProducerClaim
from magnetar.cost.measured import cost_of_counted_requests

NS = NamespaceName("public", "default")
A = TopicName.parse("persistent://public/default/a")
B = TopicName.parse("persistent://public/default/b")
PAYLOAD = b"x" * 100


def publish(broker: Any, topic: TopicName, count: int) -> None:
    for _ in range(count):
        broker.writer.append(topic, Batch.of([Message(PAYLOAD)], batched=False), "p1")


def scrape(broker: Any, topic_level: bool, namespaces: list[NamespaceName] | None = None) -> dict[tuple[str, ...], float]:
    """The scrape's samples as {(name, label=value, ...): value}, through the text exposition."""
    figures = MetricsReader(broker.metadata, broker.stats).read(namespaces)
    body, content_type = render(scrape_families(figures, "standalone", topic_level))
    assert content_type.startswith("text/plain")
    return {(s.name, *(f"{k}={v}" for k, v in sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def workload(clock: ManualClock) -> Any:
    """a: 10 messages, `sh` (Shared: c1 took 4, acked 3) and `ex` (nothing taken); b: 5 messages, no subscription."""
    broker = memory_broker(clock)
    broker.subscriptions.subscribe(A, "sh", "c1", "Shared", "Earliest")
    broker.subscriptions.subscribe(A, "ex", "e1", "Exclusive", "Earliest")
    publish(broker, A, 10)
    publish(broker, B, 5)
    broker.sealer.seal(list(broker.journal.records))
    got = broker.subscriptions.receive(A, "sh", "c1", max_messages=4).entries
    broker.subscriptions.acknowledge(A, "sh", Acks(entries=tuple(d.entry.entry_id for d in got[:3]), consumer="c1"))
    return broker


def test_topic_level_figures_equal_topic_stats() -> None:
    broker = workload(ManualClock())
    samples = scrape(broker, topic_level=True)
    stats = broker.stats.topic_stats(A)

    def topic(name: str, t: TopicName = A) -> float:
        return samples[(name, "cluster=standalone", "namespace=public/default", f"topic={t}")]

    assert topic("pulsar_msg_backlog") == sum(s["msgBacklog"] for s in stats["subscriptions"].values()) == 7 + 10
    assert topic("pulsar_storage_size") == stats["storageSize"] > 0
    assert topic("pulsar_subscriptions_count") == 2 and topic("pulsar_consumers_count") == 2
    assert topic("pulsar_producers_count") == len(stats["publishers"]) == 1
    assert topic("pulsar_in_messages_total") == stats["msgInCounter"] == 10
    assert topic("pulsar_in_bytes_total") == stats["bytesInCounter"]
    assert topic("pulsar_out_messages_total") == stats["msgOutCounter"] == 4
    assert topic("pulsar_rate_in") == pytest.approx(stats["msgRateIn"]) and topic("pulsar_rate_in") > 0
    assert topic("pulsar_rate_out") == pytest.approx(stats["msgRateOut"])
    assert topic("pulsar_storage_write_latency_count") == topic("pulsar_entry_size_count") == 10
    assert topic("pulsar_entry_size_le_512") == 10, "100-byte messages make entries of 128..512 bytes"
    sub = samples[("pulsar_subscription_back_log", "cluster=standalone", "namespace=public/default",
                   "subscription=sh", f"topic={A}")]
    unacked = samples[("pulsar_subscription_unacked_messages", "cluster=standalone", "namespace=public/default",
                       "subscription=sh", f"topic={A}")]
    assert (sub, unacked) == (stats["subscriptions"]["sh"]["msgBacklog"], stats["subscriptions"]["sh"]["unackedMessages"])
    assert (sub, unacked) == (7, 1)
    assert topic("pulsar_storage_size", B) == broker.stats.topic_stats(B)["storageSize"]
    assert samples[("pulsar_topics_count", "cluster=standalone", "namespace=public/default")] == 2


def test_namespace_level_sums_the_topics_and_has_no_subscription_series() -> None:
    broker = workload(ManualClock())
    samples = scrape(broker, topic_level=False)
    ns = ("cluster=standalone", "namespace=public/default")
    a, b = broker.stats.topic_stats(A), broker.stats.topic_stats(B)
    assert samples[("pulsar_storage_size", *ns)] == a["storageSize"] + b["storageSize"]
    assert samples[("pulsar_in_messages_total", *ns)] == 15
    assert samples[("pulsar_msg_backlog", *ns)] == 17
    assert samples[("pulsar_topics_count", *ns)] == 2
    assert not any(key[0].startswith("pulsar_subscription_") for key in samples)
    assert not any(label.startswith("topic=") for key in samples for label in key[1:])


def test_write_latency_buckets_count_reservation_to_journal_arrival() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    publish(broker, A, 3)
    late = [dataclasses.replace(r, arrival_ms=r.arrival_ms + waited)
            for r, waited in zip(broker.journal.records, (7, 150, 4_000), strict=True)]
    broker.sealer.seal(late)
    samples = scrape(broker, topic_level=True)

    def topic(name: str) -> float:
        return samples[(name, "cluster=standalone", "namespace=public/default", f"topic={A}")]

    assert [topic(f"pulsar_storage_write_latency_le_{b}") for b in ("5", "10", "100", "200", "overflow")] == [0, 1, 0, 1, 1]
    assert topic("pulsar_storage_write_latency_count") == 3 and topic("pulsar_storage_write_latency_sum") == 4_157


def test_holes_are_counted_in_the_seal_state() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    publish(broker, A, 2)
    broker.metadata.reserve_entry(A, ProducerClaim("p", clock.now))  # its writer died before the journal write
    publish(broker, A, 2)
    broker.sealer.seal(list(broker.journal.records))
    clock.advance(HOLE_GRACE_MS + 1)
    broker.sealer.seal(list(broker.journal.records))  # the tombstone goes to the journal
    broker.sealer.seal(list(broker.journal.records))  # ... and is sealed
    samples = scrape(broker, topic_level=True)
    assert samples[("magnetar_holes_total", "cluster=standalone", "namespace=public/default", f"topic={A}")] == 1
    assert samples[("pulsar_storage_write_latency_count", "cluster=standalone", "namespace=public/default",
                    f"topic={A}")] == 4, "a hole is no write"


def test_a_scrape_reads_in_batches_and_nothing_per_message() -> None:
    broker = workload(ManualClock())
    publish(broker, A, 50)  # more messages change nothing of what a scrape reads
    calls: Counter[str] = Counter()
    metadata = broker.metadata
    for name in ("list_tenants", "list_namespaces", "list_topics", "get_namespace", "get_topic_states",
                 "get_topic_state", "list_cursors", "list_segments", "get_topic_policies", "get_partitions"):
        original = getattr(metadata, name)

        def count(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            calls[_name] += 1
            if _name in ("get_topic_states", "list_cursors"):
                assert kwargs.get("consistent") is False, "a scrape reads eventually consistent"
            return _original(*args, **kwargs)

        setattr(metadata, name, count)
    scrape(broker, topic_level=True, namespaces=[NS])
    assert calls == Counter(list_topics=1, get_topic_states=1, list_cursors=2)
    calls.clear()
    scrape(broker, topic_level=False)  # every namespace: the tenants and their namespaces are listed
    assert calls == Counter(list_tenants=1, list_namespaces=1, list_topics=1, get_topic_states=1, list_cursors=2)


def test_an_asked_namespace_must_exist_and_an_empty_one_answers_zeros() -> None:
    broker = memory_broker(ManualClock())
    with pytest.raises(NotFound, match="public/nope"):
        scrape(broker, topic_level=False, namespaces=[NamespaceName("public", "nope")])
    broker.metadata.create_namespace(NamespaceInfo(NamespaceName("public", "empty")))
    samples = scrape(broker, topic_level=False, namespaces=[NamespaceName("public", "empty")])
    assert samples[("pulsar_topics_count", "cluster=standalone", "namespace=public/empty")] == 0
    assert samples[("pulsar_msg_backlog", "cluster=standalone", "namespace=public/empty")] == 0


def test_the_catalog_names_every_family_a_scrape_makes() -> None:
    broker = workload(ManualClock())
    figures = MetricsReader(broker.metadata, broker.stats).read()
    counters = ContainerSnapshot("c0ffee00", 1e9 - 3600, {"magnetar-broker": 2}, {"magnetar-broker": 1},
                                 {"magnetar-broker": 0.5}, {"magnetar-broker": 0.5}, 3, {"after_hole": 1})
    query = {("dynamodb", "Query"): 3}
    container = ContainerFigures(counters, {"requests": query, "throttles": query, "retries": query}, {"dynamodb": 0.001})
    for topic_level in (True, False):
        families = scrape_families(figures, "standalone", topic_level, container, {("dynamodb", "Query"): 2}, 0.1, 1e9)
        body, _ = render(families)
        names = {s.name for f in text_string_to_metric_families(body.decode()) for s in f.samples}
        assert names <= exposed_names()
    assert names >= {spec.sample for spec in CATALOG if spec.scope in ("container", "scrape")}
    per_hour = [s for f in text_string_to_metric_families(body.decode()) for s in f.samples
                if s.name == "magnetar_estimated_cost_dollars_per_hour"]
    assert [(s.labels["component"], s.labels["container"], s.value) for s in per_hour] == [
        ("dynamodb", "c0ffee00", pytest.approx(0.001))], "USD 0.001 over the container's one hour"
    assert all(spec.sample.endswith("_total") == (spec.kind == COUNTER) for spec in CATALOG)
    openmetrics, content_type = render(families, "application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text") and openmetrics.endswith(b"# EOF\n")


def test_metrics_are_for_superusers_and_metrics_roles() -> None:
    broker = memory_broker(ManualClock())
    authz = AuthorizationService(broker.metadata, broker.clock,
                                 AuthSettings(True, frozenset({"admin"}), frozenset({"prometheus"})))
    authz.check(Principal("admin"), Access.METRICS)
    authz.check(Principal("prometheus"), Access.METRICS)
    broker.metadata.update_tenant(dataclasses.replace(broker.metadata.get_tenant("public"), admin_roles=("alice",)))
    with pytest.raises(Forbidden, match="metrics roles"):
        authz.check(Principal("alice"), Access.METRICS)  # a tenant admin is not a metrics role
    with pytest.raises(Forbidden):
        authz.check(Principal("prometheus"), Access.SUPERUSER)  # nor is a metrics role anything more


def test_container_counters_count_invocations_and_the_first_as_cold() -> None:
    counters = ContainerCounters()

    @counted
    def handler(event: Any, context: Any) -> str:
        return "ok"

    context = SimpleNamespace(function_name="magnetar-unit-test", memory_limit_in_mb=512)
    before = COUNTERS.snapshot()
    assert [handler({}, context) for _ in range(3)] == ["ok"] * 3
    after = COUNTERS.snapshot()
    assert after.invocations["magnetar-unit-test"] - before.invocations.get("magnetar-unit-test", 0) == 3
    assert after.cold_starts["magnetar-unit-test"] - before.cold_starts.get("magnetar-unit-test", 0) == 1
    counters.late_records(2, 1, 1)
    counters.pushed(5)
    snapshot = counters.snapshot()
    assert snapshot.late == {"after_hole": 2, "reappended": 1, "dead_lettered": 1} and snapshot.pushed == 5


def test_request_counter_counts_throttles_retries_and_scopes() -> None:
    counter = RequestCounter()

    def send(attempt: int) -> None:
        request = SimpleNamespace(headers={"amz-sdk-request": f"attempt={attempt}; max=4".encode()})
        counter("before-send.dynamodb.PutItem", request=request)

    with counter.scoped() as scope:
        send(1)
        counter.attempted("needs-retry.dynamodb.PutItem",
                          response=(None, {"Error": {"Code": "ProvisionedThroughputExceededException"}}))
        send(2)
        counter.attempted("needs-retry.dynamodb.PutItem", response=(None, {}))
    send(1)  # outside the scope
    counter.attempted("needs-retry.dynamodb.TransactWriteItems",
                      response=(None, {"Error": {"Code": "TransactionCanceledException"},
                                       "CancellationReasons": [{"Code": "None"}, {"Code": "ThrottlingError"}]}))
    counts = counter.by_operation()
    assert counts["requests"] == {("dynamodb", "PutItem"): 3}
    assert counts["retries"] == {("dynamodb", "PutItem"): 1}
    assert counts["throttles"] == {("dynamodb", "PutItem"): 1, ("dynamodb", "TransactWriteItems"): 1}
    assert scope == Counter({("dynamodb", "PutItem"): 2})


def test_cost_of_counted_requests_prices_each_component() -> None:
    cost = cost_of_counted_requests({"dynamodb.Query": 1_000_000, "s3.PutObject": 1_000, "s3.GetObject": 10_000,
                                     "kinesis.GetRecords(fan-out)": 5_000}, gb_seconds=0, invocations=1_000_000,
                                    apigw_requests=1_000_000)
    assert cost["dynamodb"] == pytest.approx(0.125)  # 1 RRU a Query, $0.125 per million
    assert cost["s3_requests"] == pytest.approx(0.005 + 0.004)
    assert cost["api_gateway"] == pytest.approx(1.0) and cost["lambda_requests"] == pytest.approx(0.2)
    assert "kinesis" not in cost, "the local emulation's fan-out reads are not billed requests"


def test_the_metrics_page_documents_every_metric() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()

    def documented(name: str) -> bool:
        base, _, bound = name.rpartition("_le_")
        if base:  # a bucket: the family and its bound
            return f"`{base}_le_*" in doc and f"_le_{bound}`" in doc
        for suffix in ("_count", "_sum"):
            if name.endswith(suffix) and f"`{name.removesuffix(suffix)}_le_*`, `_count`, `_sum`" in doc:
                return True
        return f"`{name}`" in doc

    missing = [spec.sample for spec in CATALOG if not documented(spec.sample)]
    assert not missing, f"docs/metrics.md does not describe {missing}"
