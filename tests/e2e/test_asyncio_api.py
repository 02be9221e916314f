"""`magnetar.asyncio`, pulsar-client's `pulsar.asyncio`: the same classes, methods, parameters and
defaults as the installed official package (compared mechanically), and an application written
against it producing, consuming, reading and getting its errors as `PulsarException` with
pulsar-client's `Result`."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

import magnetar
import magnetar.asyncio as ours

theirs = pytest.importorskip("pulsar.asyncio")


def _default(value: Any) -> str:
    if hasattr(value, "name") and hasattr(value, "value"):  # an enum member: compare by name
        return f"{type(value).__name__}.{value.name}"
    return repr(value)


# Defaults that differ on purpose (docs/semantics.md), as the SDK's own (tests/unit/test_pulsar_api_parity.py)
DIFFERENT_DEFAULTS = {
    # every publish request is an API call, an invocation, a reservation and a journal record
    "Client.create_producer(batching_max_publish_delay_ms)": "100",
}


@pytest.mark.parametrize("name", ["Client", "Producer", "Consumer", "Reader", "PulsarException"])
def test_the_surface_is_pulsar_asyncios(name: str) -> None:
    official, mine = getattr(theirs, name), getattr(ours, name)
    for method, function in inspect.getmembers(official, inspect.isfunction):
        if method.startswith("_") and method != "__init__":
            continue
        assert hasattr(mine, method), f"{name}.{method}"
        if name in ("Producer", "Consumer", "Reader") and method == "__init__":
            continue  # they wrap the C++ objects; ours wrap the SDK's
        expected = inspect.signature(function).parameters
        actual = inspect.signature(getattr(mine, method)).parameters
        assert list(actual) == list(expected), f"{name}.{method}"
        for parameter, spec in expected.items():
            where = f"{name}.{method}({parameter})"
            assert _default(actual[parameter].default) == DIFFERENT_DEFAULTS.get(where, _default(spec.default)), where
        assert inspect.iscoroutinefunction(getattr(mine, method)) == inspect.iscoroutinefunction(function), \
            f"{name}.{method}: async"


def test_an_asyncio_application_produces_consumes_and_reads(cluster: Any, topic: str) -> None:
    async def application() -> None:
        client = ours.Client(cluster.url)
        consumer = await client.subscribe(topic, "async", consumer_type=magnetar.ConsumerType.Shared,
                                          initial_position=magnetar.InitialPosition.Earliest)
        producer = await client.create_producer(topic, batching_max_publish_delay_ms=20)
        ids = await asyncio.gather(*(producer.send(f"m{i}".encode(), partition_key=f"k{i}") for i in range(20)))
        assert len({str(i) for i in ids}) == 20  # each message its own id, sent as batches
        got = []
        for _ in range(20):
            message = await consumer.receive()
            got.append(message.data())
            await consumer.acknowledge(message)
        assert sorted(got) == sorted(f"m{i}".encode() for i in range(20))
        with pytest.raises(ours.PulsarException) as refused:
            await consumer.acknowledge_cumulative(message)  # not on a Shared subscription
        assert refused.value.error() == magnetar.Result.CumulativeAcknowledgementNotAllowedError
        reader = await client.create_reader(topic, magnetar.MessageId.earliest)
        assert (await reader.read_next()).data() in got
        assert await reader.has_message_available()
        await reader.close()
        await producer.close()
        await consumer.close()
        await client.close()

    asyncio.run(asyncio.wait_for(application(), 120))
