"""A consumer's compacted read (`subscribe(..., is_read_compacted=True)`), in the SDK.

At subscribe the consumer learns the topic partition's compacted view as it is then (`load`:
the ids of the entries the view keeps, with the batch indexes it masks, from the view's object
index through the compacted read route's "ids" format: no message is read twice). Its subscription then reads the topic as any other,
and each entry below that horizon is filtered through the view: a message the view does not hold
(superseded, deleted by a null value, without a key, a chunk) is acknowledged at once and never
handed to the application; the rest is delivered, acknowledged by the application, redelivered
on a nack or an ack timeout, as usual. Past the horizon everything is delivered. So the cursor
stays the only state: a crash or a restart filters the same way (at-least-once, as any consumer).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from magnetar.client.transport import Transport, topic_path
from magnetar.core.naming import TopicName

PAGE = 1000  # the route's maxEntries limit


@dataclass
class CompactedFilter:
    horizon: int = 0
    kept: dict[int, frozenset[int]] = field(default_factory=dict)  # entry id -> masked batch indexes

    @classmethod
    def load(cls, transport: Transport, topic: TopicName) -> CompactedFilter:
        path = f"/magnetar/v1/reader/{topic_path(topic)}/compacted"
        view = cls()
        position = 0
        while True:
            page = transport.call("POST", path, {"startEntryId": position, "maxEntries": PAGE, "format": "ids"})
            view.horizon = int(page["horizon"])
            if position >= view.horizon:
                return view
            for item in page.get("ids") or ():
                view.kept[int(item["entryId"])] = frozenset(item.get("ackedIndexes") or ())
            position = max(int(page["nextEntryId"]), position + 1)

    def masked(self, entry_id: int, num_messages: int) -> frozenset[int] | None:
        """The batch indexes of an entry the view does not hold (every index: none of it), None
        past the horizon (the whole entry is delivered)."""
        if entry_id >= self.horizon:
            return None
        if entry_id not in self.kept:
            return frozenset(range(max(num_messages, 1)))
        return self.kept[entry_id]
