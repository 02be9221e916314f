"""Topic stats on Pulsar's admin shapes: TopicStats, PersistentTopicInternalStats and
PartitionedTopicStats, computed from records the system writes anyway.

Nothing here adds a write to the message path: the writer counter already counts what is
published (totals and per producer, in the UpdateItem that reserves an id), the seal state keeps
the in-rate and the stored sizes, and each cursor keeps its out-counters and out-rate in the
dispatch write that hands entries out. A stats call only reads:

- `topic_stats`: the seal and writer items (one BatchGetItem), every cursor (one Query), the
  segment metadata behind the slowest cursor for backlogSize (one Query per 100 segments, none
  when the backlog is not sealed yet), and the effective policies for deduplicationStatus
  (cached per container by the ledger writer; two reads when the cache is cold);
- `internal_stats`: the same items, plus every listed segment (one Query per 100 segments);
- `partitioned_stats`: the partition count (one GetItem), then `topic_stats` of each partition,
  run side by side.

Geo-replication: the replicators' cursors (`pulsar.repl.<cluster>`) are not subscriptions here, as
in Pulsar: they make the `replication` section (one entry per remote cluster) and are left out of
`subscriptions`; they still count in `backlogSize` (and in the backlog quota and retention, which
see every cursor). A replicator with a backlog costs one more read: its oldest entry not
replicated yet (its publish time: `replicationDelayInSeconds`), usually from the container's cache.

A Key_Shared AutoSplit subscription on a partition reports the dispatcher's assignment (each
consumer's keyHashRanges): with at least as many partitions as consumers one consumer owns the
whole hash range of the partition (`CursorState.partition_owner`), so `topic_stats` of a single
partition reads the partition count too (one GetItem, only when it has such a subscription);
`partitioned_stats` already has it.

Which figures are exact and which are estimates is said in docs/semantics.md ("Topic stats").
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from magnetar.core.cursor import CursorState, RangeSet
from magnetar.core.errors import MagnetarError, NotFound, TopicNotFound
from magnetar.core.key_shared import HASH_RANGE
from magnetar.core.ledger import PRODUCER_IDLE_MS
from magnetar.core.lifecycle import SEGMENT_PAGE, LedgerMaintenance, estimated_entry_size
from magnetar.core.naming import TopicName
from magnetar.core.policies import TopicPolicies
from magnetar.core.ports import Clock, MetadataStore, SealState, SegmentMeta, WriterState
from magnetar.core.rates import decayed
from magnetar.core.replication import REPLICATOR_PREFIX, is_replicator, replicator_backlog

MAX_PARALLEL_PARTITIONS = 16
# a replicator that moved within this long (or has nothing to send) is reported connected: it
# moves after every journal batch of the topic it sends, and a remote that failed is retried
# by the next batch or maintenance run (the replicator's pause is 5 s)
REPLICATOR_CONNECTED_MS = 60_000

# fields summed when subscriptions of several partitions are merged (Pulsar's SubscriptionStats.add)
_SUBSCRIPTION_SUMS = ("msgRateOut", "msgThroughputOut", "bytesOutCounter", "msgOutCounter", "msgRateRedeliver",
                      "msgBacklog", "unackedMessages", "nonContiguousDeletedMessagesRanges")
_TOPIC_SUMS = ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "bytesInCounter", "msgInCounter",
               "bytesOutCounter", "msgOutCounter", "storageSize", "backlogSize", "offloadedStorageSize",
               "waitingPublishers", "nonContiguousDeletedMessagesRanges")


def iso_time(ms: int) -> str:
    """Pulsar's DateFormatter (ISO 8601 with milliseconds and offset), in UTC."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def storage_size(seal: SealState, writer: WriterState) -> int:
    """Bytes stored for a topic partition: the sealed segments still listed (exact, from the seal
    state's totals) plus the entries not sealed yet, which sit in the journal and whose sizes no
    record holds: they are estimated at the average sealed entry size (as the backlog size is)."""
    unsealed = max(0, writer.next_entry - max(seal.next_entry, seal.first_entry))
    return max(0, seal.sealed_bytes - seal.trimmed_bytes) + unsealed * estimated_entry_size(seal)


@dataclass
class _Snapshot:
    """What one stats call read of a topic partition."""

    topic: TopicName
    seal: SealState
    writer: WriterState
    cursors: dict[str, tuple[CursorState, int]]
    exists: bool  # False: a partition never used yet (or a non-persistent topic without a writer)
    partitions: int | None = None  # the parent's partition count, when known (Key_Shared assignment)


class TopicStatsService:
    def __init__(self, metadata: MetadataStore, maintenance: LedgerMaintenance, clock: Clock,
                 policies: Callable[[TopicName], dict[str, Any]]) -> None:
        self.metadata = metadata
        self.maintenance = maintenance
        self.clock = clock
        self.policies = policies  # the topic's effective policies (cached by the ledger writer)

    # --- the three admin calls ----------------------------------------------------------------
    def topic_stats(self, topic: TopicName) -> dict[str, Any]:
        """Pulsar's TopicStats of a non-partitioned topic or of one partition."""
        return self._topic_stats(self._load(topic))

    def internal_stats(self, topic: TopicName) -> dict[str, Any]:
        """Pulsar's PersistentTopicInternalStats; each ledger also lists its segments (S3 objects)."""
        return self._internal_stats(self._load(topic))

    def partitioned_stats(self, topic: TopicName, per_partition: bool = True) -> dict[str, Any]:
        """Pulsar's PartitionedTopicStats: the partitions' stats summed, and each partition's."""
        partitions = self._partitions(topic)
        names = [topic.partition(i) for i in range(partitions)]
        each = self._each(names, lambda p: self._topic_stats(self._load(p, True, partitions)))
        total = _aggregate(each)
        total["metadata"] = {"partitions": partitions}
        total["partitions"] = {str(n): s for n, s in zip(names, each, strict=True)} if per_partition else {}
        return total

    def brief_stats(self, topic: TopicName, seal: SealState, writer: WriterState | None,
                    cursors: dict[str, tuple[CursorState, int]]) -> dict[str, Any]:
        """`topic_stats` of states read already (`/metrics` reads many topics' in batches), without
        the figures that would read more: no backlogSize, backlogQuotaLimit*, deduplicationStatus,
        consumers' keyHashRanges, replicationDelayInSeconds. A topic without a writer item (`writer`
        None: a partition never used, a non-persistent topic) answers what `topic_stats` answers."""
        snap = (_Snapshot(topic, seal, writer, cursors, exists=True) if writer is not None
                else _Snapshot(topic, SealState(), WriterState(0, 0, 0, 0, 0), {}, exists=False))
        return self._topic_stats(snap, brief=True)

    def partitioned_internal_stats(self, topic: TopicName) -> dict[str, Any]:
        """Pulsar's PartitionedTopicInternalStats: each partition's internal stats."""
        partitions = self._partitions(topic)
        names = [topic.partition(i) for i in range(partitions)]
        each = self._each(names, lambda p: self._internal_stats(self._load(p, known_partition=True)))
        return {"metadata": {"partitions": partitions},
                "partitions": {str(n): s for n, s in zip(names, each, strict=True)}}

    # --- reading ----------------------------------------------------------------------------------
    def _partitions(self, topic: TopicName) -> int:
        partitions = self.metadata.get_partitions(topic) if topic.partition_index < 0 else None
        if not partitions:
            raise NotFound(f"Partitioned Topic not found: {topic} does not exist")  # Pulsar's reason
        return partitions

    @staticmethod
    def _each(names: list[TopicName], fn: Callable[[TopicName], dict[str, Any]]) -> list[dict[str, Any]]:
        if len(names) <= 1:
            return [fn(n) for n in names]
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_PARTITIONS, len(names))) as pool:
            return list(pool.map(fn, names))

    def _load(self, topic: TopicName, known_partition: bool = False, partitions: int | None = None) -> _Snapshot:
        seal, writer = self.metadata.get_topic_state(topic)
        if writer is None:
            if not known_partition:
                self._check_missing(topic)
            return _Snapshot(topic, SealState(), WriterState(0, 0, 0, 0, 0), {}, exists=False)
        return _Snapshot(topic, seal, writer, self.metadata.list_cursors(topic), exists=True, partitions=partitions)

    def _partition_count(self, snap: _Snapshot) -> int:
        """The parent's partition count for a partition's Key_Shared assignment (read once, only
        when asked: a partition with a Key_Shared subscription)."""
        if snap.partitions is None:
            snap.partitions = self.metadata.get_partitions(snap.topic.partitioned_topic) or 0
        return snap.partitions

    def _check_missing(self, topic: TopicName) -> None:
        """A topic without a writer item: a partition of a partitioned topic that nothing used yet
        answers zeros (the partition exists by the topic's metadata), a non-persistent topic that
        is listed answers what exists; anything else is 404, as in Pulsar. Only this path costs
        the extra read."""
        if topic.partition_index >= 0:
            partitions = self.metadata.get_partitions(topic.partitioned_topic)
            if partitions is not None and topic.partition_index < partitions:
                return
        elif self.metadata.get_partitions(topic) is not None:
            # Pulsar answers 404 "Topic not found" for a partitioned topic's own name; the reason
            # here also says where its stats are
            raise TopicNotFound(f"Topic not found: {topic} is a partitioned topic; "
                                "its stats are at .../partitioned-stats")
        if not topic.is_persistent and str(topic) in self.metadata.list_topics(topic.namespace_name):
            return
        raise TopicNotFound(f"Topic {topic} not found")

    # --- TopicStats ---------------------------------------------------------------------------------
    def _topic_stats(self, snap: _Snapshot, brief: bool = False) -> dict[str, Any]:
        """Pulsar's TopicStats; `brief`: only what the snapshot holds (`brief_stats`)."""
        now = self.clock.now_ms()
        seal, writer = snap.seal, snap.writer
        rate_in, throughput_in = seal.rates_at(now)
        subscriptions = {name: self._subscription_stats(snap, state, now, brief)
                         for name, (state, _) in sorted(snap.cursors.items()) if not is_replicator(name)}
        replication = {name.removeprefix(REPLICATOR_PREFIX): self._replicator_stats(snap, state, now, brief)
                       for name, (state, _) in sorted(snap.cursors.items())
                       if is_replicator(name) and snap.topic.is_persistent}
        outgoing = [*subscriptions.values(), *replication.values()]
        policies = TopicPolicies.of({} if brief else self.policies(snap.topic))
        backlog = 0
        if snap.exists and snap.topic.is_persistent and not brief:
            backlog = self.maintenance.backlog_size(snap.topic, seal, writer, snap.cursors)
        stats: dict[str, Any] = {
            "msgRateIn": rate_in,
            "msgThroughputIn": throughput_in,
            "msgRateOut": sum(s["msgRateOut"] for s in outgoing),  # replicators included, as in Pulsar
            "msgThroughputOut": sum(s["msgThroughputOut"] for s in outgoing),
            "bytesInCounter": writer.bytes_in,
            "msgInCounter": writer.messages_in,
            "bytesOutCounter": sum(s["bytesOutCounter"] for s in subscriptions.values()),
            "msgOutCounter": sum(s["msgOutCounter"] for s in subscriptions.values()),
            "averageMsgSize": writer.bytes_in / writer.messages_in if writer.messages_in else 0.0,
            "storageSize": storage_size(seal, writer) if snap.exists else 0,
            "backlogSize": backlog,
            "backlogQuotaLimitSize": policies.backlog_quota.limit_size,
            "backlogQuotaLimitTime": policies.backlog_quota.limit_time,
            "offloadedStorageSize": 0,
            "publishers": self._publishers(writer, now),
            "waitingPublishers": 0,
            "subscriptions": subscriptions,
            "replication": replication,
            "deduplicationStatus": "Enabled" if policies.deduplication else "Disabled",
            "nonContiguousDeletedMessagesRanges": sum(s["nonContiguousDeletedMessagesRanges"]
                                                      for s in subscriptions.values()),
        }
        if brief:  # what would need reads of their own
            for name in ("backlogSize", "backlogQuotaLimitSize", "backlogQuotaLimitTime", "deduplicationStatus"):
                del stats[name]
        return stats

    @staticmethod
    def _publishers(writer: WriterState, now: int) -> list[dict[str, Any]]:
        """Producers that published or connected within PRODUCER_IDLE_MS (the rule the producer
        limit counts by): a stateless broker sees no disconnect of a producer that vanished."""
        out: list[dict[str, Any]] = []
        for name, p in sorted(writer.producers.items()):
            if now - max(p.last_publish, p.connected_since) >= PRODUCER_IDLE_MS:
                continue
            out.append({
                "msgRateIn": 0.0,  # no per-producer rate is kept (the topic's is in msgRateIn)
                "msgThroughputIn": 0.0,
                "averageMsgSize": p.bytes / p.messages if p.messages else 0.0,
                "producerName": name,
                # a REST producer never connects: the time of its last publish stands in
                "connectedSince": iso_time(p.connected_since or p.last_publish),
                "msgInCounter": p.messages,
                "bytesInCounter": p.bytes,
            })
        return out

    def _subscription_stats(self, snap: _Snapshot, state: CursorState, now: int, brief: bool = False) -> dict[str, Any]:
        state.expire(now)  # a local view only (never written): lapsed consumers hold nothing
        live = state.live_consumers(now)
        owner = None  # Key_Shared AutoSplit on a partition: the consumer owning all its keys, if one does
        if snap.topic.partition_index >= 0 and state.splits_keys(live) and not brief:
            owner = state.partition_owner(now, snap.topic.partition_index, self._partition_count(snap))
        rate_msgs, rate_bytes, rate_at = state.rate_out
        consumers: list[dict[str, Any]] = []
        for i, name in enumerate(live):
            consumer: dict[str, Any] = {
                "consumerName": name,
                "unackedMessages": sum(d.end - d.start for d in state.deliveries if d.sent and d.consumer == name),
                "connectedSince": iso_time(attached) if (attached := state.consumers[name].attached_at) else None,
            }
            sticky = state.consumers[name].key_shared.ranges
            key_shared = state.subscription_type == "Key_Shared" and not brief  # brief: no keyHashRanges
            if key_shared and sticky is not None:  # its own Sticky ranges
                consumer["keyHashRanges"] = [f"[{lo}, {hi}]" for lo, hi in sorted(sticky)]
            elif key_shared and owner is not None:  # the partition's owner
                consumer["keyHashRanges"] = [f"[0, {HASH_RANGE - 1}]"] if name == owner else []
            elif key_shared:  # CursorState.key_owner's split of the hash range
                lo, hi = -(-i * HASH_RANGE // len(live)), -(-(i + 1) * HASH_RANGE // len(live)) - 1
                consumer["keyHashRanges"] = [f"[{lo}, {hi}]"]
            consumers.append(consumer)
        stats: dict[str, Any] = {
            "msgRateOut": decayed(rate_msgs, rate_at, now),
            "msgThroughputOut": decayed(rate_bytes, rate_at, now),
            "bytesOutCounter": state.out_bytes,
            "msgOutCounter": state.out_messages,
            "msgRateRedeliver": decayed(state.rate_redeliver, rate_at, now),
            "msgBacklog": state.backlog(snap.writer.next_entry) if snap.topic.is_persistent else 0,
            "blockedSubscriptionOnUnackedMsgs": False,
            "unackedMessages": state.unacked(),
            "type": state.subscription_type,
            "consumers": consumers,
            "isDurable": True,
            "isReplicated": False,
            "nonContiguousDeletedMessagesRanges": len(_acked_ranges(state)),
        }
        if state.subscription_type in ("Exclusive", "Failover") and live:
            stats["activeConsumerName"] = state.active_consumer(now, snap.topic.partition_index)
        return stats

    def _replicator_stats(self, snap: _Snapshot, state: CursorState, now: int, brief: bool = False) -> dict[str, Any]:
        """Pulsar's ReplicatorStats of one remote cluster, from its replicator's cursor."""
        rate_msgs, rate_bytes, moved_at = state.rate_out
        backlog = replicator_backlog(state, snap.seal)
        delay_s = 0.0
        if backlog and not brief:  # the age of the oldest entry not replicated yet: one entry read
            first = max(state.mark_delete, snap.seal.first_entry)
            try:
                entries = self.maintenance.reader.read(snap.topic, first, 1, snap.seal, None)
            except MagnetarError:
                entries = []
            if entries:
                delay_s = max(0, now - entries[0].publish_time) / 1000
        return {
            "msgRateOut": decayed(rate_msgs, moved_at, now),
            "msgThroughputOut": decayed(rate_bytes, moved_at, now),
            "replicationBacklog": backlog,  # entries, as msgBacklog
            # moved_at: its last move past entries (a replicator that never moved has sent nothing)
            "connected": backlog == 0 or (moved_at > 0 and now - moved_at < REPLICATOR_CONNECTED_MS),
            "replicationDelayInSeconds": delay_s,
        }

    # --- PersistentTopicInternalStats ------------------------------------------------------------
    def _segments(self, snap: _Snapshot) -> list[SegmentMeta]:
        out: list[SegmentMeta] = []
        position = snap.seal.first_entry
        while snap.exists:
            page = self.metadata.list_segments(snap.topic, position, limit=SEGMENT_PAGE)
            out.extend(page)
            if len(page) < SEGMENT_PAGE:
                break
            position = page[-1].last_entry + 1
        return out

    def _internal_stats(self, snap: _Snapshot) -> dict[str, Any]:
        seal, writer = snap.seal, snap.writer
        segments = self._segments(snap) if snap.topic.is_persistent else []
        ledgers = _ledgers(snap, segments) if snap.exists else []
        position = _Positions(seal, writer, segments)
        current = next((le for le in ledgers if le["ledgerId"] == writer.ledger_id), None)
        last = writer.next_entry - 1
        cursors: dict[str, Any] = {}
        now = self.clock.now_ms()
        for name, (state, _) in sorted(snap.cursors.items()):
            ranges = _acked_ranges(state)
            cursors[name] = {
                "markDeletePosition": position(state.mark_delete - 1),  # ours is the first entry not acked
                "readPosition": position(state.read_position),
                "waitingReadOp": False,
                "pendingReadOps": 0,
                "messagesConsumedCounter": writer.next_entry - state.backlog(writer.next_entry),  # entries
                "cursorLedger": -1,  # the cursor is a DynamoDB item, not a ledger
                "cursorLedgerLastEntry": -1,
                "individuallyDeletedMessages": "[" + ",".join(
                    f"({position(s - 1)}..{position(e - 1)}]" for s, e in ranges) + "]",
                "state": "Open",
                "active": bool(state.live_consumers(now)),
                "numberOfEntriesSinceFirstNotAckedMessage": max(0, state.read_position - state.mark_delete),
                "totalNonContiguousDeletedMessagesRange": len(ranges),
                "subscriptionHavePendingRead": False,
                "subscriptionHavePendingReplayRead": False,
                "properties": {},
            }
        return {
            "entriesAddedCounter": writer.next_entry,
            "numberOfEntries": max(0, writer.next_entry - seal.first_entry),
            "totalSize": storage_size(seal, writer) if snap.exists else 0,
            "currentLedgerEntries": max(0, writer.next_entry - writer.ledger_first_entry),
            "currentLedgerSize": current["size"] if current else 0,
            "lastLedgerCreatedTimestamp": iso_time(writer.ledger_opened_at) if snap.exists else None,
            "waitingCursorsCount": 0,
            "pendingAddEntriesCount": 0,
            "lastConfirmedEntry": position(last) if last >= 0 else f"{writer.ledger_id}:-1",
            "state": "LedgerOpened",
            "ledgers": ledgers,
            "cursors": cursors,
            "schemaLedgers": [],
            "compactedLedger": {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False,
                                "underReplicated": False},
        }


class _Positions:
    """Pulsar's "ledger:entry" of an entry id (ids are dense per partition; the ledger is a label
    the writer counter and the segments keep)."""

    def __init__(self, seal: SealState, writer: WriterState, segments: list[SegmentMeta]) -> None:
        self.seal, self.writer, self.segments = seal, writer, segments
        self.lasts = [seg.last_entry for seg in segments]

    def ledger_of(self, entry: int) -> int:
        if entry >= self.writer.ledger_first_entry:
            return self.writer.ledger_id
        i = bisect.bisect_left(self.lasts, entry)
        if i < len(self.segments) and self.segments[i].first_entry <= entry:
            return self.segments[i].ledger_id
        if entry >= self.seal.next_entry:  # not sealed yet, before the current ledger: the previous one
            return max(0, self.writer.ledger_id - 1)
        return self.segments[0].ledger_id if self.segments else self.writer.ledger_id  # trimmed

    def __call__(self, entry: int) -> str:
        # Pulsar writes the position before a ledger's first entry as "ledger:-1"
        return f"{self.ledger_of(max(entry, 0))}:{entry if entry >= 0 else -1}"


def _ledgers(snap: _Snapshot, segments: list[SegmentMeta]) -> list[dict[str, Any]]:
    """Pulsar's ledger list: the sealed segments grouped by ledger (sizes exact), the entries not
    sealed yet counted in their ledger (sizes estimated), the current ledger always listed."""
    seal, writer = snap.seal, snap.writer
    ledgers: dict[int, dict[str, Any]] = {}

    def ledger(ledger_id: int) -> dict[str, Any]:
        return ledgers.setdefault(ledger_id, {"ledgerId": ledger_id, "entries": 0, "size": 0, "offloaded": False,
                                              "underReplicated": False, "segments": []})

    for seg in segments:
        info = ledger(seg.ledger_id)
        info["entries"] += seg.last_entry - seg.first_entry + 1
        info["size"] += seg.size
        info["segments"].append({"firstEntry": seg.first_entry, "lastEntry": seg.last_entry, "key": seg.key,
                                 "size": seg.size, "messages": seg.message_count})
    tail_start = max(seal.next_entry, seal.first_entry)
    average = estimated_entry_size(seal)
    before_current = max(0, min(writer.ledger_first_entry, writer.next_entry) - tail_start)
    if before_current:
        info = ledger(max(0, writer.ledger_id - 1))
        info["entries"] += before_current
        info["size"] += before_current * average
    in_current = max(0, writer.next_entry - max(tail_start, writer.ledger_first_entry))
    info = ledger(writer.ledger_id)
    info["entries"] += in_current
    info["size"] += in_current * average
    return [ledgers[k] for k in sorted(ledgers)]


def _acked_ranges(state: CursorState) -> list[list[int]]:
    """Individually acknowledged ranges above the mark-delete position (Pulsar's
    individuallyDeletedMessages), half-open [start, end) entry ids."""
    acked = RangeSet(state.acked)
    acked.drop_below(state.mark_delete)
    return acked.ranges


def _aggregate(each: list[dict[str, Any]]) -> dict[str, Any]:
    """Pulsar's PartitionedTopicStats: rates, counters and sizes summed; subscriptions merged by
    name (backlogs, unacked counts, rates summed; consumers listed together); publishers listed
    together. averageMsgSize is the bytes-weighted average, not Pulsar's mean of the means."""
    total: dict[str, Any] = {name: 0 for name in _TOPIC_SUMS}
    for name in ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut"):
        total[name] = 0.0
    total["publishers"], total["subscriptions"], total["replication"] = [], {}, {}
    for stats in each:
        for name in _TOPIC_SUMS:
            total[name] += stats[name]
        total["publishers"].extend(stats["publishers"])
        for remote, r in stats["replication"].items():  # summed; connected when every partition's is
            merged = total["replication"].get(remote)
            if merged is None:
                total["replication"][remote] = dict(r)
                continue
            for name in ("msgRateOut", "msgThroughputOut", "replicationBacklog"):
                merged[name] += r[name]
            merged["connected"] = merged["connected"] and r["connected"]
            merged["replicationDelayInSeconds"] = max(merged["replicationDelayInSeconds"],
                                                      r["replicationDelayInSeconds"])
        for sub_name, sub in stats["subscriptions"].items():
            merged = total["subscriptions"].get(sub_name)
            if merged is None:
                merged = {k: v for k, v in sub.items() if k not in ("consumers", "activeConsumerName")}
                merged["consumers"] = list(sub["consumers"])
                total["subscriptions"][sub_name] = merged
                continue
            for name in _SUBSCRIPTION_SUMS:
                merged[name] += sub[name]
            merged["consumers"].extend(sub["consumers"])
            merged["blockedSubscriptionOnUnackedMsgs"] |= sub["blockedSubscriptionOnUnackedMsgs"]
    total["averageMsgSize"] = total["bytesInCounter"] / total["msgInCounter"] if total["msgInCounter"] else 0.0
    first = each[0] if each else {}
    total["backlogQuotaLimitSize"] = first.get("backlogQuotaLimitSize", -1)
    total["backlogQuotaLimitTime"] = first.get("backlogQuotaLimitTime", -1)
    total["deduplicationStatus"] = first.get("deduplicationStatus", "Disabled")
    return total
