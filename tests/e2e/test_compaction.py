"""Topic compaction and TableView end to end: the admin API's trigger and status, the
compactionThreshold policy through the maintenance function, compacted reads by readers, the
REST compacted read, TableView updates, retention, and crash points during a run."""

from __future__ import annotations

import base64
import threading
import time
import uuid
from typing import Any

import httpx
import pytest

import magnetar
from http_helpers import HTTP
from magnetar.adapters.aws.dynamodb import DynamoMetadataStore
from magnetar.core import crashpoints
from magnetar.core.naming import TopicName


def admin_path(topic: str) -> str:
    return "/admin/v2/" + topic.replace("://", "/", 1)


def run_maintenance(cluster, topic: str) -> None:  # type: ignore[no-untyped-def]
    response = HTTP.post(f"{cluster.url}/_magnetar/local/schedules/maintenance", json={"topics": [topic]},
                          timeout=120)
    assert response.status_code == 200, response.text


def wait_sealed(cluster, topic: str, entries: int) -> None:  # type: ignore[no-untyped-def]
    metadata = DynamoMetadataStore(cluster.names.table)
    deadline = time.monotonic() + 20
    while metadata.get_topic_state(TopicName.parse(topic))[0].next_entry < entries:
        assert time.monotonic() < deadline, "the journal consumer did not seal in time"
        time.sleep(0.1)


def publish(client: magnetar.Client, topic: str, *messages: tuple[str | None, bytes | None]) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for key, value in messages:
        producer.send(value, partition_key=key)
    producer.close()


def compact(cluster, topic: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=cluster.url, timeout=60) as http:
        assert http.get(f"{admin_path(topic)}/compaction").json()["status"] in ("NOT_RUN", "SUCCESS")
        response = http.put(f"{admin_path(topic)}/compaction")
        assert response.status_code == 204, response.text
        status: dict[str, Any] = http.get(f"{admin_path(topic)}/compaction").json()
        return status


def read_all(client: magnetar.Client, topic: str, compacted: bool) -> list[tuple[str, bytes]]:
    reader = client.create_reader(topic, magnetar.MessageId.earliest, is_read_compacted=compacted)
    out = []
    while reader.has_message_available():
        message = reader.read_next(5_000)
        out.append((message.partition_key(), message.data()))
    reader.close()
    return out


HISTORY: list[tuple[str | None, bytes | None]] = [
    ("a", b"a1"), ("b", b"b1"), (None, b"no key"), ("a", b"a2"), ("c", b"c1"), ("b", None), ("d", b"d1")]


def test_manual_compaction_and_compacted_reads(cluster, client: magnetar.Client, topic: str) -> None:  # type: ignore[no-untyped-def]
    publish(client, topic, *HISTORY)
    wait_sealed(cluster, topic, len(HISTORY))
    assert compact(cluster, topic) == {"status": "SUCCESS"}
    publish(client, topic, ("c", b"c2"), ("e", b"e1"))  # the live tail after the horizon
    wait_sealed(cluster, topic, len(HISTORY) + 2)
    assert read_all(client, topic, compacted=True) == [
        ("a", b"a2"), ("c", b"c1"), ("d", b"d1"), ("c", b"c2"), ("e", b"e1")]
    assert len(read_all(client, topic, compacted=False)) == len(HISTORY) + 2, "the topic itself is untouched"
    # the REST compacted read: the view, masked, then the topic from the horizon on
    path = topic.replace("://", "/", 1)
    with httpx.Client(base_url=cluster.url, timeout=30) as http:
        page = http.post(f"/magnetar/v1/reader/{path}/compacted", json={"startEntryId": 0}).json()
        assert page["horizon"] == len(HISTORY)
        assert [base64.b64decode(m["payload"]) for m in page["messages"]] == [b"a2", b"c1", b"d1"]
        tail = http.post(f"/magnetar/v1/reader/{path}/compacted", json={"startEntryId": page["nextEntryId"]}).json()
        assert [base64.b64decode(m["payload"]) for m in tail["messages"]] == [b"c2", b"e1"]
        # a second compaction folds the tail in; a tombstone deletes a key compacted before
        publish(client, topic, ("a", None))
        wait_sealed(cluster, topic, len(HISTORY) + 3)
        assert http.put(f"{admin_path(topic)}/compaction").status_code == 204
    assert read_all(client, topic, compacted=True) == [("d", b"d1"), ("c", b"c2"), ("e", b"e1")]


def test_compaction_refusals(cluster, topic: str) -> None:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=cluster.url, timeout=30) as http:
        missing = http.put(f"{admin_path(topic)}/compaction")
        assert missing.status_code == 404 and missing.json()["reason"]
        assert http.get(f"{admin_path(topic)}/compaction").status_code == 404
        bad = http.post(f"/magnetar/v1/reader/{topic.replace('://', '/', 1)}/compacted", json={"startEntryId": -1})
        assert bad.status_code == 400 and bad.json()["reason"]


def test_threshold_policy_compacts_from_the_maintenance_run(cluster, client: magnetar.Client, topic: str) -> None:  # type: ignore[no-untyped-def]
    publish(client, topic, *[("k", b"x" * 200) for _ in range(5)])
    wait_sealed(cluster, topic, 5)
    with httpx.Client(base_url=cluster.url, timeout=30) as http:
        assert http.post(f"{admin_path(topic)}/compactionThreshold", json=500).status_code == 204
        assert http.get(f"{admin_path(topic)}/compactionThreshold").json() == 500
        run_maintenance(cluster, topic)
        assert http.get(f"{admin_path(topic)}/compaction").json() == {"status": "SUCCESS"}
        ns = "/admin/v2/namespaces/public/default/compactionThreshold"
        assert http.post(ns, json=-1).status_code == 400
    assert read_all(client, topic, compacted=True) == [("k", b"x" * 200)]


def test_table_view_follows_the_topic(cluster, client: magnetar.Client, topic: str) -> None:  # type: ignore[no-untyped-def]
    publish(client, topic, *HISTORY)
    wait_sealed(cluster, topic, len(HISTORY))
    compact(cluster, topic)
    publish(client, topic, ("d", b"d2"))
    wait_sealed(cluster, topic, len(HISTORY) + 1)
    view = client.create_table_view(topic)
    assert dict(view.items()) == {"a": b"a2", "c": b"c1", "d": b"d2"}
    assert len(view) == 3 and "a" in view and "b" not in view and view.get("b") is None
    seen: list[tuple[str, Any]] = []
    changed = threading.Event()

    def listener(key: str, value: Any) -> None:
        seen.append((key, value))
        if key == "a" and value is None:
            changed.set()

    view.for_each_and_listen(listener)
    assert sorted(seen) == [("a", b"a2"), ("c", b"c1"), ("d", b"d2")]
    publish(client, topic, ("e", b"e1"), ("a", None))
    assert changed.wait(15), "the listener was not told"
    assert seen[-2:] == [("e", b"e1"), ("a", None)]
    assert sorted(view.keys()) == ["c", "d", "e"] and view.get("e") == b"e1"
    collected: dict[str, Any] = {}
    view.for_each(collected.__setitem__)
    assert collected == {"c": b"c1", "d": b"d2", "e": b"e1"}
    view.close()


def test_retention_keeps_what_the_compacted_view_needs(cluster, client: magnetar.Client, topic: str) -> None:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
    publish(client, topic, ("a", b"a1"), ("b", b"b1"))
    wait_sealed(cluster, topic, 2)
    compact(cluster, topic)
    publish(client, topic, ("a", b"a2"))
    wait_sealed(cluster, topic, 3)
    for _ in range(3):
        consumer.acknowledge(consumer.receive(10_000))
    consumer.close()
    with httpx.Client(base_url=cluster.url, timeout=30) as http:
        body = {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}
        assert http.post(f"{admin_path(topic)}/retention", json=body).status_code == 204
    time.sleep(1)  # the acknowledgements reach the cursor
    run_maintenance(cluster, topic)
    seal = DynamoMetadataStore(cluster.names.table).get_topic_state(TopicName.parse(topic))[0]
    assert seal.first_entry <= 2, "the tail past the horizon was trimmed"
    assert read_all(client, topic, compacted=True) == [("a", b"a1"), ("b", b"b1"), ("a", b"a2")]
    compact(cluster, topic)
    assert read_all(client, topic, compacted=True) == [("b", b"b1"), ("a", b"a2")]


@pytest.mark.parametrize("point", ["compaction.after_write", "compaction.after_commit"])
def test_a_crash_during_compaction_leaves_a_consistent_state(cluster, client: magnetar.Client, point: str) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://public/default/crash-{uuid.uuid4().hex[:10]}"
    publish(client, topic, ("a", b"a1"), ("b", b"b1"), ("a", b"a2"))
    wait_sealed(cluster, topic, 3)
    crashpoints.enable(point, times=1)
    with httpx.Client(base_url=cluster.url, timeout=60) as http:
        crashed = http.put(f"{admin_path(topic)}/compaction")
        assert crashed.status_code >= 500
        assert crashpoints.fired[point] >= 1
        expected = [("b", b"b1"), ("a", b"a2")]
        if point == "compaction.after_write":  # not committed: no view yet, the run resumes
            assert http.get(f"{admin_path(topic)}/compaction").json() == {"status": "RUNNING"}
            assert len(read_all(client, topic, compacted=True)) == 3
        else:  # committed: the view serves already
            assert read_all(client, topic, compacted=True) == expected
        run_maintenance(cluster, topic)  # finishes the run or its deletion of the old generation
        assert http.get(f"{admin_path(topic)}/compaction").json() == {"status": "SUCCESS"}
    assert read_all(client, topic, compacted=True) == expected


def test_partitioned_topic_compaction_and_table_view(cluster, client: magnetar.Client, admin) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://public/default/cp-{uuid.uuid4().hex[:10]}"
    admin.create_partitioned_topic(topic, 2)
    messages = [(f"k{i % 6}", f"v{i}".encode()) for i in range(18)]
    publish(client, topic, *messages)
    for i in range(2):
        deadline = time.monotonic() + 20
        metadata = DynamoMetadataStore(cluster.names.table)
        partition = TopicName.parse(topic).partition(i)
        while metadata.get_topic_state(partition)[0].next_entry < metadata.get_topic_state(partition)[1].next_entry:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert compact(cluster, topic) == {"status": "SUCCESS"}
    view = client.create_table_view(topic)
    assert dict(view.items()) == {f"k{i}": f"v{12 + i}".encode() for i in range(6)}
    view.close()


@pytest.mark.parametrize("batched", [False, True])
def test_a_consumer_reads_compacted(cluster, client: magnetar.Client, topic: str, batched: bool) -> None:  # type: ignore[no-untyped-def]
    producer = client.create_producer(topic, batching_enabled=batched, batching_max_publish_delay_ms=50)
    for key, value in HISTORY:
        producer.send_async(value, None, partition_key=key)
    producer.flush()
    producer.close()
    deadline = time.monotonic() + 20
    metadata = DynamoMetadataStore(cluster.names.table)
    while metadata.get_topic_state(TopicName.parse(topic))[0].next_entry < metadata.get_topic_state(
            TopicName.parse(topic))[1].next_entry:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    compact(cluster, topic)
    publish(client, topic, ("c", b"c2"))
    consumer = client.subscribe(topic, "compacted", initial_position=magnetar.InitialPosition.Earliest,
                                is_read_compacted=True)
    got = []
    for _ in range(4):
        message = consumer.receive(10_000)
        got.append((message.partition_key(), message.data()))
        if message.partition_key() != "d":
            consumer.acknowledge(message)
    assert got == [("a", b"a2"), ("c", b"c1"), ("d", b"d1"), ("c", b"c2")]
    with pytest.raises(magnetar.Timeout):
        consumer.receive(1_500)
    consumer.close()
    # what the consumer did not acknowledge comes back to the subscription, filtered the same way
    again = client.subscribe(topic, "compacted", is_read_compacted=True)
    message = again.receive(10_000)
    assert (message.partition_key(), message.data()) == ("d", b"d1")
    again.acknowledge(message)
    with pytest.raises(magnetar.Timeout):
        again.receive(1_500)
    plain = client.subscribe(topic, "plain", initial_position=magnetar.InitialPosition.Earliest)
    assert len([plain.receive(10_000) for _ in range(len(HISTORY) + 1)]) == len(HISTORY) + 1


def test_cli_compact_and_status(cluster, client: magnetar.Client, topic: str) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from magnetar.cli.main import app

    publish(client, topic, ("a", b"1"), ("a", b"2"))
    wait_sealed(cluster, topic, 2)
    runner = CliRunner()
    status = runner.invoke(app, ["admin", "topics", "compaction-status", topic, "--service-url", cluster.url])
    assert status.exit_code == 0 and "NOT_RUN" in status.output
    compacted = runner.invoke(app, ["admin", "topics", "compact", topic, "--service-url", cluster.url])
    assert compacted.exit_code == 0, compacted.output
    status = runner.invoke(app, ["admin", "topics", "compaction-status", topic, "--service-url", cluster.url])
    assert status.exit_code == 0 and "SUCCESS" in status.output
    assert read_all(client, topic, compacted=True) == [("a", b"2")]


def test_a_compaction_triggered_right_after_the_sends_compacts_them(cluster, client: magnetar.Client,  # type: ignore[no-untyped-def]
                                                                    topic: str) -> None:
    """As pulsar-client's suite does it (test_publish_compact_and_consume): the trigger comes at
    once after the sends, before the journal consumer sealed them; the run compacts them anyway."""
    client.subscribe(topic, "compacted", is_read_compacted=True).close()
    plain = client.subscribe(topic, "plain")
    publish(client, topic, ("k", b"hello-0"), ("k", b"hello-1"))
    assert compact(cluster, topic) == {"status": "SUCCESS"}
    consumer = client.subscribe(topic, "compacted", is_read_compacted=True)
    assert consumer.receive(10_000).data() == b"hello-1"
    assert read_all(client, topic, compacted=True) == [("k", b"hello-1")]
    assert [plain.receive(10_000).data() for _ in range(2)] == [b"hello-0", b"hello-1"]
