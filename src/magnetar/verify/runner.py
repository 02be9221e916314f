"""Randomized workloads against an in-process local cluster, with crash points firing.

The cluster runs in this process so that crash points (`magnetar.core.crashpoints`) can be armed
inside the very handlers that serve the workload; the emulated AWS then retries as AWS would
(the event-source mapping re-invokes a failed batch, the SDK retries a failed request).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

import magnetar
from magnetar.client import exceptions
from magnetar.client.auth import Authentication
from magnetar.core import crashpoints, delaypoints
from magnetar.verify import compaction, schemas
from magnetar.verify import functions as function_runs
from magnetar.verify.history import Delivery, History, Send, Verdict, check

CRASH_POINTS = (
    "produce.after_reserve",
    "produce.after_journal_write",
    "produce.journal_refused",  # a refusal point: the shard refuses the write; the writer tombstones its ids
    "seal.after_segment_put",
    "seal.after_commit",
    "dispatch.after_claim",
    "cursor.after_update",
    "trim.after_commit",  # maintenance: segments unlisted, objects not yet deleted
    "trim.after_delete",  # maintenance: objects deleted, trash not yet cleared
    *compaction.POINTS,  # maintenance: a run's object written, or a generation committed (verify/compaction.py)
    *function_runs.POINTS,  # the functions' dispatcher: after the invocation, after storing (verify/functions.py)
)
# Delay points (magnetar.core.delaypoints): a step stalls past every deadline and grace period, then
# goes on. The run shortens those periods (RUN_TIMINGS) so a stall costs seconds, not minutes.
DELAY_POINTS = (
    "produce.before_journal_write",  # the writer stalls after reserving: past its deadline, it must not write
    "produce.journal_write",  # the write is slow: it lands past the deadline, maybe after its ids became holes
    "produce.after_journal_write",  # stored in time, answered late: no acknowledgement past the deadline
    "seal.before_commit",  # the sealer stalls mid-batch: records pile up, holes come due meanwhile
    "dispatch.before_claim",  # a receive's claim stalls: ack timeouts, the poll's own retry
    "cursor.before_update",  # an acknowledgement's cursor write stalls: others move the cursor meanwhile
)
RUN_WRITE_DEADLINE_MS, RUN_HOLE_GRACE_MS = 500, 1500  # the rule (deadline < grace) kept, the numbers shrunk
RUN_DELAY_MS = RUN_HOLE_GRACE_MS + 1_000  # one firing crosses the deadline and the grace
MAINTENANCE_EVERY_S = 0.5  # the workload's topic is maintained (retention trims what all cursors passed) this often
MAINTENANCE_FINAL_S = 150.0  # the last maintenance run of a run (it finishes what crashes left) may take this long


@dataclass
class RunPlan:
    topic: str
    partitions: int  # 0: not partitioned
    deduplicate: bool
    producers: list[tuple[str, int, int]]  # (name, messages, batch size)
    subscriptions: list[tuple[str, str, int, int]]  # (name, type, consumers, ack timeout ms)
    crash_points: dict[str, int]
    no_ack_probability: float
    close_probability: float
    delay_points: dict[str, int] = field(default_factory=dict)

    @classmethod
    def random(cls, rng: random.Random, run: int, allowed: tuple[str, ...], delays: tuple[str, ...] = ()) -> RunPlan:
        deduplicate = rng.random() < 0.4
        namespace = DEDUP_NAMESPACE if deduplicate else "public/default"
        topic = f"persistent://{namespace}/verify-{run}-{uuid.uuid4().hex[:8]}"
        partitions = rng.choice([0, 0, 2, 3])
        producers = [(f"p{i}-{uuid.uuid4().hex[:4]}", rng.randint(20, 120), rng.choice([1, 5, 20, 50]))
                     for i in range(rng.randint(1, 3))]
        subscriptions = []
        for i in range(rng.randint(1, 2)):
            sub_type = rng.choice(["Exclusive", "Shared", "Failover", "Key_Shared"])
            consumers = 1 if sub_type == "Exclusive" else rng.randint(1, 3)
            subscriptions.append((f"s{i}", sub_type, consumers, rng.choice([0, 1000])))
        chosen = rng.sample(list(allowed), k=rng.randint(1, min(3, len(allowed)))) if allowed else []
        plan = cls(topic, partitions, deduplicate, producers, subscriptions, {p: rng.randint(1, 2) for p in chosen},
                   rng.choice([0.0, 0.05]), rng.choice([0.0, 0.02]))
        if delays:  # drawn after the rest: a run without delay points is planned as before
            stalled = rng.sample(list(delays), k=rng.randint(1, min(2, len(delays))))
            plan.delay_points = {p: rng.randint(1, 2) for p in stalled}
        return plan


DEDUP_NAMESPACE = "public/verify-dedup"


@dataclass
class Summary:
    runs: int = 0
    fired: Counter[str] = field(default_factory=Counter)
    delays_fired: Counter[str] = field(default_factory=Counter)
    acked: int = 0
    delivered: int = 0
    lost: int = 0
    duplicated: int = 0
    stored_twice: int = 0
    order_violations: int = 0
    cursor_backwards: int = 0
    missing_objects: int = 0
    compaction_violations: int = 0
    schema_violations: int = 0
    function_violations: int = 0
    function_repeats: int = 0  # ATLEAST_ONCE outputs stored again after a crash (allowed)
    trimmed_segments: int = 0  # retention's work during the runs (maintenance ran, and trimmed)
    errors: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return (self.lost + self.duplicated + self.order_violations + self.cursor_backwards + self.missing_objects
                + self.compaction_violations + self.schema_violations + self.function_violations)

    def add(self, run: int, plan: RunPlan, verdict: Verdict) -> None:
        self.runs += 1
        self.acked += verdict.acked
        self.delivered += verdict.delivered
        self.lost += len(verdict.lost)
        self.duplicated += len(verdict.duplicated)
        self.stored_twice += verdict.stored_twice
        self.order_violations += len(verdict.order_violations)
        self.cursor_backwards += len(verdict.cursor_backwards)
        self.missing_objects += len(verdict.missing_objects)
        self.compaction_violations += len(verdict.compaction_violations)
        self.schema_violations += len(verdict.schema_violations)
        self.function_violations += len(verdict.function_violations)
        self.function_repeats += verdict.function_repeats
        self.trimmed_segments += verdict.trimmed_segments
        if not verdict.ok:
            self.failures.append({
                "run": run, "topic": plan.topic, "crash_points": plan.crash_points, "delay_points": plan.delay_points,
                "lost": verdict.lost[:10], "duplicated": verdict.duplicated[:10],
                "order_violations": verdict.order_violations[:10], "cursor_backwards": verdict.cursor_backwards[:10],
                "missing_objects": verdict.missing_objects[:10],
                "compaction_violations": verdict.compaction_violations[:10],
                "schema_violations": verdict.schema_violations[:10],
                "function_violations": verdict.function_violations[:10],
            })

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs, "crash_points_fired": dict(self.fired), "delay_points_fired": dict(self.delays_fired),
            "acked": self.acked,
            "delivered": self.delivered, "lost": self.lost, "duplicated": self.duplicated,
            "stored_twice_after_retry": self.stored_twice, "order_violations": self.order_violations,
            "cursor_backwards": self.cursor_backwards, "missing_objects": self.missing_objects,
            "compaction_violations": self.compaction_violations, "schema_violations": self.schema_violations,
            "function_violations": self.function_violations, "function_repeats": self.function_repeats,
            "trimmed_segments": self.trimmed_segments, "violations": self.violations, "errors": self.errors[:20], "failures": self.failures[:20],
        }


class Verifier:
    # how long a run waits for every acknowledged message to reach every subscription: it ends as
    # soon as they have; a loaded machine overrunning the run's 0.5 s write deadline multiplies the
    # entries by retries (several times over), and Key_Shared subscriptions then drain slowly
    def __init__(self, service_url: str, drain_timeout_s: float = 90.0,
                 authentication: Authentication | None = None) -> None:
        self.url = service_url
        self.authentication = authentication
        self.drain_timeout_s = drain_timeout_s

    def run_all(self, runs: int, seed: int, allowed: tuple[str, ...],
                on_run: Callable[[int, Summary], None] | None = None, delays: tuple[str, ...] = ()) -> Summary:
        # Short hole timing so a writer killed after reserving an id costs seconds, not a minute;
        # the rule is the same (deadline < grace), only the numbers shrink.
        shorten_timings()
        rng = random.Random(seed)
        summary = Summary()
        for run in range(runs):
            plan = RunPlan.random(rng, run, allowed, delays)
            before = Counter(crashpoints.fired)
            delays_before = Counter(delaypoints.fired)
            history = History()
            try:
                self._execute(plan, history, random.Random(rng.random()))
            except Exception as exc:  # a workload that could not finish is reported, not hidden
                summary.errors.append(f"run {run}: {type(exc).__name__}: {exc}")
            finally:
                crashpoints.disable_all()
                delaypoints.disable_all()
            summary.errors.extend(f"run {run}: {e}" for e in history.errors)
            summary.fired.update(Counter(crashpoints.fired) - before)
            summary.delays_fired.update(Counter(delaypoints.fired) - delays_before)
            summary.add(run, plan, check(history))
            if on_run:
                on_run(run, summary)
        return summary

    # --- one run ---------------------------------------------------------------------------
    def _prepare(self, plan: RunPlan, history: History) -> None:
        from magnetar.client.admin import AdminClient

        admin = AdminClient(self.url, self.authentication)
        if plan.deduplicate:
            with contextlib.suppress(exceptions.PulsarException):
                admin.create_namespace(DEDUP_NAMESPACE)
            admin.set_deduplication(DEDUP_NAMESPACE, True)
            history.deduplicated_topics.add(plan.topic)
        if plan.partitions:
            admin.create_partitioned_topic(plan.topic, plan.partitions)
        admin.close()
        if compaction.compacts(plan.crash_points):
            compaction.prepare(plan.topic)

    def _execute(self, plan: RunPlan, history: History, rng: random.Random) -> None:
        client = magnetar.Client(self.url, self.authentication)
        stop = threading.Event()
        try:
            self._prepare(plan, history)
            registrations = schemas.start(self.url, self.authentication, plan.topic, history)  # verify/schemas.py
            functions = (function_runs.prepare(self.url, self.authentication, plan.topic)  # verify/functions.py
                         if function_runs.runs_functions(plan.crash_points) else None)
            consumers = self._subscribe(client, plan, history)
            for name, count in plan.crash_points.items():
                crashpoints.enable(name, times=count)
            for name, count in plan.delay_points.items():
                delaypoints.enable(name, times=count)
            sampler = threading.Thread(target=self._sample_cursors, args=(plan, history, stop), daemon=True)
            sampler.start()
            maintenance = threading.Thread(target=self._maintain, args=(plan, history, stop), daemon=True)
            maintenance.start()
            workers = [threading.Thread(target=self._consume, args=(client, plan, history, sub, c, stop, rng), daemon=True)
                       for sub, c in consumers]
            for w in workers:
                w.start()
            key_based = any(t == "Key_Shared" for _, t, _, _ in plan.subscriptions)
            senders = [threading.Thread(target=self._produce, args=(client, plan.topic, p, history, key_based),
                                        daemon=True) for p in plan.producers]
            for s in senders:
                s.start()
            for s in senders:
                s.join(timeout=120)
            # let the tail settle without new deaths; the maintenance run's points stay armed while
            # consumers acknowledge (trimming follows the acknowledgements, mostly after the producers)
            crashpoints.disable(*[p for p in plan.crash_points
                                  if not p.startswith(("trim.", "compaction.", "function."))])
            # the consumers' delay points too stay armed while they acknowledge
            delaypoints.disable(*[p for p in plan.delay_points if not p.startswith(("cursor.", "dispatch."))])
            self._wait_delivered(plan, history)
            stop.set()
            for w in workers:
                w.join(timeout=10)
            sampler.join(timeout=5)
            # the last maintenance run finishes what crashes left (compaction among it): wait for it
            maintenance.join(timeout=MAINTENANCE_FINAL_S)
            if maintenance.is_alive():
                history.errors.append(f"the final maintenance run outlasted {MAINTENANCE_FINAL_S:.0f} s")
            self._check_objects(plan, history)
            schemas.check(self.url, self.authentication, registrations, history)
            if compaction.compacts(plan.crash_points):
                compaction.check(_partitions(plan), history)
            if functions is not None:  # (it disarms the functions' crash points once they had their chance)
                function_runs.check(self.url, self.authentication, plan.topic, functions, history)
        finally:
            stop.set()
            with contextlib.suppress(Exception):
                client.close()

    def _subscribe(self, client: magnetar.Client, plan: RunPlan, history: History) -> list[tuple[Any, Any]]:
        out = []
        for name, sub_type, count, ack_timeout in plan.subscriptions:
            key = f"{plan.topic}|{name}"
            history.subscriptions_by_topic[plan.topic].append(key)
            if sub_type in ("Exclusive", "Failover"):
                history.exclusive_subscriptions.add(key)
            if sub_type == "Key_Shared":
                history.key_shared_subscriptions.add(key)
            for i in range(count):
                consumer = client.subscribe(
                    plan.topic, name, consumer_type=magnetar.ConsumerType(sub_type), consumer_name=f"c{i}",
                    initial_position=magnetar.InitialPosition.Earliest,
                    unacked_messages_timeout_ms=ack_timeout or None, receiver_queue_size=50)
                out.append(((name, sub_type, ack_timeout, key), consumer))
        return out

    def _produce(self, client: magnetar.Client, topic: str, spec: tuple[str, int, int], history: History,
                 key_based: bool) -> None:
        name, count, batch = spec
        producer = client.create_producer(
            topic, producer_name=name, batching_max_messages=batch, send_timeout_millis=20_000,
            batching_type=magnetar.BatchingType.KeyBased if key_based else magnetar.BatchingType.Default)
        for i in range(count):
            payload = f"{name}-{i}"

            def done(result: magnetar.Result, message_id: Any, i: int = i, payload: str = payload) -> None:
                mid = None
                if result == magnetar.Result.Ok:
                    mid = (message_id.ledger_id(), message_id.entry_id(), message_id.partition(), message_id.batch_index())
                history.send(Send(name, i, payload, mid, topic, f"k{i % 7}" if key_based else None))

            producer.send_async(payload.encode(), done, partition_key=f"k{i % 7}")
        producer.flush()

    def _consume(self, client: magnetar.Client, plan: RunPlan, history: History, sub: tuple[str, str, int, str],
                 consumer: Any, stop: threading.Event, rng: random.Random) -> None:
        try:
            self._consume_loop(client, plan, history, sub, consumer, stop, rng)
        except Exception as exc:  # a worker that dies must fail the run, not vanish
            history.errors.append(f"consumer of {sub[3]}: {type(exc).__name__}: {exc}")

    def _consume_loop(self, client: magnetar.Client, plan: RunPlan, history: History, sub: tuple[str, str, int, str],
                      consumer: Any, stop: threading.Event, rng: random.Random) -> None:
        name, sub_type, ack_timeout, key = sub
        while not stop.is_set():
            try:
                msg = consumer.receive(timeout_millis=300)
            except exceptions.Timeout:
                continue
            except exceptions.PulsarException:
                if stop.is_set():
                    return
                time.sleep(0.1)
                continue
            mid = msg.message_id()
            history.deliver(Delivery(key, consumer.consumer_name(), (mid.ledger_id(), mid.entry_id(), mid.partition(),
                                     mid.batch_index()), msg.data().decode(), msg.redelivery_count(), msg.partition_key()))
            if ack_timeout and rng.random() < plan.no_ack_probability:
                continue  # left unacknowledged: the ack timeout brings it back
            consumer.acknowledge(msg)
            if sub_type != "Exclusive" and rng.random() < plan.close_probability:
                consumer.close()  # its unacknowledged messages go to the others, or to its successor
                consumer = client.subscribe(plan.topic, name, consumer_type=magnetar.ConsumerType(sub_type),
                                            consumer_name=f"{consumer.consumer_name()}-r",
                                            initial_position=magnetar.InitialPosition.Earliest,
                                            unacked_messages_timeout_ms=ack_timeout or None, receiver_queue_size=50)

    def _wait_delivered(self, plan: RunPlan, history: History) -> None:
        deadline = time.monotonic() + self.drain_timeout_s
        while time.monotonic() < deadline:
            with history.lock:
                acked = {s.payload for s in history.sends if s.message_id is not None}
                got: dict[str, set[str]] = {}
                for d in history.deliveries:
                    got.setdefault(d.subscription, set()).add(d.payload)
            if all(acked <= got.get(sub, set()) for sub in history.subscriptions_by_topic[plan.topic]):
                time.sleep(0.5)  # late duplicates would show up now
                return
            time.sleep(0.2)

    def _maintain(self, plan: RunPlan, history: History, stop: threading.Event) -> None:
        """The maintenance function over the run's topic while it runs, through the schedule's own
        door (the local twin of EventBridge), so its crash points fire inside the function: with
        the namespace's default retention (none), it trims every segment all cursors have passed
        while consumers are still reading, and an interrupted trim is finished by the next run."""
        event = {"topics": [str(t) for t in _partitions(plan)]}
        with httpx.Client(base_url=self.url, timeout=60) as http:
            while not stop.wait(MAINTENANCE_EVERY_S):
                with contextlib.suppress(httpx.HTTPError):
                    response = http.post("/_magnetar/local/schedules/maintenance", json=event)
                    if response.status_code == 200:
                        history.trimmed_segments += int(response.json().get("trimmedSegments", 0))
            # the last run after the workload, with no crash point left: it finishes whatever a crash
            # left half-done (the functions' points stay armed: verify/functions.py's check disarms them)
            crashpoints.disable(*[p for p in plan.crash_points if not p.startswith("function.")])
            with contextlib.suppress(httpx.HTTPError):
                response = http.post("/_magnetar/local/schedules/maintenance", json=event,
                                     timeout=MAINTENANCE_FINAL_S - 10)
                if response.status_code == 200:
                    history.trimmed_segments += int(response.json().get("trimmedSegments", 0))

    def _sample_cursors(self, plan: RunPlan, history: History, stop: threading.Event) -> None:
        from magnetar.adapters.aws import build_broker

        metadata = build_broker().metadata
        while not stop.wait(0.1):
            for topic in _partitions(plan):
                for name, *_ in plan.subscriptions:
                    with contextlib.suppress(Exception):
                        view = metadata.get_subscription_view(topic, name)
                        if view.cursor is not None:
                            history.cursor_positions[f"{topic}|{name}"].append(view.cursor.mark_delete)

    def _check_objects(self, plan: RunPlan, history: History) -> None:
        from botocore.exceptions import ClientError

        from magnetar.adapters.aws import build_broker
        from magnetar.adapters.aws.clients import client
        from magnetar.config import ResourceNames

        s3 = client("s3")
        bucket = ResourceNames.from_env().bucket
        for topic in _partitions(plan):
            for segment in build_broker().metadata.list_segments(topic, 0, 10_000):
                try:
                    s3.head_object(Bucket=bucket, Key=segment.key)
                except ClientError:
                    history.missing_objects.append(segment.key)


def shorten_timings() -> None:
    """The run's write deadline, hole grace and delay, through the settings the functions read:
    the environment (MAGNETAR_WRITE_DEADLINE_MS, MAGNETAR_HOLE_GRACE_MS, MAGNETAR_DELAY_POINT_MS,
    for functions started after this) and the modules already loaded in this process."""
    import os

    import magnetar.core.ledger as ledger

    os.environ[ledger.common.ENV_WRITE_DEADLINE_MS] = str(RUN_WRITE_DEADLINE_MS)
    os.environ[ledger.common.ENV_HOLE_GRACE_MS] = str(RUN_HOLE_GRACE_MS)
    os.environ[delaypoints.ENV_DELAY_MS] = str(RUN_DELAY_MS)
    ledger.common.WRITE_DEADLINE_MS, ledger.common.HOLE_GRACE_MS = RUN_WRITE_DEADLINE_MS, RUN_HOLE_GRACE_MS
    delaypoints.duration_ms = RUN_DELAY_MS


def _partitions(plan: RunPlan) -> list[Any]:
    from magnetar.core.naming import TopicName

    base = TopicName.parse(plan.topic)
    return [base.partition(i) for i in range(plan.partitions)] if plan.partitions else [base]
