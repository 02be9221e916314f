"""Namespace and topic policies end to end: the admin API, the SDK, the CLI and the maintenance
function (the EventBridge schedule, run on demand by the local runtime)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

import magnetar
from http_helpers import HTTP
from magnetar.adapters.aws.dynamodb import DynamoMetadataStore
from magnetar.cli.main import app as cli
from magnetar.client import exceptions
from magnetar.client.admin import AdminClient
from magnetar.core import crashpoints
from magnetar.core.naming import TopicName


@pytest.fixture
def namespace(admin: AdminClient) -> str:
    name = f"public/pol-{uuid.uuid4().hex[:8]}"
    admin.create_namespace(name)
    return name


def run_maintenance(cluster, topic: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """One run of the maintenance function, for this test's topic only (a rule input {"topics"})."""
    response = HTTP.post(f"{cluster.url}/_magnetar/local/schedules/maintenance", json={"topics": [topic]},
                          timeout=120)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def wait_sealed(cluster, topic: str, entries: int) -> None:  # type: ignore[no-untyped-def]
    metadata = DynamoMetadataStore(cluster.names.table)
    deadline = time.monotonic() + 20
    while metadata.get_topic_state(TopicName.parse(topic))[0].next_entry < entries:
        assert time.monotonic() < deadline, "the journal consumer did not seal in time"
        time.sleep(0.2)


def segment_objects(cluster, topic: str) -> list[str]:  # type: ignore[no-untyped-def]
    t = TopicName.parse(topic)
    prefix = f"segments/{t.tenant}/{t.namespace}/"
    listing = boto3.client("s3").list_objects_v2(Bucket=cluster.names.bucket, Prefix=prefix)
    return [o["Key"] for o in listing.get("Contents", []) if f"/{t.local_name}/" in o["Key"]]


def send(client: magnetar.Client, topic: str, n: int, size: int = 100) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(n):
        producer.send(f"{i:04d}".encode().ljust(size, b"."))
    producer.close()


# --- the admin API ---------------------------------------------------------------------------------
def test_namespace_policies_are_set_read_and_removed_on_pulsars_paths(admin: AdminClient, namespace: str,
                                                                      cluster) -> None:  # type: ignore[no-untyped-def]
    admin.set_retention(namespace, 60, 512)
    admin.set_message_ttl(namespace, 120)
    admin.set_backlog_quota(namespace, limit_size=10 * 1024**2, limit_time=-1, policy="producer_exception")
    admin.set_deduplication(namespace, True)
    admin.set_policy(namespace, "maxProducersPerTopic", 3)
    admin.set_policy(namespace, "maxConsumersPerTopic", 4)
    assert admin.get_retention(namespace) == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 512}
    assert admin.get_message_ttl(namespace) == 120
    assert admin.get_backlog_quotas(namespace) == {
        "destination_storage": {"limitSize": 10 * 1024**2, "limitTime": -1, "policy": "producer_exception"}}
    assert admin.get_deduplication(namespace) is True
    assert admin.get_policy(namespace, "maxProducersPerTopic") == 3
    assert admin.get_policy(namespace, "maxConsumersPerTopic") == 4
    tenant, ns = namespace.split("/")
    raw = HTTP.get(f"{cluster.url}/admin/v2/namespaces/{tenant}/{ns}").json()
    assert raw["message_ttl_in_seconds"] == 120  # Pulsar's Policies field names
    admin.remove_policy(namespace, "messageTTL")
    admin.remove_backlog_quota(namespace)
    assert admin.get_message_ttl(namespace) is None
    assert admin.get_backlog_quotas(namespace) == {}


def test_topic_policies_override_the_namespace(admin: AdminClient, namespace: str, client: magnetar.Client) -> None:
    topic = f"persistent://{namespace}/over-{uuid.uuid4().hex[:6]}"
    admin.create_topic(topic)
    admin.set_message_ttl(namespace, 300)
    admin.set_message_ttl(topic, 30)
    admin.set_retention(topic, -1, -1)
    assert admin.get_message_ttl(topic) == 30 and admin.get_message_ttl(namespace) == 300
    assert admin.get_retention(topic) == {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
    admin.set_policy(topic, "maxProducers", 1)
    client.create_producer(topic, producer_name="first")
    with pytest.raises(exceptions.ProducerBusy):
        client.create_producer(topic, producer_name="second")
    with pytest.raises(exceptions.TopicNotFound):
        admin.set_message_ttl(f"persistent://{namespace}/never-created", 10)


@pytest.mark.parametrize(
    ("path", "body", "reason"),
    [
        ("retention", {"retentionTimeInMinutes": -5, "retentionSizeInMB": 1}, "Retention time and size"),
        ("retention", {"retentionTimeInMinutes": 10}, "retentionSizeInMB"),
        ("messageTTL", "ten", "JSON integer"),
        ("messageTTL", -1, "must be 0 or positive"),
        ("backlogQuota", {"limitSize": 10, "policy": "drop_everything"}, "policy"),
        ("deduplication", "yes", "true or false"),
        ("maxProducersPerTopic", 1.5, "JSON integer"),
    ],
)
def test_bad_policies_are_refused_with_a_reason_and_change_nothing(cluster, namespace: str, path: str,  # type: ignore[no-untyped-def]
                                                                    body: object, reason: str) -> None:
    tenant, ns = namespace.split("/")
    url = f"{cluster.url}/admin/v2/namespaces/{tenant}/{ns}"
    response = HTTP.post(f"{url}/{path}", json=body)
    assert response.status_code == 400, response.text
    assert reason in response.json()["reason"]
    assert HTTP.get(f"{url}").json() == {}, "nothing half-written"


def test_policies_of_an_unknown_namespace_are_404(cluster) -> None:  # type: ignore[no-untyped-def]
    response = HTTP.post(f"{cluster.url}/admin/v2/namespaces/public/nope-{uuid.uuid4().hex[:6]}/messageTTL", json=5)
    assert response.status_code == 404 and "does not exist" in response.json()["reason"]


# --- the lifecycle -----------------------------------------------------------------------------------
def test_ttl_expires_old_messages_for_every_subscription(cluster, admin: AdminClient, namespace: str,  # type: ignore[no-untyped-def]
                                                         client: magnetar.Client) -> None:
    topic = f"persistent://{namespace}/ttl"
    subs = [client.subscribe(topic, name, consumer_type=magnetar.ConsumerType.Shared) for name in ("a", "b")]
    send(client, topic, 5)
    admin.set_message_ttl(namespace, 5)  # room for a slow machine between the second send and the run
    time.sleep(5.5)
    send(client, topic, 2)  # younger than the TTL when the maintenance runs
    assert run_maintenance(cluster, topic)["expiredEntries"] >= 10
    for consumer in subs:
        got = [consumer.receive(timeout_millis=5000).data()[:4] for _ in range(2)]
        assert got == [b"0000", b"0001"], "only the messages younger than the TTL are delivered"
        with pytest.raises(exceptions.Timeout):
            consumer.receive(timeout_millis=500)


def test_without_retention_acknowledged_segments_are_deleted_and_unacknowledged_kept(
    cluster, admin: AdminClient, namespace: str, client: magnetar.Client  # type: ignore[no-untyped-def]
) -> None:
    topic = f"persistent://{namespace}/gc"
    consumer = client.subscribe(topic, "s", consumer_type=magnetar.ConsumerType.Exclusive)
    send(client, topic, 10)
    wait_sealed(cluster, topic, 10)
    run_maintenance(cluster, topic)
    assert segment_objects(cluster, topic), "nothing is acknowledged yet: the segments stay"
    for _ in range(10):
        consumer.acknowledge(consumer.receive(timeout_millis=5000))
    consumer.close()  # flushes the acknowledgements
    run_maintenance(cluster, topic)
    assert segment_objects(cluster, topic) == []
    seal, _ = DynamoMetadataStore(cluster.names.table).get_topic_state(TopicName.parse(topic))
    assert seal.first_entry == 10 and seal.trash == ()
    # a new subscription from Earliest starts at the first entry still stored
    again = client.subscribe(topic, "late", initial_position=magnetar.InitialPosition.Earliest)
    send(client, topic, 1)
    assert again.receive(timeout_millis=5000).data()[:4] == b"0000"


def test_retention_keeps_acknowledged_messages_for_readers(cluster, admin: AdminClient, namespace: str,  # type: ignore[no-untyped-def]
                                                           client: magnetar.Client) -> None:
    topic = f"persistent://{namespace}/kept"
    admin.set_retention(namespace, 60, -1)
    consumer = client.subscribe(topic, "s")
    send(client, topic, 6)
    for _ in range(6):
        consumer.acknowledge(consumer.receive(timeout_millis=5000))
    consumer.close()
    wait_sealed(cluster, topic, 6)
    run_maintenance(cluster, topic)
    assert segment_objects(cluster, topic), "retention keeps acknowledged data"
    reader = client.create_reader(topic, magnetar.MessageId.earliest)
    assert [reader.read_next(timeout_millis=5000).data()[:4] for _ in range(6)] == [f"{i:04d}".encode() for i in range(6)]


def test_backlog_quota_producer_exception_refuses_producers_with_a_clear_error(
    cluster, admin: AdminClient, namespace: str, client: magnetar.Client  # type: ignore[no-untyped-def]
) -> None:
    topic = f"persistent://{namespace}/quota-exception"
    admin.set_backlog_quota(namespace, limit_size=1000, policy="producer_exception")
    consumer = client.subscribe(topic, "slow")
    send(client, topic, 20)
    wait_sealed(cluster, topic, 20)
    assert topic in run_maintenance(cluster, topic)["blockedTopics"]
    with pytest.raises(exceptions.ProducerBlockedQuotaExceededException) as info:
        client.create_producer(topic)
    assert "backlog quota exceeded" in info.value.reason
    response = HTTP.post(f"{cluster.url}/topics/persistent/{namespace}/quota-exception",
                          json={"messages": [{"payload": "eA=="}]})
    assert response.status_code == 409 and "backlog quota exceeded" in response.json()["reason"]
    for _ in range(20):  # the consumer catches up: producers are admitted again
        consumer.acknowledge(consumer.receive(timeout_millis=5000))
    consumer.close()
    time.sleep(1.1)
    producer = client.create_producer(topic)
    assert producer.send(b"after") is not None


def test_backlog_quota_producer_request_hold_times_the_send_out(
    cluster, admin: AdminClient, namespace: str, client: magnetar.Client  # type: ignore[no-untyped-def]
) -> None:
    topic = f"persistent://{namespace}/quota-hold"
    admin.set_backlog_quota(namespace, limit_size=1000, policy="producer_request_hold")
    client.subscribe(topic, "slow")
    send(client, topic, 20)
    wait_sealed(cluster, topic, 20)
    run_maintenance(cluster, topic)
    producer = client.create_producer(topic, send_timeout_millis=3000)
    started = time.monotonic()
    with pytest.raises(exceptions.ProducerBlockedQuotaExceededError):
        producer.send(b"held")
    assert time.monotonic() - started >= 2.5, "the publish was held until the send timeout"


def test_backlog_quota_consumer_backlog_eviction_drops_the_oldest_backlog(
    cluster, admin: AdminClient, namespace: str, client: magnetar.Client  # type: ignore[no-untyped-def]
) -> None:
    topic = f"persistent://{namespace}/quota-evict"
    admin.set_backlog_quota(namespace, limit_size=1000, policy="consumer_backlog_eviction")
    consumer = client.subscribe(topic, "slow")
    send(client, topic, 20)
    wait_sealed(cluster, topic, 20)
    assert run_maintenance(cluster, topic)["evictedEntries"] > 0
    first = consumer.receive(timeout_millis=5000).data()[:4]
    assert first != b"0000", "the oldest messages were evicted"
    client.create_producer(topic).send(b"producers are never blocked by eviction")


def test_a_maintenance_run_crashing_mid_deletion_is_finished_by_the_next(
    cluster, namespace: str, client: magnetar.Client  # type: ignore[no-untyped-def]
) -> None:
    topic = f"persistent://{namespace}/gc-crash"
    send(client, topic, 8)  # no subscription, no retention: all of it may go
    wait_sealed(cluster, topic, 8)
    assert segment_objects(cluster, topic)
    crashpoints.enable("trim.after_commit")
    response = HTTP.post(f"{cluster.url}/_magnetar/local/schedules/maintenance", json={"topics": [topic]},
                          timeout=120)
    assert response.status_code == 500 and "SimulatedCrash" in response.json()["reason"]
    metadata = DynamoMetadataStore(cluster.names.table)
    t = TopicName.parse(topic)
    objects = set(segment_objects(cluster, topic))
    for seg in metadata.list_segments(t, 0, 100):
        assert seg.key in objects, "no listed segment points to a missing object"
    assert metadata.get_topic_state(t)[0].trash, "the unlisted objects are remembered as trash"
    run_maintenance(cluster, topic)
    assert segment_objects(cluster, topic) == []
    assert metadata.get_topic_state(t)[0].trash == ()


# --- the CLI --------------------------------------------------------------------------------------
def test_cli_sets_and_gets_namespace_policies(cluster, namespace: str) -> None:  # type: ignore[no-untyped-def]
    runner = CliRunner()
    url = ["--service-url", cluster.url]
    commands = [
        ["admin", "namespaces", "set-retention", namespace, "--time", "3h", "--size", "2G", *url],
        ["admin", "namespaces", "set-message-ttl", namespace, "--messageTTL", "10m", *url],
        ["admin", "namespaces", "set-backlog-quota", namespace, "--limitSize", "5M", "--policy", "producer_exception", *url],
        ["admin", "namespaces", "set-deduplication", namespace, "--enable", *url],
    ]
    for command in commands:
        result = runner.invoke(cli, command)
        assert result.exit_code == 0, result.output
    got = runner.invoke(cli, ["admin", "namespaces", "get-retention", namespace, *url])
    assert '"retentionTimeInMinutes": 180' in got.output and '"retentionSizeInMB": 2048' in got.output
    assert "600" in runner.invoke(cli, ["admin", "namespaces", "get-message-ttl", namespace, *url]).output
    quotas = runner.invoke(cli, ["admin", "namespaces", "get-backlog-quotas", namespace, *url]).output
    assert '"limitSize": 5242880' in quotas and "producer_exception" in quotas
    assert "true" in runner.invoke(cli, ["admin", "namespaces", "get-deduplication", namespace, *url]).output
    bad = runner.invoke(cli, ["admin", "namespaces", "set-backlog-quota", namespace, "--policy", "nope", *url])
    assert bad.exit_code == 1 and "policy" in bad.output


def test_a_scheduled_run_visits_every_topic(cluster, client: magnetar.Client, namespace: str) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://{namespace}/scheduled"
    send(client, topic, 3)
    wait_sealed(cluster, topic, 3)
    response = HTTP.post(f"{cluster.url}/_magnetar/local/schedules/maintenance", timeout=300)  # the schedule's event
    assert response.status_code == 200 and response.json()["topics"] >= 1
    assert segment_objects(cluster, topic) == [], "no subscription, no retention: the run deleted them"
    bad = HTTP.post(f"{cluster.url}/_magnetar/local/schedules/maintenance", content=b"[1]")
    assert bad.status_code == 400 and "JSON object" in bad.json()["reason"]
