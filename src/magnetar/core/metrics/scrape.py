"""Reading what a scrape reports: every topic partition of the asked namespaces (or of every
namespace), in batches, then each one's brief topic stats (`TopicStatsService.brief_stats`).

The requests of a scrape of N topic partitions in namespaces S (none asked: every namespace of
every tenant, T tenants), with DynamoDB on AWS:

- the namespaces: none when they are asked for (a namespace without topics: 1 GetItem, to tell
  whether it exists); else 1 Query for the tenants and 1 per tenant;
- the topics: 1 Query per namespace (per 1 MB of names: ~10,000 topics);
- the seal and writer states: 1 BatchGetItem per 50 topic partitions;
- the cursors: 1 Query per topic partition with a writer item (a partition never used and a
  non-persistent topic have none, and no cursor is read for them, as in topic stats): the
  subscriptions' names are not indexed, and a BatchGetItem of them would cost the same read units
  (DynamoDB bills reads per item).

Every read is eventually consistent (half the read units of a strongly consistent one; a scrape
may lag the store by the replication delay, typically under a second). Nothing grows with
messages, entries or segments: a 1,000-topic namespace costs 1 + 20 + 1,000 requests.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from magnetar.core.cursor import CursorState
from magnetar.core.errors import NotFound
from magnetar.core.metrics.families import NamespaceFigures, TopicFigures
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.ports import MetadataStore
from magnetar.core.stats import TopicStatsService

MAX_PARALLEL_READS = 16  # cursor queries (and namespace listings) in flight at once
A = TypeVar("A")
R = TypeVar("R")


class MetricsReader:
    def __init__(self, metadata: MetadataStore, stats: TopicStatsService) -> None:
        self.metadata = metadata
        self.stats = stats

    def read(self, namespaces: list[NamespaceName] | None = None) -> list[NamespaceFigures]:
        """The figures of every topic partition of `namespaces` (None: of every namespace);
        NotFound for an asked namespace that does not exist."""
        asked = namespaces is not None
        if namespaces is None:
            namespaces = [NamespaceName(tenant, ns) for tenant in sorted(self.metadata.list_tenants())
                          for ns in sorted(self.metadata.list_namespaces(tenant))]
        listed = _each(namespaces, self.metadata.list_topics)
        for namespace, topics in zip(namespaces, listed, strict=True):
            if asked and not topics and self.metadata.get_namespace(namespace) is None:
                raise NotFound(f"Namespace {namespace} does not exist")
        names = {str(ns): [TopicName.parse(t) for t in sorted(set(topics))]
                 for ns, topics in zip(namespaces, listed, strict=True)}
        every = [topic for topics in names.values() for topic in topics]
        states = self.metadata.get_topic_states(every, consistent=False) if every else {}
        used = [topic for topic in every if states[str(topic)][1] is not None]
        cursors: dict[str, dict[str, tuple[CursorState, int]]] = dict(zip(
            (str(t) for t in used), _each(used, lambda t: self.metadata.list_cursors(t, consistent=False)),
            strict=True))
        out: list[NamespaceFigures] = []
        for namespace in namespaces:
            figures = []
            for topic in names[str(namespace)]:
                seal, writer = states[str(topic)]
                stats = self.stats.brief_stats(topic, seal, writer, cursors.get(str(topic), {}))
                figures.append(TopicFigures(topic, stats, seal))
            out.append(NamespaceFigures(namespace, figures))
        return out


def _each(items: list[A], fn: Callable[[A], R]) -> list[R]:
    """`fn` of every item, side by side, in order; each call runs in a copy of the caller's
    context (so that what the caller counts per request sees these requests too)."""
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_READS, len(items))) as pool:
        futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in items]
        return [f.result() for f in futures]
