"""What a verification run saw, and the checks over it (pure: unit-testable without a cluster)."""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Send:
    producer: str
    index: int  # the producer's send order
    payload: str
    message_id: tuple[int, int, int, int] | None  # None: the send failed (not acknowledged)
    topic: str
    key: str | None = None  # set when the producer batches by key: order then holds per key


@dataclass(frozen=True)
class Delivery:
    subscription: str  # "<topic>|<subscription>"
    consumer: str
    message_id: tuple[int, int, int, int]
    payload: str
    redelivery_count: int
    key: str


@dataclass
class History:
    sends: list[Send] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    exclusive_subscriptions: set[str] = field(default_factory=set)  # single active consumer: in order
    key_shared_subscriptions: set[str] = field(default_factory=set)
    deduplicated_topics: set[str] = field(default_factory=set)
    cursor_positions: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    subscriptions_by_topic: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    missing_objects: list[str] = field(default_factory=list)
    trimmed_segments: int = 0  # what the maintenance runs during the workload deleted (retention)
    compaction_violations: list[str] = field(default_factory=list)  # verify/compaction.py's check
    schema_violations: list[str] = field(default_factory=list)  # verify/schemas.py's check
    function_violations: list[str] = field(default_factory=list)  # verify/functions.py's check
    function_repeats: int = 0  # ATLEAST_ONCE outputs stored again (allowed)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, s: Send) -> None:
        with self.lock:
            self.sends.append(s)

    def deliver(self, d: Delivery) -> None:
        with self.lock:
            self.deliveries.append(d)


@dataclass
class Verdict:
    acked: int = 0
    delivered: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)  # fresh (redelivery 0) deliveries of one id twice
    stored_twice: int = 0  # a retried send stored under two ids (allowed without deduplication)
    order_violations: list[str] = field(default_factory=list)
    cursor_backwards: list[str] = field(default_factory=list)
    missing_objects: list[str] = field(default_factory=list)
    trimmed_segments: int = 0
    compaction_violations: list[str] = field(default_factory=list)
    schema_violations: list[str] = field(default_factory=list)
    function_violations: list[str] = field(default_factory=list)
    function_repeats: int = 0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.order_violations or self.cursor_backwards
                    or self.missing_objects or self.compaction_violations or self.schema_violations
                    or self.function_violations)


def check(history: History) -> Verdict:
    v = Verdict(trimmed_segments=history.trimmed_segments, function_repeats=history.function_repeats)
    acked = [s for s in history.sends if s.message_id is not None]
    v.acked = len(acked)
    v.delivered = len(history.deliveries)
    # 1. no acknowledged message lost: every subscription of its topic received it
    delivered_payloads: dict[str, set[str]] = defaultdict(set)
    for d in history.deliveries:
        delivered_payloads[d.subscription].add(d.payload)
    for s in acked:
        for sub in history.subscriptions_by_topic.get(s.topic, []):
            if s.payload not in delivered_payloads[sub]:
                v.lost.append(f"{s.payload} ({s.message_id}) never reached {sub}")
    # 2. duplicates: an id handed out fresh twice to one subscription
    fresh: dict[tuple[str, tuple[int, int, int, int]], int] = defaultdict(int)
    for d in history.deliveries:
        if d.redelivery_count == 0:
            fresh[(d.subscription, d.message_id)] += 1
    v.duplicated = [f"{mid} delivered fresh {n} times to {sub}" for (sub, mid), n in fresh.items() if n > 1]
    ids_by_payload: dict[str, set[tuple[int, int, int, int]]] = defaultdict(set)
    for s in acked:
        ids_by_payload[s.payload].add(s.message_id)  # type: ignore[arg-type]
    for d in history.deliveries:
        ids_by_payload[d.payload].add(d.message_id)
    twice = [p for p, ids in ids_by_payload.items() if len(ids) > 1]
    v.stored_twice = len(twice)
    topic_of = {s.payload: s.topic for s in history.sends}
    v.duplicated += [f"{p} stored twice although deduplication is on" for p in twice
                     if topic_of.get(p) in history.deduplicated_topics]
    # 3. a producer's order: ids increase with its send order
    by_producer: dict[tuple[str, str | None], list[Send]] = defaultdict(list)
    for s in acked:
        by_producer[(s.producer, s.key)].append(s)
    for (producer, _key), sends in by_producer.items():
        sends.sort(key=lambda s: s.index)
        for a, b in itertools.pairwise(sends):
            same_partition = a.topic == b.topic and a.message_id[2] == b.message_id[2]  # type: ignore[index]
            if same_partition and not (a.message_id < b.message_id):  # type: ignore[operator]
                v.order_violations.append(f"{producer}: send {a.index} got {a.message_id}, send {b.index} got {b.message_id}")
    # ... and an exclusive consumer sees fresh messages in id order
    last_fresh: dict[tuple[str, str, int], tuple[int, int, int, int]] = {}
    for d in history.deliveries:
        if d.subscription in history.exclusive_subscriptions and d.redelivery_count == 0:
            key = (d.subscription, d.consumer, d.message_id[2])
            if key in last_fresh and d.message_id <= last_fresh[key]:
                v.order_violations.append(f"{d.subscription}/{d.consumer}: {d.message_id} after {last_fresh[key]}")
            last_fresh[key] = d.message_id
    # ... and Key_Shared keeps each key's order, whichever consumer has it
    send_index = {s.payload: (s.producer, s.index) for s in acked}
    last_of_key: dict[tuple[str, str, str], int] = {}
    first_time: set[tuple[str, str]] = set()  # a payload stored twice (a retried send) counts once
    for d in history.deliveries:
        if (d.subscription, d.payload) in first_time:
            continue
        first_time.add((d.subscription, d.payload))
        if d.subscription in history.key_shared_subscriptions and d.redelivery_count == 0 and d.payload in send_index:
            producer, index = send_index[d.payload]
            k = (d.subscription, d.key, producer)
            if k in last_of_key and index < last_of_key[k]:
                v.order_violations.append(f"{d.subscription} key {d.key}: {producer} send {index} after {last_of_key[k]}")
            last_of_key[k] = max(index, last_of_key.get(k, -1))
    # 4. a cursor never moves backwards
    for sub, positions in history.cursor_positions.items():
        for before, after in itertools.pairwise(positions):
            if after < before:
                v.cursor_backwards.append(f"{sub}: mark-delete {before} -> {after}")
    # 5. every S3 object the metadata references exists
    v.missing_objects = list(history.missing_objects)
    # 6. a compacted topic's view: each key's latest value below the horizon (verify/compaction.py)
    v.compaction_violations = list(history.compaction_violations)
    # 7. concurrent schema registrations: one version each, contiguous, as answered (verify/schemas.py)
    v.schema_violations = list(history.schema_violations)
    # 8. functions under crashes: no input without output, none output twice EFFECTIVELY_ONCE (verify/functions.py)
    v.function_violations = list(history.function_violations)
    return v
