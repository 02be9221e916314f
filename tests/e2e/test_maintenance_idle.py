"""The maintenance function on idle topics, through the local stack: one state read per idle
topic and run, whatever the topic's history (created empty, or emptied by retention)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from http_helpers import HTTP


def run_maintenance(cluster, topics: list[str]) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    response = HTTP.post(f"{cluster.url}/_magnetar/local/schedules/maintenance", json={"topics": topics},
                          timeout=120)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_idle_topics_cost_one_state_read_per_run(cluster, admin, client) -> None:  # type: ignore[no-untyped-def]
    namespace = f"public/idle-{uuid.uuid4().hex[:8]}"
    admin.create_namespace(namespace)
    topics = [f"persistent://{namespace}/t{i}" for i in range(20)]
    for t in topics:
        admin.create_topic(t)
    used = f"persistent://{namespace}/used"
    producer = client.create_producer(used, batching_enabled=False)
    for _ in range(3):
        producer.send(b"m")
    producer.close()
    topics.append(used)
    deadline = time.monotonic() + 20
    # all three sealed first (a busy shard's seals are paced: they may land in more than one segment)
    while sum(seg["lastEntry"] - seg["firstEntry"] + 1
              for ledger in admin.topic_internal_stats(used)["ledgers"] for seg in ledger["segments"]) < 3:
        assert time.monotonic() < deadline, "the messages were never sealed"
        time.sleep(0.2)
    # no subscription: everything is acknowledged, so a run trims it once it is sealed
    while run_maintenance(cluster, [used])["trimmedSegments"] == 0:
        assert time.monotonic() < deadline, "the messages were never sealed and trimmed"
        time.sleep(0.3)

    HTTP.delete(f"{cluster.url}/_magnetar/local/stats", timeout=30)
    report = run_maintenance(cluster, topics)
    requests = HTTP.get(f"{cluster.url}/_magnetar/local/stats", timeout=30).json()["aws_requests"]
    assert report["topics"] == len(topics)
    dynamodb = {k: n for k, n in requests.items() if k.startswith("dynamodb.")}
    # per named topic: its partition count (the rule input names topics) and its state, nothing else;
    # per run: the one query of the push registry (the topics with WebSocket connections)
    assert dynamodb.get("dynamodb.Query", 0) <= 1, dynamodb
    assert sum(dynamodb.values()) <= 2 * len(topics) + 1, dynamodb
    assert not any(k.startswith("s3.") for k in requests), requests
