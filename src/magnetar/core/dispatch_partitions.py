"""One receive for every partition of a partitioned topic a consumer is attached to.

Pulsar multiplexes a consumer's partitions over one connection; a long poll per partition would
make a consumer of an 8-partition topic eight pollers, each look a cursor read and each hand-out
a cursor write. Here one long poll serves them all, with the per-partition semantics of
`SubscriptionService.receive` (each partition keeps its own cursor, its own subscription-type
rules, acks, redelivery, ack timeouts, delayed delivery and dispatch rate):

- each look reads the views of all the partitions in one round trip
  (`MetadataStore.get_subscription_views`: one BatchGetItem);
- each partition takes one dispatch step in memory (`SubscriptionService.step`): acks first,
  then a fair share of `max_messages` (partitions in a rotating order; what a quiet partition
  leaves goes, in a second pass, to those that handed out something), within one response's
  byte budget;
- the cursors that changed are written together (`MetadataStore.put_cursors`: one
  TransactWriteItems), each still conditional on its own version, so two consumers never hand
  out the same entry; the partitions whose writes lose a race are stepped again (re-read,
  their acks re-applied, claim, write: one BatchGetItem and one TransactWriteItems a round for
  all of them), the others keep their claims;
- everything that can refuse the request (a consumer not attached, a cumulative ack on a Shared
  subscription) is found before any write: a refused request changed nothing.

One receive may also serve several consumers of the subscription (`receive_partitions_together`:
a client's consumers polling together): each look reads the partitions once and steps every
consumer on each cursor in turn (who goes first rotates), and each cursor that changed is written
once for all of them — a client's four Key_Shared consumers of an 8-partition topic make one look
and one claim per seal instead of four. A topic that is not partitioned is polled together the
same way, as one partition (`receive_topic_together`).

The poll returns as soon as any partition has messages (or `min_messages` in all), or when the
wait is over, with when the first of the partitions' next seals is due when their cadences tell
(`next_seal_of_partitions`): a consumer that took everything ready polls again then, not at once.
"""

from __future__ import annotations

import itertools
import logging
import random
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from magnetar.core.crashpoints import crash_point
from magnetar.core.delaypoints import delay_point
from magnetar.core.errors import InvalidInput, MagnetarError, SubscriptionNotFound
from magnetar.core.ledger.pacing import next_seal_in_ms
from magnetar.core.naming import TopicName
from magnetar.core.ports import CursorWrite, SubscriptionView

if TYPE_CHECKING:
    from magnetar.core.acks import Acks
    from magnetar.core.claims import DeliveredEntry
    from magnetar.core.dispatch import Step, SubscriptionService

log = logging.getLogger(__name__)

MAX_PARTITIONS_PER_RECEIVE = 256  # keeps a look within a few BatchGetItems
MAX_CONSUMERS_PER_RECEIVE = 32  # a client's consumers of one subscription served by one receive

# looks made by this container: each starts at the next partition in turn (a random start, as
# before, left a partition out of 12 small asks 3 % of the time)
_LOOKS = itertools.count()


@dataclass(frozen=True)
class PartitionReceived:
    """What one partition handed out in a multi-partition receive, and its cursor's epoch."""

    entries: list[DeliveredEntry]
    epoch: int
    acks_applied: bool = True  # False: its acks could not be written this time, send them again
    # when the partition's next seal is due, if its cadence tells (`ledger.pacing.next_seal_in_ms`)
    next_seal_in_ms: int | None = None
    # whether what the partition seals next may go to this consumer (not while another consumer
    # owns its keys, Key_Shared, or is its active consumer, Failover): its seals do not concern it
    receives_new: bool = True


def next_seal_of_partitions(got: dict[int, PartitionReceived]) -> int | None:
    """When the first next seal of the partitions whose new entries may go to the consumer is due
    (ms): a consumer that took everything ready needs no look before then. None unless each of
    those partitions' is known (a quiet partition is sealed as soon as something reaches it), or
    when none of them may send it anything new."""
    due = [r.next_seal_in_ms for r in got.values() if r.receives_new]
    if not due or any(d is None for d in due):
        return None
    return min(d for d in due if d is not None)


def check_partitions(parent: TopicName, partitions: list[int]) -> list[TopicName]:
    if parent.partition_index >= 0:
        raise InvalidInput(f"{parent} is a partition: receive from several partitions on the partitioned topic")
    if not partitions or len(partitions) > MAX_PARTITIONS_PER_RECEIVE:
        raise InvalidInput(f"Give 1 to {MAX_PARTITIONS_PER_RECEIVE} partitions")
    if len(set(partitions)) != len(partitions) or min(partitions) < 0:
        raise InvalidInput("Partitions must be distinct, non-negative indexes")
    return [parent.partition(p) for p in partitions]


@dataclass(frozen=True)
class ConsumerAsk:
    """One consumer's part of a receive over partitions: the messages it has room for, and its
    acknowledgements by partition riding along."""

    consumer: str
    max_messages: int
    acks: dict[int, Acks] = field(default_factory=dict)


def receive_partitions(
    service: SubscriptionService,
    parent: TopicName,
    partitions: list[int],
    subscription: str,
    consumer: str,
    max_messages: int,
    wait_ms: int,
    request_id: str,
    acks: dict[int, Acks],
    min_messages: int = 1,
) -> dict[int, PartitionReceived]:
    """Long-poll the partitions `partitions` of `parent` for `consumer` (acks by partition ride
    along); what each partition handed out, by partition (every partition asked is in it)."""
    got = receive_partitions_together(service, parent, partitions, subscription,
                                      [ConsumerAsk(consumer, max_messages, acks)], wait_ms, request_id, min_messages)
    return got[consumer]


def receive_partitions_together(
    service: SubscriptionService,
    parent: TopicName,
    partitions: list[int],
    subscription: str,
    asks: list[ConsumerAsk],
    wait_ms: int,
    request_id: str,
    min_messages: int = 1,
) -> dict[str, dict[int, PartitionReceived]]:
    """Long-poll the partitions `partitions` of `parent` for several consumers of `subscription`
    at once (a client's consumers of one subscription): each look reads the partitions once and
    steps every consumer on each of them in turn, and each cursor that changed is written once
    for all of them. What each partition handed out, by consumer then partition. Returns as soon
    as any consumer got something (or `min_messages` in all)."""
    return _receive_together(service, parent, check_partitions(parent, partitions), partitions, subscription, asks,
                             wait_ms, request_id, min_messages)


def receive_topic_together(
    service: SubscriptionService,
    topic: TopicName,
    subscription: str,
    asks: list[ConsumerAsk],
    wait_ms: int,
    request_id: str,
    min_messages: int = 1,
) -> dict[str, PartitionReceived]:
    """Long-poll one topic (not partitioned, or one partition by its own name) for several
    consumers of `subscription` at once (a client's consumers of it): one look and one cursor
    write for all of them, as `receive_partitions_together` over one partition. Each consumer's
    acknowledgements are under the topic's partition index (-1: not a partition). What each
    consumer got, by consumer."""
    got = _receive_together(service, topic, [topic], [topic.partition_index], subscription, asks, wait_ms,
                            request_id, min_messages)
    return {consumer: per[topic.partition_index] for consumer, per in got.items()}


def _receive_together(
    service: SubscriptionService,
    parent: TopicName,
    topics: list[TopicName],
    partitions: list[int],
    subscription: str,
    asks: list[ConsumerAsk],
    wait_ms: int,
    request_id: str,
    min_messages: int,
) -> dict[str, dict[int, PartitionReceived]]:
    from magnetar.core.dispatch import MAX_POLL_INTERVAL_S, MAX_WAIT_MS, POLL_INTERVAL_S

    if not asks or len(asks) > MAX_CONSUMERS_PER_RECEIVE:
        raise InvalidInput(f"Give 1 to {MAX_CONSUMERS_PER_RECEIVE} consumers")
    if len({a.consumer for a in asks}) != len(asks):
        raise InvalidInput("Consumers of one receive must be distinct")
    if any(a.max_messages <= 0 for a in asks):
        raise InvalidInput("maxMessages must be positive")
    if any(set(a.acks) - set(partitions) for a in asks):
        raise InvalidInput("Acknowledgements for a partition not received from")
    min_messages = max(1, min(min_messages, sum(a.max_messages for a in asks)))
    clock = service.clock
    deadline = clock.now_ms() + min(max(wait_ms, 0), MAX_WAIT_MS)
    idle_interval = POLL_INTERVAL_S
    while True:
        final = clock.now_ms() >= deadline
        got, throttled_until = _look(service, topics, partitions, subscription, asks, request_id,
                                     1 if final else min_messages)
        left_s = max(0.0, (deadline - clock.now_ms()) / 1000)
        if got is None:  # some ready, not enough: look again once the wait is over (or in 250 ms)
            clock.sleep(max(0.05, min(left_s, 0.25)))
            continue
        asks = [replace(a, acks={}) for a in asks]  # written with the cursors
        if final or any(r.entries for per in got.values() for r in per.values()):
            _record(service, parent, [r for per in got.values() for r in per.values()])
            return got
        if throttled_until:  # every partition's dispatch rate is used up: wait for the next period
            clock.sleep(min(max(throttled_until - clock.now_ms(), 1) / 1000, left_s + 0.001))
            continue
        clock.sleep(min(idle_interval, left_s + 0.001))
        idle_interval = min(idle_interval * 2, MAX_POLL_INTERVAL_S)


def _record(service: SubscriptionService, parent: TopicName, got: list[PartitionReceived]) -> None:
    """The messages a partitioned receive handed out, to the telemetry (one namespace)."""
    from magnetar.core.delivery_telemetry import record_delivery
    from magnetar.core.metrics import DISPATCHED_MESSAGES

    delivered = [d for r in got for d in r.entries]
    if delivered:
        with service.telemetry.tracer.span("dispatch") as span:
            span.annotate("namespace", str(parent.namespace_name))
            record_delivery(service.telemetry, parent, delivered, DISPATCHED_MESSAGES, service.clock.now_ms(), span)


def acknowledge_partitions(service: SubscriptionService, parent: TopicName, subscription: str,
                           acks: dict[int, Acks]) -> dict[int, int]:
    """Apply acknowledgements on several partitions: one read, one transaction (partitions that
    lose a race are done again on their own); each partition's cursor epoch by partition."""
    partitions = sorted(acks)
    topics = check_partitions(parent, partitions)
    now = service.clock.now_ms()
    views = service.metadata.get_subscription_views([(t, subscription) for t in topics])
    writes: list[CursorWrite] = []
    shares: set[str] = set()  # partitions whose replicated subscription's snapshot goes with the write
    epochs: dict[int, int] = {}
    for topic, view, p in zip(topics, views, partitions, strict=True):
        if view.cursor is None:
            raise SubscriptionNotFound(f"Subscription {subscription} not found on {topic}")
        before = view.cursor.to_dict()
        acks[p].apply(view.cursor, now)  # as the single-partition ack: no lease needed
        epochs[p] = view.cursor.epoch
        if view.cursor.to_dict() != before:
            writes.append(CursorWrite(topic, subscription, view.cursor, view.cursor_version))
            if service.prepare_share(topic, view.cursor, view.seal):
                shares.add(str(topic))
    for write, ok in zip(writes, service.metadata.put_cursors(writes), strict=True):
        if not ok:  # lost a race: that partition alone, re-read and retried (acks are idempotent)
            p = write.topic.partition_index
            epochs[p] = service.acknowledge(write.topic, subscription, acks[p]).epoch
        elif str(write.topic) in shares:
            service.publish_share(write.topic, subscription, write.state)
    return epochs


def _look(
    service: SubscriptionService,
    topics: list[TopicName],
    partitions: list[int],
    subscription: str,
    asks: list[ConsumerAsk],
    request_id: str,
    min_messages: int,
) -> tuple[dict[str, dict[int, PartitionReceived]] | None, int]:
    """One look at every partition for every consumer asking; None when fewer than `min_messages`
    are ready (nothing written), else what each partition handed out to each consumer and, when
    dispatch rates held everything back, the earliest time one of them opens again."""
    from magnetar.core.acks import NO_ACKS
    from magnetar.core.claims import MAX_RECEIVE_BYTES, WIRE_BYTES_PER_ENTRY

    def wire_bytes(delivered: list[DeliveredEntry]) -> int:  # what they add to the answer's JSON
        return sum(d.entry.size + WIRE_BYTES_PER_ENTRY for d in delivered)

    now = service.clock.now_ms()
    views = service.metadata.get_subscription_views([(t, subscription) for t in topics])
    n, m = len(topics), len(asks)
    look = next(_LOOKS)
    order = [(look + k) % n for k in range(n)]  # no partition always first: none starves when the ask is small
    turns = [(look + k) % m for k in range(m)]  # nor a consumer: on a Shared cursor the first takes the most
    shares = [max(1, a.max_messages // n) for a in asks]
    msgs_left, bytes_left = [a.max_messages for a in asks], MAX_RECEIVE_BYTES  # one response for all

    def room() -> bool:  # at least one entry is always handed out: claim only while a large one fits
        return bytes_left >= MAX_RECEIVE_BYTES // 4 or bytes_left == MAX_RECEIVE_BYTES

    steps: dict[tuple[int, int], Step] = {}
    for i in order:  # pass 1: acks, leases, and a fair share each (consumers in turn on one cursor)
        p = partitions[i]
        for j in turns:
            ask = min(shares[j], msgs_left[j]) if room() else 0
            step = service.step(topics[i], views[i], asks[j].consumer, ask, request_id, asks[j].acks.get(p, NO_ACKS),
                                now, bytes_left, subscription=subscription)
            steps[i, j] = step
            msgs_left[j] -= step.messages
            bytes_left -= wire_bytes(step.delivered)
    for i in order:  # pass 2: what the quiet partitions left goes to those that handed out something
        for j in turns:  # (an entry of many messages may have stopped a step short of its share)
            step = steps[i, j]
            if msgs_left[j] <= 0 or not room() or step.retried or step.limited or not step.delivered:
                continue
            more = _claim_more(service, topics[i], views[i], step, asks[j].consumer, msgs_left[j], bytes_left,
                               request_id)
            msgs_left[j] -= sum(d.entry.num_messages for d in more)
            bytes_left -= wire_bytes(more)
    ready = sum(s.messages for s in steps.values())
    if 0 < ready < min_messages and not any(s.retried for s in steps.values()):
        return None, 0
    changed = [i for i in range(n) if any(steps[i, j].write for j in range(m))]
    if changed:
        delay_point("dispatch.before_claim")  # a stalled claim: the ack timeout, the poll's retry
    shares_of = {i for i in changed if service.prepare_share(topics[i], steps[i, 0].state, views[i].seal)}
    written = service.metadata.put_cursors(
        [CursorWrite(topics[i], subscription, steps[i, 0].state, views[i].cursor_version) for i in changed])
    if any(written):
        crash_point("dispatch.after_claim")  # claimed, not delivered: the retried receive gets them
    for i, ok in zip(changed, written, strict=True):
        if ok and i in shares_of:
            service.publish_share(topics[i], subscription, steps[i, 0].state)
    out: dict[str, dict[int, PartitionReceived]] = {}
    for j, a in enumerate(asks):
        # the next seals tell when more is readable only if this look took everything ready for
        # the consumer: not when the request's count or bytes cut it short
        full = msgs_left[j] <= 0 or not room()
        out[a.consumer] = {partitions[i]: PartitionReceived(
            steps[i, j].delivered, steps[i, j].state.epoch,
            next_seal_in_ms=None if full else next_seal_in_ms(views[i].seal, now),
            receives_new=service.claims.may_receive_new(topics[i], steps[i, j].state, a.consumer, now))
            for i in range(n)}
    lost = [i for i, ok in zip(changed, written, strict=True) if not ok]
    if lost:  # lost races: those partitions again, together (one read, one write per round)
        wants = {(k, j): max(steps[i, j].messages, min(shares[j], steps[i, j].cap))
                 for k, i in enumerate(lost) for j in range(m)}
        kept = sum(wire_bytes(steps[i, j].delivered) for i in range(n) if i not in lost for j in range(m))
        again = _again(service, [topics[i] for i in lost], [partitions[i] for i in lost], subscription, asks, wants,
                       request_id, [steps[i, 0].state.epoch for i in lost], MAX_RECEIVE_BYTES - kept)
        for consumer, per in again.items():
            out[consumer].update(per)
    throttled = [s.throttled_until for s in steps.values() if s.throttled_until]
    return out, (min(throttled) if len(throttled) == n * m else 0)


def _claim_more(service: SubscriptionService, topic: TopicName, view: SubscriptionView, step: Step, consumer: str,
                max_messages: int, max_bytes: int, request_id: str) -> list[DeliveredEntry]:
    """A second claim on a partition's stepped cursor (still unwritten), added to its step."""
    state = step.state
    lease = state.consumers[consumer]
    more = service.claims.claim(topic, view, state, consumer, max_messages, service.clock.now_ms(), lease.ack_timeout_ms,
                         request_id, max_bytes)
    if more:
        step.delivered.extend(more)
        step.write = True
    return more


def _again(service: SubscriptionService, topics: list[TopicName], partitions: list[int], subscription: str,
           asks: list[ConsumerAsk], wants: dict[tuple[int, int], int], request_id: str,
           epochs: list[int], max_bytes: int) -> dict[str, dict[int, PartitionReceived]]:
    """Step again the partitions whose write lost a race (re-read, every consumer's acks
    re-applied, `wants[k, j]` messages for consumer j on partition k), all of them in each round:
    one BatchGetItem and one TransactWriteItems, up to CONFLICT_RETRIES rounds. Other partitions'
    claims are already written, so nothing may be raised from here: a partition that cannot be
    stepped now (endless contention, a consumer detached meanwhile) hands out nothing this time
    and says its acks were not applied, for the clients to send them again. What they hand out
    stays within `max_bytes` of the answer (the rest of the look's budget)."""
    from magnetar.core.acks import NO_ACKS
    from magnetar.core.claims import MAX_RECEIVE_BYTES, WIRE_BYTES_PER_ENTRY
    from magnetar.core.dispatch import CONFLICT_RETRIES

    out: dict[str, dict[int, PartitionReceived]] = {a.consumer: {} for a in asks}

    def nothing(k: int) -> None:
        for a in asks:
            out[a.consumer][partitions[k]] = PartitionReceived([], epochs[k], acks_applied=partitions[k] not in a.acks)

    todo = list(range(len(topics)))
    for _ in range(CONFLICT_RETRIES):
        service.clock.sleep(random.uniform(0.0, 0.02))
        left = max_bytes - sum(d.entry.size + WIRE_BYTES_PER_ENTRY for per in out.values() for r in per.values()
                               for d in r.entries)
        views = service.metadata.get_subscription_views([(topics[k], subscription) for k in todo])
        now = service.clock.now_ms()
        stepped: list[tuple[int, SubscriptionView, list[Step]]] = []
        for k, view in zip(todo, views, strict=True):
            try:
                steps = []
                for j, a in enumerate(asks):  # claim only while a large entry still fits the answer
                    want = wants[k, j] if left >= MAX_RECEIVE_BYTES // 4 else 0
                    steps.append(service.step(topics[k], view, a.consumer, want, request_id,
                                              a.acks.get(partitions[k], NO_ACKS), now, max(left, 0),
                                              subscription=subscription))
                    left -= sum(d.entry.size + WIRE_BYTES_PER_ENTRY for d in steps[-1].delivered)
            except MagnetarError as exc:
                log.warning("partition %s not stepped after a lost race: %s", topics[k], exc)
                nothing(k)
                continue
            if any(step.write for step in steps):
                stepped.append((k, view, steps))
            else:
                for a, step in zip(asks, steps, strict=True):
                    out[a.consumer][partitions[k]] = PartitionReceived([], step.state.epoch)
        written = service.metadata.put_cursors(
            [CursorWrite(topics[k], subscription, steps[0].state, view.cursor_version) for k, view, steps in stepped])
        todo = []
        for (k, _, steps), ok in zip(stepped, written, strict=True):
            if ok:
                for a, step in zip(asks, steps, strict=True):
                    out[a.consumer][partitions[k]] = PartitionReceived(step.delivered, step.state.epoch)
            else:
                todo.append(k)
        if not todo:
            return out
    for k in todo:
        log.warning("partition %s not stepped: too much contention", topics[k])
        nothing(k)
    return out
