"""A registered function's inputs: its subscription on each partition of each input topic
(`subscribe_inputs`; a `topicsPattern` resolved over the namespace's topics, `input_topics`),
which functions a sealed batch's topics trigger (`FunctionTriggers`, cached per topic for
`TRIGGER_CACHE_MS`, so nothing runs for an idle function), and which functions have a backlog
for the maintenance run to serve (`backlogged_functions`)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from magnetar.core.entry import batch_topics
from magnetar.core.naming import TopicName
from magnetar.functions.config import FunctionConfig, ProcessingGuarantees

if TYPE_CHECKING:
    from magnetar.core.broker import Broker
    from magnetar.core.ports import MetadataStore

log = logging.getLogger(__name__)
TRIGGER_CACHE_MS = 10_000
DISPATCH_ACK_TIMEOUT_MS = 330_000  # longer than any invocation (deployment.MAX_TIMEOUT_MS) and its storing


class DispatcherInvoker(Protocol):
    """Starts a dispatcher for a function asynchronously (Lambda's `Event` invocation)."""

    def serve_async(self, fqfn: str) -> None: ...


def subscription_type(config: FunctionConfig) -> str:
    if config.processingGuarantees is ProcessingGuarantees.EFFECTIVELY_ONCE:
        return "Failover"
    return config.subscription_type


def dispatcher_consumer(config: FunctionConfig) -> str:
    """The consumer name every dispatcher of the function uses (a Failover subscription's active
    consumer stays the same whichever dispatcher serves it)."""
    return f"{config.name}-dispatcher"


def input_topics(metadata: MetadataStore, config: FunctionConfig) -> list[TopicName]:
    """The function's input topics: `inputs`, and the topics of the pattern's namespace that
    `topicsPattern` matches (by full name or local name, as the registry's `consumers_of`)."""
    topics = [TopicName.parse(t) for t in config.inputs]
    if config.topicsPattern:
        pattern = re.compile(config.topicsPattern)
        namespace = TopicName.parse(config.topicsPattern).namespace_name
        names = {str(TopicName.parse(t).partitioned_topic) for t in metadata.list_topics(namespace)}
        names.update(metadata.list_partitioned_topics(namespace))
        known = {str(t) for t in topics}
        for name in sorted(names - known):
            topic = TopicName.parse(name)
            if pattern.fullmatch(name) or pattern.fullmatch(topic.local_name):
                topics.append(topic)
    return topics


def input_partitions(metadata: MetadataStore, config: FunctionConfig) -> list[TopicName]:
    partitions = []
    for base in input_topics(metadata, config):
        count = metadata.get_partitions(base)
        partitions.extend([base.partition(i) for i in range(count)] if count else [base])
    return partitions


def subscribe_inputs(broker: Broker, config: FunctionConfig, lease_ms: int = 30_000) -> list[TopicName]:
    """The function's subscription on each partition of each input (created at
    `subscriptionPosition` when missing, the input created as a consumer would); the partitions.
    Called when the function is registered or updated, so that messages published from then on
    are the function's, as a Pulsar function's consumer subscribes when its instance starts; and by
    each dispatcher, which so subscribes the topics a `topicsPattern` matches as they appear."""
    partitions = input_partitions(broker.metadata, config)
    for partition in partitions:
        # every dispatcher renews the same consumer's lease: a batch a dispatcher took and never
        # settled (it died) comes back after the ack timeout, not when the lease ends
        broker.subscriptions.subscribe(partition, config.subscription, dispatcher_consumer(config),
                                       subscription_type(config), config.subscriptionPosition.value,
                                       ack_timeout_ms=DISPATCH_ACK_TIMEOUT_MS, lease_ms=lease_ms)
    return partitions


def config_arn(config_json: str) -> bool:
    """Whether a stored FunctionConfig names a Lambda function of the user's (functionArn)."""
    return bool(json.loads(config_json).get("functionArn"))


class FunctionTriggers:
    """The functions consuming a topic (the registry's input index), cached per topic partition
    for `period_ms` (a sealed batch's topics cost one read each per period, not per batch)."""

    def __init__(self, broker: Broker, period_ms: int = TRIGGER_CACHE_MS,
                 now_ms: Callable[[], int] | None = None) -> None:
        self.broker = broker
        self.period_ms = period_ms
        self._now = now_ms or broker.clock.now_ms
        self._cache: dict[str, tuple[int, list[str]]] = {}

    def consumers_of(self, topic: str) -> list[str]:
        base = str(TopicName.parse(topic).partitioned_topic)
        now = self._now()
        cached = self._cache.get(base)
        if cached is not None and now - cached[0] < self.period_ms:
            return cached[1]
        found = self.broker.functions.consumers_of(base)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[base] = (now, found)
        return found

    def functions_of(self, topics: list[str]) -> list[str]:
        found: set[str] = set()
        for topic in set(topics):
            try:
                found.update(self.consumers_of(topic))
            except Exception as exc:  # a name that is not a topic's (a journal key hashed): skipped
                log.debug("no functions for %r: %r", topic, exc)
        return sorted(found)

    def trigger_batch(self, records: list[bytes], dispatchers: DispatcherInvoker) -> list[str]:
        """After a journal batch is sealed: start a dispatcher for each function consuming one of
        its topics (read from the entries, not from the records' partition keys, which are hashed
        for long names); the functions started."""
        return self.trigger(list(batch_topics(records)), dispatchers)

    def trigger(self, topics: list[str], dispatchers: DispatcherInvoker) -> list[str]:
        """Start a dispatcher for each function consuming one of `topics`; the functions started."""
        started = self.functions_of(topics)
        for fqfn in started:
            try:
                dispatchers.serve_async(fqfn)
            except Exception as exc:  # the maintenance run serves what is left
                log.warning("could not start the dispatcher of %s: %r", fqfn, exc)
        return started


def backlogged_functions(broker: Broker, only: list[str] | None = None) -> list[str]:
    """The RUNNING functions of this instance whose subscription has a backlog on an input
    partition (messages not acknowledged yet, negatively acknowledged ones due for redelivery
    among them): the maintenance run serves these, so nothing waits on a new message to come.
    `only`: of these functions (`tenant/namespace/name`), read directly instead of listing every
    tenant's namespaces and functions."""
    metadata = broker.metadata
    if only is None:
        names = [(tenant, namespace, name) for tenant in metadata.list_tenants()
                 for namespace in metadata.list_namespaces(tenant) for name in metadata.list_functions(tenant, namespace)]
    else:
        names = [(tenant, namespace, name) for tenant, namespace, name in (fqfn.split("/", 2) for fqfn in only)]
    found = []
    for tenant, namespace, name in names:
        record = metadata.get_function(tenant, namespace, name)
        if record is None or record.state != "RUNNING" or not (record.code_key or config_arn(record.config)):
            continue
        config = FunctionConfig.model_validate_json(record.config)
        partitions = input_partitions(metadata, config)
        views = metadata.get_subscription_views([(p, config.subscription) for p in partitions])
        if any(v.cursor is not None and v.writer is not None and v.cursor.backlog(v.writer.next_entry) > 0
               for v in views):
            found.append(record.fqfn)
    return found
