"""`magnetar verify --clusters N`: geo-replication under crashes and an outage.

Each run starts a local instance of N clusters (`LocalInstance`, a process per cluster) with the
replicator's crash points armed in every cluster process (MAGNETAR_CRASH_POINTS: the remote
append stored but the position not moved; the position moved but the invocation dead), makes a
namespace replicated over all clusters (deduplicated: a producer's retried send is stored once;
with retention: read whole at the end),
and has SDK producers in every cluster publish to several topics, a partitioned one among them,
while one cluster is taken off the network for a few seconds (staged through another cluster's
port) and brought back. Then each cluster's maintenance runs until no replicator has a backlog,
every cluster's topics are read whole, and the run checks:

- every acknowledged send is stored exactly once in every cluster (nothing lost, no loop, no
  duplicate: a message stored twice anywhere is a violation);
- each producer's order holds in every cluster (per partition);
- `replicated_from` names the cluster of origin on the copies, and is empty on the originals;
- a replicated subscription consumed partly in one cluster, its acknowledgements shared by that
  cluster's maintenance run, then consumed in another: the two received every message between
  them (redeliveries allowed, skips not);
- that subscription then deleted in both clusters (the SDK's unsubscribe in the second, the admin
  API's DELETE in the first, each dying once between the snapshot's delete and the cursor's:
  crash point `unsubscribe.after_snapshot`, the request retried) and subscribed again in the first
  from the earliest entry: it starts there, not where a deleted one's snapshot was (its first
  messages are the topic's first).

The crash points fired in each cluster process (`/_magnetar/local/stats`) are the run's evidence
that the crash paths were taken.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

import magnetar
from magnetar.client import exceptions

GEO_CRASH_POINTS = ("replicate.after_append", "replicate.after_position")
UNSUBSCRIBE_CRASH_POINT = "unsubscribe.after_snapshot"  # once per cluster process: each deletion's first try dies
CLUSTER_NAMES = {2: ("east", "west"), 3: ("east", "west", "central")}
TOPICS = ("orders", "events")  # not partitioned
PARTITIONED_TOPIC, PARTITIONS = "keyed", 2
SUBSCRIBED_TOPIC = "shared-sub"  # the replicated subscription's topic
REPLICATED_SUBSCRIPTION = "geo-sub"
RESUBSCRIBE_CHECKED = 10  # the first messages the subscription subscribed again must get
OUTAGE_S = (3.0, 5.0)  # how long the outage lasts (drawn)
DRAIN_DEADLINE_S = 60.0  # replicator backlogs must reach 0 within this
READ_DEADLINE_S = 40.0  # every cluster's topics read whole within this
SEND_TIMEOUT_MS = 30_000  # a producer rides through the outage of its own cluster


@dataclass
class GeoPlan:
    run: int
    seed: int
    clusters: tuple[str, ...]
    namespace: str
    crash_points: dict[str, int]
    rate: float  # messages per second per producer
    seconds: float
    outage: str  # the cluster taken off the network
    outage_via: str  # the cluster whose port stages it
    outage_at_s: float
    outage_s: float
    first_consumer: str  # where the replicated subscription is consumed first
    second_consumer: str

    @classmethod
    def random(cls, rng: random.Random, run: int, clusters: tuple[str, ...], seconds: float) -> GeoPlan:
        seed = rng.randrange(1 << 30)
        outage = rng.choice(clusters)
        first, second = rng.sample(list(clusters), 2)
        return cls(run, seed, clusters, f"public/geo-{run}-{uuid.uuid4().hex[:6]}",
                   {**{p: rng.randint(1, 3) for p in GEO_CRASH_POINTS}, UNSUBSCRIBE_CRASH_POINT: 1},
                   rng.choice([10.0, 20.0, 30.0]), seconds,
                   outage, rng.choice([c for c in clusters if c != outage]),
                   round(rng.uniform(0.15, 0.4) * seconds, 1), round(rng.uniform(*OUTAGE_S), 1), first, second)

    def topics(self) -> list[str]:
        return [f"persistent://{self.namespace}/{t}" for t in (*TOPICS, PARTITIONED_TOPIC, SUBSCRIBED_TOPIC)]

    def partitions(self, topic: str) -> list[str]:
        if topic.endswith(f"/{PARTITIONED_TOPIC}"):
            return [f"{topic}-partition-{i}" for i in range(PARTITIONS)]
        return [topic]

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.run, "seed": self.seed, "clusters": list(self.clusters), "namespace": self.namespace,
                "crash_points_armed": self.crash_points, "rate_per_producer": self.rate, "seconds": self.seconds,
                "outage": {"cluster": self.outage, "via": self.outage_via, "at_s": self.outage_at_s,
                           "seconds": self.outage_s},
                "replicated_subscription": {"first": self.first_consumer, "second": self.second_consumer}}


@dataclass(frozen=True)
class Sent:
    cluster: str
    producer: str
    index: int
    topic: str
    partition: int  # -1: not partitioned
    acked: bool

    @property
    def payload(self) -> str:
        return f"{self.producer}|{self.index}"


@dataclass(frozen=True)
class Stored:
    """A message as read in one cluster."""

    payload: str
    topic: str  # the partition's name
    replicated_from: str


@dataclass
class GeoRun:
    plan: GeoPlan
    sends: list[Sent] = field(default_factory=list)
    stored: dict[str, list[Stored]] = field(default_factory=lambda: defaultdict(list))  # cluster -> read in order
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    order_violations: list[str] = field(default_factory=list)
    origin_violations: list[str] = field(default_factory=list)
    subscription_skipped: list[str] = field(default_factory=list)
    resubscribe_skipped: list[str] = field(default_factory=list)  # the subscription subscribed again
    subscription: dict[str, int] = field(default_factory=dict)
    fired: dict[str, dict[str, int]] = field(default_factory=dict)  # cluster -> crash point -> firings
    backlog_left: int = 0
    drain_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the run had to set right before it could start
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def violations(self) -> int:
        return (len(self.lost) + len(self.duplicated) + len(self.order_violations) + len(self.origin_violations)
                + len(self.subscription_skipped) + len(self.resubscribe_skipped))

    @property
    def ok(self) -> bool:
        return not self.violations and not self.errors

    def as_dict(self) -> dict[str, Any]:
        acked = sum(1 for s in self.sends if s.acked)
        fired: Counter[str] = Counter()
        for counts in self.fired.values():
            fired.update(counts)
        return {
            **self.plan.as_dict(), "verdict": "ok" if self.ok else "violations",
            "acked": acked, "failed_sends": len(self.sends) - acked,
            "stored": {c: len(v) for c, v in sorted(self.stored.items())},
            "crash_points_fired": dict(fired), "crash_points_fired_by_cluster": self.fired,
            "lost": len(self.lost), "duplicated": len(self.duplicated), "order_violations": len(self.order_violations),
            "replicated_from_violations": len(self.origin_violations),
            "replicated_subscription": self.subscription | {"skipped": len(self.subscription_skipped),
                                                            "resubscribe_skipped": len(self.resubscribe_skipped)},
            "replication_backlog_left": self.backlog_left, "drain_seconds": round(self.drain_s, 1),
            "seconds": round(self.seconds, 1), "errors": self.errors[:10], "notes": self.notes,
            "violation_samples": (self.lost[:5] + self.duplicated[:5] + self.order_violations[:5]
                                  + self.origin_violations[:5] + self.subscription_skipped[:5]
                                  + self.resubscribe_skipped[:5]),
        }


def check(run: GeoRun) -> None:
    """(a)-(d) over what was sent and what each cluster stores (pure: unit-testable)."""
    plan = run.plan
    sent_by_payload = {s.payload: s for s in run.sends}
    for cluster in plan.clusters:
        stored = run.stored.get(cluster, [])
        counts = Counter(m.payload for m in stored)
        for s in run.sends:
            if s.acked and counts[s.payload] == 0:
                run.lost.append(f"{s.payload} (sent in {s.cluster} to {s.topic}) missing in {cluster}")
        run.duplicated += [f"{p} stored {n} times in {cluster}" for p, n in counts.items() if n > 1]
        last: dict[tuple[str, str], int] = {}
        for m in stored:
            sent = sent_by_payload.get(m.payload)
            if sent is None:
                run.origin_violations.append(f"{m.payload} in {cluster}: never sent")
                continue
            expected = "" if sent.cluster == cluster else sent.cluster
            if m.replicated_from != expected:
                run.origin_violations.append(
                    f"{m.payload} in {cluster}: replicated_from {m.replicated_from!r}, published in {sent.cluster}")
            if not sent.acked:
                continue
            key = (m.topic, sent.producer)
            if key in last and sent.index <= last[key]:
                run.order_violations.append(f"{cluster} {m.topic}: {sent.producer} send {sent.index} after {last[key]}")
            last[key] = max(sent.index, last.get(key, -1))


class GeoVerifier:
    def __init__(self, clusters: int, seconds: float = 8.0, aws_limits: bool = True,
                 log: Callable[[str], None] | None = None) -> None:
        if clusters not in CLUSTER_NAMES:
            raise ValueError("--clusters takes 2 or 3")
        self.names = CLUSTER_NAMES[clusters]
        self.seconds = seconds
        self.aws_limits = aws_limits
        self.log = log or (lambda _: None)

    def run_all(self, runs: int, seed: int, on_run: Callable[[GeoRun], None] | None = None) -> list[GeoRun]:
        rng = random.Random(seed)
        results = []
        for run in range(runs):
            result = self.run_one(GeoPlan.random(rng, run, self.names, self.seconds))
            results.append(result)
            if on_run:
                on_run(result)
        return results

    def run_one(self, plan: GeoPlan) -> GeoRun:
        from magnetar.local.cluster import free_port, free_run
        from magnetar.local.fidelity import AwsFidelity
        from magnetar.local.instance import LocalInstance

        started = time.monotonic()
        run = GeoRun(plan)
        n = len(plan.clusters)
        spec = ",".join(f"{p}:{t}" for p, t in plan.crash_points.items())
        saved = os.environ.get("MAGNETAR_CRASH_POINTS")
        os.environ["MAGNETAR_CRASH_POINTS"] = spec  # the cluster processes inherit it (not this one)
        instance = LocalInstance(list(plan.clusters), port=free_run(n), pulsar_port=0, aws_port=free_port(),
                                 fidelity=AwsFidelity(limits=self.aws_limits),
                                 cluster_args=["--maintenance-interval", "0",
                                               "--aws-limits", "on" if self.aws_limits else "off"])
        try:
            with instance:
                if saved is None:
                    os.environ.pop("MAGNETAR_CRASH_POINTS", None)
                else:
                    os.environ["MAGNETAR_CRASH_POINTS"] = saved
                urls = {p.name: p.url for p in instance.processes}
                try:
                    self._execute(plan, run, urls)
                except Exception as exc:  # a workload that could not finish is reported, not hidden
                    run.errors.append(f"{type(exc).__name__}: {exc}")
                run.fired = {name: _fired(url) for name, url in urls.items()}
        finally:
            if saved is None:
                os.environ.pop("MAGNETAR_CRASH_POINTS", None)
            else:
                os.environ["MAGNETAR_CRASH_POINTS"] = saved
        check(run)
        run.seconds = time.monotonic() - started
        return run

    # --- one run -------------------------------------------------------------------------------
    def _execute(self, plan: GeoPlan, run: GeoRun, urls: dict[str, str]) -> None:
        self._prepare(plan, run, urls)
        clients = {name: magnetar.Client(url) for name, url in urls.items()}
        try:
            subscribed = f"persistent://{plan.namespace}/{SUBSCRIBED_TOPIC}"
            first = clients[plan.first_consumer].subscribe(
                subscribed, REPLICATED_SUBSCRIPTION, initial_position=magnetar.InitialPosition.Earliest,
                replicate_subscription_state_enabled=True)
            first.close()  # the subscription stays, from the first entry
            self.log(f"run {plan.run}: producing {plan.seconds}s in {', '.join(plan.clusters)}")
            self._produce(plan, run, clients, urls)
            self.log(f"run {plan.run}: draining the replicators")
            self._drain(plan, run, urls)
            self.log(f"run {plan.run}: reading every cluster")
            self._read_all(plan, run, clients)
            self.log(f"run {plan.run}: the replicated subscription")
            self._replicated_subscription(plan, run, clients, urls)
            self.log(f"run {plan.run}: the replicated subscription deleted, then subscribed again")
            self._resubscribed(plan, run, clients, urls)
        finally:
            for client in clients.values():
                with contextlib.suppress(Exception):
                    client.close()

    def _prepare(self, plan: GeoPlan, run: GeoRun, urls: dict[str, str]) -> None:
        from magnetar.client.admin import AdminClient

        admin = AdminClient(urls[plan.clusters[0]])
        try:
            # each cluster adds itself to tenant public as it starts (read, then written): clusters
            # starting together can drop one another from the list; the run puts them all back, and says so
            tenant = admin.get_tenant("public")
            missing = [c for c in plan.clusters if c not in tenant.get("allowedClusters", [])]
            if missing:
                admin.update_tenant("public", tenant.get("adminRoles") or None,
                                    sorted({*tenant.get("allowedClusters", []), *plan.clusters}))
                run.notes.append(f"tenant public did not allow {', '.join(missing)} after the start: added")
            admin.create_namespace(plan.namespace)
            admin.set_namespace_replication_clusters(plan.namespace, list(plan.clusters))
            admin.set_deduplication(plan.namespace, True)
            # kept after every cursor passed: the run reads each cluster's topics whole at the end (without
            # retention, the maintenance runs that drain the replicators would trim what they sent)
            admin.set_retention(plan.namespace, 60, 100)
        finally:
            admin.close()
        topic = f"persistent://{plan.namespace}/{PARTITIONED_TOPIC}"
        deadline = time.monotonic() + 30
        for name in plan.clusters:  # each sees the namespace (a shared configuration store), and the partitions
            other = AdminClient(urls[name])
            try:
                while sorted(other.get_namespace_replication_clusters(plan.namespace)) != sorted(plan.clusters):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{name} does not see the namespace's replication clusters")
                    time.sleep(0.2)
                with contextlib.suppress(exceptions.PulsarException):
                    other.create_partitioned_topic(topic, PARTITIONS)
                if other.partitioned_topic_metadata(topic) != PARTITIONS:
                    raise RuntimeError(f"{name}: {topic} is not partitioned")
            finally:
                other.close()

    def _produce(self, plan: GeoPlan, run: GeoRun, clients: dict[str, magnetar.Client], urls: dict[str, str]) -> None:
        count = int(plan.rate * plan.seconds)
        threads = [threading.Thread(target=self._producer, args=(plan, run, clients[c], c, t, count), daemon=True)
                   for c in plan.clusters for t in plan.topics()]
        for t in threads:
            t.start()
        time.sleep(plan.outage_at_s)
        via = urls[plan.outage_via]
        if plan.outage_s > 0:  # 0: none (debugging a plan)
            _request("POST", f"{via}/_magnetar/local/clusters/{plan.outage}/outage")
            time.sleep(plan.outage_s)
            _request("DELETE", f"{via}/_magnetar/local/clusters/{plan.outage}/outage")
        for t in threads:
            t.join(timeout=plan.seconds + SEND_TIMEOUT_MS / 1000 + 30)
            if t.is_alive():
                run.errors.append("a producer did not finish")

    def _producer(self, plan: GeoPlan, run: GeoRun, client: magnetar.Client, cluster: str, topic: str,
                  count: int) -> None:
        name = f"{cluster}-{topic.rsplit('/', 1)[1]}-{uuid.uuid4().hex[:4]}"
        partitioned = topic.endswith(f"/{PARTITIONED_TOPIC}")
        try:
            producer = client.create_producer(topic, producer_name=name, send_timeout_millis=SEND_TIMEOUT_MS,
                                              batching_max_messages=10)
        except Exception as exc:
            run.errors.append(f"producer {name}: {type(exc).__name__}: {exc}")
            return
        start = time.monotonic()
        for i in range(count):
            def done(result: magnetar.Result, message_id: Any, i: int = i) -> None:
                ok = result == magnetar.Result.Ok
                partition = message_id.partition() if ok and partitioned else -1
                with run.lock:
                    run.sends.append(Sent(cluster, name, i, topic, partition, ok))

            try:
                producer.send_async(f"{name}|{i}".encode(), done, partition_key=f"k{i % 5}")
            except Exception:  # refused at once (the cluster is off the network): not acknowledged
                with run.lock:
                    run.sends.append(Sent(cluster, name, i, topic, -1, False))
            time.sleep(max(0.0, start + (i + 1) / plan.rate - time.monotonic()))
        with contextlib.suppress(Exception):
            producer.flush()
        with contextlib.suppress(Exception):
            producer.close()

    def _drain(self, plan: GeoPlan, run: GeoRun, urls: dict[str, str]) -> None:
        """Maintenance runs in every cluster (sending what a failed remote or a crash left) until no
        replicator of the run's topics has a backlog."""
        started = time.monotonic()
        while True:
            for url in urls.values():
                with contextlib.suppress(httpx.HTTPError):
                    httpx.post(f"{url}/_magnetar/local/schedules/maintenance", timeout=120)
            backlog = sum(_backlog(urls[c], p) for c in plan.clusters for t in plan.topics() for p in plan.partitions(t))
            run.backlog_left = backlog
            if backlog == 0 or time.monotonic() - started > DRAIN_DEADLINE_S:
                break
            time.sleep(0.5)
        run.drain_s = time.monotonic() - started
        if run.backlog_left:
            run.errors.append(f"replication backlog of {run.backlog_left} entries left after {DRAIN_DEADLINE_S}s")

    def _read_all(self, plan: GeoPlan, run: GeoRun, clients: dict[str, magnetar.Client]) -> None:
        """Each cluster's topics from the first entry, until every acknowledged send is there (the
        copies stored last are sealed a moment after their append) and nothing more comes."""
        deadline = time.monotonic() + READ_DEADLINE_S  # for the whole phase: a lost message costs it once
        for cluster in plan.clusters:
            for topic in plan.topics():
                for index, partition in enumerate(plan.partitions(topic)):
                    part = index if partition != topic else -1
                    expected = {s.payload for s in run.sends if s.acked and s.topic == topic and s.partition == part}
                    run.stored[cluster] += _read_partition(clients[cluster], partition, expected, deadline)

    def _replicated_subscription(self, plan: GeoPlan, run: GeoRun, clients: dict[str, magnetar.Client],
                                 urls: dict[str, str]) -> None:
        topic = f"persistent://{plan.namespace}/{SUBSCRIBED_TOPIC}"
        everything = {m.payload for m in run.stored[plan.first_consumer] if m.topic == topic}
        first_got: set[str] = set()
        consumer = clients[plan.first_consumer].subscribe(
            topic, REPLICATED_SUBSCRIPTION, replicate_subscription_state_enabled=True, receiver_queue_size=20)
        half = len(everything) // 2
        while len(first_got) < half:
            try:
                message = consumer.receive(timeout_millis=5000)
            except exceptions.Timeout:
                break
            first_got.add(message.data().decode())
            consumer.acknowledge(message)
        consumer.close()
        # the first cluster's maintenance shares what the subscription acknowledged (a crash point may
        # stop a run: the next one does it)
        for _ in range(5):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.post(f"{urls[plan.first_consumer]}/_magnetar/local/schedules/maintenance",
                              timeout=120).status_code == 200:
                    break
        second_got: set[str] = set()
        consumer = clients[plan.second_consumer].subscribe(
            topic, REPLICATED_SUBSCRIPTION, replicate_subscription_state_enabled=True,
            initial_position=magnetar.InitialPosition.Earliest)
        idle_until = time.monotonic() + 5
        while time.monotonic() < idle_until:
            try:
                message = consumer.receive(timeout_millis=1000)
            except exceptions.Timeout:
                continue
            second_got.add(message.data().decode())
            consumer.acknowledge(message)
            idle_until = time.monotonic() + 3
        consumer.unsubscribe()  # its first try dies after the snapshot's delete: the SDK's retry finishes it
        run.subscription = {"messages": len(everything), "received_first": len(first_got),
                            "received_second": len(second_got),
                            "skipped_in_second": len(everything - second_got),  # acknowledged in the first
                            "received_twice": len(first_got & second_got)}
        run.subscription_skipped = [f"{p} received in neither {plan.first_consumer} nor {plan.second_consumer}"
                                    for p in sorted(everything - first_got - second_got)]

    def _resubscribed(self, plan: GeoPlan, run: GeoRun, clients: dict[str, magnetar.Client],
                      urls: dict[str, str]) -> None:
        """The subscription the second cluster unsubscribed, deleted in the first too (the admin
        API), subscribed again in the first from the earliest entry: its first messages are the
        topic's first there. A snapshot left by either deletion (the second's covers every message)
        would have it start further on."""
        topic = f"persistent://{plan.namespace}/{SUBSCRIBED_TOPIC}"
        path = f"/admin/v2/persistent/{plan.namespace}/{SUBSCRIBED_TOPIC}/subscription/{REPLICATED_SUBSCRIPTION}"
        for attempt in range(5):  # its first try dies (the crash point): the retry finishes it
            response = httpx.delete(f"{urls[plan.first_consumer]}{path}", params={"force": "true"}, timeout=60)
            if response.status_code < 500:
                break
            time.sleep(0.2 * (attempt + 1))
        if response.status_code != 204:
            raise RuntimeError(f"DELETE {path} in {plan.first_consumer}: {response.status_code} {response.text[:200]}")
        stored = [m.payload for m in run.stored[plan.first_consumer] if m.topic == topic]
        expected = stored[:RESUBSCRIBE_CHECKED]
        consumer = clients[plan.first_consumer].subscribe(
            topic, REPLICATED_SUBSCRIPTION, replicate_subscription_state_enabled=True,
            initial_position=magnetar.InitialPosition.Earliest, receiver_queue_size=RESUBSCRIBE_CHECKED)
        got: list[str] = []
        try:
            while len(got) < len(expected):
                try:
                    got.append(consumer.receive(timeout_millis=5000).data().decode())
                except exceptions.Timeout:
                    break
        finally:
            consumer.close()
        run.subscription["resubscribed_received"] = len(got)
        if got != expected:
            run.resubscribe_skipped.append(
                f"subscribed again in {plan.first_consumer} from the earliest entry after its deletion in both "
                f"clusters: got {got[:3]}... instead of {expected[:3]}...")


def _read_partition(client: magnetar.Client, partition: str, expected: set[str], deadline: float) -> list[Stored]:
    reader = client.create_reader(partition, magnetar.MessageId.earliest)
    out: list[Stored] = []
    seen: set[str] = set()
    quiet_until = 0.0
    try:
        while True:
            # all there: a short wait shows a late duplicate; past the deadline: what is there is read
            if expected <= seen or time.monotonic() > deadline:
                quiet_until = quiet_until or time.monotonic() + 1.0
                if time.monotonic() > quiet_until:
                    break
            try:
                message = reader.read_next(timeout_millis=500)
            except exceptions.Timeout:
                continue
            payload = message.data().decode()
            seen.add(payload)
            out.append(Stored(payload, partition, message.replicated_from()))
    finally:
        reader.close()
    return out


def _backlog(url: str, partition: str) -> int:
    path = partition.replace("://", "/")
    try:
        stats = httpx.get(f"{url}/admin/v2/{path}/stats", timeout=30).json()
    except (httpx.HTTPError, ValueError):
        return 1  # not known: not drained
    return sum(int(r.get("replicationBacklog", 0)) for r in (stats.get("replication") or {}).values())


def _fired(url: str) -> dict[str, int]:
    with contextlib.suppress(httpx.HTTPError, ValueError):
        fired: dict[str, int] = httpx.get(f"{url}/_magnetar/local/stats", timeout=10).json().get("crash_points_fired", {})
        return fired
    return {}


def _request(method: str, url: str) -> None:
    response = httpx.request(method, url, timeout=10)
    if response.status_code >= 300:
        raise RuntimeError(f"{method} {url}: {response.status_code} {response.text[:200]}")


def summarize(runs: list[GeoRun]) -> dict[str, Any]:
    fired: Counter[str] = Counter()
    for r in runs:
        for counts in r.fired.values():
            fired.update(counts)
    return {
        "runs": len(runs), "ok_runs": sum(1 for r in runs if r.ok),
        "acked": sum(1 for r in runs for s in r.sends if s.acked),
        "lost": sum(len(r.lost) for r in runs), "duplicated": sum(len(r.duplicated) for r in runs),
        "order_violations": sum(len(r.order_violations) for r in runs),
        "replicated_from_violations": sum(len(r.origin_violations) for r in runs),
        "replicated_subscription_skips": sum(len(r.subscription_skipped) + len(r.resubscribe_skipped) for r in runs),
        "violations": sum(r.violations for r in runs), "crash_points_fired": dict(fired),
        "errors": [f"run {r.plan.run}: {e}" for r in runs for e in r.errors][:20],
        "per_run": [r.as_dict() for r in runs],
    }
