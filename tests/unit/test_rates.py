"""Noisy neighbours on the in-memory ports (and the DynamoDB adapter on moto): publishRate,
dispatchRate, maxTopicsPerNamespace, maxSubscriptionsPerTopic, and what they cost in requests."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.core import policies as rules
from magnetar.core.broker import Broker
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import InvalidInput, NotAllowed, TooManyRequests, TopicLimitReached
from magnetar.core.ledger import rate_claim
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.policies import PublishRate, admit, dispatch_budget
from magnetar.core.ports import NamespaceInfo, ProducerClaim, TenantInfo

NS = NamespaceName("public", "default")
T = TopicName.parse("persistent://public/default/rates")


def publish_one(broker: Broker, topic: TopicName = T, messages: int = 1, size: int = 10) -> None:
    batch = Batch.of([Message(b"x" * size) for _ in range(messages)], batched=messages > 1)
    broker.writer.append(topic, batch, "p")


def publish_rate(msgs: int = -1, size: int = -1) -> dict[str, int]:
    return rules.check_publish_rate(msgs, size)


def flood(broker: Broker, clock: ManualClock, seconds: float, step_ms: int = 5, **kwargs: Any) -> int:
    """A producer that tries again every `step_ms` for `seconds`: how many publishes got in."""
    admitted = 0
    end = clock.now + int(seconds * 1000)
    while clock.now < end:
        try:
            publish_one(broker, **kwargs)
            admitted += 1
        except TooManyRequests:
            clock.advance(step_ms)
    return admitted


# --- the rule ---------------------------------------------------------------------------------------
def test_admit_is_a_token_bucket_on_a_virtual_clock() -> None:
    second = 1_000_000_000
    assert admit(0, 10 * second, second // 10, second) == 10 * second + second // 10  # idle: restarts at now
    assert admit(10 * second + second, 10 * second, 5, second) == 11 * second + 5  # at the burst edge: admitted
    assert admit(11 * second + 1, 10 * second, 5, second) is None  # beyond it: refused
    assert rules.rate_cost_ns(3, 1000) == 3_000_000 and rules.rate_cost_ns(1, 3) == 333_333_334
    assert rules.rate_cost_ns(10, 0) == 0 and rate_claim(PublishRate(), 1, 1, 0) is None


def test_dispatch_budget_counts_per_period_and_adds_the_publish_rate_when_relative() -> None:
    rate = rules.DispatchRate(msgs=10, bytes=-1, period_s=2)
    assert dispatch_budget(rate, (0, 0, 0), 5_500) == (10, -1, 4_000)
    assert dispatch_budget(rate, (4_000, 7, 700), 5_500) == (3, -1, 4_000)
    assert dispatch_budget(rate, (4_000, 12, 700), 5_900) == (0, -1, 4_000)
    assert dispatch_budget(rate, (4_000, 12, 700), 6_000) == (10, -1, 6_000)  # a new period
    relative = rules.DispatchRate(msgs=10, bytes=100, relative=True)
    assert dispatch_budget(relative, (0, 0, 0), 1_000, (25.0, 50.0)) == (35, 150, 1_000)


@pytest.mark.parametrize(
    ("check", "args"),
    [
        (rules.check_publish_rate, (-2, 10)),
        (rules.check_publish_rate, (10, -5)),
        (rules.check_dispatch_rate, (-2, 1, 1, False)),
        (rules.check_dispatch_rate, (10, 1, 0, False)),
    ],
)
def test_bad_rates_are_refused(check: Any, args: tuple[Any, ...]) -> None:
    with pytest.raises(InvalidInput):
        check(*args)


# --- publishRate ------------------------------------------------------------------------------------
def test_publish_rate_in_messages_admits_one_second_of_burst_then_the_rate() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.admin.set_policy(NS, rules.PUBLISH_RATE, publish_rate(msgs=10))
    admitted = 0
    while True:
        try:
            publish_one(broker)
            admitted += 1
        except TooManyRequests as exc:
            assert exc.status == 429 and "10 msg/s" in exc.reason
            break
    assert admitted == 11  # the burst: one second's worth, plus the publish that starts it
    assert 99 <= flood(broker, clock, 10.0) <= 100  # then the rate


def test_publish_rate_in_bytes_and_a_large_batch_leaves_a_debt() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.admin.set_policy(NS, rules.PUBLISH_RATE, publish_rate(size=1000))
    publish_one(broker, size=500)  # about half a second of the rate (the payload has message headers too)
    publish_one(broker, size=5000)  # within the burst, so admitted: a debt of about 5 s
    with pytest.raises(TooManyRequests):
        publish_one(broker, size=1)
    clock.advance(4_000)
    with pytest.raises(TooManyRequests):
        publish_one(broker, size=1)
    clock.advance(2_000)
    publish_one(broker, size=1)
    # the long-run rate in bytes: 100-byte messages (with their headers) at 1,000 bytes/s
    clock.advance(10_000)
    assert 80 <= flood(broker, clock, 10.0, size=100) <= 115  # (after a 10 s idle: one second of burst)


def test_topic_publish_rate_overrides_the_namespace_and_removing_it_lifts_the_limit() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    broker.metadata.create_topic(T, clock.now)
    broker.admin.set_policy(NS, rules.PUBLISH_RATE, publish_rate(msgs=100))
    broker.admin.set_topic_policy(T, rules.PUBLISH_RATE, publish_rate(msgs=5))
    assert 15 <= flood(broker, clock, 2.0) <= 16  # a burst of one second (+1), then 5/s
    broker.admin.remove_topic_policy(T, rules.PUBLISH_RATE)
    assert flood(broker, clock, 1.0) >= 100  # the namespace's 100/s (with its burst)
    broker.admin.remove_policy(NS, rules.PUBLISH_RATE)
    for _ in range(1000):
        publish_one(broker)  # no limit: never refused


def test_publish_rate_applies_to_each_partition_of_a_partitioned_topic() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    parent = TopicName.parse("persistent://public/default/parted")
    broker.admin.create_partitioned_topic(parent, 2)
    broker.admin.set_topic_policy(parent, rules.PUBLISH_RATE, publish_rate(msgs=10))
    for index in range(2):
        partition = TopicName.parse(f"{parent}-partition-{index}")
        assert 20 <= flood(broker, clock, 1.0, topic=partition) <= 21  # its own bucket, as Pulsar's per partition


def test_other_topics_and_namespaces_are_not_slowed_by_a_throttled_one() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    noisy = NamespaceName("public", "noisy")
    broker.admin.create_namespace(noisy)
    broker.admin.set_policy(noisy, rules.PUBLISH_RATE, publish_rate(msgs=1))
    flood(broker, clock, 0.1, topic=TopicName.parse("persistent://public/noisy/flood"))
    for _ in range(500):
        publish_one(broker, topic=T)  # public/default has no limit


class CountingStore:
    """The in-memory metadata store, counting the port calls made through it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return counted


def test_a_publish_costs_the_same_port_calls_with_and_without_a_publish_rate() -> None:
    clock = ManualClock()
    plain = memory_broker(clock)
    counted = CountingStore(plain.metadata)
    broker = Broker(counted, plain.segments, plain.journal, clock)
    limited = TopicName.parse("persistent://public/default/limited")
    free = TopicName.parse("persistent://public/default/free")
    for topic in (limited, free):
        publish_one(broker, topic=topic)  # created on first use; policies read once (cached 10 s)
    broker.admin.set_topic_policy(limited, rules.PUBLISH_RATE, publish_rate(msgs=1_000_000, size=10**9))
    for topic in (limited, free):
        publish_one(broker, topic=topic)  # the policy cache is warm again
    costs = {}
    for topic in (limited, free):
        counted.calls.clear()
        for _ in range(50):
            publish_one(broker, topic=topic)
        costs[topic.local_name] = dict(counted.calls)
    assert costs["limited"] == costs["free"] == {"reserve_entry": 50}


# --- dispatchRate -----------------------------------------------------------------------------------
def test_dispatch_rate_caps_what_a_subscription_is_handed_per_period() -> None:
    clock = ManualClock(1_700_000_000_000)
    broker = memory_broker(clock)
    broker.subscriptions.subscribe(T, "slow", "c", "Exclusive", "Earliest")
    broker.subscriptions.subscribe(T, "other", "c", "Exclusive", "Earliest")
    for _ in range(30):
        publish_one(broker)
    broker.admin.set_topic_policy(T, rules.DISPATCH_RATE, rules.check_dispatch_rate(10, -1, 1, False))
    got = broker.subscriptions.receive(T, "slow", "c", max_messages=100).entries
    assert len(got) == 10
    assert broker.subscriptions.receive(T, "slow", "c", max_messages=100).entries == []  # the period is used up
    assert len(broker.subscriptions.receive(T, "other", "c", max_messages=100).entries) == 10  # per subscription
    started = clock.now
    waited = broker.subscriptions.receive(T, "slow", "c", max_messages=100, wait_ms=5_000).entries
    assert len(waited) == 10 and clock.now - started <= 1_000  # a long poll waits for the next period
    broker.admin.remove_topic_policy(T, rules.DISPATCH_RATE)
    assert len(broker.subscriptions.receive(T, "slow", "c", max_messages=100).entries) == 10  # the rest at once


def test_dispatch_rate_in_bytes_hands_out_at_least_one_entry_per_period() -> None:
    clock = ManualClock(1_700_000_000_000)
    broker = memory_broker(clock)
    broker.subscriptions.subscribe(T, "s", "c", "Shared", "Earliest")
    for _ in range(5):
        publish_one(broker, size=400)
    broker.admin.set_policy(NS, rules.DISPATCH_RATE, rules.check_dispatch_rate(-1, 100, 1, False))
    assert len(broker.subscriptions.receive(T, "s", "c", max_messages=100).entries) == 1  # overshoots, as Pulsar
    assert broker.subscriptions.receive(T, "s", "c", max_messages=100).entries == []
    clock.advance(1_000)
    assert len(broker.subscriptions.receive(T, "s", "c", max_messages=100).entries) == 1


# --- maxTopicsPerNamespace / maxSubscriptionsPerTopic -----------------------------------------------
def test_max_topics_counts_existing_topics_and_partitions_and_refuses_the_next() -> None:
    clock = ManualClock()
    broker = memory_broker(clock)
    publish_one(broker, topic=TopicName.parse("persistent://public/default/before"))  # exists before the limit
    broker.admin.create_partitioned_topic(TopicName.parse("persistent://public/default/parted"), 2)
    broker.admin.set_policy(NS, rules.MAX_TOPICS, 4)
    broker.admin.create_topic(TopicName.parse("persistent://public/default/fourth"))
    with pytest.raises(TopicLimitReached) as refused:
        broker.admin.create_topic(TopicName.parse("persistent://public/default/fifth"))
    assert refused.value.status == 412 and refused.value.reason == "Exceed maximum number of topics in namespace."
    with pytest.raises(NotAllowed) as auto:  # created on first use: Pulsar's client NotAllowedError
        publish_one(broker, topic=TopicName.parse("persistent://public/default/auto"))
    assert auto.value.status == 405
    with pytest.raises(NotAllowed):
        broker.subscriptions.subscribe(TopicName.parse("persistent://public/default/sub-auto"), "s", "c")
    with pytest.raises(TopicLimitReached):
        broker.admin.create_partitioned_topic(TopicName.parse("persistent://public/default/more"), 1)
    publish_one(broker, topic=TopicName.parse("persistent://public/default/parted-partition-1"))  # counted already
    broker.admin.set_policy(NS, rules.MAX_TOPICS, 6)
    broker.admin.update_partitioned_topic(TopicName.parse("persistent://public/default/parted"), 4)
    with pytest.raises(TopicLimitReached):
        broker.admin.update_partitioned_topic(TopicName.parse("persistent://public/default/parted"), 5)
    broker.admin.remove_policy(NS, rules.MAX_TOPICS)
    broker.admin.create_topic(TopicName.parse("persistent://public/default/fifth"))


def test_max_subscriptions_refuses_a_new_subscription_but_not_an_existing_one() -> None:
    broker = memory_broker()
    broker.metadata.create_topic(T, 0)
    broker.admin.set_policy(NS, rules.MAX_SUBSCRIPTIONS, 5)
    broker.admin.set_topic_policy(T, rules.MAX_SUBSCRIPTIONS, 2)
    broker.subscriptions.subscribe(T, "a", "c1", "Shared")
    broker.subscriptions.subscribe(T, "b", "c1", "Shared")
    with pytest.raises(NotAllowed) as refused:
        broker.subscriptions.subscribe(T, "c", "c1", "Shared")
    assert refused.value.status == 405 and "Exceed the maximum number of subscriptions" in refused.value.reason
    broker.subscriptions.subscribe(T, "a", "c2", "Shared")  # another consumer of an existing one
    broker.subscriptions.unsubscribe(T, "b", "c1")
    broker.subscriptions.subscribe(T, "c", "c1", "Shared")


# --- the DynamoDB adapter (moto in-process): one write per publish, limits in the same write ---------
@pytest.fixture
def dynamo(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Counter[str]]]:
    moto = pytest.importorskip("moto")
    import boto3

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:  # the suite's emulator
        monkeypatch.delenv(name)
    with moto.mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="test",
                           aws_secret_access_key="test")
        ddb.create_table(
            TableName="t",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                  {"AttributeName": "sk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            BillingMode="PAY_PER_REQUEST",
        )
        calls: Counter[str] = Counter()
        ddb.meta.events.register("before-send", lambda event_name="", **_: calls.update([event_name.split(".")[-1]]))
        yield ddb, calls


def test_dynamodb_publish_rate_rides_on_the_reservation_write(dynamo: tuple[Any, Counter[str]]) -> None:
    from magnetar.adapters.aws.dynamodb import DynamoMetadataStore

    ddb, calls = dynamo
    first, second = DynamoMetadataStore("t", ddb), DynamoMetadataStore("t", ddb)  # two containers
    first.create_tenant(TenantInfo("public"))
    first.create_namespace(NamespaceInfo(NS))
    first.create_topic(T, 0)
    now = 1_700_000_000_000
    rate = PublishRate(msgs=10)

    def reserve(store: DynamoMetadataStore, at: int) -> bool:
        try:
            store.reserve_entry(T, ProducerClaim("p", at, messages=1, size=10, rate=rate_claim(rate, 1, 10, at)))
            return True
        except TooManyRequests:
            return False

    calls.clear()
    admitted = [reserve(first, now) for _ in range(12)]
    assert admitted == [True] * 11 + [False]  # as on the in-memory ports
    assert calls == {"UpdateItem": 12}, "one write per publish, refusals included"
    calls.clear()
    assert reserve(first, now + 100)  # 100 ms later: one more
    assert calls == {"UpdateItem": 1}
    calls.clear()
    # the other container never saw this topic's clock: it guesses "idle", is told otherwise, and
    # knows from then on
    assert reserve(second, now + 200) and calls == {"UpdateItem": 2}
    calls.clear()
    assert not reserve(second, now + 200) and calls == {"UpdateItem": 1}
    # idle for a while: the clock restarts from now, with the burst available again
    calls.clear()
    assert sum(reserve(first, now + 60_000) for _ in range(12)) == 11
    assert calls == {"UpdateItem": 12}
    # no limit: the same write without the rate condition
    calls.clear()
    assert all(first.reserve_entry(T, ProducerClaim("p", now + 60_000, messages=1, size=10)) for _ in range(5))
    assert calls == {"UpdateItem": 5}


def test_dynamodb_topic_counter_rides_on_the_creating_transaction(dynamo: tuple[Any, Counter[str]]) -> None:
    from magnetar.adapters.aws.dynamodb import DynamoMetadataStore

    ddb, calls = dynamo
    store = DynamoMetadataStore("t", ddb)
    store.create_tenant(TenantInfo("public"))
    store.create_namespace(NamespaceInfo(NS))
    calls.clear()
    assert store.create_topic(TopicName.parse("persistent://public/default/a"), 0, max_topics=2)
    # the listing and the counter in one transaction (configuration store), the writer counter apart
    assert calls == {"TransactWriteItems": 1, "UpdateItem": 1}  # (a revivable writer counter: `dynamodb.deletion`)
    assert not store.create_topic(TopicName.parse("persistent://public/default/a"), 0, max_topics=2)  # exists
    assert store.create_partitioned_topic(TopicName.parse("persistent://public/default/p"), 1, max_topics=2)
    with pytest.raises(TopicLimitReached):
        store.create_topic(TopicName.parse("persistent://public/default/c"), 0, max_topics=2)
    with pytest.raises(TopicLimitReached):
        store.update_partitions(TopicName.parse("persistent://public/default/p"), 2, max_topics=2, previous=1)
    store.set_topic_count(NS, 0)
    assert store.update_partitions(TopicName.parse("persistent://public/default/p"), 2, max_topics=2, previous=1)
    assert store.get_partitions(TopicName.parse("persistent://public/default/p")) == 2
