"""Geo-replication: the entries published in this cluster, republished in the other clusters of
the topic's replication set (Pulsar's replicators).

A replicator is a durable cursor per remote cluster, `pulsar.repl.<cluster>`, on the topic
partition: retention and backlog quotas count it as a subscription, topic stats show its
backlog. It reads the sealed entries after its mark-delete position, sends the ones to
replicate to the remote cluster as one group append (one remote publish per journal batch of the
topic), then moves its mark-delete position with a conditional write. Nothing runs per topic:
the journal consumer replicates the topics it has just sealed, the maintenance run the topics a
failed remote left behind.

Exactly once per cluster: the remote append is deduplicated by the replicator's producer
(`pulsar.repl.<this cluster>`) with the origin's entry id as its sequence id, so an append
repeated after a crash, a timeout or a lost answer is stored once. No loops: an entry that is
itself a replicated copy is never sent on. Order: one replicator sends a topic partition's
entries in id order, and the remote appends them in that order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from magnetar.core.crashpoints import crash_point
from magnetar.core.cursor import CursorState
from magnetar.core.entry import Batch, Entry, Origin, batch_topics, decode_entry, peek_header, record_entries
from magnetar.core.errors import InvalidInput, RetryableError
from magnetar.core.ledger.reader import EntryCache, EntryReader
from magnetar.core.naming import TopicName
from magnetar.core.policies import replication_clusters
from magnetar.core.ports import Clock, CursorWrite, JournalRecord, MetadataStore, SealState, SubscriptionView

log = logging.getLogger(__name__)

REPLICATOR_PREFIX = "pulsar.repl."  # Pulsar's name for a replicator's cursor and producer
MAX_SEND_ENTRIES = 500  # entries per remote append
MAX_SEND_BYTES = 512 * 1024  # payload bytes per remote append (under the journal's 1 MiB record once framed)
MAX_ROUNDS = 20  # remote appends per topic, remote and call: a long backlog drains over several calls
# after a failed append, a remote is left alone this long by this container (its backlog waits
# for the next batch or maintenance run past it): a partitioned region must not slow the sealing
REMOTE_BACKOFF_MS = 5_000


def replicator_name(cluster: str) -> str:
    """The cursor replicating to `cluster`, and the producer a cluster's replicator appends as."""
    return f"{REPLICATOR_PREFIX}{cluster}"


def is_replicator(subscription: str) -> bool:
    return subscription.startswith(REPLICATOR_PREFIX)


def replicator_backlog(cursor: CursorState, seal: SealState) -> int:
    """The sealed entries a replicator has still to go through: from its position (its
    `mark_delete`, the first entry not replicated, as every cursor's) to the sealed end, trimmed ones aside."""
    return max(0, seal.next_entry - max(cursor.mark_delete, seal.first_entry))


class RemoteUnavailable(RetryableError):
    """The remote cluster did not take the append (unreachable, refusing, timing out): the
    replicator's position stays, the backlog is sent again later."""


class RemoteClusters(Protocol):
    """How a replicator reaches the other clusters of the instance."""

    def append(self, cluster: str, topic: TopicName, batches: list[Batch]) -> None:
        """Append `batches` (replicated copies, each with its origin) to `topic` in `cluster`, all
        or nothing, deduplicated by origin; RemoteUnavailable when it could not be done."""
        ...

    def acknowledge(self, cluster: str, topic: TopicName, subscription: str, subscription_type: str,
                    origin_acked: dict[str, int]) -> None:
        """Tell `cluster` what a replicated subscription acknowledged here (`apply_remote_acks`
        there); RemoteUnavailable when it could not be done."""
        ...


@dataclass
class ReplicationResult:
    """One replicator's work in one call."""

    topic: str
    remote: str
    entries: int = 0  # entries the position moved past
    sent_messages: int = 0
    sent_bytes: int = 0
    appends: int = 0  # remote appends made
    backlog: int = 0  # entries still to replicate after this call
    delay_ms: int = 0  # how old the newest entry sent was when it was stored remotely
    error: str = ""


def replicated_copy(entry: Entry, cluster: str) -> Batch:
    """The batch a replicator appends for `entry`, stored in `cluster`: the same bytes and
    metadata, the origin said, the origin's entry id as the deduplication sequence id."""
    origin = Origin(cluster, entry.ledger_id, entry.entry_id, entry.producer_name, entry.sequence_id,
                    entry.highest_sequence_id, entry.publish_time)
    return Batch(entry.payload, entry.num_messages, entry.compression, entry.uncompressed_size, entry.key,
                 entry.batched, entry.entry_id, entry.entry_id, entry.deliver_at, entry.chunk, origin,
                 entry.replicate_to)


def wanted_by(entry: Entry, remote: str) -> bool:
    """Whether `remote` gets a copy of `entry`: not a hole, not itself a copy (no loops), and
    within the clusters its publish asked for, if it asked."""
    if entry.hole or entry.origin is not None:
        return False
    return entry.replicate_to is None or remote in entry.replicate_to


class Replicator:
    def __init__(self, metadata: MetadataStore, reader: EntryReader, clock: Clock, local_cluster: str,
                 remotes: RemoteClusters, policies: Callable[[TopicName], dict[str, Any]]) -> None:
        self.metadata = metadata
        self.reader = reader
        self.clock = clock
        self.local_cluster = local_cluster
        self.remotes = remotes
        self.policies = policies
        self._down_until: dict[str, int] = {}  # remote cluster -> not tried again before (ms)
        from magnetar.core.replicated_subscriptions import ReplicatedSubscriptions

        self.subscriptions = ReplicatedSubscriptions(metadata, reader, clock, local_cluster, remotes)

    def share_subscriptions(self, topic: TopicName, cursors: dict[str, tuple[CursorState, int]]) -> int:
        """The maintenance run: replicated subscriptions' positions, to the topic's other clusters."""
        if not any(c.replicated for c, _ in cursors.values()):
            return 0
        return self.subscriptions.share(topic, self.remotes_of(topic), cursors)

    def replicate_batch(self, records: list[JournalRecord], cache: EntryCache) -> list[ReplicationResult]:
        """After a journal batch is sealed: replicate its topics that have other clusters, their
        entries taken from the batch (put in the reader's cache: no segment read)."""
        first = {topic: entry for topic, entry in batch_topics(r.data for r in records).items()
                 if self.remotes_of(TopicName.parse(topic))}
        if not first:
            return []
        for record in records:
            try:
                items = record_entries(record.data)
            except InvalidInput:  # (the sealer reports it)
                continue
            for data in items:
                header = peek_header(data)
                if header.topic in first and not header.hole:
                    cache.put(decode_entry(data))
        return self.replicate([TopicName.parse(t) for t in first], first)

    def remotes_of(self, topic: TopicName) -> list[str]:
        """The other clusters `topic` replicates to (its policies, cached by the writer)."""
        if not topic.is_persistent:
            return []
        clusters = replication_clusters(self.policies(topic), self.local_cluster)
        return [c for c in clusters if c != self.local_cluster]

    def catch_up(self, topic: TopicName) -> list[ReplicationResult]:
        """The maintenance run: send what a replicator of `topic` left behind, to every remote, even
        one this container paused after a failure (nothing waits on the run)."""
        return self.replicate([topic], paused_too=True)

    def replicate(self, topics: list[TopicName], start_at: dict[str, int] | None = None,
                  paused_too: bool = False) -> list[ReplicationResult]:
        """Replicate what is sealed of `topics` to their remote clusters. `start_at`: for a topic
        whose replicator has no position yet, the first entry to replicate (the journal batch's
        first entry of it: a replication set starts with what is published after it); without,
        the replicator starts at the end of what is sealed."""
        now = self.clock.now_ms()
        pairs = [(topic, remote) for topic in topics for remote in self.remotes_of(topic)
                 if paused_too or self._down_until.get(remote, 0) <= now or str(topic) in (start_at or {})]
        if not pairs:
            return []
        views = self.metadata.get_subscription_views([(t, replicator_name(r)) for t, r in pairs])
        results: list[ReplicationResult] = []
        for (topic, remote), view in zip(pairs, views, strict=True):
            paused = not paused_too and self._down_until.get(remote, 0) > now
            if paused and view.cursor is not None:
                continue
            # a paused remote's replicator is still created where the batch starts: what it has not
            # sent yet is its backlog (created later, at the sealed end, it would skip it)
            first = (start_at or {}).get(str(topic))
            results.append(self._replicate_one(topic, remote, view, first, send=not paused))
        return results

    def _replicate_one(self, topic: TopicName, remote: str, view: SubscriptionView,
                       first: int | None, send: bool = True) -> ReplicationResult:
        result = ReplicationResult(str(topic), remote)
        name = replicator_name(remote)
        cursor, version, seal = view.cursor, view.cursor_version, view.seal
        if cursor is None:
            start = seal.next_entry if first is None else min(first, seal.next_entry)
            cursor = CursorState("Exclusive", start, start, created_at=self.clock.now_ms())
            if not self.metadata.put_cursor(topic, name, cursor, 0):
                view = self.metadata.get_subscription_view(topic, name)  # another replicator made it
                if view.cursor is None:
                    result.error = "replicator cursor not created"
                    return result
                cursor, version = view.cursor, view.cursor_version
            else:
                version = 1
        if not send:
            result.backlog = replicator_backlog(cursor, seal)
            return result
        for _ in range(MAX_ROUNDS):
            start = max(cursor.mark_delete, seal.first_entry)  # the first entry not replicated yet
            if start >= seal.next_entry:
                break
            entries = self.reader.read(topic, start, MAX_SEND_ENTRIES, seal, None)
            if not entries or entries[0].entry_id != start:
                result.error = f"entry {start} unreadable"
                break
            entries = _within_bytes(entries)
            copies = [replicated_copy(e, self.local_cluster) for e in entries if wanted_by(e, remote)]
            if copies:
                try:
                    self.remotes.append(remote, topic, copies)
                except Exception as exc:  # any failure: the remote is left alone a while
                    # a replicator never fails the journal batch it follows (the batch is sealed; a
                    # failed invocation would be replayed over and over, holding the shard)
                    result.error = str(exc) or type(exc).__name__
                    self._down_until[remote] = self.clock.now_ms() + REMOTE_BACKOFF_MS
                    if isinstance(exc, RemoteUnavailable):
                        log.warning("replication of %s to %s paused: %s", topic, remote, exc)
                    else:
                        log.exception("replication of %s to %s paused", topic, remote)
                    break
                result.appends += 1
                result.sent_messages += sum(c.num_messages for c in copies)
                result.sent_bytes += sum(len(c.payload) for c in copies)
                result.delay_ms = max(0, self.clock.now_ms() - entries[-1].publish_time)
            last = entries[-1].entry_id
            moved = CursorState.from_dict(cursor.to_dict())
            moved.mark_delete = last + 1
            moved.read_position = max(moved.read_position, last + 1)
            moved.record_out(sum(c.num_messages for c in copies), sum(len(c.payload) for c in copies),
                             self.clock.now_ms())
            crash_point("replicate.after_append")  # stored remotely, position not moved: sent again, deduplicated there
            written = self.metadata.put_cursors([CursorWrite(topic, name, moved, version)])[0]
            crash_point("replicate.after_position")  # position moved, the batch's invocation dies: a replay sends nothing
            if not written:  # another replicator moved it (a maintenance run, a retried batch)
                view = self.metadata.get_subscription_view(topic, name)
                if view.cursor is None:
                    break
                cursor, version, seal = view.cursor, view.cursor_version, view.seal
                continue
            result.entries += last - start + 1
            cursor, version = moved, version + 1
        result.backlog = replicator_backlog(cursor, seal)
        return result


def _within_bytes(entries: list[Entry]) -> list[Entry]:
    size, kept = 0, list[Entry]()
    for entry in entries:
        if kept and size + entry.size > MAX_SEND_BYTES:
            break
        kept.append(entry)
        size += entry.size
    return kept


def replication_by_remote(results: list[ReplicationResult]) -> dict[str, tuple[int, int, int]]:
    """Per remote cluster: messages sent, the backlog left and the largest delay (metrics)."""
    out: dict[str, tuple[int, int, int]] = {}
    for r in results:
        sent, backlog, delay = out.get(r.remote, (0, 0, 0))
        out[r.remote] = (sent + r.sent_messages, backlog + r.backlog, max(delay, r.delay_ms))
    return out
