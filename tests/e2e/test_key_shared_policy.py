"""Key_Shared policies through the SDK and the HTTP API against the session cluster: Sticky hash
ranges (each consumer gets exactly its keys), overlapping ranges refused with pulsar-client's
ConsumerAssignError (409 and a reason over HTTP), Sticky and AutoSplit consumers not mixed."""

from __future__ import annotations

from typing import Any

import pytest
from tests.sdk_helpers import receive_until_quiet

import magnetar
from http_helpers import HTTP
from magnetar.client import exceptions
from magnetar.core.key_shared import key_hash

KeyShared = magnetar.ConsumerType.KeyShared
Earliest = magnetar.InitialPosition.Earliest
LOW, HIGH = (0, 32767), (32768, 65535)


def sticky(*ranges: tuple[int, int]) -> magnetar.ConsumerKeySharedPolicy:
    return magnetar.ConsumerKeySharedPolicy(magnetar.KeySharedMode.Sticky, sticky_ranges=list(ranges))


def keys_in(lo: int, hi: int) -> list[str]:
    return [k for k in (f"k{i}" for i in range(200)) if lo <= key_hash(k) <= hi][:4]


def test_sticky_consumers_get_their_own_keys_and_overlaps_are_refused(client: magnetar.Client, topic: str) -> None:
    low = client.subscribe(topic, "s", consumer_type=KeyShared, initial_position=Earliest,
                           key_shared_policy=sticky(LOW), consumer_name="low")
    high = client.subscribe(topic, "s", consumer_type=KeyShared, initial_position=Earliest,
                            key_shared_policy=sticky(HIGH), consumer_name="high")
    with pytest.raises(exceptions.ConsumerAssignError, match="Range conflict with consumer"):
        client.subscribe(topic, "s", consumer_type=KeyShared, key_shared_policy=sticky((32000, 33000)))
    with pytest.raises(exceptions.ConsumerBusy, match="different type"):
        client.subscribe(topic, "s", consumer_type=KeyShared)  # AutoSplit next to Sticky consumers
    producer = client.create_producer(topic, batching_enabled=False)
    low_keys, high_keys = keys_in(*LOW), keys_in(*HIGH)
    for key in low_keys + high_keys:
        producer.send(key.encode(), partition_key=key)
    assert sorted(m.partition_key() for m in receive_until_quiet(low)) == sorted(low_keys)
    assert sorted(m.partition_key() for m in receive_until_quiet(high)) == sorted(high_keys)


def test_keys_outside_every_range_wait_and_http_refusals_say_why(client: magnetar.Client, topic: str,
                                                                 cluster: Any) -> None:
    low = client.subscribe(topic, "s", consumer_type=KeyShared, initial_position=Earliest,
                           key_shared_policy=sticky(LOW))
    producer = client.create_producer(topic, batching_enabled=False)
    for key in keys_in(*HIGH):
        producer.send(key.encode(), partition_key=key)
    assert receive_until_quiet(low, 1000) == []  # nobody covers these keys yet: they wait
    path = f"{cluster.url}/magnetar/v1/consumer/{topic.replace('://', '/')}/s/other"
    meta = {"keySharedMode": "STICKY", "hashRanges": [{"start": 100, "end": 200}]}
    refused = HTTP.put(path, json={"subscriptionType": "Key_Shared", "keySharedPolicy": meta})
    assert refused.status_code == 409 and "Range conflict" in refused.json()["reason"]
    empty = HTTP.put(path, json={"subscriptionType": "Key_Shared", "keySharedPolicy": meta | {"hashRanges": []}})
    assert empty.status_code == 409 and "must not be empty" in empty.json()["reason"]
    high = client.subscribe(topic, "s", consumer_type=KeyShared, key_shared_policy=sticky(HIGH))
    # a quiet spell of 5 s, not 1.5: on LocalStack under two workers the last entries were sealed
    # more than 1.5 s after the first ones reached the consumer
    assert sorted(m.partition_key() for m in receive_until_quiet(high, 5000)) == sorted(keys_in(*HIGH))


def test_official_client_sticky_ranges_through_the_binary_proxy(cluster: Any, topic: str) -> None:
    """pulsar-client's own KeySharedMeta (SUBSCRIBE) reaches the cursor through magnetar.protocol."""
    pulsar = pytest.importorskip("pulsar")
    from magnetar.protocol import ProxySettings, ProxyThread

    proxy = ProxyThread(ProxySettings(port=0)).start()
    official = pulsar.Client(proxy.service_url, operation_timeout_seconds=15, log_conf_file_path=None)
    try:
        def policy(*ranges: tuple[int, int]) -> Any:
            return pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=list(ranges))

        low = official.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.KeyShared, key_shared_policy=policy(LOW),
                                 initial_position=pulsar.InitialPosition.Earliest)
        with pytest.raises(pulsar.ConsumerAssignError):
            official.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.KeyShared,
                               key_shared_policy=policy((0, 10)))
        producer = official.create_producer(topic, batching_enabled=False)
        for key in keys_in(*HIGH) + keys_in(*LOW):
            producer.send(key.encode(), partition_key=key)
        got = []
        while True:
            try:
                message = low.receive(timeout_millis=2000)
            except pulsar.Timeout:
                break
            low.acknowledge(message)
            got.append(message.partition_key())
        assert sorted(got) == sorted(keys_in(*LOW))  # the high keys wait for a consumer that covers them
    finally:
        official.close()
        proxy.stop()
