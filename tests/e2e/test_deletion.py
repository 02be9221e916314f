"""Deleting topics, partitioned topics, namespaces and tenants on the session cluster (DynamoDB, S3
and Kinesis emulated) through the HTTP API, the SDK's admin client and the CLI: Pulsar's paths and
answers, nothing of a deleted topic left in its table, bucket, listings, stats or metrics, and no
record of it still in the journal ever reaching a new topic of its name."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

import magnetar
from http_helpers import HTTP
from magnetar.adapters.aws.clients import client as aws_client
from magnetar.cli.main import app
from magnetar.client.admin import AdminClient
from magnetar.config import ResourceNames
from magnetar.core import crashpoints

runner = CliRunner()


def call(cluster: Any, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return HTTP.request(method, f"{cluster.url}{path}", timeout=60, **kwargs)


def table_items(cluster: Any, topic: str) -> list[str]:
    """The sort keys of the topic partition's items in the cluster's metadata table."""
    page = aws_client("dynamodb").query(TableName=ResourceNames.from_env().table, KeyConditionExpression="pk = :pk",
                                        ExpressionAttributeValues={":pk": {"S": f"TP#{topic}"}}, ConsistentRead=True)
    return sorted(item["sk"]["S"] for item in page["Items"])


def bucket_keys(cluster: Any, topic: str) -> list[str]:
    local = topic.removeprefix("persistent://").split("/")
    prefix = f"segments/{local[0]}/{local[1]}/persistent/{local[2]}/"
    page = aws_client("s3").list_objects_v2(Bucket=ResourceNames.from_env().bucket, Prefix=prefix)
    return [obj["Key"] for obj in page.get("Contents", [])]


def eventually(check: Any, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def receive_all(client: magnetar.Client, topic: str, expected: int, timeout_ms: int = 2_000) -> list[bytes]:
    consumer = client.subscribe(topic, f"check-{uuid.uuid4().hex[:6]}",
                                initial_position=magnetar.InitialPosition.Earliest)
    got: list[bytes] = []
    try:
        while True:
            got.append(consumer.receive(timeout_millis=timeout_ms if len(got) >= expected else 15_000).data())
    except magnetar.Timeout:
        pass
    consumer.close()
    return got


def test_delete_topic_over_http_leaves_nothing_and_a_new_topic_starts_empty(cluster: Any, client: magnetar.Client,
                                                                          topic: str) -> None:
    path = f"/admin/v2/persistent/{topic.removeprefix('persistent://')}"
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        producer.send(f"old-{i}".encode())
    consumer = client.subscribe(topic, "busy", initial_position=magnetar.InitialPosition.Earliest)
    consumer.receive(timeout_millis=15_000)

    busy = call(cluster, "DELETE", path)
    assert busy.status_code == 412 and "active producers/subscriptions" in busy.json()["reason"]
    assert eventually(lambda: bucket_keys(cluster, topic)), "sealed before the delete"
    # forced: while records of the producer may still wait in the journal to be sealed
    for i in range(20, 40):
        producer.send_async(f"old-{i}".encode(), None)
    producer.flush()
    assert call(cluster, "DELETE", path, params={"force": "true"}).status_code == 204
    assert call(cluster, "DELETE", path).status_code == 404
    assert topic not in call(cluster, "GET", "/admin/v2/persistent/public/default").json()
    assert call(cluster, "GET", f"{path}/stats").status_code == 404
    time.sleep(1.5)  # the journal consumer meanwhile met the records still in flight
    assert table_items(cluster, topic) == ["SEAL", "WRITER"], "the fence only"
    assert bucket_keys(cluster, topic) == []

    # the same name, created again by its first publish, holds only what was published since
    fresh = client.create_producer(topic, batching_enabled=False, producer_name=f"fresh-{uuid.uuid4().hex[:6]}")
    ids = [fresh.send(f"new-{i}".encode()) for i in range(3)]
    assert all(i.entry_id() >= 40 for i in ids), "a new incarnation continues the entry ids"
    assert receive_all(client, topic, 3) == [b"new-0", b"new-1", b"new-2"]
    assert call(cluster, "GET", f"{path}/subscriptions").json() == [] or "busy" not in \
        call(cluster, "GET", f"{path}/subscriptions").json()
    fresh.close()


def test_sdk_and_cli_delete_partitioned_topics_namespaces_and_tenants(cluster: Any, client: magnetar.Client,
                                                                    admin: AdminClient) -> None:
    tenant = f"del-{uuid.uuid4().hex[:6]}"
    admin.create_tenant(tenant, allowed_clusters=["standalone"])
    admin.create_namespace(f"{tenant}/ns")
    parted = f"persistent://{tenant}/ns/parted"
    admin.create_partitioned_topic(parted, 3)
    producer = client.create_producer(parted, batching_enabled=False)
    for i in range(6):
        producer.send(f"m{i}".encode(), partition_key=str(i))
    producer.close()
    admin.create_topic(f"persistent://{tenant}/ns/plain")

    with pytest.raises(magnetar.PulsarException, match="Cannot delete non empty namespace"):
        admin.delete_namespace(f"{tenant}/ns")
    with pytest.raises(magnetar.PulsarException, match="still has active namespaces"):
        admin.delete_tenant(tenant)
    admin.delete_partitioned_topic(parted)
    assert admin.partitioned_topic_metadata(parted) == 0
    with pytest.raises(magnetar.PulsarException):
        admin.delete_partitioned_topic(parted)
    assert all(table_items(cluster, f"{parted}-partition-{i}") == ["SEAL", "WRITER"] for i in range(3))

    def cli(*args: str) -> Any:
        return runner.invoke(app, ["admin", *args, "--service-url", cluster.url])

    refused = cli("namespaces", "delete", f"{tenant}/ns")
    assert refused.exit_code == 1 and "Cannot delete non empty namespace" in refused.output
    assert cli("topics", "delete", f"persistent://{tenant}/ns/plain").exit_code == 0
    admin.create_topic(f"persistent://{tenant}/ns/again")
    assert cli("tenants", "delete", tenant, "--force").exit_code == 0, "its namespace and topic too"
    assert tenant not in admin.tenants()
    missing = cli("tenants", "delete", tenant)
    assert missing.exit_code == 1 and "does not exist" in missing.output


def test_a_deletion_that_dies_halfway_is_finished_by_the_next_delete(cluster: Any, client: magnetar.Client,
                                                                    topic: str) -> None:
    path = f"/admin/v2/persistent/{topic.removeprefix('persistent://')}"
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"m{i}".encode())
    producer.close()
    client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest).close()
    assert eventually(lambda: bucket_keys(cluster, topic))
    crashpoints.enable("delete.after_items")
    assert call(cluster, "DELETE", path).status_code >= 500
    assert crashpoints.fired["delete.after_items"]
    crashpoints.disable_all()
    assert call(cluster, "GET", f"{path}/stats").status_code == 404, "nothing readable half-deleted"
    assert bucket_keys(cluster, topic), "the objects were not deleted yet"
    assert call(cluster, "DELETE", path).status_code == 204
    assert bucket_keys(cluster, topic) == [] and table_items(cluster, topic) == ["SEAL", "WRITER"]
    assert call(cluster, "DELETE", path).status_code == 404


def test_bad_input_and_the_metrics_forget_a_deleted_topic(cluster: Any, client: magnetar.Client) -> None:
    namespace = f"public/del-{uuid.uuid4().hex[:6]}"
    assert call(cluster, "PUT", f"/admin/v2/namespaces/{namespace}").status_code == 204
    topic = f"persistent://{namespace}/gone"
    client.create_producer(topic).send(b"x")
    metrics = call(cluster, "GET", "/metrics", params={"namespace": namespace, "topics": "true"}).text
    assert f'topic="{topic}"' in metrics
    path = f"/admin/v2/persistent/{namespace}/gone"
    bad = call(cluster, "DELETE", path, params={"force": "maybe"})
    assert bad.status_code == 400 and "force" in bad.json()["reason"]
    partition = call(cluster, "DELETE", f"{path}-partition-0/partitions")
    assert partition.status_code == 412 and "-partition-" in partition.json()["reason"]
    assert call(cluster, "DELETE", f"{path}/partitions").status_code == 404
    assert call(cluster, "DELETE", path, params={"force": "true"}).status_code == 204
    metrics = call(cluster, "GET", "/metrics", params={"namespace": namespace, "topics": "true"}).text
    assert f'topic="{topic}"' not in metrics
    assert call(cluster, "DELETE", f"/admin/v2/namespaces/{namespace}").status_code == 204
    assert call(cluster, "DELETE", f"/admin/v2/namespaces/{namespace}").status_code == 404
    assert call(cluster, "DELETE", "/admin/v2/tenants/no-such-tenant").status_code == 404
