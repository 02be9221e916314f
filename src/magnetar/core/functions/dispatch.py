"""Pulsar Functions' dispatch: a registered function runs when its input topics have messages.

`FunctionDispatcher.serve(fqfn, budget_ms)` serves one RUNNING function for a while: it receives
from the function's subscription on each partition of each input topic (core/functions/inputs.py:
`inputs` and the topics a `topicsPattern` matches), invokes the function (the `FunctionInvoker`
port: its Lambda function, or the user's `functionArn`; the code in process in tests) with a batch,
stores the outputs the invocation returns through the ledger writer (group appends, tried again
on the writer's "retry"), and acknowledges by the processing guarantee:

- ATMOST_ONCE: acknowledged before the invocation (a failure loses the message, as Pulsar);
- ATLEAST_ONCE: acknowledged once the outputs are stored; a failure is negatively acknowledged
  and redelivered; after `maxMessageRetries` redeliveries it goes to the dead-letter topic;
  concurrent dispatchers share the work through the subscription's claims;
- EFFECTIVELY_ONCE: as ATLEAST_ONCE, the outputs published with the runtime's producer name and
  sequence id (the input's position) on an output topic with deduplication on (enabled as a topic
  policy when neither the topic nor its namespace has it, as `functions localrun` does), so an
  output stored twice (a dispatcher dying between store and ack) is dropped the second time. As
  deduplication also drops an output stored after a later one, one dispatcher at a time serves
  the function (a lease, renewed before each batch), a failed batch comes again at once and before
  anything later, and a dispatcher taking the lease over from a dead one first gets back what that
  one had received; the subscription is Failover, as Pulsar's.

A dispatcher serves only while it holds one of the function's `parallelism` dispatch slots (leases
in the metadata store, renewed before each batch; EFFECTIVELY_ONCE has one): the journal consumer
starts a dispatcher after every seal of an input, and one that finds every slot held ends at once
(one conditional write) instead of claiming messages it could not run before a serving one is done
with the function's concurrency (`parallelism` is its reserved concurrency). Giving its slot up, a
dispatcher looks once more for sealed messages (a seal may have come between its last empty look and
the release, and that seal's dispatcher found the slot held) and serves them. Each invocation
carries the function's configuration and code location (the function's Lambda function reads
nothing from the registry); a throttled invocation (the account's concurrency) is tried again after
a pause, not counted as a failure. It loops while messages come and the budget lasts, always keeping
the time of one invocation and of storing its outputs. Pulsar's instance stats are added up in this cluster's table
(core/functions/stats.py), which `functions status|stats` read.
"""

from __future__ import annotations

import logging
import uuid
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.core.acks import Acks
from magnetar.core.crashpoints import crash_point
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import NotFound, RetryableError, TooManyRequests
from magnetar.core.functions.deployment import processing_budget_ms, timeout_ms
from magnetar.core.functions.inputs import config_arn, dispatcher_consumer, subscribe_inputs
from magnetar.core.functions.stats import FunctionStats
from magnetar.core.naming import TopicName
from magnetar.core.policies import DEDUPLICATION, TopicPolicies
from magnetar.functions.config import FunctionConfig, ProcessingGuarantees

if TYPE_CHECKING:
    from magnetar.core.broker import Broker
    from magnetar.core.ports.functions import FunctionRecord

log = logging.getLogger(__name__)
DEFAULT_BUDGET_MS = 60_000
BATCH_MESSAGES = 100
NACK_DELAY_MS = 1_000
STORE_MARGIN_MS = 10_000  # a dispatcher keeps this long, past an invocation, to store and acknowledge
GROUP_ENTRIES, GROUP_BYTES, GROUP_ENTRY_OVERHEAD = 100, 512 * 1024, 512  # outputs stored in one group append
STORE_ATTEMPTS, STORE_RETRY_WAIT_S = 4, 0.2  # an output group append refused with "retry": tried again
LEASE_SLACK_MS = 5_000  # a dispatch slot's lease: an invocation, its storing and this
THROTTLE_WAIT_S = (0.1, 2.0)  # a throttled invocation is tried again after this pause, doubling up to the max
ACK, NACK, DEAD_LETTER = "ack", "nack", "deadLetter"


class FunctionInvoker(Protocol):
    """Runs one invocation of a registered function (functions/invocation.py's event and result):
    its own Lambda function, or `function_arn` (the user's). Raises TooManyRequests when throttled,
    RetryableError while the Lambda function is not ready yet (being created or updated)."""

    def invoke(self, fqfn: str, event: dict[str, Any], function_arn: str | None = None) -> dict[str, Any]: ...


def slot_lease_ms(config: FunctionConfig) -> int:
    """How long a dispatch slot stays taken past its last renewal: an invocation, storing its
    outputs, and a margin (how long a dispatcher killed mid-batch holds its slot up)."""
    return timeout_ms(config) + STORE_MARGIN_MS + LEASE_SLACK_MS


# --- serving one function ------------------------------------------------------------------------
@dataclass
class ServeReport:
    fqfn: str
    served: bool = False  # False: not RUNNING (or unknown)
    invocations: int = 0
    received: int = 0
    acked: int = 0
    nacked: int = 0
    dead_lettered: int = 0
    published: int = 0
    failures: int = 0  # invocations that failed as a whole (the invoker raised)
    throttled: int = 0  # invocations refused for the function's concurrency, tried again
    standby: bool = False  # every dispatch slot was held by another dispatcher; this one did nothing
    stopped: bool = False  # EFFECTIVELY_ONCE: a batch failed; it is retried from its first message later


@dataclass
class _Received:
    partition: TopicName
    epoch: int
    messages: list[Any] = field(default_factory=list)  # magnetar.client.message.Message


class FunctionDispatcher:
    def __init__(self, broker: Broker, invoker: FunctionInvoker, batch_messages: int = BATCH_MESSAGES,
                 nack_delay_ms: int = NACK_DELAY_MS) -> None:
        self.broker = broker
        self.invoker = invoker
        self.batch_messages = batch_messages
        self.nack_delay_ms = nack_delay_ms
        self._round_robin = 0

    def _partitions(self, topic: TopicName) -> list[TopicName]:
        count = self.broker.metadata.get_partitions(topic)
        return [topic.partition(i) for i in range(count)] if count else [topic]

    def serve(self, fqfn: str, budget_ms: int = DEFAULT_BUDGET_MS, *, remaining_ms: int | None = None) -> ServeReport:
        """Serve `fqfn` while messages come, for `budget_ms` at most (a new batch is not started
        past it). `remaining_ms`: the time the caller has left (a Lambda invocation's), of which an
        invocation of the function and the storing of its outputs are kept free."""
        report = ServeReport(fqfn)
        tenant, namespace, name = fqfn.split("/", 2)
        try:
            record = self.broker.functions.record(tenant, namespace, name)
        except NotFound:
            return report
        if record.state != "RUNNING" or not (record.code_key or config_arn(record.config)):
            return report
        config = FunctionConfig.model_validate_json(record.config)
        report.served = True
        if remaining_ms is not None:
            budget_ms = max(1_000, min(budget_ms, remaining_ms - timeout_ms(config) - STORE_MARGIN_MS))
        deadline = self.broker.clock.now_ms() + budget_ms
        consumer = dispatcher_consumer(config)
        partitions = subscribe_inputs(self.broker, config, lease_ms=max(budget_ms, 30_000))
        # EFFECTIVELY_ONCE: one dispatcher at a time, so that outputs are stored in the order of their
        # inputs' sequence ids (deduplication would drop one stored after a later one)
        once = config.processingGuarantees is ProcessingGuarantees.EFFECTIVELY_ONCE
        slots = 1 if once else config.parallelism
        owner, idle_rounds = uuid.uuid4().hex, 0
        while self.broker.clock.now_ms() < deadline and not report.stopped:
            slot = self._take_slot(config, owner, slots)
            if slot is None:
                report.standby = True  # the slots' holders serve it
                break
            try:
                if once:  # what a dispatcher before this one received and did not settle comes first
                    for partition in partitions:
                        self.broker.subscriptions.redeliver_unacknowledged(partition, config.subscription, consumer)
                ran = self._loop(config, record, partitions, consumer, report, deadline, slot, owner)
            except Exception:
                self.broker.metadata.release_function_lease(slot, owner)
                raise
            # (a dispatcher killed mid-batch gives nothing up: its lease runs out)
            self.broker.metadata.release_function_lease(slot, owner)
            idle_rounds = idle_rounds + 1 if not ran else 0
            # once more for what was sealed meanwhile; not again after a round that found nothing to
            # run twice (what is sealed but not due yet, a negatively acknowledged message's delay,
            # is the maintenance run's)
            if idle_rounds >= 2 or not self._sealed_backlog(partitions, config.subscription):
                break
        return report

    def _loop(self, config: FunctionConfig, record: FunctionRecord, partitions: list[TopicName], consumer: str,
              report: ServeReport, deadline: int, slot: str, owner: str) -> int:
        """Batches while messages come, the slot held and the budget lasts; how many were run."""
        subscription, ran = config.subscription, 0
        while self.broker.clock.now_ms() < deadline and not report.stopped:
            if not self._renew_lease(config, slot, owner):
                break
            batches = self._receive(partitions, subscription, consumer)
            if not batches:
                break
            self._run(config, record, batches, subscription, consumer, report, deadline)
            ran += 1
        return ran

    @staticmethod
    def _lease_ms(config: FunctionConfig) -> int:
        return slot_lease_ms(config)

    def _renew_lease(self, config: FunctionConfig, slot: str, owner: str) -> bool:
        return self.broker.metadata.claim_function_lease(slot, owner, self.broker.clock.now_ms(),
                                                         self._lease_ms(config))

    def _take_slot(self, config: FunctionConfig, owner: str, slots: int) -> str | None:
        """The first of the function's dispatch slots free to take (its lease's key), or None."""
        for index in range(slots):
            slot = config.fqfn if index == 0 else f"{config.fqfn}#{index}"
            if self._renew_lease(config, slot, owner):
                return slot
        return None

    def _sealed_backlog(self, partitions: list[TopicName], subscription: str) -> bool:
        """Whether a readable message of an input (sealed; with tail reads, journaled) is not
        acknowledged yet: what a receive could get."""
        views = self.broker.metadata.get_subscription_views([(p, subscription) for p in partitions])
        tail = self.broker.tail_reads
        return any(v.cursor is not None and v.cursor.backlog(
            v.writer.next_entry if tail and v.writer is not None else v.seal.next_entry) > 0 for v in views)

    def _receive(self, partitions: list[TopicName], subscription: str, consumer: str) -> list[_Received]:
        from magnetar.client.message import Message as ClientMessage

        out, room = [], self.batch_messages
        for partition in partitions:
            if room <= 0:
                break
            received = self.broker.subscriptions.receive(partition, subscription, consumer, max_messages=room,
                                                         wait_ms=0, request_id=uuid.uuid4().hex)
            got = _Received(partition, received.epoch)
            for delivered in received.entries:
                entry = delivered.entry
                if entry.hole or entry.chunk is not None:
                    continue  # (chunked inputs are not reassembled by the dispatcher yet)
                got.messages.extend(ClientMessage.from_entry(entry, partition.partition_index,
                                                             delivered.redelivery_count, set(delivered.acked_indexes)))
            if got.messages:
                out.append(got)
                room -= len(got.messages)
        return out

    def _invoke(self, config: FunctionConfig, event: dict[str, Any], report: ServeReport,
                deadline: int) -> dict[str, Any]:
        """One invocation; a throttled one (or one of a function still being created or updated) is
        tried again after a pause while the serving lasts."""
        wait = THROTTLE_WAIT_S[0]
        while True:
            try:
                return self.invoker.invoke(config.fqfn, event, config.functionArn)
            except (TooManyRequests, RetryableError) as exc:
                report.throttled += 1
                if self.broker.clock.now_ms() + wait * 1000 > deadline:
                    raise
                log.info("%s: invocation refused (%s), tried again in %.1f s", config.fqfn, exc, wait)
                self.broker.clock.sleep(wait)
                wait = min(wait * 2, THROTTLE_WAIT_S[1])

    def _run(self, config: FunctionConfig, record: FunctionRecord, batches: list[_Received], subscription: str,
             consumer: str, report: ServeReport, deadline: int) -> None:
        from magnetar.functions.invocation import invocation_event

        messages = [m for b in batches for m in b.messages]
        report.received += len(messages)
        guarantee = config.processingGuarantees
        stats = FunctionStats(self.broker.metadata, config.fqfn)
        if guarantee is ProcessingGuarantees.ATMOST_ONCE:
            self._acknowledge(batches, {_id(m): ACK for m in messages}, subscription, consumer, report)
        event = invocation_event(record, config, messages, processing_budget_ms(config))
        report.invocations += 1
        try:
            result = self._invoke(config, event, report, deadline)
            if "errorMessage" in result and "results" not in result:
                raise RuntimeError(f"{result.get('errorType', 'Error')}: {result['errorMessage']}")
        except Exception as exc:
            log.warning("%s: the invocation failed: %r", config.fqfn, exc)
            report.failures += 1
            stats.add({"received": len(messages), "systemExceptions": 1,
                       "latestSystemExceptions": [_exception(exc, self.broker.clock.now_ms())]})
            if guarantee is not ProcessingGuarantees.ATMOST_ONCE:
                self._fail(config, batches, messages, subscription, consumer, report)
            return
        actions = {str(r["messageId"]): str(r["action"]) for r in result.get("results") or []}
        crash_point("function.after_invoke")  # run, nothing stored: the batch comes back after the ack timeout
        try:
            self._store(config, result.get("outputs") or [])
            report.published += len(result.get("outputs") or [])
        except Exception as exc:  # nothing is acknowledged: all of it comes again (EFFECTIVELY_ONCE: deduplicated)
            log.warning("%s: storing the outputs failed: %r", config.fqfn, exc)
            stats.add({**(result.get("stats") or {}), "systemExceptions": 1 + int((result.get("stats") or {})
                                                                                  .get("systemExceptions", 0)),
                       "latestSystemExceptions": [_exception(exc, self.broker.clock.now_ms())]})
            if guarantee is not ProcessingGuarantees.ATMOST_ONCE:
                self._fail(config, batches, messages, subscription, consumer, report)
            return
        crash_point("function.after_store")  # stored, not acknowledged: stored again (EFFECTIVELY_ONCE: deduplicated)
        stats.add(result.get("stats") or {})
        if guarantee is ProcessingGuarantees.ATMOST_ONCE:
            return
        decided = {}
        for message in messages:
            action = actions.get(_id(message), NACK)
            # "none": the function left it (autoAck off, or the invocation stopped before it): redelivered
            decided[_id(message)] = ACK if action in (ACK, DEAD_LETTER) else (NACK if action == NACK else "none")
            if action == DEAD_LETTER:
                report.dead_lettered += 1
        exactly = guarantee is ProcessingGuarantees.EFFECTIVELY_ONCE
        if exactly and any(a != ACK for a in decided.values()):  # (its time ran out): again at once, in order
            report.stopped = True
            self._acknowledge(batches, decided, subscription, consumer, report, nack_delay_ms=0)
            return
        self._acknowledge(batches, decided, subscription, consumer, report)

    def _fail(self, config: FunctionConfig, batches: list[_Received], messages: list[Any], subscription: str,
              consumer: str, report: ServeReport) -> None:
        """A batch that failed as a whole comes again: after the nack delay (ATLEAST_ONCE); at once and
        before anything later, the serving stopped (EFFECTIVELY_ONCE: the next dispatcher retries it)."""
        exactly = config.processingGuarantees is ProcessingGuarantees.EFFECTIVELY_ONCE
        self._acknowledge(batches, {_id(m): NACK for m in messages}, subscription, consumer, report,
                          nack_delay_ms=0 if exactly else None)
        report.stopped = exactly

    def _store(self, config: FunctionConfig, outputs: list[dict[str, Any]]) -> None:
        """The outputs in order, each its own entry (EFFECTIVELY_ONCE: with its producer's sequence
        id); consecutive outputs to one partition by one producer go in one group append (one
        reservation, one journal record)."""
        import base64

        deduplicated: set[str] = set()
        partitions: dict[str, list[TopicName]] = {}  # an output topic's partitions, looked up once per store
        groups: list[tuple[TopicName, str, list[Batch], int]] = []  # (partition, producer, entries, bytes)
        for output in outputs:
            topic = TopicName.parse(str(output["topic"]))
            producer = output.get("producerName")
            sequence = output.get("sequenceId")
            if producer and sequence is not None and str(topic) not in deduplicated:
                self._ensure_deduplication(topic)
                deduplicated.add(str(topic))
            version = output.get("schemaVersion")
            message = Message(base64.b64decode(output.get("payload") or ""), output.get("key") or None,
                              dict(output.get("properties") or {}), int(output.get("eventTime") or 0),
                              output.get("orderingKey") or None,
                              schema_version=int(version) if isinstance(version, int) else None)
            batch = Batch.of([message], batched=False, sequence_id=int(sequence) if sequence is not None else -1)
            if str(topic) not in partitions:
                partitions[str(topic)] = self._partitions(topic)
            target = self._route(partitions[str(topic)], message.key)
            name = str(producer or f"{config.tenant}.{config.namespace}.{config.name}")
            size = len(batch.payload) + GROUP_ENTRY_OVERHEAD
            last = groups[-1] if groups else None
            if (last is not None and last[0] == target and last[1] == name and len(last[2]) < GROUP_ENTRIES
                    and last[3] + size <= GROUP_BYTES):
                last[2].append(batch)
                groups[-1] = (last[0], last[1], last[2], last[3] + size)
            else:
                groups.append((target, name, [batch], size))
        for target, name, batches, _ in groups:
            self._append(target, batches, name)
            crash_point("function.mid_store")  # some outputs stored, not all, nothing acknowledged

    def _append(self, target: TopicName, batches: list[Batch], producer: str) -> None:
        """One group append, tried again on the writer's "retry" (a journal write past its deadline,
        a throttle) as a producer does: with sequence ids deduplicated, without them maybe stored twice."""
        wait = STORE_RETRY_WAIT_S
        for attempt in range(STORE_ATTEMPTS):
            try:
                self.broker.writer.append_group(target, batches, producer)
                return
            except (RetryableError, TooManyRequests):
                if attempt == STORE_ATTEMPTS - 1:
                    raise
                self.broker.clock.sleep(wait)
                wait *= 2

    def _route(self, partitions: list[TopicName], key: str | None) -> TopicName:
        """The partition an output goes to: by its key's hash, else round robin."""
        if len(partitions) == 1:
            return partitions[0]
        if key:
            return partitions[zlib.crc32(key.encode()) % len(partitions)]
        self._round_robin += 1
        return partitions[self._round_robin % len(partitions)]

    def _ensure_deduplication(self, topic: TopicName) -> None:
        from magnetar.core.ledger.writer import ensure_topic

        base = topic.partitioned_topic
        if TopicPolicies.of(self.broker.writer.policies(topic)).deduplication:
            return
        if not self.broker.metadata.get_partitions(base):
            ensure_topic(self.broker.metadata, base, self.broker.clock.now_ms())
        self.broker.admin.set_topic_policy(base, DEDUPLICATION, True)
        self.broker.writer.forget_policies()

    def _acknowledge(self, batches: list[_Received], actions: dict[str, str], subscription: str, consumer: str,
                     report: ServeReport, nack_delay_ms: int | None = None) -> None:
        for got in batches:
            entries: list[int] = []
            batch: dict[int, tuple[int, list[int]]] = {}
            nacks: list[int] = []
            for message in got.messages:
                action = actions.get(_id(message))
                mid = message.message_id()
                if action == ACK:
                    report.acked += 1
                    if mid.batch_index() < 0:
                        entries.append(mid.entry_id())
                    else:
                        batch.setdefault(mid.entry_id(), (mid._batch_size, []))[1].append(mid.batch_index())
                elif action in (NACK, "none"):
                    report.nacked += 1
                    if mid.entry_id() not in nacks:
                        nacks.append(mid.entry_id())
            acks = Acks(entries=tuple(entries), batch=tuple((e, n, tuple(ix)) for e, (n, ix) in batch.items()),
                        nacks=tuple(nacks), epoch=got.epoch, consumer=consumer,
                        nack_delay_ms=self.nack_delay_ms if nack_delay_ms is None else nack_delay_ms)
            if acks:
                self.broker.subscriptions.acknowledge(got.partition, subscription, acks)


def _id(message: Any) -> str:
    mid = message.message_id()
    return f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}:{mid.batch_index()}"


def _exception(exc: BaseException, now_ms: int) -> dict[str, Any]:
    return {"exceptionString": repr(exc), "timestampMs": now_ms}


