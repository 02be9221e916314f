"""Replicated subscriptions (Pulsar's replicate_subscription_state), without markers in the topic.

A subscription's position crosses to the topic's other clusters as, per cluster of origin, the
highest origin entry id within its acknowledged prefix (`CursorState.origin_acked`). Three paths
carry it, none with a process of its own:

- the acknowledgement path (`SubscriptionSnapshots.prepare`/`publish`): a dispatch or
  acknowledgement write that moves a replicated subscription's acknowledged prefix, at most once
  per `SNAPSHOT_INTERVAL_MS`, scans what the prefix gained (entries the container's cache mostly
  holds: it just delivered them), writes the result with the cursor, then the subscription's
  snapshot for this cluster in the configuration store (a global table: every cluster reads it);
- the other cluster applies the snapshots when a consumer subscribes there (`catch_up`): its
  subscription moves past every entry they cover before the consumer's first receive;
- the maintenance run (`ReplicatedSubscriptions.share`) writes what the acknowledgement path left
  (the last acknowledgements within an interval, a snapshot a dying container did not write) and
  sends it to the other clusters, which move their subscription at once.

A subscription deleted here (unsubscribed, or its topic deleted) takes this cluster's snapshot with
it (`SubscriptionSnapshots.forget`, `core.deletion`): a subscription of the same name created later
in another cluster starts at its own initial position, not where the deleted one was. The other
clusters' subscriptions of that name, and their snapshots, stay (as in Pulsar: a subscription is
deleted in the cluster it is deleted in). A snapshot is written only after a cursor write, and a
deletion deletes the cursor with a condition on the version it read: the snapshot write of an
acknowledgement racing the deletion was sent before the deletion's snapshot delete (its cursor
write came before the deletion's read) or makes the deletion read and delete again; the
maintenance run, which writes a snapshot before its cursor write, deletes the snapshot it wrote
when that write finds the subscription gone, and sends nothing.

Never a skip: a snapshot only says what a cursor write made durable here, and a snapshot only
grows (its write is conditional on covering more). A moved consumer gets again at most what was
acknowledged in the last interval before its last acknowledgement here (and what a client had not
sent yet). Every step is safe to repeat or to die after: a cursor write lost to a race shares
nothing; a snapshot not written after its cursor write is written by the next share or the
maintenance run; applying a snapshot twice acknowledges nothing more.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from magnetar.core.cursor import CursorState
from magnetar.core.entry import Entry
from magnetar.core.errors import RetryableError, TopicNotFound
from magnetar.core.key_shared import key_hash
from magnetar.core.ledger.reader import EntryReader
from magnetar.core.naming import TopicName
from magnetar.core.policies import replication_clusters
from magnetar.core.ports import Clock, CursorWrite, MetadataStore, SealState, SubscriptionSnapshot
from magnetar.core.replication import MAX_SEND_ENTRIES, RemoteClusters, RemoteUnavailable, is_replicator

log = logging.getLogger(__name__)

SNAPSHOT_INTERVAL_MS = 2_000  # the acknowledgement path shares a subscription at most this often
MAX_SNAPSHOT_SCAN = 5_000  # entries one share of the acknowledgement path scans at most (the rest: the next)


def scan_prefix(reader: EntryReader, topic: TopicName, cursor: CursorState, seal: SealState, local_cluster: str,
                limit: int | None = None) -> tuple[dict[str, int], int]:
    """`origin_acked` once the acknowledged prefix gained since `origin_scanned` is scanned (up to
    `limit` entries of it), and where the scan stopped. This cluster's entries count by their ids
    (all before the mark-delete position are acknowledged), copies by their origin ids."""
    acked = dict(cursor.origin_acked)
    if cursor.mark_delete > 0:
        acked[local_cluster] = max(acked.get(local_cluster, -1), cursor.mark_delete - 1)
    position = max(cursor.origin_scanned, seal.first_entry)
    end = min(cursor.mark_delete, seal.next_entry)
    if limit is not None:
        end = min(end, position + limit)
    while position < end:
        entries = reader.read(topic, position, min(MAX_SEND_ENTRIES, end - position), seal, None)
        if not entries or entries[0].entry_id != position:
            break
        for entry in entries:
            if entry.origin is not None:
                acked[entry.origin.cluster] = max(acked.get(entry.origin.cluster, -1), entry.origin.entry_id)
        position = entries[-1].entry_id + 1
    return acked, max(cursor.origin_scanned, min(position, cursor.mark_delete))


def publish_snapshot(metadata: MetadataStore, topic: TopicName, subscription: str, cluster: str,
                     origin_acked: dict[str, int], now: int) -> None:
    """Write the subscription's snapshot for `cluster`; a failure is logged (the configuration
    store's home out of reach: the next share, or the maintenance run, writes it)."""
    try:
        metadata.put_subscription_snapshot(topic, subscription, cluster, SubscriptionSnapshot(dict(origin_acked), now))
    except Exception as exc:
        log.warning("snapshot of subscription %s of %s not written: %s", subscription, topic, exc)


class SubscriptionSnapshots:
    """The acknowledgement path's half: `prepare` before a cursor write, `publish` after it
    succeeded; `catch_up` where a consumer subscribes."""

    def __init__(self, metadata: MetadataStore, reader: EntryReader, clock: Clock, local_cluster: str,
                 policies: Callable[[TopicName], dict[str, Any]] | None = None) -> None:
        self.metadata = metadata
        self.reader = reader
        self.clock = clock
        self.local_cluster = local_cluster
        self.policies = policies  # the topic's effective policies (cached by the ledger writer)
        self.subscriptions = ReplicatedSubscriptions(metadata, reader, clock, local_cluster)

    def _replicated_topic(self, topic: TopicName) -> bool:
        if self.policies is None or not topic.is_persistent:
            return False
        return any(c != self.local_cluster for c in replication_clusters(self.policies(topic), self.local_cluster))

    def prepare(self, topic: TopicName, state: CursorState, seal: SealState, now: int) -> bool:
        """Before the cursor write of a step that may have moved a replicated subscription's
        acknowledged prefix: when it moved and the last share is `SNAPSHOT_INTERVAL_MS` old, scan
        what it gained into `state` (written with the cursor); True: `publish` once written."""
        if (not state.replicated or state.mark_delete <= state.origin_scanned
                or now - state.snapshot_at < SNAPSHOT_INTERVAL_MS or not self._replicated_topic(topic)):
            return False
        state.origin_acked, state.origin_scanned = scan_prefix(self.reader, topic, state, seal, self.local_cluster,
                                                               MAX_SNAPSHOT_SCAN)
        state.snapshot_at = now
        return True

    def publish(self, topic: TopicName, subscription: str, state: CursorState) -> None:
        """After the cursor write `prepare` readied: the snapshot, for the other clusters."""
        publish_snapshot(self.metadata, topic, subscription, self.local_cluster, state.origin_acked, state.snapshot_at)

    def forget(self, topic: TopicName, subscription: str) -> None:
        """The subscription is being deleted here: this cluster's snapshot of it goes (first: a
        retry of the deletion deletes it again). Raised, not logged: a deletion that cannot delete
        its snapshot (the configuration store's home out of reach) deletes nothing."""
        self.metadata.delete_subscription_snapshot(topic, subscription, self.local_cluster)

    def catch_up(self, topic: TopicName, subscription: str, subscription_type: str) -> None:
        """A consumer subscribes here to a replicated subscription: move it past what the other
        clusters' snapshots cover, before its first receive. A failure is logged, never raised:
        the consumer then gets again what was acknowledged elsewhere (never less)."""
        if not self._replicated_topic(topic):
            return
        try:
            merged: dict[str, int] = {}
            for cluster, snapshot in self.metadata.get_subscription_snapshots(topic, subscription).items():
                if cluster == self.local_cluster:
                    continue
                for origin, acked in snapshot.origin_acked.items():
                    merged[origin] = max(merged.get(origin, -1), acked)
            if merged:
                self.subscriptions.apply_remote_acks(topic, subscription, subscription_type, merged)
        except Exception as exc:
            log.warning("subscription %s of %s not caught up with the other clusters: %s", subscription, topic, exc)


class ReplicatedSubscriptions:
    """Replicated subscriptions (Pulsar's replicate_subscription_state), without markers in the
    topic: what a subscription acknowledged is said per cluster of origin, and each other cluster
    moves its subscription past the entries that covers.

    Here: the subscription's acknowledged prefix (entries before its mark-delete position) is
    scanned once, noting per origin cluster the highest origin id in it (`origin_acked`: this
    cluster's own entries by their ids here, the copies by their ids where they were first
    published). Copies arrive in their origin's order, so every entry of that origin up to that id
    that reached this cluster is acknowledged here. There: the subscription moves past its
    entries while each is covered (its origin id within `origin_acked`), and stops at the first
    that is not. Nothing is skipped there that was not acknowledged here; what was acknowledged
    here after the last exchange is delivered there again."""

    def __init__(self, metadata: MetadataStore, reader: EntryReader, clock: Clock, local_cluster: str,
                 remotes: RemoteClusters | None = None) -> None:
        self.metadata = metadata
        self.reader = reader
        self.clock = clock
        self.local_cluster = local_cluster
        self.remotes = remotes
        self._unsent: set[tuple[str, str, str]] = set()  # (topic, subscription, remote) a failed send left

    def share(self, topic: TopicName, remotes: list[str], cursors: dict[str, tuple[CursorState, int]]) -> int:
        """The maintenance run: the replicated subscriptions' acknowledged prefixes that changed since
        the last run, to `remotes` and to the snapshots every cluster reads; the sends made. It also
        catches up on what the acknowledgement path left (a snapshot not written: the container died
        after its cursor write; the last acknowledgements within the snapshot interval). Per
        subscription: the snapshot, the cursor write (`origin_sent`), then the sends; a run that
        dies before its cursor write is done again by the next, one that dies after it leaves the
        other clusters to the snapshot (applied when a consumer subscribes there)."""
        sent = 0
        seal: SealState | None = None
        for name, (cursor, version) in cursors.items():
            if not cursor.replicated or is_replicator(name):
                continue
            updated = CursorState.from_dict(cursor.to_dict())
            if cursor.mark_delete > cursor.origin_scanned:
                seal = seal or self.metadata.get_topic_state(topic)[0]
                updated.origin_acked, updated.origin_scanned = scan_prefix(self.reader, topic, cursor, seal,
                                                                           self.local_cluster)
            changed = updated.origin_acked != updated.origin_sent
            published = bool(changed and updated.origin_acked)
            if published:
                publish_snapshot(self.metadata, topic, name, self.local_cluster, updated.origin_acked,
                                 self.clock.now_ms())
            updated.origin_sent = dict(updated.origin_acked)
            if updated.to_dict() != cursor.to_dict() and not self.metadata.put_cursors(
                    [CursorWrite(topic, name, updated, version)])[0]:
                # lost to a consumer's write (again next time), or the subscription was deleted
                # since it was listed: then the snapshot just written goes, and nothing is sent
                if published:
                    self._forget_if_deleted(topic, name)
                continue
            for remote in remotes:
                key = (str(topic), name, remote)
                if not (changed or key in self._unsent) or not updated.origin_acked or self.remotes is None:
                    continue
                try:
                    self.remotes.acknowledge(remote, topic, name, cursor.subscription_type, updated.origin_acked)
                    self._unsent.discard(key)
                    sent += 1
                except RemoteUnavailable as exc:
                    self._unsent.add(key)
                    log.warning("subscription %s of %s not shared with %s: %s", name, topic, remote, exc)
        return sent

    def _forget_if_deleted(self, topic: TopicName, subscription: str) -> None:
        """`share` wrote the snapshot of a subscription whose cursor write then failed: when the
        subscription is gone (deleted meanwhile), so is the snapshot."""
        try:
            if self.metadata.get_subscription_view(topic, subscription).cursor is None:
                self.metadata.delete_subscription_snapshot(topic, subscription, self.local_cluster)
        except Exception as exc:
            log.warning("snapshot of deleted subscription %s of %s not deleted: %s", subscription, topic, exc)

    def apply_remote_acks(self, topic: TopicName, subscription: str, subscription_type: str,
                          origin_acked: dict[str, int], max_scan: int = 10_000) -> int:
        """Another cluster's replicated subscription acknowledged `origin_acked`: move this
        cluster's subscription (created if needed, replicated) past the entries that covers;
        its first entry not acknowledged."""
        def covered(entry: Entry) -> bool:
            if entry.hole:
                return True
            if entry.origin is None:
                return origin_acked.get(self.local_cluster, -1) >= entry.entry_id
            return origin_acked.get(entry.origin.cluster, -1) >= entry.origin.entry_id

        for _ in range(5):
            view = self.metadata.get_subscription_view(topic, subscription)
            seal, cursor, version = view.seal, view.cursor, view.cursor_version
            if cursor is not None and all(cursor.origin_acked.get(c, -1) >= i for c, i in origin_acked.items()):
                return cursor.mark_delete  # covered already (applied before, or acknowledged here): no scan
            if cursor is None:
                start = seal.first_entry
                cursor = CursorState(subscription_type, start, start, created_at=self.clock.now_ms())
            state = CursorState.from_dict(cursor.to_dict())
            state.replicated = True
            if state.read_position < seal.first_entry:
                state.expire_before(seal.first_entry)
            _acknowledge_covered(self.reader, topic, state, seal, covered, max_scan, self.clock.now_ms())
            # what came from there is known there: the next scan here starts past it
            state.origin_scanned = max(state.origin_scanned, state.mark_delete)
            for cluster, acked in origin_acked.items():  # known there: not sent back
                state.origin_acked[cluster] = max(state.origin_acked.get(cluster, -1), acked)
                state.origin_sent[cluster] = max(state.origin_sent.get(cluster, -1), acked)
            state.compact()
            if state.to_dict() == cursor.to_dict() and view.cursor is not None:
                return state.mark_delete
            if self.metadata.put_cursor(topic, subscription, state, version):
                return state.mark_delete
            if view.cursor is None and view.writer is None:  # a new cursor only beside a live topic
                raise TopicNotFound(f"Topic {topic} not found (deleted or being deleted)")
        raise RetryableError("Too much contention on the subscription; retry")


def _acknowledge_covered(reader: EntryReader, topic: TopicName, state: CursorState, seal: SealState,
                         covered: Callable[[Entry], bool], max_scan: int, now: int) -> None:
    """Acknowledge the entries after the mark-delete position that `covered` says were
    acknowledged elsewhere; the others past the read position join the cursor as waiting
    deliveries (as dispatch admits new entries), so that nothing is skipped."""
    key_shared = state.subscription_type == "Key_Shared"
    delays = state.subscription_type in ("Shared", "Key_Shared")
    position, scanned = state.mark_delete, 0
    while position < seal.next_entry and scanned < max_scan:
        entries = reader.read(topic, position, MAX_SEND_ENTRIES, seal, None)
        if not entries or entries[0].entry_id != position:
            break
        for entry in entries:
            e = entry.entry_id
            if e >= state.read_position:
                if not covered(entry):
                    not_before = entry.deliver_at if delays and entry.deliver_at > now else 0
                    state.add_new(e, e + 1, None, False, None, "", not_before,
                                  key_hash(entry.key) if key_shared else None)
                state.read_position = e + 1
            if covered(entry):
                state.acknowledge([e])
        position = entries[-1].entry_id + 1
        scanned += len(entries)
