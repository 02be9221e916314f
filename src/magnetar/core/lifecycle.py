"""The ledger lifecycle: message TTL, backlog quotas and retention, run on a schedule.

Pulsar's broker does this work in background tasks of the topic's owner (the message-expiry
check, the backlog-quota check every minute, ledger trimming after a rollover). Here a scheduled
function (`functions/maintenance`, EventBridge every minute) runs `LedgerMaintenance.run`, which
visits every persistent topic partition:

1. **TTL**: every subscription's cursor moves past the entries older than the message TTL
   (acknowledging them, as Pulsar's expireMessages does);
2. **backlog quota**: the backlog (bytes and age of the oldest unacknowledged entry behind the
   slowest cursor) is compared with the quota; `consumer_backlog_eviction` moves the slow cursors
   forward, the producer policies set a flag on the writer counter that the next reservation
   meets (no extra request per publish) until the backlog is back under quota;
3. **retention**: whole segments below every cursor are deleted once retention no longer needs
   them (older than the retention time or beyond the retention size). With no subscription at
   all, everything is acknowledged, as in Pulsar.

What a run costs grows with the topics, so an idle topic must cost next to nothing: a topic whose
ledger is empty (every entry trimmed or none published: nothing to expire, measure or trim) costs
its one state read and nothing else, the namespace's policies are read once per namespace and
run, and the segments are listed only when a cursor has passed one (bench/scale_topics.py measures
it: 5 requests per idle topic and run before, 1 after).

Deleting is crash-safe: one DynamoDB transaction unlists the segments, moves the seal state's
first entry and records the objects as trash; the objects are deleted afterwards and the trash
cleared. An interrupted run leaves trash (objects no metadata points to), never metadata that
points to a missing object, and the next run finishes the deletion.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from magnetar.core import metrics as m
from magnetar.core.crashpoints import crash_point
from magnetar.core.cursor import CursorState
from magnetar.core.dispatch import SubscriptionService
from magnetar.core.errors import InvalidInput
from magnetar.core.ledger import EntryReader, LedgerWriter
from magnetar.core.ledger.common import sealed_bytes
from magnetar.core.naming import NamespaceName, TopicDomain, TopicName
from magnetar.core.policies import TopicPolicies, effective_policies
from magnetar.core.ports import Clock, MetadataStore, SealState, SegmentMeta, SegmentStore, WriterState
from magnetar.core.ports.telemetry import NO_TELEMETRY, Telemetry, Unit
from magnetar.core.replication import is_replicator

log = logging.getLogger(__name__)

TRIM_BATCH = 99  # segments per trim transaction (DynamoDB transactions hold 100 items)
SEGMENT_PAGE = 100


@dataclass
class TopicReport:
    expired_entries: int = 0
    evicted_entries: int = 0
    trimmed_segments: int = 0
    trimmed_entries: int = 0
    deleted_objects: int = 0
    backlog_bytes: int = 0
    quota_exceeded: bool = False
    backlog_entries: int = 0  # behind the slowest cursor
    quota_ratio: float | None = None  # the backlog against its quota (size or age, the fuller); None: no quota


@dataclass
class NamespaceBacklog:
    entries: int = 0
    bytes: int = 0
    quota_ratio: float | None = None  # the fullest of its topics with a quota


@dataclass(frozen=True)
class MaintenanceScope:
    """What a maintenance run visits: the schedule's run everything; a rule's constant input naming
    topics (`{"topics": [...]}`) or functions (`{"functions": ["tenant/namespace/name"]}`) only
    those, and nothing of the other kind. None: every one; []: none."""

    topics: list[str] | None = None
    functions: list[str] | None = None

    @classmethod
    def of(cls, event: dict[str, Any]) -> MaintenanceScope:
        """The scope an invocation's event asks for; InvalidInput for an input of another shape."""
        topics, functions = event.get("topics"), event.get("functions")
        if topics is not None and not (isinstance(topics, list) and all(isinstance(t, str) for t in topics)):
            raise InvalidInput("'topics' must be a list of topic names")
        if functions is not None and not (isinstance(functions, list) and all(
                isinstance(f, str) and len(f.split("/")) == 3 and all(f.split("/")) for f in functions)):
            raise InvalidInput("'functions' must be a list of function names, tenant/namespace/name")
        if topics is None and functions is None:
            return cls()
        return cls(topics or [], functions or [])


@dataclass
class MaintenanceReport:
    topics: int = 0
    expired_entries: int = 0
    evicted_entries: int = 0
    trimmed_segments: int = 0
    deleted_objects: int = 0
    blocked_topics: list[str] = field(default_factory=list)
    # per namespace: entries behind the slowest cursors, bytes measured for quotas, the fullest quota
    namespaces: dict[str, NamespaceBacklog] = field(default_factory=dict)

    def add(self, topic: str, report: TopicReport) -> None:
        self.topics += 1
        backlog = self.namespaces.setdefault(str(TopicName.parse(topic).namespace_name), NamespaceBacklog())
        backlog.entries += report.backlog_entries
        backlog.bytes += report.backlog_bytes
        if report.quota_ratio is not None:
            backlog.quota_ratio = max(backlog.quota_ratio or 0.0, report.quota_ratio)
        self.expired_entries += report.expired_entries
        self.evicted_entries += report.evicted_entries
        self.trimmed_segments += report.trimmed_segments
        self.deleted_objects += report.deleted_objects
        if report.quota_exceeded:
            self.blocked_topics.append(topic)


@dataclass(frozen=True)
class Backlog:
    """What sits behind the slowest cursor of a topic partition."""

    start: int  # the slowest cursor's mark-delete position (the topic's end without subscriptions)
    end: int
    size: int  # bytes (sealed entries exactly; the unsealed tail estimated at the average entry size)
    oldest_publish_time: int | None  # of the entry at `start`, None when the backlog is empty


def backlog_range(seal: SealState, writer: WriterState, cursors: dict[str, tuple[CursorState, int]]) -> tuple[int, int]:
    """[start, end) of the entries behind the slowest cursor (the topic's end without subscriptions)."""
    start = min((state.mark_delete for state, _ in cursors.values()), default=writer.next_entry)
    return max(start, seal.first_entry), writer.next_entry


def settled(seal: SealState, writer: WriterState) -> bool:
    """Nothing for a maintenance run to do: the ledger is empty (every entry trimmed, or none ever
    published), no trash waits and no backlog block is left to lift. TTL, quotas and retention
    only act on entries, so the next publish is what gives the run work again."""
    return seal.first_entry >= writer.next_entry and not seal.trash and not writer.backlog_blocked


def estimated_entry_size(seal: SealState) -> int:
    """The size assumed for an entry not sealed yet: the average sealed entry (1 KB before any)."""
    return seal.sealed_bytes // seal.sealed_entries if seal.sealed_entries else 1024


class LedgerMaintenance:
    telemetry: Telemetry = NO_TELEMETRY  # each run's backlogs per namespace
    # topic compaction (magnetar.core.compaction.Compactor), when wired: the run starts and
    # continues compactions, and retention keeps what the compacted view still needs
    compaction: Any = None
    # geo-replication (magnetar.core.replication.Replicator), when wired: a replicator left behind
    # (its remote cluster was unreachable) sends its backlog from the run
    replication: Any = None

    def __init__(self, metadata: MetadataStore, segments: SegmentStore, reader: EntryReader,
                 writer: LedgerWriter, subscriptions: SubscriptionService, clock: Clock) -> None:
        self.metadata = metadata
        self.subscriptions = subscriptions
        self.segments = segments
        self.reader = reader
        self.writer = writer
        self.clock = clock

    # --- the scheduled run -----------------------------------------------------------------
    def run(self, topics: list[str] | None = None) -> MaintenanceReport:
        """Visit every persistent topic partition (or only `topics`, partitions of a partitioned
        topic included)."""
        report = MaintenanceReport()
        if self.compaction is not None:
            self.compaction.new_run()  # compaction steps share one budget per run
        namespaces: dict[NamespaceName, dict[str, Any]] = {}  # policies read once per namespace and run
        for name in self._all_topics() if topics is None else self._expand(topics):
            topic = TopicName.parse(name)
            if topic.domain is not TopicDomain.PERSISTENT:
                continue
            try:
                report.add(name, self.maintain(topic, namespaces))
            except Exception:  # one broken topic must not stop the others; the next run retries
                log.exception("maintenance of %s failed", name)
        self._emit(report)
        return report

    def _emit(self, report: MaintenanceReport) -> None:
        """The run's backlogs per namespace, to the telemetry (the dashboard's backlog, the quota alarm)."""
        metrics = self.telemetry.metrics
        for name, value in ((m.TOPICS_MAINTAINED, report.topics), (m.EXPIRED_ENTRIES, report.expired_entries),
                            (m.EVICTED_ENTRIES, report.evicted_entries),
                            (m.TRIMMED_SEGMENTS, report.trimmed_segments),
                            (m.BACKLOG_BLOCKED_TOPICS, len(report.blocked_topics))):
            metrics.add(name, value)
        for namespace, backlog in sorted(report.namespaces.items()):
            metrics.add(m.BACKLOG_ENTRIES, backlog.entries, namespace=namespace)
            if backlog.quota_ratio is not None:
                metrics.add(m.BACKLOG_BYTES, backlog.bytes, Unit.BYTES, namespace=namespace)
                metrics.add(m.BACKLOG_QUOTA_RATIO, round(backlog.quota_ratio, 4), Unit.NONE, namespace=namespace)

    def _all_topics(self) -> Iterator[str]:
        for tenant in self.metadata.list_tenants():
            for namespace in self.metadata.list_namespaces(tenant):
                yield from self.metadata.list_topics(NamespaceName(tenant, namespace))

    def _expand(self, topics: list[str]) -> Iterator[str]:
        for name in topics:
            topic = TopicName.parse(name)
            partitions = self.metadata.get_partitions(topic) if topic.partition_index < 0 else None
            yield from (str(topic.partition(i)) for i in range(partitions)) if partitions else [str(topic)]

    def maintain(self, topic: TopicName, namespaces: dict[NamespaceName, dict[str, Any]] | None = None) -> TopicReport:
        """One topic partition; `namespaces` caches the namespace policies across a run."""
        report = TopicReport()
        seal, writer = self.metadata.get_topic_state(topic)
        if writer is None or settled(seal, writer):
            return report
        policies = TopicPolicies.of(self._fresh_policies(topic, namespaces))
        if seal.trash:
            report.deleted_objects += self._empty_trash(topic, list(seal.trash))
        cursors = self.metadata.list_cursors(topic)
        start, end = backlog_range(seal, writer, cursors)
        report.backlog_entries = max(0, end - start)
        if self.replication is not None and any(
                is_replicator(name) and cursor.mark_delete < seal.next_entry for name, (cursor, _) in cursors.items()):
            try:
                self.replication.catch_up(topic)
                cursors = self.metadata.list_cursors(topic)
            except Exception:  # the next run retries; the rest of the topic's maintenance goes on
                log.exception("replication of %s failed", topic)
        if self.replication is not None:
            try:  # replicated subscriptions: what they acknowledged here, to the other clusters
                self.replication.share_subscriptions(topic, cursors)
            except Exception:
                log.exception("replicated subscriptions of %s not shared", topic)
        now = self.clock.now_ms()
        if policies.message_ttl_s > 0 and cursors:
            cutoff = self._first_entry_since(topic, seal, writer, now - policies.message_ttl_s * 1000, cursors)
            report.expired_entries = self._expire_cursors(topic, cursors, cutoff)
            cursors = self.metadata.list_cursors(topic) if report.expired_entries else cursors
        self._apply_backlog_quota(topic, policies, seal, writer, cursors, report)
        if report.evicted_entries:
            cursors = self.metadata.list_cursors(topic)
        keep = None
        if self.compaction is not None:
            try:
                keep = self.compaction.maintain(topic, policies.compaction_threshold, seal.next_entry)
            except Exception:  # the compaction's state is unknown: trim nothing this run
                log.exception("compaction of %s failed", topic)
                return report
        self._trim(topic, policies, seal, writer, cursors, report, keep)
        return report

    def _fresh_policies(self, topic: TopicName, namespaces: dict[NamespaceName, dict[str, Any]] | None) -> dict[str, Any]:
        """The effective policies read now: the topic's overrides (one read) over its namespace's
        (one read per namespace and run when `namespaces` is given)."""
        if namespaces is None:
            return self.writer.fresh_policies(topic)
        name = topic.namespace_name
        if name not in namespaces:
            info = self.metadata.get_namespace(name)
            namespaces[name] = dict(info.policies) if info else {}
        return effective_policies(namespaces[name], self.metadata.get_topic_policies(topic))

    # --- backlog quota ------------------------------------------------------------------------
    def backlog(self, topic: TopicName, seal: SealState, writer: WriterState,
                cursors: dict[str, tuple[CursorState, int]], with_age: bool = True) -> Backlog:
        """The backlog's range and size; its age too (one entry read) when `with_age`."""
        start, end = backlog_range(seal, writer, cursors)
        size = self._size_between(topic, seal, start, end)
        oldest = None
        if with_age and start < end:
            entries = self.reader.read(topic, start, 1, seal, writer)
            oldest = entries[0].publish_time if entries else None
        return Backlog(start, end, size, oldest)

    def backlog_size(self, topic: TopicName, seal: SealState, writer: WriterState,
                     cursors: dict[str, tuple[CursorState, int]]) -> int:
        """The bytes of `backlog` without reading its oldest entry (topic stats' backlogSize)."""
        return self._size_between(topic, seal, *backlog_range(seal, writer, cursors))

    def quota_exceeded(self, topic: TopicName) -> bool:
        """Re-evaluate a blocked topic now (a held or refused producer asks); lifts the block
        when the backlog is back under its quota."""
        seal, writer = self.metadata.get_topic_state(topic)
        if writer is None:
            return False
        policies = TopicPolicies.of(self.writer.policies(topic))
        backlog = self.backlog(topic, seal, writer, self.metadata.list_cursors(topic),
                               with_age=policies.backlog_quota.limit_time > 0)
        exceeded = self._over_quota(policies, backlog)
        if not exceeded and writer.backlog_blocked:
            self.metadata.set_backlog_blocked(topic, "")
        return exceeded

    def _quota_ratio(self, policies: TopicPolicies, backlog: Backlog) -> float:
        """How full the quota is: the backlog's size against limitSize, its age against limitTime,
        the fuller of the two (1.0: at the quota)."""
        quota = policies.backlog_quota
        if backlog.start >= backlog.end:
            return 0.0
        ratio = backlog.size / quota.limit_size if quota.limit_size > 0 else 0.0
        if quota.limit_time > 0 and backlog.oldest_publish_time is not None:
            age_ms = max(0, self.clock.now_ms() - backlog.oldest_publish_time)
            ratio = max(ratio, age_ms / (quota.limit_time * 1000))
        return ratio

    def _over_quota(self, policies: TopicPolicies, backlog: Backlog) -> bool:
        quota = policies.backlog_quota
        if not quota.active or backlog.start >= backlog.end:
            return False
        if quota.limit_size > 0 and backlog.size > quota.limit_size:
            return True
        now = self.clock.now_ms()
        return bool(quota.limit_time > 0 and backlog.oldest_publish_time is not None
                    and now - backlog.oldest_publish_time > quota.limit_time * 1000)

    def _apply_backlog_quota(self, topic: TopicName, policies: TopicPolicies, seal: SealState, writer: WriterState,
                             cursors: dict[str, tuple[CursorState, int]], report: TopicReport) -> None:
        quota = policies.backlog_quota
        if not quota.active:  # nothing to measure: no reads (only lift a block left from a removed quota)
            if writer.backlog_blocked:
                self.metadata.set_backlog_blocked(topic, "")
            return
        backlog = self.backlog(topic, seal, writer, cursors, with_age=quota.limit_time > 0)
        report.backlog_bytes = backlog.size
        report.backlog_entries = max(0, backlog.end - backlog.start)
        report.quota_ratio = self._quota_ratio(policies, backlog)
        exceeded = self._over_quota(policies, backlog)
        if exceeded and quota.policy == "consumer_backlog_eviction":
            target = self._eviction_point(topic, seal, writer, backlog, policies, cursors)
            report.evicted_entries = self._expire_cursors(topic, cursors, target)
            exceeded = False
        wanted = quota.policy if exceeded else ""
        report.quota_exceeded = exceeded
        if wanted != writer.backlog_blocked:
            self.metadata.set_backlog_blocked(topic, wanted)

    def _eviction_point(self, topic: TopicName, seal: SealState, writer: WriterState, backlog: Backlog,
                        policies: TopicPolicies, cursors: dict[str, tuple[CursorState, int]]) -> int:
        """The oldest position the slow cursors may keep so the backlog fits the quota again
        (Pulsar evicts the oldest backlog of the slowest subscriptions)."""
        quota = policies.backlog_quota
        target = backlog.start
        if quota.limit_size > 0 and backlog.size > quota.limit_size:
            target = self._position_keeping(topic, seal, writer, quota.limit_size)
        if quota.limit_time > 0:
            since = self._first_entry_since(topic, seal, writer, self.clock.now_ms() - quota.limit_time * 1000, cursors)
            target = max(target, since)
        return target

    # --- TTL ------------------------------------------------------------------------------------
    def _expire_cursors(self, topic: TopicName, cursors: dict[str, tuple[CursorState, int]], position: int) -> int:
        """Move every cursor below `position` up to it (Pulsar's expireMessages on each)."""
        return sum(self.subscriptions.expire_messages(topic, name, position)
                   for name, (state, _) in cursors.items() if state.mark_delete < position)

    def _first_entry_since(self, topic: TopicName, seal: SealState, writer: WriterState, since_ms: int,
                           cursors: dict[str, tuple[CursorState, int]]) -> int:
        """The first entry published at or after `since_ms`, searched from the slowest cursor."""
        position = max(min((s.mark_delete for s, _ in cursors.values()), default=0), seal.first_entry)
        while position < seal.next_entry:  # sealed: segment metadata skips whole old segments
            page = self.metadata.list_segments(topic, position, limit=SEGMENT_PAGE)
            if not page:
                break
            for seg in page:
                if seg.max_publish_time >= since_ms:
                    return self._scan(topic, max(seg.first_entry, position), since_ms, seal, writer)
                position = seg.last_entry + 1
        return self._scan(topic, position, since_ms, seal, writer)

    def _scan(self, topic: TopicName, position: int, since_ms: int, seal: SealState, writer: WriterState) -> int:
        while position < writer.next_entry:
            entries = self.reader.read(topic, position, 100, seal, writer)
            if not entries:
                return position  # not settled yet: nothing at or after it can be expired
            for entry in entries:
                if not entry.hole and entry.publish_time >= since_ms:
                    return entry.entry_id
            position = entries[-1].entry_id + 1
        return position

    # --- retention and trimming --------------------------------------------------------------------
    def _trim(self, topic: TopicName, policies: TopicPolicies, seal: SealState, writer: WriterState,
              cursors: dict[str, tuple[CursorState, int]], report: TopicReport, keep: int | None = None) -> None:
        retention = policies.retention
        if retention.keeps_everything:
            return
        slowest = min((state.mark_delete for state, _ in cursors.values()), default=writer.next_entry)
        if keep is not None:  # a compacted topic: entries from its horizon on may still enter the view
            slowest = min(slowest, keep)
        acknowledged = self._segments_below(topic, seal.first_entry, slowest)
        if not acknowledged:
            return
        now = self.clock.now_ms()
        retained = sum(seg.size for seg in acknowledged)
        size_limit = retention.size_mb * 1024 * 1024
        doomed: list[SegmentMeta] = []
        for seg in acknowledged:  # oldest first; only a prefix may go (the ledger stays contiguous)
            over_size = retention.size_mb >= 0 and retained > size_limit
            expired = retention.minutes >= 0 and now - seg.max_publish_time >= retention.minutes * 60_000
            if not (over_size or expired):
                break
            doomed.append(seg)
            retained -= seg.size
        first = seal.first_entry
        for i in range(0, len(doomed), TRIM_BATCH):
            batch = doomed[i : i + TRIM_BATCH]
            if not self.metadata.trim_segments(topic, batch, first):
                log.info("trim of %s raced another run; the next run continues", topic)
                return
            crash_point("trim.after_commit")  # unlisted, objects not deleted: trash the next run empties
            first = batch[-1].last_entry + 1
            report.trimmed_segments += len(batch)
            report.trimmed_entries += sum(seg.last_entry - seg.first_entry + 1 for seg in batch)
            report.deleted_objects += self._empty_trash(topic, [seg.key for seg in batch])

    def _segments_below(self, topic: TopicName, first: int, slowest: int) -> list[SegmentMeta]:
        """Sealed segments every cursor has passed (their last entry is below `slowest`)."""
        out: list[SegmentMeta] = []
        if slowest <= first:  # no cursor has passed the first entry: no segment to list
            return out
        position = first
        while True:
            page = self.metadata.list_segments(topic, position, limit=SEGMENT_PAGE)
            for seg in page:
                if seg.last_entry >= slowest:
                    return out
                out.append(seg)
            if len(page) < SEGMENT_PAGE:
                return out
            position = page[-1].last_entry + 1

    def _empty_trash(self, topic: TopicName, keys: list[str]) -> int:
        self.segments.delete(keys)  # one DeleteObjects request per 1,000 keys
        crash_point("trim.after_delete")  # deleted, trash not cleared: deleting again is harmless
        self.metadata.clear_trash(topic, keys)
        return len(keys)

    # --- sizes ----------------------------------------------------------------------------------
    def _size_between(self, topic: TopicName, seal: SealState, start: int, end: int) -> int:
        """Bytes of entries [start, end): exact for sealed entries (segment offsets), the unsealed
        tail at the average sealed entry size."""
        size = sealed_bytes(self.metadata, topic, max(start, seal.first_entry), min(end, seal.next_entry), SEGMENT_PAGE)
        unsealed = max(0, end - max(start, seal.next_entry))
        if unsealed:
            size += unsealed * estimated_entry_size(seal)
        return size

    def _position_keeping(self, topic: TopicName, seal: SealState, writer: WriterState, limit: int) -> int:
        """The oldest position from which the entries up to the end fit in `limit` bytes."""
        total = self._size_between(topic, seal, seal.first_entry, writer.next_entry)
        position = seal.first_entry
        while position < seal.next_entry and total > limit:
            page = self.metadata.list_segments(topic, position, limit=SEGMENT_PAGE)
            if not page:
                break
            for seg in page:
                for i in range(max(position, seg.first_entry) - seg.first_entry, seg.last_entry - seg.first_entry + 1):
                    if total <= limit:
                        return position
                    total -= seg.offsets[i + 1] - seg.offsets[i]
                    position = seg.first_entry + i + 1
        return position if total <= limit else max(position, seal.next_entry)

