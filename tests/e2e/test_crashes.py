"""Crashes at named points lose and duplicate nothing (the emulated AWS retries as AWS does)."""

from __future__ import annotations

import time

import pytest

import magnetar
from http_helpers import HTTP
from magnetar.adapters.aws.dynamodb import DynamoMetadataStore
from magnetar.config import ResourceNames
from magnetar.core import crashpoints
from magnetar.core.naming import TopicName


def wait_sealed(topic: str, entries: int, timeout_s: float = 30) -> None:
    store = DynamoMetadataStore(ResourceNames.from_env().table)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = store.get_seal_states([topic]).get(topic)
        if state and state.next_entry >= entries:
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} not sealed to {entries} within {timeout_s}s")


def read_all(cluster, topic: str) -> list[dict]:  # type: ignore[no-untyped-def]
    name = TopicName.parse(topic)
    url = f"{cluster.url}/magnetar/v1/reader/persistent/{name.tenant}/{name.namespace}/{name.local_name}/read"
    out, start = [], 0
    while True:
        page = HTTP.post(url, json={"startEntryId": start, "maxEntries": 1000}).json()
        out.extend(page["messages"])
        if page["nextEntryId"] == start:
            return out
        start = page["nextEntryId"]


@pytest.mark.parametrize("crash_point", ["seal.after_segment_put", "seal.after_commit"])
def test_journal_consumer_killed_mid_batch_loses_and_duplicates_nothing(
    cluster, client: magnetar.Client, topic: str, crash_point: str  # type: ignore[no-untyped-def]
) -> None:
    other = topic + "-other"
    failed_before = cluster.esm.failed_invocations
    crashpoints.enable(crash_point, times=1)
    sent = []
    for t in (topic, other):
        producer = client.create_producer(t, batching_max_messages=10)
        for i in range(200):
            producer.send_async(f"{t}-{i}".encode(), lambda r, m, t=t: sent.append((t, m.wire())))
        producer.flush()
    wait_sealed(topic, 20)
    wait_sealed(other, 20)
    assert crashpoints.fired[crash_point] >= 1
    assert cluster.esm.failed_invocations > failed_before, "the mapping retried the failed batch"
    for t in (topic, other):
        got = read_all(cluster, t)
        ids = [m["messageId"] for m in got]
        assert len(ids) == len(set(ids)) == 200
        assert sorted(ids) == sorted(mid for tt, mid in sent if tt == t)
        store = DynamoMetadataStore(ResourceNames.from_env().table)
        segments = store.list_segments(TopicName.parse(t), 0, 100)
        covered = [e for s in segments for e in range(s.first_entry, s.last_entry + 1)]
        # 200 messages in batches of at most 10: 20 entries or more (a batch the linger closed
        # early, or a hole an expired reservation left, is one more)
        assert covered == list(range(len(covered))) and len(covered) >= 20, \
            "segments cover every entry once, in order"


def test_producer_dying_after_reserving_an_id_leaves_a_hole_that_consumers_skip(
    cluster, client: magnetar.Client, topic: str, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    import magnetar.core.ledger as ledger

    monkeypatch.setattr(ledger.common, "HOLE_GRACE_MS", 1500)
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "holes", initial_position=magnetar.InitialPosition.Earliest)
    crashpoints.enable("produce.after_reserve", times=1)
    first = producer.send(b"survives the crash")  # the first attempt dies; the SDK retries
    assert crashpoints.fired["produce.after_reserve"] >= 1
    assert first.entry_id() == 1, "entry 0 was reserved by the invocation that died"
    second = producer.send(b"next")
    got = [consumer.receive(timeout_millis=15_000) for _ in range(2)]
    assert [m.data() for m in got] == [b"survives the crash", b"next"]
    assert [m.message_id() for m in got] == [first, second]
    wait_sealed(topic, 3)


def test_crash_after_claiming_messages_redelivers_them_to_the_retried_receive(
    cluster, client: magnetar.Client, topic: str  # type: ignore[no-untyped-def]
) -> None:
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "claims", consumer_type=magnetar.ConsumerType.Shared,
                                initial_position=magnetar.InitialPosition.Earliest)
    producer.send(b"claimed then lost")
    crashpoints.enable("dispatch.after_claim", times=1)
    msg = consumer.receive(timeout_millis=10_000)  # the poll's response is lost; its retry gets the same claim
    assert msg.data() == b"claimed then lost"
    assert crashpoints.fired["dispatch.after_claim"] >= 1
    consumer.acknowledge(msg)
    with pytest.raises(magnetar.exceptions.Timeout):
        consumer.receive(timeout_millis=1500)
