"""The load generator behind `magnetar perf produce|consume|e2e`.

Producers send fixed-size random payloads through the SDK (client batching, one entry per
batch) at a target rate or as fast as possible; consumers use `batch_receive` and acknowledge
everything. Latencies go into HDR histograms (publish: send_async -> callback; end to end:
publish timestamp -> receipt). AWS requests and Lambda invocations are read from the local
runtime's counters, so they are measured where they are made.

What a scale run needs on top (issue #9): how deliveries spread over the consumers, whether every
acknowledged message arrived exactly once (`check_delivery`: each message carries its own sequence
in a property, so a duplicate is seen even when a producer's retry wrote it under a new id), what
the emulator's AWS limits refused during the run (`aws_endpoint`), the HTTP answers the clients
saw (a 5xx is a retry the SDK made), and the Lambda concurrency the run used.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from hdrh.histogram import HdrHistogram

import magnetar
from magnetar.client.auth import Authentication
from magnetar.client.producer import DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS
from magnetar.core.naming import TopicName
from magnetar.perf.protocol import PROTOCOLS, api_of, official_client

MODES = ("produce", "consume", "e2e")
SEQ_PROPERTY = "perf-seq"
CONSUMERS_PER_CLIENT = 25  # one HTTP connection pool (100 connections) per this many long-polling consumers
CONSUMER_ERROR_PAUSE_S = 0.5
SUBSCRIPTION_TYPES = ("Exclusive", "Shared", "Failover", "Key_Shared")
UNREACHABLE_AFTER_S = 5.0  # a cluster that is not up fails the run at once, not after the SDK's retries


@dataclass
class PerfConfig:
    mode: str
    service_url: str
    topic: str = ""
    producers: int = 1
    consumers: int = 1
    subscription: str = "perf"
    subscription_type: str = "Shared"
    rate: float = 0.0  # messages/s over all producers; 0 = as fast as possible
    size: int = 1024
    batch_max_messages: int = 100
    batch_max_delay_ms: int = DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS
    duration_s: float = 10.0
    receive_batch: int = 1000
    receive_wait_ms: int = 100
    drain_timeout_s: float = 60.0
    partitions: int = 1
    compression: str = "NONE"
    keys: int = 0  # >0: messages carry one of this many keys (key-hash routing, Key_Shared)
    nack_fraction: float = 0.0  # consumers negatively acknowledge this share of first deliveries
    window_s: float = 10.0  # the timeline's resolution
    watch_pids: tuple[int, ...] = ()  # processes whose resident memory the timeline records
    check_delivery: bool = False  # tag every message and check exactly-once delivery
    aws_endpoint: str = ""  # the emulator whose refusals (GET /_magnetar/aws-limits) the run reports
    delivery: str = "auto"  # consumers: "poll" (long polls, "auto" for persistent topics) or "push" (WebSocket)
    protocol: str = "magnetar"  # "pulsar": the official pulsar-client's producers and consumers (perf/protocol.py)
    pulsar_url: str = ""  # the binary protocol proxy's URL (protocol "pulsar")

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        if self.compression.upper() not in ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"):
            raise ValueError(f"unknown compression {self.compression}")
        self.compression = {"ZLIB": "ZLib"}.get(self.compression.upper(), self.compression.upper())
        if self.delivery not in ("auto", "poll", "push"):
            raise ValueError("delivery must be auto, poll or push")
        if self.protocol not in PROTOCOLS or (self.protocol == "pulsar" and not self.pulsar_url):
            raise ValueError(f"protocol must be one of {PROTOCOLS}; pulsar needs the proxy's URL")
        if self.size <= 0 or self.producers < 0 or self.consumers < 0 or self.duration_s <= 0:
            raise ValueError("size, duration must be positive; producers, consumers not negative")
        self.subscription_type = {"KeyShared": "Key_Shared"}.get(self.subscription_type, self.subscription_type)
        if self.subscription_type not in SUBSCRIPTION_TYPES:
            raise ValueError(f"subscription type must be one of {', '.join(SUBSCRIPTION_TYPES)}, "
                             f"not {self.subscription_type!r}")
        self.topic = self.topic or f"persistent://public/default/perf-{uuid.uuid4().hex[:8]}"


class Latency:
    """A thread-safe HDR histogram of milliseconds (microsecond resolution, up to 1 hour)."""

    def __init__(self) -> None:
        self._h = HdrHistogram(1, 3_600_000_000, 3)
        self._lock = threading.Lock()

    def record_ms(self, value_ms: float) -> None:
        with self._lock:
            self._h.record_value(max(1, int(value_ms * 1000)))

    def percentiles(self) -> dict[str, float]:
        with self._lock:
            if self._h.get_total_count() == 0:
                return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0, "count": 0}
            q = {k: self._h.get_value_at_percentile(p) / 1000 for k, p in
                 (("p50", 50), ("p95", 95), ("p99", 99), ("p999", 99.9))}
            return q | {"max": self._h.get_max_value() / 1000, "count": self._h.get_total_count()}

    def p99(self) -> float:
        with self._lock:
            return self._h.get_value_at_percentile(99) / 1000 if self._h.get_total_count() else 0.0


@dataclass
class Counters:
    sent: int = 0
    acked: int = 0
    failed: int = 0
    received: int = 0
    redelivered: int = 0
    first_send: float = 0.0
    last_ack: float = 0.0
    last_receive: float = 0.0
    consumer_errors: int = 0
    per_consumer: dict[str, int] = field(default_factory=dict)
    acked_seqs: set[str] = field(default_factory=set)
    received_seqs: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class PerfRun:
    """`authentication`: the credentials of every client of the run (kept out of the config, which
    goes into the result file)."""

    def __init__(self, config: PerfConfig, on_tick: Callable[[dict[str, float]], None] | None = None,
                 authentication: Authentication | None = None) -> None:
        self.config = config
        self.authentication = authentication
        self.on_tick = on_tick
        self.publish = Latency()
        self.e2e = Latency()
        self.window_e2e = Latency()
        self.timeline: list[dict[str, Any]] = []
        self._window_start = 0.0
        self._window_count = 0
        self.c = Counters()
        self.http_statuses: dict[str, dict[str, int]] = {}
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.api = api_of(config.protocol)
        # half random, half repeated: compression has something to do, as with real payloads
        half = config.size // 2
        self.payload = os.urandom(half) + b"magnetar" * ((config.size - half) // 8 + 1)
        self.payload = self.payload[: config.size]

    # --- the local runtime's counters --------------------------------------------------------
    def _stats(self, method: str = "GET") -> dict[str, Any]:
        try:
            response = httpx.request(method, f"{self.config.service_url}/_magnetar/local/stats", timeout=10,
                                     auth=self.authentication)
            return dict(response.json()) if response.status_code == 200 else {}
        except httpx.HTTPError:
            return {}

    # --- workers -----------------------------------------------------------------------------
    def _producer(self, client: magnetar.Client) -> Any:
        cfg, api = self.config, self.api.module
        return client.create_producer(
            cfg.topic,
            batching_enabled=True,  # the SDK's default; pulsar-client's is off (one entry per message)
            batching_max_messages=cfg.batch_max_messages,
            batching_max_allowed_size_in_bytes=max(cfg.batch_max_messages * cfg.size + 1024, 128 * 1024),
            batching_max_publish_delay_ms=cfg.batch_max_delay_ms,
            compression_type=getattr(api.CompressionType, cfg.compression),
            batching_type=api.BatchingType.KeyBased if cfg.subscription_type == "Key_Shared" else
            api.BatchingType.Default,
            block_if_queue_full=True,  # back-pressure, as the SDK's send_async (pulsar-client's default fails the send)
        )

    def _produce(self, producer: Any, index: int) -> None:
        cfg, api = self.config, self.api.module
        sent_count = 0
        interval = cfg.producers / cfg.rate if cfg.rate > 0 else 0.0
        next_at = time.perf_counter()
        while not self.stop_producing.is_set():
            if interval:
                next_at += interval
                delay = next_at - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            sent_at = time.perf_counter()
            seq = f"{index}:{sent_count}" if cfg.check_delivery else ""

            def done(result: magnetar.Result, message_id: Any, sent_at: float = sent_at, seq: str = seq) -> None:
                now = time.perf_counter()
                with self.c.lock:
                    if result == api.Result.Ok:
                        self.c.acked += 1
                        self.c.last_ack = now
                        if seq:
                            self.c.acked_seqs.add(seq)
                    else:
                        self.c.failed += 1
                if result == api.Result.Ok:
                    self.publish.record_ms((now - sent_at) * 1000)

            key = f"key-{sent_count % cfg.keys}" if cfg.keys else None
            sent_count += 1
            producer.send_async(self.payload, done, partition_key=key,
                                properties={SEQ_PROPERTY: seq} if seq else None)
            with self.c.lock:
                self.c.sent += 1
        producer.flush()

    def _consume(self, consumer: Any, name: str) -> None:
        """Receive and acknowledge until told to stop. An error the SDK gave up on (its retries ran
        out, e.g. 503s from an overloaded broker) is counted and the consumer goes on, as an
        application would: a benchmark whose consumers die on the first error measures nothing."""
        while not self.stop_consuming.is_set():
            try:
                messages = consumer.batch_receive()
            except self.api.already_closed:
                return
            except self.api.error:
                with self.c.lock:
                    self.c.consumer_errors += 1
                self.stop_consuming.wait(CONSUMER_ERROR_PAUSE_S)
                continue
            now_wall = time.time() * 1000
            fresh = 0
            for msg in messages:
                if msg.redelivery_count() == 0 and self.config.nack_fraction and random.random() < self.config.nack_fraction:
                    consumer.negative_acknowledge(msg)  # comes back: the cost of redelivery
                    continue
                if msg.redelivery_count() == 0:
                    fresh += 1
                    latency = max(0.0, now_wall - msg.publish_timestamp())
                    self.e2e.record_ms(latency)
                    self.window_e2e.record_ms(latency)
                consumer.acknowledge(msg)
            if messages:
                with self.c.lock:
                    self.c.received += fresh + sum(1 for m in messages if m.redelivery_count() > 0)
                    self.c.redelivered += sum(1 for m in messages if m.redelivery_count() > 0)
                    self.c.last_receive = time.perf_counter()
                    self.c.per_consumer[name] = self.c.per_consumer.get(name, 0) + len(messages)
                    if self.config.check_delivery:
                        for msg in messages:
                            seq = msg.properties().get(SEQ_PROPERTY, "")
                            self.c.received_seqs[seq] = self.c.received_seqs.get(seq, 0) + 1

    # --- the run ------------------------------------------------------------------------------
    def _start(self, clients: list[Any]) -> tuple[list[tuple[Any, str]], list[Any]]:
        """The run's consumers (with their names) and producers, made before the clock starts, so
        that a refusal (no such namespace, a 401, a cluster that is not up) ends the run with its
        reason; every client made goes into `clients`."""
        cfg = self.config
        clients.append(self._client("producers"))
        if cfg.partitions > 1:
            from magnetar.client.admin import AdminClient

            admin = AdminClient(cfg.service_url, self.authentication, unreachable_after_s=UNREACHABLE_AFTER_S)
            try:
                admin.create_partitioned_topic(cfg.topic, cfg.partitions)
            finally:
                admin.close()
        consumers: list[tuple[Any, str]] = []
        if cfg.mode in ("consume", "e2e"):
            policy = self.api.batch_policy(cfg.receive_batch, cfg.receive_wait_ms)
            ctype = self.api.consumer_type(cfg.subscription_type)
            for i in range(cfg.consumers):
                if i % CONSUMERS_PER_CLIENT == 0:  # long polls hold connections: a pool per group
                    clients.append(self._client("consumers"))
                name = f"perf-c{i}"
                consumers.append((clients[-1].subscribe(
                    cfg.topic, cfg.subscription, consumer_type=ctype, consumer_name=name,
                    initial_position=self.api.module.InitialPosition.Earliest, receiver_queue_size=cfg.receive_batch,
                    batch_receive_policy=policy, negative_ack_redelivery_delay_ms=100), name))
        producers = [self._producer(clients[0]) for _ in range(cfg.producers)] if cfg.mode in ("produce", "e2e") else []
        return consumers, producers

    def run(self) -> dict[str, Any]:
        cfg = self.config
        clients: list[Any] = []
        try:
            consumers, producers = self._start(clients)
        except BaseException:
            for made in clients:
                made.close()
            raise
        self._stats("DELETE")
        refusals_before, declined_before = self._refusals(), self._refusals("declined")
        started = time.perf_counter()
        self.c.first_send = started
        consumer_threads = [threading.Thread(target=self._consume, args=c, daemon=True) for c in consumers]
        producer_threads = [threading.Thread(target=self._produce, args=(producer, i), daemon=True)
                            for i, producer in enumerate(producers)]
        threads = consumer_threads + producer_threads
        for t in threads:
            t.start()
        self._tick_until(started + cfg.duration_s)
        self.stop_producing.set()
        for t in producer_threads:
            t.join(timeout=60)
        drain_timed_out = False
        if cfg.mode == "e2e":  # drain: everything acknowledged to a producer must arrive
            deadline = time.perf_counter() + cfg.drain_timeout_s
            while self._undelivered() and time.perf_counter() < deadline:
                self._tick_until(min(deadline, time.perf_counter() + 0.5))
            drain_timed_out = self._undelivered()
        self.stop_consuming.set()
        deadline = time.perf_counter() + 15  # one deadline for all: 100 consumers in 30 s polls must not take 100 x 10 s
        for t in consumer_threads:
            t.join(timeout=max(0.0, deadline - time.perf_counter()))
        for made in clients:
            made.close()
        time.sleep(1.5)  # the journal consumer seals the tail: its requests belong to the run
        result = self._result(started, self._stats()) | {"drain_timed_out": drain_timed_out}
        if cfg.aws_endpoint:
            result["refusals"] = _delta(self._refusals(), refusals_before)
            result["declined_conditions"] = _delta(self._refusals("declined"), declined_before)
            result["item_bytes"] = self._item_sizes()
        return result

    def _undelivered(self) -> bool:
        """Acknowledged messages not received yet (by sequence with `check_delivery`: a redelivery
        or a duplicate must not make up for a message that has not arrived)."""
        with self.c.lock:
            if self.config.check_delivery:
                return not self.c.acked_seqs <= self.c.received_seqs.keys()
            return self.c.received < self.c.acked

    def _client(self, role: str) -> magnetar.Client:
        """A client whose HTTP answers are counted by status under `role`: the 429s and 5xx are
        the retries the SDK made (it retries them until its deadline), what a user would see.
        With `protocol` "pulsar": the official client on the proxy (no HTTP answers to count)."""
        if self.config.protocol == "pulsar":
            return official_client(self.config.pulsar_url, self.authentication)  # type: ignore[no-any-return]
        client = magnetar.Client(self.config.service_url, self.authentication, delivery=self.config.delivery)
        counts = self.http_statuses.setdefault(role, {})

        def count(response: httpx.Response) -> None:
            with self.c.lock:
                counts[str(response.status_code)] = counts.get(str(response.status_code), 0) + 1

        client._transport.http.event_hooks["response"].append(count)
        client._transport.unreachable_after_s = UNREACHABLE_AFTER_S
        return client

    def _item_sizes(self) -> dict[str, int]:
        """The billed sizes of the run's DynamoDB items (its topic's, or its first partition's): the
        writer, seal-state and cursor items and the newest segment item, read from the emulator once
        the run is over, so that its cost prices the units its requests really consumed."""
        import boto3

        from magnetar.config import ENV_TABLE, LOCAL_TABLE_NAME
        from magnetar.local.aws_limits import item_size

        topic = TopicName.parse(self.config.topic)
        if self.config.partitions > 1:
            topic = topic.partition(0)
        ddb = boto3.client("dynamodb", endpoint_url=self.config.aws_endpoint, region_name="us-east-1",
                           aws_access_key_id="test", aws_secret_access_key="test")  # the emulator's
        table, pk = os.environ.get(ENV_TABLE, LOCAL_TABLE_NAME), {"S": f"TP#{topic}"}
        sizes: dict[str, int] = {}
        try:
            for name, sk in (("writer", "WRITER"), ("seal", "SEAL"), ("cursor", f"SUB#{self.config.subscription}")):
                item = ddb.get_item(TableName=table, Key={"pk": pk, "sk": {"S": sk}}).get("Item")
                if item:
                    sizes[name] = item_size(item)
            newest = ddb.query(TableName=table, KeyConditionExpression="pk = :pk AND begins_with(sk, :seg)",
                               ExpressionAttributeValues={":pk": pk, ":seg": {"S": "SEG#"}},
                               ScanIndexForward=False, Limit=1)["Items"]
            if newest:
                sizes["segment"] = item_size(newest[0])
        except Exception:  # another table, a stopped emulator: priced with the model's sizes
            return {}
        return sizes

    def _refusals(self, kind: str = "refusals") -> dict[str, int]:
        """What the emulator's AWS limits have refused so far, by `service.operation:code`
        (`declined`: the conditional writes DynamoDB declined, the races lost)."""
        try:
            response = httpx.get(f"{self.config.aws_endpoint}/_magnetar/aws-limits", timeout=10)
            return dict(response.json().get(kind, {})) if response.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            return {}

    def _window(self) -> None:
        """Close a timeline window: its rate, its end-to-end p99, and the watched processes' memory."""
        now = time.perf_counter()
        if not self._window_start:
            self._window_start, self._window_count = now, self._count()
            return
        if now - self._window_start < self.config.window_s:
            return
        count = self._count()
        self.timeline.append({
            "t": round(now - self.c.first_send, 1),
            "msgs_per_s": (count - self._window_count) / (now - self._window_start),
            "e2e_p99_ms": self.window_e2e.p99(),
            "rss_kb": {str(pid): rss_kb(pid) for pid in self._pids()},
        })
        self.window_e2e = Latency()
        self._window_start, self._window_count = now, count

    def _count(self) -> int:
        return self.c.received if self.config.mode != "produce" else self.c.acked

    def _pids(self) -> list[int]:
        pids: list[int] = []
        for pid in self.config.watch_pids:
            pids.append(pid)
            pids.extend(children(pid))
        return pids

    def _tick_until(self, until: float) -> None:
        while time.perf_counter() < until:
            time.sleep(min(1.0, max(0.0, until - time.perf_counter())))
            self._window()
            if self.on_tick:
                elapsed = max(time.perf_counter() - self.c.first_send, 1e-9)
                count = self.c.received if self.config.mode != "produce" else self.c.acked
                self.on_tick({
                    "elapsed": elapsed,
                    "sent": self.c.sent,
                    "acked": self.c.acked,
                    "received": self.c.received,
                    "rate": count / elapsed,
                    "mb_per_s": count * self.config.size / elapsed / 1e6,
                    "publish_p99": self.publish.p99(),
                    "e2e_p99": self.e2e.p99(),
                })

    def _result(self, started: float, stats: dict[str, Any]) -> dict[str, Any]:
        cfg = self.config
        if cfg.mode == "produce":
            count, end = self.c.acked, self.c.last_ack
        else:
            count, end = self.c.received, self.c.last_receive
        seconds = max((end or time.perf_counter()) - started, 1e-9)
        requests: dict[str, int] = stats.get("aws_requests", {})
        total = sum(requests.values())
        return {
            "mode": cfg.mode,
            "topic": cfg.topic,
            "messages": count,
            "sent": self.c.sent,
            "acked": self.c.acked,
            "failed": self.c.failed,
            "received": self.c.received,
            "redelivered": self.c.redelivered,
            "seconds": seconds,
            # publishing alone: from the first send to the last acknowledgement (an e2e run's
            # `seconds` end at the last receipt, after the drain)
            "produce_seconds": (self.c.last_ack - started) if self.c.last_ack else None,
            "acked_per_s": self.c.acked / (self.c.last_ack - started) if self.c.last_ack else None,
            "msgs_per_s": count / seconds,
            "mb_per_s": count * cfg.size / seconds / 1e6,
            "publish_latency_ms": self.publish.percentiles(),
            "e2e_latency_ms": self.e2e.percentiles(),
            "aws_requests": requests,
            "aws_requests_total": total,
            "aws_requests_per_1000_msgs": total / count * 1000 if count else None,
            "lambda": stats.get("lambda", {}),
            "lambda_concurrency": _concurrency(stats, seconds),
            "consumer_errors": self.c.consumer_errors,
            "http_statuses": self.http_statuses,
            "delivery": self._delivery(),
            "timeline": self.timeline,
        }

    def _delivery(self) -> dict[str, Any]:
        """How the deliveries spread over the consumers (every consumer listed, 0 for one that got
        nothing) and, with `check_delivery`, whether each acknowledged message arrived exactly once."""
        cfg = self.config
        per = {f"perf-c{i}": self.c.per_consumer.get(f"perf-c{i}", 0) for i in range(cfg.consumers)}
        counts = sorted(per.values())
        out: dict[str, Any] = {"per_consumer": per}
        if counts:
            mean = sum(counts) / len(counts)
            out |= {"consumers_receiving": sum(1 for n in counts if n), "min": counts[0], "max": counts[-1],
                    "mean": mean, "median": counts[len(counts) // 2],
                    "max_over_mean": counts[-1] / mean if mean else None}
        if cfg.check_delivery:
            received = self.c.received_seqs
            out |= {
                "acked": len(self.c.acked_seqs),
                "unique_received": len(received),
                "duplicates": sum(n - 1 for n in received.values() if n > 1),
                # acknowledged to a producer, not delivered by the end of the drain (`drain_timed_out`)
                "lost": len(self.c.acked_seqs - received.keys()),
                "received_not_acked": len(received.keys() - self.c.acked_seqs),  # a failed send that was written
            }
        return out


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def _concurrency(stats: dict[str, Any], seconds: float) -> dict[str, Any]:
    """Lambda concurrency: the mean from billed duration over wall time (Little's law, per
    function), and the account pool's peak and throttles when the local runtime reports them."""
    mean = {name: f.get("duration_ms_total", 0.0) / 1000 / seconds for name, f in stats.get("lambda", {}).items()}
    return {"mean": mean, "mean_total": sum(mean.values())} | dict(stats.get("concurrency") or {})


def rss_kb(pid: int) -> int:
    """Resident memory of a process (Linux /proc), 0 if unknown."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []
