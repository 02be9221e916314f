"""SUBSCRIBE's `read_compacted` for the binary protocol's consumers and readers.

What the SDK does for its consumers and readers (client/compacted.py, client/reader.py), done by
the proxy for the official clients (their TableView reads this way):

- a **consumer** (durable subscription) learns the topic partition's compacted view as it is at
  SUBSCRIBE (the kept entry ids and their masks, from the view's object index) and filters what its
  subscription delivers below that horizon: a message the view does not hold is acknowledged for
  the client, never sent; a batch entry partly in the view is sent with those messages in its ack
  set. The cursor stays the only state (a reconnect filters the same way); past the horizon
  everything is delivered.
- a **reader** (non-durable) reads the view below the horizon (the view's entries with their
  masks), then the topic itself from the horizon on, as the compacted read route does.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from magnetar.client.compacted import CompactedFilter
from magnetar.core.acks import Acks
from magnetar.core.claims import DeliveredEntry
from magnetar.core.naming import TopicName

if TYPE_CHECKING:
    from magnetar.core.broker import Broker
    from magnetar.core.compaction.view import CompactedView

PAGE = 10_000  # kept ids per index read


@cache
def _view() -> CompactedView:
    from magnetar.adapters.aws.compaction import build_compactor

    return build_compactor().view


def load(topic: TopicName) -> CompactedFilter:
    """The topic partition's view as it is now: its horizon and the entries it keeps (with the
    batch indexes it masks), from the object index alone."""
    view = CompactedFilter()
    position = 0
    while True:
        kept, position, state = _view().kept(topic, position, PAGE)
        view.horizon = state.horizon
        view.kept.update((entry, frozenset(mask)) for entry, mask in kept)
        if position >= state.horizon:
            return view


def through_view(view: CompactedFilter, delivered: DeliveredEntry, acks: list[tuple[int, int, tuple[int, ...]]]
                 ) -> DeliveredEntry | None:
    """What of a delivered entry the view holds: None when nothing (the entry goes to `acks` whole,
    as (entry, 0, ())), else the entry with the view's masked messages among its acknowledged
    ones (those not acknowledged yet go to `acks`)."""
    entry = delivered.entry
    masked = view.masked(entry.entry_id, entry.num_messages)
    if not masked:
        return delivered
    already = set(delivered.acked_indexes)
    if not entry.batched or entry.chunk is not None or masked | already >= set(range(entry.num_messages)):
        acks.append((entry.entry_id, 0, ()))
        return None
    acks.append((entry.entry_id, entry.num_messages, tuple(sorted(masked - already))))
    return DeliveredEntry(entry, delivered.redelivery_count, sorted(masked | already))


def view_acks(acks: list[tuple[int, int, tuple[int, ...]]], consumer: str) -> Acks:
    """`through_view`'s acknowledgements as one core acknowledgement (one cursor write)."""
    return Acks(tuple(sorted({e for e, size, _ in acks if size == 0})),
                tuple((e, size, ix) for e, size, ix in acks if size > 0), consumer=consumer)


def read(broker: Broker, topic: TopicName, position: int, limit: int) -> tuple[list[DeliveredEntry], int]:
    """A compacted reader's next entries from `position`, and the position after them."""
    page, next_position, state = _view().read(topic, position, limit)
    if position < state.horizon:
        return [DeliveredEntry(item.entry, 0, list(item.mask)) for item in page], next_position
    entries = broker.read_entries(topic, max(position, state.horizon), limit)
    after = entries[-1].entry_id + 1 if entries else max(position, state.horizon)
    return [DeliveredEntry(e, 0) for e in entries if not e.hole], after
