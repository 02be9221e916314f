"""Offsets of the Spark source: per topic-partition entry ids, as JSON.

An offset is a map `{"persistent://tenant/ns/topic-partition-0": 42, ...}`: for each topic (or
partition of a partitioned topic), the **next** entry id to read. A range of a read goes from a
start offset (inclusive) to an end offset (exclusive), as Kafka's offsets do. Two sentinels, in
the options and in the checkpoint alike: `-2` = earliest (the first entry retention keeps, with
no data-loss error for what it already deleted), `-1` = latest (the end of the topic when the
read is planned).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from magnetar.core.errors import InvalidInput
from magnetar.core.naming import TopicName

EARLIEST = -2
LATEST = -1

Offsets = dict[str, int]


def canonical_topic(name: str) -> str:
    """The full name of a topic given as `persistent://t/ns/x`, `t/ns/x` or `x`."""
    try:
        return str(TopicName.parse(name.strip()))
    except InvalidInput as exc:
        raise ValueError(f"magnetar: {exc.reason}") from None


def parse_offsets(option: str, raw: str | None, default: str) -> str | Offsets:
    """`earliest`, `latest` or a JSON map `{topic: entryId}` (entry ids >= -2, see above)."""
    text = (raw or default).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        raise ValueError(f"magnetar: option {option!r} must be earliest, latest or a JSON map "
                         f"{{\"topic-partition\": entryId}}, got {text!r}") from None
    if not isinstance(parsed, Mapping) or not parsed:
        raise ValueError(f"magnetar: option {option!r}: a JSON map of topic (partition) to entry id, got {text!r}")
    out: Offsets = {}
    for topic, value in parsed.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < EARLIEST:
            raise ValueError(f"magnetar: option {option!r}: the position of {topic!r} must be an entry id "
                             f"(or -2 earliest, -1 latest), got {value!r}")
        out[canonical_topic(str(topic))] = value
    return out


def position(spec: str | Offsets, topic: str, default: int) -> int:
    """The position `spec` gives `topic` (a partition name; a map may name its partitioned topic)."""
    if spec == "earliest":
        return EARLIEST
    if spec == "latest":
        return LATEST
    assert isinstance(spec, dict)
    if topic in spec:
        return spec[topic]
    parent = str(TopicName.parse(topic).partitioned_topic)
    return spec.get(parent, default)


def dumps(offsets: Mapping[str, int]) -> str:
    return json.dumps(dict(sorted(offsets.items())), separators=(",", ":"))
