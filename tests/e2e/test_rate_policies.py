"""Noisy neighbours end to end: publishRate, dispatchRate, maxTopicsPerNamespace and
maxSubscriptionsPerTopic on Pulsar's admin paths, enforced for SDK producers and consumers, and
what a publish costs in AWS requests with a rate policy and without."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

import magnetar
from http_helpers import HTTP
from magnetar.client import exceptions
from magnetar.client.admin import AdminClient

PUBLISH_RATE = {"publishThrottlingRateInMsg": 20, "publishThrottlingRateInByte": -1}
DISPATCH_RATE = {"dispatchThrottlingRateInMsg": 20, "dispatchThrottlingRateInByte": -1, "ratePeriodInSecond": 1,
                 "relativeToPublishRate": False}


@pytest.fixture
def namespace(admin: AdminClient) -> str:
    name = f"public/rates-{uuid.uuid4().hex[:8]}"
    admin.create_namespace(name)
    return name


def ns_url(cluster: Any, namespace: str) -> str:
    tenant, ns = namespace.split("/")
    return f"{cluster.url}/admin/v2/namespaces/{tenant}/{ns}"


# --- the admin API --------------------------------------------------------------------------------
def test_rate_policies_are_set_read_and_removed_at_both_levels(admin: AdminClient, namespace: str,
                                                               cluster: Any) -> None:
    topic = f"persistent://{namespace}/t"
    admin.create_topic(topic)
    admin.set_policy(namespace, "publishRate", PUBLISH_RATE)
    admin.set_policy(namespace, "dispatchRate", {"dispatchThrottlingRateInMsg": 50})  # Pulsar's defaults fill in
    admin.set_policy(namespace, "maxTopicsPerNamespace", 100)
    admin.set_policy(namespace, "maxSubscriptionsPerTopic", 10)
    admin.set_policy(topic, "publishRate", {"publishThrottlingRateInMsg": -1, "publishThrottlingRateInByte": 4096})
    admin.set_policy(topic, "dispatchRate", DISPATCH_RATE)
    admin.set_policy(topic, "maxSubscriptionsPerTopic", 3)
    assert admin.get_policy(namespace, "publishRate") == PUBLISH_RATE
    assert admin.get_policy(namespace, "dispatchRate") == {**DISPATCH_RATE, "dispatchThrottlingRateInMsg": 50}
    assert admin.get_policy(namespace, "maxTopicsPerNamespace") == 100
    assert admin.get_policy(namespace, "maxSubscriptionsPerTopic") == 10
    assert admin.get_policy(topic, "publishRate") == {"publishThrottlingRateInMsg": -1,
                                                      "publishThrottlingRateInByte": 4096}
    assert admin.get_policy(topic, "dispatchRate") == DISPATCH_RATE
    assert admin.get_policy(topic, "maxSubscriptionsPerTopic") == 3
    raw = HTTP.get(ns_url(cluster, namespace)).json()  # Pulsar's Policies field names
    assert raw["publishMaxMessageRate"] == PUBLISH_RATE and raw["max_topics_per_namespace"] == 100
    assert raw["topicDispatchRate"]["dispatchThrottlingRateInMsg"] == 50
    assert raw["max_subscriptions_per_topic"] == 10
    for name in ("publishRate", "dispatchRate", "maxSubscriptionsPerTopic"):
        admin.remove_policy(topic, name)
        assert admin.get_policy(topic, name) is None
    for name in ("publishRate", "dispatchRate", "maxTopicsPerNamespace", "maxSubscriptionsPerTopic"):
        admin.remove_policy(namespace, name)
        assert admin.get_policy(namespace, name) is None
    # maxTopicsPerNamespace is a namespace policy only, as in Pulsar
    response = HTTP.post(f"{cluster.url}/admin/v2/persistent/{namespace}/t/maxTopicsPerNamespace", json=1)
    assert response.status_code == 404


def test_the_new_policy_routes_need_a_tenant_admin() -> None:
    from magnetar.api import app  # noqa: F401  (registers the routes)
    from magnetar.api.access import ROUTE_TABLE
    from magnetar.core.authz import Access

    names = ("publishRate", "dispatchRate", "maxTopicsPerNamespace", "maxSubscriptionsPerTopic")
    routes = [r for r in ROUTE_TABLE if r.path.rsplit("/", 1)[-1] in names]
    assert len(routes) == 3 * 4 + 3 * 3 * 2  # namespace: 4 x POST/GET/DELETE; topic: 3 x 3 x 2 domains
    assert {r.access for r in routes} == {Access.TENANT_ADMIN}


@pytest.mark.parametrize(
    ("path", "body", "reason"),
    [
        ("publishRate", {"publishThrottlingRateInMsg": -5}, "must be -1, 0 or positive"),
        ("publishRate", {"publishThrottlingRateInMsg": "10"}, "publishThrottlingRateInMsg"),
        ("publishRate", {"publishThrottlingRateInMsg": 1.5}, "publishThrottlingRateInMsg"),
        ("publishRate", {"publishRateInMsg": 10}, "publishRateInMsg"),
        ("publishRate", [10], "Invalid request body"),
        ("dispatchRate", {"dispatchThrottlingRateInByte": -7}, "must be -1, 0 or positive"),
        ("dispatchRate", {"dispatchThrottlingRateInMsg": 10, "ratePeriodInSecond": 0}, "ratePeriodInSecond"),
        ("dispatchRate", {"relativeToPublishRate": "yes"}, "relativeToPublishRate"),
        ("maxTopicsPerNamespace", -1, "must be 0 or positive"),
        ("maxTopicsPerNamespace", "ten", "JSON integer"),
        ("maxSubscriptionsPerTopic", 2.5, "JSON integer"),
        ("maxTopicsPerNamespace", 10**40, "between 0 and 2147483647"),
        ("maxSubscriptionsPerTopic", 2**31, "between 0 and 2147483647"),
        ("publishRate", {"publishThrottlingRateInByte": 2**63}, "publishThrottlingRateInByte"),
        ("dispatchRate", {"dispatchThrottlingRateInMsg": 2**31}, "dispatchThrottlingRateInMsg"),
    ],
)
def test_bad_rate_policies_are_refused_with_a_reason_and_change_nothing(cluster: Any, namespace: str, path: str,
                                                                        body: object, reason: str) -> None:
    url = ns_url(cluster, namespace)
    response = HTTP.post(f"{url}/{path}", json=body)
    assert response.status_code == 400, response.text
    assert reason in response.json()["reason"]
    assert HTTP.get(url).json() == {}, "nothing half-written"
    topic_url = f"{cluster.url}/admin/v2/persistent/{namespace}/bad"
    HTTP.put(topic_url)
    if path != "maxTopicsPerNamespace":
        response = HTTP.post(f"{topic_url}/{path}", json=body)
        assert response.status_code == 400, response.text
        assert HTTP.get(f"{topic_url}/{path}").json() is None


# --- enforcement ----------------------------------------------------------------------------------
def test_a_producer_over_the_publish_rate_is_slowed_to_it(admin: AdminClient, client: magnetar.Client,
                                                          namespace: str, cluster: Any) -> None:
    topic = f"persistent://{namespace}/flood"
    admin.create_topic(topic)
    admin.set_policy(topic, "publishRate", {"publishThrottlingRateInMsg": 10, "publishThrottlingRateInByte": -1})
    producer = client.create_producer(topic, batching_enabled=False)
    started = time.monotonic()
    acked: list[float] = []
    while time.monotonic() - started < 6.0:
        producer.send(b"x" * 100)  # the SDK retries the broker's 429 until its send timeout
        acked.append(time.monotonic() - started)
    producer.close()
    # a token bucket of one second: everything admitted in t seconds is at most 10 t + 10 (+1)
    elapsed = acked[-1]
    assert len(acked) <= 10 * elapsed + 11 + 1, f"{len(acked)} in {elapsed:.1f} s"
    # past the first 3 s: at least half the limit, and at most the bucket's bound over that window
    # (a slow start leaves the bucket full again, so the window may hold one more burst of 10 + 1)
    steady = [t for t in acked if t >= 3.0]
    window = steady[-1] - steady[0]
    rate = (len(steady) - 1) / window
    assert rate >= 5, f"achieved {rate:.1f} msg/s against a limit of 10 ({len(acked)} in {elapsed:.1f} s)"
    assert len(steady) <= 10 * window + 11 + 1, f"{len(steady)} in the last {window:.1f} s against a limit of 10"
    # the namespace next door is not held back: none of its 40 publishes is refused (a refused
    # publish is a reservation write too, so refusals would show as more than 40)
    other = client.create_producer(f"persistent://public/default/free-{uuid.uuid4().hex[:6]}", batching_enabled=False)
    other.send(b"warm")
    HTTP.delete(f"{cluster.url}/_magnetar/local/stats")
    for _ in range(40):
        other.send(b"y")
    writes = HTTP.get(f"{cluster.url}/_magnetar/local/stats").json()["aws_requests"].get("dynamodb.UpdateItem", 0)
    assert writes == 40, f"{writes} reservation writes for 40 publishes"
    other.close()


def test_a_publish_costs_the_same_aws_requests_with_a_publish_rate(admin: AdminClient, client: magnetar.Client,
                                                                   namespace: str, cluster: Any) -> None:
    limited, free = f"persistent://{namespace}/limited", f"persistent://{namespace}/free"
    for topic in (limited, free):
        admin.create_topic(topic)
    admin.set_policy(limited, "publishRate", {"publishThrottlingRateInMsg": 100_000,
                                              "publishThrottlingRateInByte": 100_000_000})
    producers = {t: client.create_producer(t, batching_enabled=False) for t in (limited, free)}
    for producer in producers.values():
        producer.send(b"warm")  # reads the policies into the broker's cache (10 s)
    counts: dict[str, dict[str, int]] = {}
    for topic, producer in producers.items():
        HTTP.delete(f"{cluster.url}/_magnetar/local/stats")
        started = time.monotonic()
        for i in range(25):
            producer.send(f"m{i}".encode())
        elapsed = time.monotonic() - started
        stats = HTTP.get(f"{cluster.url}/_magnetar/local/stats").json()["aws_requests"]
        # the publish path's requests (the sealer's and other clients' requests are counted too, so
        # the operations only a publish makes are compared)
        counts[topic] = {op: stats.get(op, 0) for op in ("dynamodb.UpdateItem", "kinesis.PutRecord")}
        # the policies are re-read once per cache period (10 s), never per publish
        assert stats.get("dynamodb.GetItem", 0) <= 1 + int(elapsed // 10), (topic, stats, elapsed)
    for producer in producers.values():
        producer.close()
    expected = {"dynamodb.UpdateItem": 25, "kinesis.PutRecord": 25}
    assert counts[free] == expected, counts
    assert counts[limited] == counts[free], counts


def test_dispatch_rate_caps_a_consumers_receive_rate(admin: AdminClient, client: magnetar.Client,
                                                     namespace: str) -> None:
    topic = f"persistent://{namespace}/drain"
    admin.create_topic(topic)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(100):
        producer.send_async(f"{i}".encode(), None)
    producer.flush()
    producer.close()
    admin.set_policy(namespace, "dispatchRate", DISPATCH_RATE)  # 20 msg/s per subscription
    consumer = client.subscribe(topic, "capped", initial_position=magnetar.InitialPosition.Earliest)
    started = time.monotonic()
    for _ in range(100):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    elapsed = time.monotonic() - started
    consumer.close()
    # 20 in the period the consumer starts in, then 20 at the start of each next one: 3 to 4 s
    assert 3.0 <= elapsed <= 7.0, f"100 messages at 20 msg/s took {elapsed:.1f} s"
    admin.remove_policy(namespace, "dispatchRate")
    fast = client.subscribe(topic, "uncapped", initial_position=magnetar.InitialPosition.Earliest)
    started = time.monotonic()
    for _ in range(100):
        fast.receive(timeout_millis=10_000)
    assert time.monotonic() - started < 3.0
    fast.close()


def test_max_topics_refuses_the_next_topic_with_pulsars_errors(admin: AdminClient, client: magnetar.Client,
                                                               namespace: str, cluster: Any) -> None:
    admin.create_topic(f"persistent://{namespace}/one")
    admin.set_policy(namespace, "maxTopicsPerNamespace", 3)  # counts the topic created before it
    admin.create_partitioned_topic(f"persistent://{namespace}/parted", 2)  # a partition counts as a topic
    response = HTTP.put(f"{cluster.url}/admin/v2/persistent/{namespace}/three")
    assert response.status_code == 412, response.text
    assert response.json()["reason"] == "Exceed maximum number of topics in namespace."
    with pytest.raises(exceptions.PulsarException) as refused:
        admin.create_partitioned_topic(f"persistent://{namespace}/more", 1)
    assert refused.value.status == 412
    with pytest.raises(exceptions.NotAllowedError):  # auto-creation: Pulsar's client NotAllowedError
        client.create_producer(f"persistent://{namespace}/auto")
    with pytest.raises(exceptions.NotAllowedError):
        client.subscribe(f"persistent://{namespace}/auto-sub", "s")
    client.create_producer(f"persistent://{namespace}/parted").send(b"partitions were counted already")
    admin.remove_policy(namespace, "maxTopicsPerNamespace")
    admin.create_topic(f"persistent://{namespace}/three")


def test_max_subscriptions_refuses_the_next_subscription(admin: AdminClient, client: magnetar.Client,
                                                         namespace: str) -> None:
    topic = f"persistent://{namespace}/subs"
    admin.create_topic(topic)
    admin.set_policy(namespace, "maxSubscriptionsPerTopic", 3)
    admin.set_policy(topic, "maxSubscriptionsPerTopic", 2)  # the topic's wins
    first = client.subscribe(topic, "a", consumer_type=magnetar.ConsumerType.Shared)
    client.subscribe(topic, "b", consumer_type=magnetar.ConsumerType.Shared)
    with pytest.raises(exceptions.NotAllowedError) as refused:
        client.subscribe(topic, "c")
    assert "Exceed the maximum number of subscriptions of the topic" in refused.value.reason
    again = client.subscribe(topic, "a", consumer_type=magnetar.ConsumerType.Shared)  # an existing one: no new count
    again.close()
    first.unsubscribe()
    client.subscribe(topic, "c")
    assert sorted(admin.subscriptions(topic)) == ["b", "c"]
