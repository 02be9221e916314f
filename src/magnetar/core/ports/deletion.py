"""The port of deletion (`magnetar.core.deletion`): what deleting topics, namespaces and tenants
asks of the metadata store, one storage request (or one small fixed number) per method.

A topic partition's deletion is anchored on its writer counter, which stays behind as the
partition's *fence*: the next entry id and ledger id when the deletion began. From the fence on,
no id is reserved under the old incarnation and every read finds no topic; once the deletion is
finished (`done`), the name may be created again and continues from the fence (entry ids above
every id the old incarnation handed out, ledger ids above its ledgers), so no record of the old
incarnation still in the journal can ever be sealed into the new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from magnetar.core.naming import NamespaceName, TopicName


@dataclass(frozen=True)
class TopicFence:
    """A topic partition's deletion: the writer counter's `next_entry` and `ledger_id` when it
    began (every id of the old incarnation is below `next_entry`, every ledger at most
    `ledger_id`), when it began, and whether it finished."""

    next_entry: int
    ledger_id: int
    started_at: int
    done: bool = False


class DeletionStore(Protocol):
    """The metadata store's part in deletions."""

    def fence_topic(self, topic: TopicName, now_ms: int) -> TopicFence | None:
        """Begin (or find begun) the deletion of a topic partition in this cluster: its writer
        counter refuses every reservation and reads as absent from now on. One conditional write;
        a fence already there is returned as it is (a retried deletion keeps the first). None when
        the partition has no writer counter here."""
        ...

    def is_listed(self, topic: TopicName) -> bool:
        """Whether the topic's listing exists (configuration store: one read)."""
        ...

    def get_fence(self, topic: TopicName) -> TopicFence | None:
        """The partition's fence, None when it has none (live, or never created here)."""
        ...

    def fence_seal(self, topic: TopicName, fence: TopicFence) -> None:
        """Replace the seal state by an empty one that starts at the fence (`next_entry`,
        `first_entry` and `base` at `fence.next_entry`): the sealer skips every record of the old
        incarnation as already sealed, and its commits of the old incarnation fail their condition.
        Nothing is written when the seal state starts at or past the fence already."""
        ...

    def topic_item_keys(self, topic: TopicName) -> list[str]:
        """The partition's other items (segments, cursors, compacted-object index, WebSocket
        connections): their sort keys, the writer counter, seal state and compaction state left
        out (one Query per 1 MB of keys)."""
        ...

    def delete_topic_items(self, topic: TopicName, fence: TopicFence, keys: list[str]) -> bool:
        """Delete those items while the fence is unfinished (DynamoDB: 99 per TransactWriteItems,
        with a condition on the fence): False, nothing more deleted, when the deletion finished
        meanwhile (another run of it finished first, and the name may be in use again)."""
        ...

    def finish_fence(self, topic: TopicName, fence: TopicFence) -> None:
        """Mark the deletion finished: the name may be created again (continuing from the fence)."""
        ...

    def forget_topic(self, topic: TopicName, counted: int) -> bool:
        """Remove a topic's listing (configuration store: its policies go with it) and its name from
        its namespace's index of topics with policies; with `counted` > 0 the namespace's topic
        counter goes down by it, in the same transaction. False when it was not listed."""
        ...

    def forget_partitioned_topic(self, topic: TopicName, counted: int) -> bool:
        """Remove a partitioned topic's metadata (and its policies), as `forget_topic`."""
        ...

    def delete_schemas(self, schema_id: str) -> int:
        """Forget every version of a schema id (configuration store); how many there were."""
        ...

    def delete_namespace(self, name: NamespaceName) -> bool:
        """Forget a namespace (its policies and permissions); False when it did not exist."""
        ...

    def delete_tenant(self, name: str) -> bool:
        """Forget a tenant; False when it did not exist."""
        ...
