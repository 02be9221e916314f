"""How a producer's queued messages become entries and requests: a pending message, the runs of one
replication setting, key-based groups, and requests whose entries fit one journal record together."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from magnetar.client.message import MessageId
from magnetar.client.types import Result
from magnetar.core.entry import Message

SendCallback = Callable[[Result, MessageId | None], None]

# the entries of one request share one journal record (up to 1 MiB). A request of up to 384 KiB
# carries three full batches of 100 1-KB messages: a saturated producer's publishes (a
# reservation and a journal record each) number ~4 a second rather than ~5 at 256 KiB, about 2
# requests per 1,000 messages fewer (docs/benchmarks.md), while a record still needs only ~0.4 s
# of a shard's 1 MiB/s, so the partition producers sharing a shard (each one request in flight)
# take turns. At 512 KiB two records fill a 1 MiB segment: seals stop holding and the seal cadence
# turns irregular (measured: an e2e p99 past a second in one run of two).
MAX_REQUEST_BYTES = 384 * 1024
ENTRY_OVERHEAD_BYTES = 1024  # an entry's metadata beside its payload and key (topic, producer, ids)
MAX_BATCHES_PER_REQUEST = 1_000  # the broker's limit of entries in one publish


@dataclass
class Pending:
    """A message sent and not answered yet: its future, callback and what its request needs."""

    message: Message
    size: int
    future: Future[MessageId]
    callback: SendCallback | None
    sequence_id: int
    deliver_at: int = 0
    chunks: list[tuple[bytes, int, int]] = field(default_factory=list)  # (chunk, codec size, uncompressed)
    # the clusters the message is stored in (geo-replication): None, the topic's; (): this one only
    replicate_to: tuple[str, ...] | None = None


def travels_alone(batch: list[Pending]) -> bool:
    """A delayed or chunked message: its own request (its delivery time or chunks are its own)."""
    return bool(batch[0].deliver_at or batch[0].chunks)


def requests_of(entries: list[list[Pending]]) -> list[list[list[Pending]]]:
    """Consecutive entries cut into requests whose entries fit one journal record together."""
    out: list[list[list[Pending]]] = []
    size = 0
    for entry in entries:
        weight = sum(p.size + len(p.message.key or "") + len(p.message.ordering_key or "") + 32
                     + sum(len(k) + len(v) + 8 for k, v in p.message.properties.items()) for p in entry)
        weight += ENTRY_OVERHEAD_BYTES
        if not out or size + weight > MAX_REQUEST_BYTES or len(out[-1]) >= MAX_BATCHES_PER_REQUEST:
            out.append([])
            size = 0
        out[-1].append(entry)
        size += weight
    return out


def with_replication(batch: dict[str, Any], replicate_to: tuple[str, ...] | None) -> dict[str, Any]:
    """An encoded batch with its messages' replication clusters ([]: this cluster only), if set."""
    if replicate_to is not None:
        batch["replicationClusters"] = list(replicate_to)
    return batch


def same_replication(messages: list[Pending]) -> list[list[Pending]]:
    """Consecutive messages in runs of one replication setting (a batch never mixes them)."""
    runs: list[list[Pending]] = []
    for p in messages:
        if not runs or runs[-1][-1].replicate_to != p.replicate_to:
            runs.append([])
        runs[-1].append(p)
    return runs


def by_key(batch: list[Pending]) -> list[list[Pending]]:
    """Key-based batching: one entry per key, in the order of their highest sequence ids (so that
    deduplication, which compares highest sequence ids, sees them grow)."""
    groups: dict[str | None, list[Pending]] = {}
    for p in batch:
        groups.setdefault(p.message.ordering_key or p.message.key, []).append(p)
    return sorted(groups.values(), key=lambda g: g[-1].sequence_id)
