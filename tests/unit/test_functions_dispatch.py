"""The functions' dispatcher on the in-memory ports, the code run in process by the runtime
(functions/invocation.py's FunctionHost): ack order per guarantee, outputs stored before acks,
nack -> redelivery -> dead letter, deduplicated EFFECTIVELY_ONCE outputs, STOPPED not served,
stats in the registry, the trigger's cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from magnetar.adapters.memory import memory_broker
from magnetar.core.broker import Broker
from magnetar.core.entry import Batch, Message
from magnetar.core.functions.dispatch import FunctionDispatcher
from magnetar.core.functions.inputs import FunctionTriggers, backlogged_functions, subscribe_inputs
from magnetar.core.functions.registry import FunctionCode, FunctionRegistry
from magnetar.core.functions.stats import FunctionStats
from magnetar.core.naming import TopicName
from magnetar.core.policies import TopicPolicies
from magnetar.functions.config import FunctionConfig
from magnetar.functions.invocation import FunctionHost, InProcessInvoker

EXCLAMATION = FunctionCode("exclamation.py", (
    b"from magnetar import Function\n\n\n"
    b"class ExclamationFunction(Function):\n"
    b"    def process(self, input, context):\n"
    b"        if input == 'bad':\n"
    b"            raise ValueError('bad input')\n"
    b"        context.get_logger().info('saw %s', input)\n"
    b"        context.incr_counter('seen', 1)\n"
    b"        return input + '!'\n"))


@pytest.fixture
def broker() -> Broker:
    return memory_broker()


def _dispatcher(broker: Broker, tmp_path: Path) -> tuple[FunctionDispatcher, InProcessInvoker]:
    invoker = InProcessInvoker(FunctionHost(broker.functions, tmp_path))
    return FunctionDispatcher(broker, invoker, nack_delay_ms=0), invoker


def _create(broker: Broker, name: str = "ex", **fields: object) -> str:
    config = FunctionRegistry.config_of({"className": "exclamation.ExclamationFunction", "inputs": ["in"],
                                         "output": "out", "subscriptionPosition": "Earliest", **fields},
                                        "public", "default", name)
    return broker.functions.create(config, EXCLAMATION).fqfn


def _produce(broker: Broker, topic: str, *values: str) -> None:
    for value in values:
        broker.writer.append(TopicName.parse(topic), Batch.of([Message(value.encode())]), "test-producer")


def _read(broker: Broker, topic: str) -> list[bytes]:
    try:
        entries = broker.read_entries(TopicName.parse(topic), 0, 1000)
    except Exception:
        return []
    return [m.payload for e in entries if not e.hole for m in e.messages]


def _observe(broker: Broker) -> list[tuple[str, str]]:
    """The order of output stores and acknowledgements (the real methods, recorded)."""
    events: list[tuple[str, str]] = []
    append, acknowledge = broker.writer.append_group, broker.subscriptions.acknowledge

    def recorded_append(topic: TopicName, batches: list[Batch], producer: str, create_topic: bool = True) -> Any:
        events.append(("store", topic.local_name))
        return append(topic, batches, producer, create_topic)

    def recorded_ack(topic: TopicName, subscription: str, acks: Any) -> Any:
        events.append(("ack" if acks.entries or acks.batch else "nack", topic.local_name))
        return acknowledge(topic, subscription, acks)

    broker.writer.append_group = recorded_append  # type: ignore[method-assign]
    broker.subscriptions.acknowledge = recorded_ack  # type: ignore[method-assign]
    return events


def _backlog(broker: Broker, fqfn: str) -> int:
    view = broker.metadata.get_subscription_view(TopicName.parse("in"), fqfn.replace("/", "."))
    assert view.cursor is not None and view.writer is not None
    return view.writer.next_entry - view.cursor.mark_delete  # mark_delete: the first entry not acknowledged


def test_atleast_once_stores_outputs_then_acks(broker: Broker, tmp_path: Path) -> None:
    fqfn = _create(broker, logTopic="logs")
    _produce(broker, "in", "hello", "world")
    dispatcher, invoker = _dispatcher(broker, tmp_path)
    events = _observe(broker)
    report = dispatcher.serve(fqfn, 10_000)
    assert report.served and report.received == 2 and report.acked == 2 and report.nacked == 0
    assert _read(broker, "out") == [b"hello!", b"world!"]
    assert [line.endswith(b"saw hello") for line in _read(broker, "logs")] == [True, False]
    first_ack = events.index(("ack", "in"))
    assert all(kind == "store" for kind, _ in events[:first_ack]) and ("store", "out") in events[:first_ack]
    assert _backlog(broker, fqfn) == 0
    assert broker.functions.state_of(fqfn).get_counter("seen") == 2
    stats = FunctionStats(broker.metadata, fqfn).read()
    assert stats["received"] == 2 and stats["processed"] == 2 and stats["lastInvocation"]
    shown = broker.functions.stats("public", "default", "ex")
    assert shown["processedSuccessfullyTotal"] == 2 and shown["receivedTotal"] == 2
    status = broker.functions.status("public", "default", "ex")["instances"][0]["status"]
    assert status["numSuccessfullyProcessed"] == 2 and status["error"] == ""
    # idle: nothing to receive, nothing invoked
    assert dispatcher.serve(fqfn, 10_000).invocations == 0 and invoker.invocations == 1


def test_atmost_once_acks_before_invoking(broker: Broker, tmp_path: Path) -> None:
    fqfn = _create(broker, processingGuarantees="ATMOST_ONCE")
    _produce(broker, "in", "hello", "bad")
    dispatcher, invoker = _dispatcher(broker, tmp_path)
    backlog_at_invocation: list[int] = []
    invoke = invoker.invoke

    def observed(name: str, event: dict[str, Any], function_arn: str | None = None) -> dict[str, Any]:
        backlog_at_invocation.append(_backlog(broker, fqfn))
        return invoke(name, event, function_arn)

    invoker.invoke = observed  # type: ignore[method-assign]
    report = dispatcher.serve(fqfn, 10_000)
    assert backlog_at_invocation == [0]  # acknowledged before the function ran
    assert _read(broker, "out") == [b"hello!"]  # the failed one is lost, as at-most-once
    assert report.nacked == 0 and _backlog(broker, fqfn) == 0
    assert FunctionStats(broker.metadata, fqfn).read()["userExceptions"] == 1


def test_nack_redelivers_then_dead_letters(broker: Broker, tmp_path: Path) -> None:
    fqfn = _create(broker, maxMessageRetries=2, deadLetterTopic="dlq")
    _produce(broker, "in", "bad", "fine")
    dispatcher, invoker = _dispatcher(broker, tmp_path)
    report = dispatcher.serve(fqfn, 10_000)
    # delivered 3 times (redelivery count 0, 1, 2), dead-lettered on its last retry
    assert invoker.invocations == 3 and report.nacked == 2 and report.dead_lettered == 1
    assert _read(broker, "dlq") == [b"bad"]
    assert _read(broker, "out") == [b"fine!"]
    assert _backlog(broker, fqfn) == 0
    stats = FunctionStats(broker.metadata, fqfn).read()
    assert stats["userExceptions"] == 3 and stats["processed"] == 1
    assert "bad input" in stats["latestUserExceptions"][0]["exceptionString"]


def test_effectively_once_outputs_are_deduplicated_when_stored_again(broker: Broker, tmp_path: Path) -> None:
    fqfn = _create(broker, processingGuarantees="EFFECTIVELY_ONCE")
    _produce(broker, "in", "a", "b", "c")
    dispatcher, _ = _dispatcher(broker, tmp_path)
    acknowledge = broker.subscriptions.acknowledge
    crashed: list[bool] = []

    def crash_once(topic: TopicName, subscription: str, acks: Any) -> Any:
        if not crashed:
            crashed.append(True)
            raise RuntimeError("the dispatcher died between storing and acknowledging")
        return acknowledge(topic, subscription, acks)

    broker.subscriptions.acknowledge = crash_once  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="died"):
        dispatcher.serve(fqfn, 10_000)
    assert _read(broker, "out") == [b"a!", b"b!", b"c!"]
    assert TopicPolicies.of(broker.writer.policies(TopicName.parse("out"))).deduplication
    subscription = fqfn.replace("/", ".")
    assert broker.metadata.get_subscription_view(TopicName.parse("in"), subscription).cursor is not None
    broker.subscriptions.redeliver_unacknowledged(TopicName.parse("in"), subscription, "ex-dispatcher")
    report = dispatcher.serve(fqfn, 10_000)
    assert report.received == 3 and report.acked == 3
    assert _read(broker, "out") == [b"a!", b"b!", b"c!"]  # stored again, dropped as duplicates
    assert _backlog(broker, fqfn) == 0


def test_stopped_function_is_not_served(broker: Broker, tmp_path: Path) -> None:
    fqfn = _create(broker)
    broker.functions.stop("public", "default", "ex")
    _produce(broker, "in", "hello")
    dispatcher, invoker = _dispatcher(broker, tmp_path)
    report = dispatcher.serve(fqfn, 10_000)
    assert not report.served and invoker.invocations == 0 and _read(broker, "out") == []
    broker.functions.start("public", "default", "ex")
    assert dispatcher.serve(fqfn, 10_000).served and _read(broker, "out") == [b"hello!"]


def test_an_updated_function_runs_its_new_code(broker: Broker, tmp_path: Path) -> None:
    fqfn = _create(broker)
    dispatcher, _ = _dispatcher(broker, tmp_path)
    _produce(broker, "in", "one")
    dispatcher.serve(fqfn, 10_000)
    broker.functions.update("public", "default", "ex", {}, FunctionCode(
        "exclamation.py", b"class ExclamationFunction:\n    def process(self, input, context):\n"
                          b"        return input + '?'\n"))
    _produce(broker, "in", "two")
    dispatcher.serve(fqfn, 10_000)
    assert _read(broker, "out") == [b"one!", b"two?"]


def test_triggers_find_consumers_and_cache_them(broker: Broker) -> None:
    fqfn = _create(broker)
    now = [0]
    triggers = FunctionTriggers(broker, period_ms=1000, now_ms=lambda: now[0])
    started: list[str] = []

    class Recorder:
        def serve_async(self, name: str) -> None:
            started.append(name)

    assert triggers.trigger(["persistent://public/default/in", "persistent://public/default/out"],
                            Recorder()) == [fqfn]
    assert started == [fqfn]
    _create(broker, "second")
    assert triggers.functions_of(["persistent://public/default/in"]) == [fqfn]  # cached
    now[0] = 1000
    assert triggers.functions_of(["persistent://public/default/in"]) == [fqfn, "public/default/second"]


def test_backlog_sweep_names_functions_with_messages_due(broker: Broker, tmp_path: Path) -> None:
    fqfn = _create(broker)
    _create(broker, "idle", inputs=["elsewhere"])
    for name in ("ex", "idle"):
        subscribe_inputs(broker, FunctionConfig.model_validate_json(broker.functions.record("public", "default", name)
                                                                     .config))
    assert backlogged_functions(broker) == []  # subscribed, nothing published: nothing to serve
    _produce(broker, "in", "hello")
    assert backlogged_functions(broker) == [fqfn]
    # a run for named functions reads those alone (no listing): the named one with a backlog
    assert backlogged_functions(broker, [fqfn, "public/default/idle", "public/default/missing"]) == [fqfn]
    assert backlogged_functions(broker, ["public/default/idle"]) == []
    broker.functions.stop("public", "default", "ex")
    assert backlogged_functions(broker) == []  # STOPPED: not served
    broker.functions.start("public", "default", "ex")
    dispatcher, _ = _dispatcher(broker, tmp_path)
    dispatcher.serve(fqfn, 10_000)
    assert backlogged_functions(broker) == []


class _Died(BaseException):
    """A dispatcher's Lambda ending mid-batch (a timeout, a crash): nothing after it runs."""


def test_a_batch_left_by_a_dead_dispatcher_comes_back_after_the_ack_timeout(tmp_path: Path) -> None:
    from magnetar.adapters.memory import ManualClock
    from magnetar.core.functions.inputs import DISPATCH_ACK_TIMEOUT_MS

    clock = ManualClock()
    broker = memory_broker(clock)
    fqfn = _create(broker)
    _produce(broker, "in", "hello")
    dispatcher, invoker = _dispatcher(broker, tmp_path)
    invoke = invoker.invoke

    def die(name: str, event: dict[str, Any], function_arn: str | None = None) -> dict[str, Any]:
        raise _Died()

    invoker.invoke = die  # type: ignore[method-assign]
    with pytest.raises(_Died):
        dispatcher.serve(fqfn, 10_000)
    invoker.invoke = invoke  # type: ignore[method-assign]
    # later dispatchers renew the (shared) consumer's lease every 25 s: it never ends, the batch
    # comes back by the ack timeout
    waited, report = 0, dispatcher.serve(fqfn, 10_000)
    while report.received == 0:
        assert waited <= DISPATCH_ACK_TIMEOUT_MS, "the batch never came back"
        clock.advance(25_000)
        waited += 25_000
        report = dispatcher.serve(fqfn, 10_000)
    assert waited >= DISPATCH_ACK_TIMEOUT_MS - 25_000  # not before the ack timeout
    assert report.received == 1 and report.acked == 1 and _read(broker, "out") == [b"hello!"]


def test_effectively_once_serves_one_dispatcher_at_a_time_and_takes_over_a_dead_ones_batch(tmp_path: Path) -> None:
    """Outputs stored out of their inputs' order would be dropped by deduplication: an EFFECTIVELY_ONCE
    function has one dispatcher at a time (a lease); the next takes over once a dead one's lease ran
    out, and gets what that one had received first."""
    from magnetar.adapters.memory import ManualClock

    clock = ManualClock()
    broker = memory_broker(clock)
    fqfn = _create(broker, processingGuarantees="EFFECTIVELY_ONCE")
    _produce(broker, "in", "a", "b")
    dispatcher, invoker = _dispatcher(broker, tmp_path)
    invoke = invoker.invoke

    def die(name: str, event: dict[str, Any], function_arn: str | None = None) -> dict[str, Any]:
        raise _Died()  # after receiving a and b, before storing anything

    invoker.invoke = die  # type: ignore[method-assign]
    with pytest.raises(_Died):
        dispatcher.serve(fqfn, 10_000)
    invoker.invoke = invoke  # type: ignore[method-assign]
    _produce(broker, "in", "c")
    standby = dispatcher.serve(fqfn, 10_000)
    assert standby.standby and standby.received == 0  # the dead one's lease still holds
    assert _read(broker, "out") == []
    clock.advance(80_000)  # its lease (the function's 60 s timeout, 15 s of margins) runs out
    report = dispatcher.serve(fqfn, 10_000)
    assert report.received == 3 and report.acked == 3
    assert _read(broker, "out") == [b"a!", b"b!", b"c!"]  # in order: none dropped as a duplicate
    assert not broker.metadata.function_leases  # type: ignore[attr-defined]  # given up when done


def test_a_dispatcher_finding_every_slot_held_ends_without_claiming(broker: Broker, tmp_path: Path) -> None:
    """The journal consumer starts a dispatcher after every seal: one that finds the function's
    dispatch slots (its parallelism) held by serving dispatchers ends at once, claiming nothing."""
    fqfn = _create(broker)
    _produce(broker, "in", "a", "b")
    dispatcher, invoker = _dispatcher(broker, tmp_path)
    now = broker.clock.now_ms()
    assert broker.metadata.claim_function_lease(fqfn, "serving", now, 60_000)
    report = dispatcher.serve(fqfn, 10_000)
    assert report.standby and report.received == 0 and invoker.invocations == 0
    broker.metadata.release_function_lease(fqfn, "serving")
    report = dispatcher.serve(fqfn, 10_000)  # nothing was claimed: all of it is there for the next
    assert report.received == 2 and report.acked == 2 and _read(broker, "out") == [b"a!", b"b!"]


def test_parallelism_gives_as_many_dispatch_slots(broker: Broker, tmp_path: Path) -> None:
    fqfn = _create(broker, parallelism=2)
    _produce(broker, "in", "a")
    dispatcher, _ = _dispatcher(broker, tmp_path)
    assert broker.metadata.claim_function_lease(fqfn, "serving", broker.clock.now_ms(), 60_000)
    report = dispatcher.serve(fqfn, 10_000)  # the second slot is free
    assert not report.standby and report.acked == 1
    assert list(broker.metadata.function_leases) == [fqfn]  # type: ignore[attr-defined]  # its own given up


def test_what_is_sealed_while_a_dispatcher_gives_its_slot_up_is_served(broker: Broker, tmp_path: Path) -> None:
    """A seal between a dispatcher's last empty look and the release of its slot started a
    dispatcher that found the slot held: the one giving it up looks once more and serves it."""
    fqfn = _create(broker)
    _produce(broker, "in", "a")
    dispatcher, _ = _dispatcher(broker, tmp_path)
    release = broker.metadata.release_function_lease
    sealed_meanwhile = [False]

    def release_after_a_seal(slot: str, owner: str) -> None:
        if not sealed_meanwhile[0]:
            sealed_meanwhile[0] = True
            _produce(broker, "in", "b")
            assert dispatcher.serve(fqfn, 10_000).standby  # that seal's dispatcher: the slot is held
        release(slot, owner)

    broker.metadata.release_function_lease = release_after_a_seal  # type: ignore[method-assign]
    report = dispatcher.serve(fqfn, 10_000)
    assert report.received == 2 and report.acked == 2 and _read(broker, "out") == [b"a!", b"b!"]


def test_a_batchs_outputs_look_their_topic_up_once(broker: Broker, tmp_path: Path) -> None:
    """Routing outputs reads the output topic's partition count once per batch, not once per output
    (a configuration-store read per message)."""
    fqfn = _create(broker)
    _produce(broker, "in", *[f"m{i}" for i in range(20)])
    dispatcher, _ = _dispatcher(broker, tmp_path)
    lookups: list[str] = []
    get_partitions = broker.metadata.get_partitions

    def counted(topic: TopicName) -> int | None:
        lookups.append(str(topic))
        return get_partitions(topic)

    broker.metadata.get_partitions = counted  # type: ignore[method-assign]
    report = dispatcher.serve(fqfn, 10_000)
    assert report.acked == 20 and len(_read(broker, "out")) == 20
    # the store's one lookup, and the topic's creation by its first append (not one per output)
    assert report.invocations == 1 and lookups.count("persistent://public/default/out") <= 2
