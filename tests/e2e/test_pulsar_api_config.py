"""pulsar-client's configuration objects (`_pulsar.ProducerConfiguration`, `ConsumerConfiguration`,
`ReaderConfiguration`) in the SDK: the same accessors and defaults as the installed package's, its
TypeErrors for wrong types, and `options()` driving `create_producer`, `subscribe` and `create_reader`
against the session cluster."""

from __future__ import annotations

import enum
from typing import Any

import _pulsar
import pytest

import magnetar
from magnetar.client.config import ConsumerConfiguration, ProducerConfiguration, ReaderConfiguration
from magnetar.schema import Schema

PAIRS = [(_pulsar.ProducerConfiguration, ProducerConfiguration), (_pulsar.ConsumerConfiguration, ConsumerConfiguration),
         (_pulsar.ReaderConfiguration, ReaderConfiguration)]
# defaults that differ on purpose (docs/semantics.md): every publish request is an AWS call
DIFFERENT_DEFAULTS = {"ProducerConfiguration.batching_max_publish_delay_ms": (10, 100)}


def _comparable(value: Any) -> Any:
    if isinstance(value, enum.Enum) or (type(value).__module__ == "_pulsar" and hasattr(value, "name")):
        return getattr(value, "name", value)
    return value


def test_the_suites_configuration_checks() -> None:
    """pulsar-client's own test_producer_config and test_consumer_config, verbatim in substance."""
    conf = magnetar.ProducerConfiguration()
    conf.send_timeout_millis(12)
    assert conf.send_timeout_millis() == 12
    assert conf.compression_type() == magnetar.CompressionType.NONE
    conf.compression_type(magnetar.CompressionType.LZ4)
    assert conf.compression_type() == magnetar.CompressionType.LZ4
    conf.max_pending_messages(120)
    assert conf.max_pending_messages() == 120
    consumer = magnetar.ConsumerConfiguration()
    assert consumer.consumer_type() == magnetar.ConsumerType.Exclusive
    consumer.consumer_type(magnetar.ConsumerType.Shared)
    assert consumer.consumer_type() == magnetar.ConsumerType.Shared
    assert consumer.consumer_name() == ""
    consumer.consumer_name("my-name")
    assert consumer.consumer_name() == "my-name"
    assert consumer.replicate_subscription_state_enabled() is False
    consumer.replicate_subscription_state_enabled(True)
    assert consumer.replicate_subscription_state_enabled() is True


@pytest.mark.parametrize(("theirs", "ours"), PAIRS, ids=lambda c: c.__name__)
def test_the_accessors_and_defaults_are_pulsar_clients(theirs: type, ours: type) -> None:
    official, mine = theirs(), ours()
    for name in (n for n in dir(official) if not n.startswith("_")):
        assert hasattr(mine, name), f"{ours.__name__}.{name}"
        try:
            expected = getattr(official, name)()
        except TypeError:  # set only (a listener, a key reader), or a property (key, value)
            with pytest.raises(TypeError):
                getattr(mine, name)()
            continue
        if isinstance(getattr(mine, name)(), Schema | magnetar.ConsumerBatchReceivePolicy
                      | magnetar.ConsumerKeySharedPolicy | magnetar.ConsumerDeadLetterPolicy | type(None)):
            continue  # C++ objects on their side (SchemaInfo, policies)
        default = DIFFERENT_DEFAULTS.get(f"{ours.__name__}.{name}")
        if default is not None:
            assert (expected, getattr(mine, name)()) == default
            continue
        assert _comparable(getattr(mine, name)()) == _comparable(expected), f"{ours.__name__}.{name}"


@pytest.mark.parametrize(("name", "value"), [
    ("send_timeout_millis", "12"), ("send_timeout_millis", 1.5), ("compression_type", "LZ4"),
    ("producer_name", 1), ("batching_enabled", "y"), ("message_router", "f"), ("encryption_key", 1),
])
def test_a_wrong_type_is_pulsar_clients_type_error(name: str, value: object) -> None:
    with pytest.raises(TypeError):
        getattr(_pulsar.ProducerConfiguration(), name)(value)
    with pytest.raises(TypeError, match=f"{name}\\(\\): incompatible function arguments"):
        getattr(magnetar.ProducerConfiguration(), name)(value)
    with pytest.raises(TypeError):
        magnetar.ProducerConfiguration().property("k", 1)  # type: ignore[arg-type]


def test_options_drive_producers_consumers_and_readers(client: magnetar.Client, topic: str) -> None:
    consumer_conf = (magnetar.ConsumerConfiguration().consumer_type(magnetar.ConsumerType.Shared)
                     .consumer_name("conf-consumer").subscription_initial_position(magnetar.InitialPosition.Earliest)
                     .receiver_queue_size(10))
    assert consumer_conf.options() == {"consumer_type": magnetar.ConsumerType.Shared, "consumer_name": "conf-consumer",
                                       "initial_position": magnetar.InitialPosition.Earliest,
                                       "receiver_queue_size": 10}
    producer_conf = (magnetar.ProducerConfiguration().producer_name("conf-producer").batching_enabled(False)
                     .compression_type(magnetar.CompressionType.LZ4).property("team", "a"))
    producer = client.create_producer(topic, **producer_conf.options())
    sent = producer.send(b"configured")
    consumer = client.subscribe(topic, "conf-sub", **consumer_conf.options())
    message = consumer.receive(10_000)
    assert (message.data(), message.producer_name(), consumer.consumer_name()) == (
        b"configured", "conf-producer", "conf-consumer")
    reader_conf = magnetar.ReaderConfiguration().start_message_id_inclusive(True).receiver_queue_size(100)
    reader = client.create_reader(topic, sent, **reader_conf.options())
    assert reader.read_next(10_000).message_id() == sent  # inclusive: the message itself
    with pytest.raises(ValueError, match="Batching and chunking"):  # options() passes on what was set
        client.create_producer(topic, **magnetar.ProducerConfiguration().chunking_enabled(True)
                               .batching_enabled(True).options())
