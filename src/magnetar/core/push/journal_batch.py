"""The journal consumer's pushes: after sealing a batch, its new entries go to the connected
consumers and readers of its topics, served from the batch held in memory.

`plan` runs before the seal (the batch's seal states, read once and handed to the sealer, and the
entries the batch settles); `dispatch` after it: the topics' connections, looked up now (all of
them in one lookup, `ConnectionRegistry.of_topics`), then every subscription's view in one read
and the pushes (`Dispatcher`'s steps) side by side.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from magnetar.core.broker import Broker
from magnetar.core.entry import decode_entry, record_headers
from magnetar.core.errors import InvalidInput
from magnetar.core.ports import JournalRecord, SealState
from magnetar.core.ports.push import Connection
from magnetar.core.push.dispatch import Dispatcher, PushReport

log = logging.getLogger(__name__)


@dataclass
class JournalPlan:
    """What the journal consumer pushes after sealing a batch: the entries this batch settles, by
    topic (their bytes, decoded only for topics with connections), and the seal states read before
    sealing (handed to the sealer, which needs the same read). The connections are looked up after
    the seal: one that attached meanwhile is found, and everything it missed in its own first read
    is then sealed, so nothing falls between the two."""

    states: dict[str, SealState] | None = None  # None: not read (the sealer reads them itself)
    settled: dict[str, list[tuple[int, bytes]]] = field(default_factory=dict)  # topic -> (entry id, bytes)
    connections: dict[str, list[Connection]] = field(default_factory=dict)  # filled after the seal


class JournalBatchPush:
    """Pushes what a journal batch settles (one per container, beside its `Dispatcher`)."""

    def __init__(self, broker: Broker, dispatcher: Dispatcher) -> None:
        self.broker = broker
        self.dispatcher = dispatcher

    def plan(self, records: list[JournalRecord]) -> JournalPlan:
        """Before sealing: the seal states of the batch's topics (one read for all, which the
        sealer then uses) and, per topic, the entries this batch settles: for an id, the first
        record at or past the seal state's next entry (the one the sealer keeps)."""
        by_topic: dict[str, list[tuple[int, bytes]]] = {}  # topic -> (entry id, its bytes)
        for record in records:
            try:
                entries = record_headers(record.data)  # an envelope (a group append) holds several
            except InvalidInput:
                continue
            for data, header in entries:
                by_topic.setdefault(header.topic, []).append((header.entry_id, data))
        if not by_topic:
            return JournalPlan()
        try:  # pushing never holds sealing up: without a plan, the next dispatch catches up
            states = self.broker.sealer.seal_states({t: min(i for i, _ in found) for t, found in by_topic.items()})
        except Exception:
            log.exception("no push plan for this journal batch")
            return JournalPlan()
        plan = JournalPlan(states=states)
        for topic, found in by_topic.items():
            start = states[topic].next_entry if topic in states else 0
            seen: set[int] = set()
            for entry_id, data in found:
                if entry_id >= start and entry_id not in seen:
                    seen.add(entry_id)
                    plan.settled.setdefault(topic, []).append((entry_id, data))
        return plan

    def dispatch(self, plan: JournalPlan) -> PushReport:
        """After sealing: the batch's topics' connections (looked up now, so that a connection
        made while the batch was sealed is served; all topics in one lookup, `of_topics`), pushed
        to, the new entries served from memory. The views of every subscription pushed to are
        read together (one BatchGetItem per 33), not one per subscription: a batch of many
        low-rate topics costs a few reads, not one per topic."""
        report = PushReport()
        found: dict[str, tuple[list[Connection], int]] = {}  # topic -> (its connections, new messages)
        # only topics a push connection ever announced itself on (their seal state's push_epoch; a
        # commit that expected none fails if one came meanwhile, `MetadataStore.commit_segments`)
        topics = [t for t in plan.settled if plan.states is None or (t in plan.states and plan.states[t].push_epoch)]
        try:
            connections = self.dispatcher.registry.of_topics(topics) if topics else {}
        except Exception:  # never fails the journal batch: the next dispatch catches up
            log.exception("no connections for this journal batch")
            connections = {}
        for topic, all_conns in connections.items():
            conns = [c for c in all_conns if c.role in ("consumer", "reader")]
            if not conns:
                continue
            messages = 0
            for _, data in plan.settled[topic]:
                try:
                    entry = decode_entry(data)
                except InvalidInput:
                    continue
                self.broker.cache.put(entry)
                messages += entry.num_messages
            found[topic] = (conns, messages)
        views = self.dispatcher.views_of({topic: conns for topic, (conns, _) in found.items()})
        pushes: list[Callable[[], PushReport]] = []
        for topic in plan.settled:  # in the batch's order
            if topic in found:
                conns, messages = found[topic]
                plan.connections[topic] = conns
                report.topics += 1
                report.connections += len(conns)
                pushes.extend(self.dispatcher.topic_tasks(topic, conns, messages, views.get(topic)))
        try:
            for result in self.dispatcher.run(pushes):
                report.add(result)
        except Exception:  # never fails the journal batch: the next dispatch catches up
            log.exception("push after a journal batch failed")
        return report
