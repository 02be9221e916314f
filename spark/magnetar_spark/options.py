"""The source's options (Apache Pulsar's Spark connector's names) and the topics they select.

    service.url          the HTTP API (required)
    topic                one topic                                   } exactly one
    topics               comma-separated topics                      } of the
    topicsPattern        a regex over the full names of one namespace } three
    startingOffsets      earliest | latest | {"topic-or-partition": entryId, ...}
    endingOffsets        latest | {"topic-or-partition": entryId, ...}   (batch reads only)
    failOnDataLoss       true (default): a range retention deleted fails the query, naming it;
                         false: it is skipped with a warning
    maxEntriesPerTrigger at most this many entries per micro-batch (all partitions together)
    directReads          true (default): executors fetch sealed segments from S3 with the URLs of
                         the broker's read plan (magnetar_spark.direct); false: every entry
                         through the broker's read endpoint
    partitions           about how many Spark input partitions a read plans (default 4)

A partitioned topic is read whole: each of its partitions is a topic-partition of the offsets.
The options of magnetar_spark.settings (`service.url`, `pageSize`, timeouts, retries,
authentication) apply, and the older `startingEntryId` / `endingEntryId` (one topic, both
inclusive) still work.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from magnetar.core.naming import TopicName
from magnetar_spark.broker import BrokerClient
from magnetar_spark.errors import MagnetarSourceError
from magnetar_spark.offsets import EARLIEST, LATEST, Offsets, canonical_topic, parse_offsets, position
from magnetar_spark.settings import TopicSettings, bool_option, int_option, text_option

_PLACEHOLDER_TOPIC = "persistent://public/default/magnetar-spark-placeholder"
DEFAULT_PARTITIONS = 4


class SourceOptions:
    """The validated options of a read (batch or streaming) or a write; pickles to the executors."""

    def __init__(self, options: Mapping[str, str], streaming: bool = False, sink: bool = False) -> None:
        chosen = {name: text_option(options, name) for name in ("topic", "topics", "topicsPattern")}
        given = [name for name, value in chosen.items() if value is not None]
        if len(given) > 1 or (not given and not sink):
            raise ValueError("magnetar: give exactly one of the options 'topic', 'topics' or 'topicsPattern' "
                             f"(got {', '.join(given) or 'none'})")
        self.topics: list[str] | None = None
        self.pattern: str | None = None
        self.pattern_namespace: tuple[str, str, str] | None = None
        if chosen["topic"] is not None:
            self.topics = [canonical_topic(chosen["topic"])]
        elif chosen["topics"] is not None:
            self.topics = list(dict.fromkeys(canonical_topic(t) for t in chosen["topics"].split(",") if t.strip()))
            if not self.topics:
                raise ValueError("magnetar: option 'topics' names no topic")
        elif chosen["topicsPattern"] is not None:
            self.pattern, self.pattern_namespace = _pattern(chosen["topicsPattern"])
        first = self.topics[0] if self.topics else _PLACEHOLDER_TOPIC
        self.base = TopicSettings({**{str(k): str(v) for k, v in options.items()}, "topic": first})
        self.streaming = streaming
        legacy_start = int_option(options, "startingEntryId", -1, 0) if text_option(options, "startingEntryId") else None
        legacy_end = int_option(options, "endingEntryId", -1, -1) if text_option(options, "endingEntryId") else None
        if (legacy_start is not None or legacy_end is not None) and (self.topics is None or len(self.topics) != 1):
            raise ValueError("magnetar: startingEntryId/endingEntryId apply to one topic; "
                             "use startingOffsets/endingOffsets with several")
        self.starting = parse_offsets("startingOffsets", text_option(options, "startingOffsets"),
                                      "latest" if streaming else "earliest")
        if legacy_start is not None:
            self.starting = {first: legacy_start}
        self.ending = parse_offsets("endingOffsets", text_option(options, "endingOffsets"), "latest")
        if self.ending == "earliest":
            raise ValueError("magnetar: option 'endingOffsets' cannot be earliest")
        if streaming and text_option(options, "endingOffsets") is not None:
            raise ValueError("magnetar: option 'endingOffsets' is for batch reads; a stream reads on")
        if legacy_end is not None and legacy_end >= 0:
            self.ending = {first: legacy_end + 1}  # inclusive there, exclusive here
        self.fail_on_data_loss = bool_option(options, "failOnDataLoss", True)
        # sealed segments straight from S3 when the broker's plan offers URLs (magnetar_spark.direct)
        self.direct_reads = bool_option(options, "directReads", True)
        per_trigger = text_option(options, "maxEntriesPerTrigger")
        self.max_entries_per_trigger = int_option(options, "maxEntriesPerTrigger", 0, 1) if per_trigger else None
        self.partitions = int_option(options, "partitions", DEFAULT_PARTITIONS, 1)
        self.batch_size = 100  # the sink's messages per entry (its option batchSize)

    def settings_for(self, topic: str) -> TopicSettings:
        """The source's settings pointed at one topic (partition)."""
        settings = copy.copy(self.base)
        settings.topic = TopicName.parse(topic)
        return settings

    def client(self, topic: str | None = None, transport: Any = None) -> BrokerClient:
        return BrokerClient(self.settings_for(topic or (self.topics[0] if self.topics else _PLACEHOLDER_TOPIC)),
                           transport)

    # --- which topic-partitions ------------------------------------------------------------------
    def resolve(self, transport: Any = None) -> list[str]:
        """Every topic-partition selected now: partitioned topics expanded, the pattern matched."""
        where = None
        if self.pattern_namespace is not None:  # errors of the namespace calls name the namespace
            where = "{}://{}/{}/topicsPattern".format(*self.pattern_namespace)
        with self.client(where, transport) as http:
            if self.topics is not None:
                names = self.topics
            else:
                assert self.pattern is not None and self.pattern_namespace is not None
                regex = re.compile(self.pattern)
                listed = http.namespace_topics(*self.pattern_namespace)
                names = sorted({str(TopicName.parse(t).partitioned_topic) for t in listed})
                names = [n for n in names if regex.fullmatch(n)]
            out: list[str] = []
            for name in names:
                count = 0 if TopicName.parse(name).partition_index >= 0 else http.partition_count(name)
                out.extend([str(TopicName.parse(name).partition(i)) for i in range(count)] if count else [name])
            return out

    def ends(self, topics: list[str], transport: Any = None, missing_ok: bool = False) -> Offsets:
        """Each topic-partition's end now: its last entry id + 1 (the `lastMessageId` snapshot)."""
        out: Offsets = {}
        for topic in topics:
            with self.client(topic, transport) as http:
                try:
                    out[topic] = http.last_entry_id() + 1
                except MagnetarSourceError as exc:
                    if not (missing_ok and exc.status == 404):
                        raise
                    out[topic] = 0  # a partition nobody wrote to yet
        return out

    def start_of(self, topic: str, end: int, transport: Any = None) -> int:
        """Where a read of `topic` starts, as an entry id (`end` = its end now). Earliest is the
        first entry retention keeps now, so that a trim after this is seen as data loss."""
        start = position(self.starting, topic, EARLIEST if not self.streaming else LATEST)
        if start == LATEST:
            return end
        if start == EARLIEST:
            with self.client(topic, transport) as http:
                first = http.page(end, 1).first_entry  # past the end: reads nothing, says what is kept
            return min(end, first or 0)
        return start

    def end_of(self, topic: str, end: int) -> int:
        """Where a batch read of `topic` stops (exclusive), at most its end now."""
        stop = position(self.ending, topic, LATEST)
        return end if stop in (LATEST, EARLIEST) else min(stop, end)


def _pattern(raw: str) -> tuple[str, tuple[str, str, str]]:
    """A topicsPattern as (the regex over full names, its namespace (domain, tenant, ns))."""
    text = raw.strip()
    domain = "persistent"
    if "://" in text:
        domain, text = text.split("://", 1)
    parts = text.split("/", 2)
    if len(parts) == 1:
        tenant, namespace, local = "public", "default", parts[0]
    elif len(parts) == 3:
        tenant, namespace, local = parts
    else:
        raise ValueError(f"magnetar: option 'topicsPattern' must be [domain://]tenant/namespace/regex, got {raw!r}")
    if domain not in ("persistent", "non-persistent") or not tenant or not namespace or not local:
        raise ValueError(f"magnetar: option 'topicsPattern' must be [domain://]tenant/namespace/regex, got {raw!r}")
    regex = f"{re.escape(f'{domain}://{tenant}/{namespace}/')}{local}"
    try:
        re.compile(regex)
    except re.error as exc:
        raise ValueError(f"magnetar: option 'topicsPattern' is not a valid regex: {exc}") from None
    return regex, (domain, tenant, namespace)

