"""Subscription administration and the paged topic listing through the HTTP API, on the session
cluster (DynamoDB, S3 and Kinesis emulated): Pulsar's subscription routes, reads decoded with the
topic's schema, a page of a namespace of 10,000 topics read with one Query, and bad input
refused with a reason."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

import magnetar
from http_helpers import HTTP
from magnetar import schema as ms


def call(cluster: Any, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return HTTP.request(method, f"{cluster.url}{path}", timeout=30, **kwargs)


def backlog(cluster: Any, topic_path: str, subscription: str) -> int:
    stats = call(cluster, "GET", f"/admin/v2/persistent/{topic_path}/stats").json()
    return int(stats["subscriptions"][subscription]["msgBacklog"])


def produce(client: magnetar.Client, topic: str, count: int) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(count):
        producer.send(f"m{i}".encode())
    producer.close()


def test_the_subscription_routes_move_cursors_as_pulsar_admin_does(cluster: Any, client: magnetar.Client,
                                                                  topic: str) -> None:
    produce(client, topic, 10)
    path = topic.removeprefix("persistent://")
    sub = f"/admin/v2/persistent/{path}/subscription"
    assert call(cluster, "PUT", f"{sub}/audit", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    assert call(cluster, "PUT", f"{sub}/tail").status_code == 204  # no body: at the end
    assert backlog(cluster, path, "audit") == 10 and backlog(cluster, path, "tail") == 0
    again = call(cluster, "PUT", f"{sub}/audit")
    assert again.status_code == 409 and "already exists" in again.json()["reason"]

    skipped = call(cluster, "POST", f"{sub}/audit/skip/3")
    assert skipped.status_code == 200 and skipped.json() == {"skipped": 3}
    assert backlog(cluster, path, "audit") == 7
    assert call(cluster, "POST", f"{sub}/audit/resetcursor", json={"ledgerId": 0, "entryId": 8}).status_code == 204
    assert backlog(cluster, path, "audit") == 2
    assert call(cluster, "POST", f"{sub}/audit/resetcursor/0").status_code == 204  # to the start, by time
    assert backlog(cluster, path, "audit") == 10
    cleared = call(cluster, "POST", f"{sub}/audit/skip_all")
    assert cleared.json() == {"skipped": 10} and backlog(cluster, path, "audit") == 0

    consumer = client.subscribe(topic, "audit", consumer_type=magnetar.ConsumerType.Shared)
    busy = call(cluster, "DELETE", f"{sub}/audit")
    assert busy.status_code == 412 and "active consumers" in busy.json()["reason"]
    assert call(cluster, "DELETE", f"{sub}/audit", params={"force": "true"}).status_code == 204
    listed = call(cluster, "GET", f"/admin/v2/persistent/{path}/subscriptions").json()
    assert "audit" not in listed and "tail" in listed
    consumer.close()


@pytest.mark.parametrize(("method", "suffix", "body", "status", "reason"), [
    ("POST", "tail/skip/abc", None, 400, "numMessages"),
    ("POST", "tail/skip/0", None, 400, "positive"),
    ("POST", "tail/resetcursor/yesterday", None, 400, "timestamp"),
    ("POST", "tail/resetcursor", {"ledgerId": 0}, 400, "entryId"),
    ("POST", "tail/resetcursor", {"ledgerId": 0, "entryId": -1}, 400, "entryId"),
    ("PUT", "pulsar.repl.east", None, 400, "replicator"),
    ("PUT", "at-99", {"ledgerId": 0, "entryId": 99}, 400, "keeps entries"),
    ("DELETE", "nobody", None, 404, "not found"),
    ("POST", "nobody/skip_all", None, 404, "not found"),
])
def test_bad_subscription_admin_requests_are_refused(cluster: Any, client: magnetar.Client, topic: str, method: str,
                                                     suffix: str, body: Any, status: int, reason: str) -> None:
    produce(client, topic, 1)
    sub = f"/admin/v2/persistent/{topic.removeprefix('persistent://')}/subscription"
    call(cluster, "PUT", f"{sub}/tail")
    response = call(cluster, method, f"{sub}/{suffix}", json=body)
    assert response.status_code == status, response.text
    assert reason in response.json()["reason"]
    missing = call(cluster, "PUT", "/admin/v2/persistent/public/default/never-created-topic/subscription/s")
    assert missing.status_code == 404 and "reason" in missing.json()


def test_a_read_decodes_values_with_their_schema(cluster: Any, client: magnetar.Client, topic: str) -> None:
    class Reading(ms.Record):
        sensor = ms.String()
        celsius = ms.Double()

    producer = client.create_producer(topic, schema=ms.AvroSchema(Reading))
    producer.send(Reading(sensor="s1", celsius=21.5), properties={"site": "north"})
    producer.close()
    read = f"/magnetar/v1/reader/persistent/{topic.removeprefix('persistent://')}/read"
    deadline = time.monotonic() + 10
    while True:
        messages = call(cluster, "POST", read, json={"startEntryId": 0, "decode": True}).json()["messages"]
        if messages or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    (message,) = messages
    assert message["value"] == {"sensor": "s1", "celsius": 21.5}
    assert message["schemaType"] == "AVRO" and message["schemaVersion"] == 0 and message["properties"] == {"site": "north"}
    plain = call(cluster, "POST", read, json={"startEntryId": 0}).json()["messages"][0]
    assert "value" not in plain and "schemaType" not in plain  # undecoded reads are as they were
    refused = call(cluster, "POST", read, json={"format": "entries", "decode": True})
    assert refused.status_code == 400 and "decode" in refused.json()["reason"]


def test_a_page_of_a_namespace_of_10_000_topics_is_one_query(cluster: Any) -> None:
    from magnetar.adapters.aws import build_broker
    from magnetar.adapters.aws.clients import REQUESTS

    namespace = f"many-{uuid.uuid4().hex[:6]}"
    assert call(cluster, "PUT", f"/admin/v2/namespaces/public/{namespace}").status_code == 204
    store: Any = build_broker().metadata
    names = [f"persistent://public/{namespace}/t-{i:05d}" for i in range(10_000)]
    for start in range(0, len(names), 25):  # the listing items topics leave, written directly (quicker)
        request = {store.config_table: [{"PutRequest": {"Item": {
            "pk": {"S": f"TOPICS#public/{namespace}"}, "sk": {"S": name}, "createdAt": {"N": "0"}}}}
            for name in names[start:start + 25]]}
        while request:
            request = store.config_ddb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
    base = f"/admin/v2/persistent/public/{namespace}"
    queries_before = REQUESTS.snapshot().get("dynamodb.Query", 0)
    began = time.monotonic()
    page = call(cluster, "GET", base, params={"limit": 100, "startAfter": names[6999]})
    elapsed = time.monotonic() - began
    assert page.status_code == 200 and page.json() == names[7000:7100]
    assert REQUESTS.snapshot().get("dynamodb.Query", 0) - queries_before == 1
    assert elapsed < 2.0, f"a page took {elapsed:.2f}s"
    found = call(cluster, "GET", base, params={"search": "T-0999", "limit": 5}).json()
    assert found == [f"persistent://public/{namespace}/t-0999{i}" for i in range(5)]
    last = call(cluster, "GET", base, params={"startAfter": "t-09998"}).json()  # a local name works too
    assert last == [names[-1]]
    assert len(call(cluster, "GET", base).json()) == 10_000  # Pulsar's unpaged call, as it was
    for params, reason in (({"limit": "0"}, "limit"), ({"limit": "lots"}, "limit"), ({"limit": "5000"}, "limit"),
                           ({"search": "x" * 300}, "search")):
        refused = call(cluster, "GET", base, params=params)
        assert refused.status_code == 400 and reason in refused.json()["reason"], refused.text
