"""`GET /metrics` on the local cluster: after SDK traffic, Pulsar's figures equal topic stats of the
same topics; topic level on and off (the deployment's setting and `?topics=`); Magnetar's own
counters; bad options refused; a 1,000-topic namespace scraped for a known number of AWS requests.
(Authorization: tests/e2e/test_security.py, on the authenticated cluster.)"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import magnetar
from http_helpers import HTTP
from magnetar.client.admin import AdminClient
from magnetar.config import ENV_TOPIC_LEVEL_METRICS

Samples = dict[tuple[str, ...], float]


def parse(text: str) -> Samples:
    """{(name, label=value, ... sorted): value}"""
    return {(s.name, *(f"{k}={v}" for k, v in sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape(cluster: Any, **params: str) -> Samples:
    response = HTTP.get(f"{cluster.url}/metrics", params=params, timeout=60)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)


def eventually(read: Callable[[], Any], ok: Callable[[Any], bool], timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


@pytest.fixture
def namespace(admin: AdminClient) -> str:
    name = f"public/metrics-{uuid.uuid4().hex[:8]}"
    admin.create_namespace(name)
    return name


def topic_level(samples: Samples, name: str, namespace: str, topic: str) -> float:
    return samples[(name, "cluster=standalone", f"namespace={namespace}", f"topic={topic}")]


def test_after_traffic_the_metrics_equal_topic_stats(cluster: Any, client: magnetar.Client, admin: AdminClient,
                                                    namespace: str) -> None:
    topic = f"persistent://{namespace}/orders"
    consumer = client.subscribe(topic, "shared", consumer_type=magnetar.ConsumerType.Shared,
                                initial_position=magnetar.InitialPosition.Earliest, receiver_queue_size=5)
    idle = client.subscribe(topic, "idle", initial_position=magnetar.InitialPosition.Earliest)
    producer = client.create_producer(topic, producer_name="p1", batching_enabled=False)
    for i in range(20):
        producer.send(f"m{i}".encode() * 20)
    for _ in range(5):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))

    def both() -> tuple[dict[str, Any], Samples]:
        return admin.topic_stats(topic), scrape(cluster, topics="true", namespace=namespace)

    def agree(pair: tuple[dict[str, Any], Samples]) -> bool:
        stats, samples = pair
        subs = stats["subscriptions"]
        return (subs["shared"]["msgBacklog"] == 15 and not subs["shared"]["unackedMessages"]
                and topic_level(samples, "pulsar_storage_write_latency_count", namespace, topic) == 20
                and topic_level(samples, "pulsar_storage_size", namespace, topic) == stats["storageSize"]
                and topic_level(samples, "pulsar_msg_backlog", namespace, topic) == 15 + 20)

    stats, samples = eventually(both, agree)  # acknowledgements and seals land a moment later
    assert agree((stats, samples)), (stats, {k: v for k, v in samples.items() if topic in str(k)})
    subs = stats["subscriptions"]
    assert topic_level(samples, "pulsar_subscriptions_count", namespace, topic) == len(subs) == 2
    assert topic_level(samples, "pulsar_consumers_count", namespace, topic) == sum(
        len(s["consumers"]) for s in subs.values()) == 2
    assert topic_level(samples, "pulsar_producers_count", namespace, topic) == len(stats["publishers"]) == 1
    assert topic_level(samples, "pulsar_in_messages_total", namespace, topic) == stats["msgInCounter"] == 20
    assert topic_level(samples, "pulsar_in_bytes_total", namespace, topic) == stats["bytesInCounter"]
    assert topic_level(samples, "pulsar_out_messages_total", namespace, topic) == stats["msgOutCounter"]
    assert topic_level(samples, "pulsar_rate_in", namespace, topic) > 0
    assert topic_level(samples, "pulsar_entry_size_count", namespace, topic) == 20
    assert topic_level(samples, "pulsar_storage_write_latency_sum", namespace, topic) >= 0
    for sub in ("shared", "idle"):
        key = ("cluster=standalone", f"namespace={namespace}", f"subscription={sub}", f"topic={topic}")
        assert samples[("pulsar_subscription_back_log", *key)] == subs[sub]["msgBacklog"]
        assert samples[("pulsar_subscription_unacked_messages", *key)] == subs[sub]["unackedMessages"]
    assert samples[("pulsar_topics_count", "cluster=standalone", f"namespace={namespace}")] == 1
    # the namespace level (the default): the same figures, summed over the namespace's one topic
    by_namespace = scrape(cluster, namespace=namespace)
    ns = ("cluster=standalone", f"namespace={namespace}")
    assert by_namespace[("pulsar_msg_backlog", *ns)] == 35
    assert by_namespace[("pulsar_storage_size", *ns)] == stats["storageSize"]
    assert by_namespace[("pulsar_in_messages_total", *ns)] == 20
    assert not any(name.startswith("pulsar_subscription_") for name, *_ in by_namespace)
    idle.close()
    consumer.close()
    producer.close()


def test_negative_acks_show_as_the_subscriptions_redeliver_rate(cluster: Any, client: magnetar.Client,
                                                                  admin: AdminClient, namespace: str) -> None:
    topic = f"persistent://{namespace}/retried"
    consumer = client.subscribe(topic, "work", consumer_type=magnetar.ConsumerType.Shared,
                                initial_position=magnetar.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=100)
    calm = client.subscribe(topic, "calm", initial_position=magnetar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(6):
        producer.send(f"m{i}".encode())
    first = [consumer.receive(timeout_millis=10_000) for _ in range(6)]
    assert all(m.redelivery_count() == 0 for m in first)
    for message in first:
        consumer.negative_acknowledge(message)
    again = [consumer.receive(timeout_millis=10_000) for _ in range(6)]
    assert sorted(m.data() for m in again) == sorted(m.data() for m in first)
    assert all(m.redelivery_count() == 1 for m in again)
    for message in again:
        consumer.acknowledge(message)
    for _ in range(6):
        calm.acknowledge(calm.receive(timeout_millis=10_000))

    stats = admin.topic_stats(topic)["subscriptions"]
    # six redelivered within the last seconds: about 6/60 a second (a one-minute moving average)
    assert 0.05 < stats["work"]["msgRateRedeliver"] <= 0.1
    assert stats["calm"]["msgRateRedeliver"] == 0.0, "nothing was redelivered on this one"
    samples = scrape(cluster, topics="true", namespace=namespace)
    rate = {sub: samples[("pulsar_subscription_msg_rate_redeliver", "cluster=standalone", f"namespace={namespace}",
                          f"subscription={sub}", f"topic={topic}")] for sub in ("work", "calm")}
    assert 0.05 < rate["work"] <= 0.1 and rate["calm"] == 0.0
    consumer.close()
    calm.close()
    producer.close()


def test_topic_level_from_the_setting_and_the_query(cluster: Any, client: magnetar.Client, namespace: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    topic = f"persistent://{namespace}/t"
    client.create_producer(topic).send(b"x")

    def has_topics(samples: Samples) -> bool:
        return any(f"topic={topic}" in key for key in samples)

    monkeypatch.delenv(ENV_TOPIC_LEVEL_METRICS, raising=False)
    assert not has_topics(scrape(cluster, namespace=namespace)), "namespace level by default"
    assert has_topics(scrape(cluster, namespace=namespace, topics="true"))
    monkeypatch.setenv(ENV_TOPIC_LEVEL_METRICS, "true")  # the deployment's setting (read at every scrape)
    assert has_topics(scrape(cluster, namespace=namespace))
    assert not has_topics(scrape(cluster, namespace=namespace, topics="false")), "the scrape's own choice wins"


def test_magnetar_counters_of_the_container(cluster: Any, client: magnetar.Client, namespace: str) -> None:
    topic = f"persistent://{namespace}/pushed"
    consumer = client.subscribe(topic, "push", delivery="push", initial_position=magnetar.InitialPosition.Earliest)
    before = scrape(cluster, namespace=namespace)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(f"m{i}".encode())
    got = [consumer.receive(timeout_millis=15_000) for _ in range(3)]
    for message in got:
        consumer.acknowledge(message)
    after = scrape(cluster, namespace=namespace)
    [container] = {label.split("=", 1)[1] for key in after if key[0] == "magnetar_push_deliveries_total"
                   for label in key[1:] if label.startswith("container=")}

    def key(name: str, **labels: str) -> tuple[str, ...]:
        labels = {"cluster": "standalone", "container": container, **labels}
        return (name, *(f"{k}={v}" for k, v in sorted(labels.items())))

    def delta(name: str, **labels: str) -> float:
        return after[key(name, **labels)] - before.get(key(name, **labels), 0.0)

    assert delta("magnetar_push_deliveries_total") >= 3
    assert delta("magnetar_lambda_invocations_total", function="magnetar-broker") >= 4  # subscribe, 3 sends
    assert after[key("magnetar_lambda_cold_starts_total", function="magnetar-broker")] >= 1
    assert delta("magnetar_aws_requests_total", service="kinesis", operation="PutRecord") >= 3
    assert after[key("magnetar_estimated_cost_dollars_total", component="dynamodb")] > 0
    assert after[key("magnetar_estimated_cost_dollars_per_hour", component="dynamodb")] > 0
    assert key("magnetar_late_records_total", outcome="after_hole") in after
    assert after[("magnetar_scrape_aws_requests", "cluster=standalone", "operation=Query", "service=dynamodb")] >= 1
    consumer.close()
    producer.close()


def test_bad_options_are_refused_with_a_reason(cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for params, status in (({"topics": "maybe"}, 400), ({"namespace": "no-slash"}, 400),
                           ({"namespace": "public/does-not-exist"}, 404)):
        response = HTTP.get(f"{cluster.url}/metrics", params=params, timeout=30)
        assert response.status_code == status and response.json()["reason"], (params, response.text)
    assert HTTP.post(f"{cluster.url}/metrics", timeout=30).status_code == 405
    # an answer over what Lambda may return goes out gzipped, or is refused (here: a limit of 100 bytes)
    from magnetar.api.routes import metrics

    monkeypatch.setattr(metrics, "MAX_PLAIN_BYTES", 100)
    plain = HTTP.get(f"{cluster.url}/metrics", headers={"Accept-Encoding": "identity"}, timeout=30)
    assert plain.status_code == 400 and "Accept-Encoding: gzip" in plain.json()["reason"]
    gzipped = HTTP.get(f"{cluster.url}/metrics", headers={"Accept-Encoding": "gzip"}, timeout=30)
    assert gzipped.status_code == 200 and gzipped.headers["content-encoding"] == "gzip"
    assert "pulsar_topics_count" in gzipped.text


def test_a_namespace_of_many_topics_costs_a_known_number_of_requests(cluster: Any, admin: AdminClient, namespace: str,
                                                                    client: magnetar.Client) -> None:
    """The scrape's requests as docs/metrics.md counts them, on 200 topics (bench/metrics_scrape.py
    measures 1,000: the figures that page quotes)."""
    n = 200
    topics = [f"persistent://{namespace}/t{i:04d}" for i in range(n)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(admin.create_topic, topics))
    for topic in topics[:3]:  # a few subscriptions: their cursors come with their topics' queries
        client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest).close()
    started = time.monotonic()
    response = HTTP.get(f"{cluster.url}/metrics", params={"namespace": namespace},
                         headers={"Accept-Encoding": "gzip"}, timeout=60)
    assert response.status_code == 200 and response.headers["content-encoding"] == "gzip"
    samples = parse(response.text)
    elapsed = time.monotonic() - started
    ns = ("cluster=standalone", f"namespace={namespace}")
    assert samples[("pulsar_topics_count", *ns)] == n and samples[("pulsar_subscriptions_count", *ns)] == 3
    requests = {key[1:]: value for key, value in samples.items() if key[0] == "magnetar_scrape_aws_requests"}
    # 1 Query lists the topics, a BatchGetItem per 50 topics reads their seal and writer states, 1 Query per
    # topic its cursors
    assert requests == {("cluster=standalone", "operation=Query", "service=dynamodb"): 1 + n,
                        ("cluster=standalone", "operation=BatchGetItem", "service=dynamodb"): n // 50}
    assert elapsed < 30, f"a scrape of {n} topics took {elapsed:.1f} s (API Gateway gives up at 30 s)"
    # at topic level: a series per topic, gzipped to a small part of it
    response = HTTP.get(f"{cluster.url}/metrics", params={"namespace": namespace, "topics": "true"},
                         headers={"Accept-Encoding": "gzip"}, timeout=60)
    by_topic = parse(response.text)
    assert sum(1 for key in by_topic if key[0] == "pulsar_storage_size") == n
    assert response.num_bytes_downloaded * 10 < len(response.content), "gzip: 6 MB is Lambda's limit"
