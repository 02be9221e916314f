"""Failover `priority_level` through the SDK's long-polling consumer (HTTP `priorityLevel`) and its
pushed consumer (WebSocket `priorityLevel`, Pulsar's query parameter): the highest level (0) is
active whatever the names; a lower level takes over when it closes."""

from __future__ import annotations

from typing import Any

import pytest

import magnetar
from ws_helpers import refusal


def test_the_highest_priority_level_is_the_active_consumer(client: magnetar.Client, topic: str) -> None:
    failover = magnetar.ConsumerType.Failover
    earliest = magnetar.InitialPosition.Earliest
    standby = client.subscribe(topic, "s", consumer_type=failover, consumer_name="a-standby", priority_level=1,
                               initial_position=earliest, delivery="push")
    primary = client.subscribe(topic, "s", consumer_type=failover, consumer_name="z-primary", priority_level=0,
                               initial_position=earliest, delivery="poll")
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"to the primary")
    message = primary.receive(15_000)
    assert message.data() == b"to the primary"  # by name alone "a-standby" would be active
    primary.acknowledge(message)
    with pytest.raises(magnetar.Timeout):
        standby.receive(2_000)
    primary.close()
    producer.send(b"to the standby")
    assert standby.receive(15_000).data() == b"to the standby"
    standby.close()
    with pytest.raises(ValueError, match="priority_level"):
        client.subscribe(topic, "s", consumer_type=failover, priority_level=-1)


def test_websocket_refuses_a_bad_priority_level(cluster: Any, topic: str) -> None:
    path = f"/ws/v2/consumer/{topic.replace('://', '/', 1)}/s?subscriptionType=Failover&priorityLevel=-1"
    status, body = refusal(cluster, path)
    assert status == 400 and "priorityLevel" in body["reason"]
