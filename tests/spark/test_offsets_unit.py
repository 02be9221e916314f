"""The connector's options, offsets, planning and rate cap, without Spark or a broker."""

from __future__ import annotations

import json

import pytest

from magnetar_spark.offsets import EARLIEST, dumps, parse_offsets, position
from magnetar_spark.options import SourceOptions, _pattern
from magnetar_spark.reading import plan_ranges
from magnetar_spark.stream import cap

URL = {"service.url": "http://broker.test"}


def test_offsets_parse_and_position() -> None:
    assert parse_offsets("startingOffsets", None, "earliest") == "earliest"
    assert parse_offsets("startingOffsets", " LATEST ", "earliest") == "latest"
    spec = parse_offsets("startingOffsets", json.dumps({"orders": 5, "t/ns/x-partition-1": -2}), "latest")
    assert spec == {"persistent://public/default/orders": 5, "persistent://t/ns/x-partition-1": -2}
    assert position(spec, "persistent://public/default/orders", -1) == 5
    assert position(spec, "persistent://t/ns/x-partition-1", -1) == EARLIEST
    assert position(spec, "persistent://t/ns/x-partition-0", -1) == -1  # not named: the default
    # a partitioned topic's name covers all of its partitions
    whole = parse_offsets("startingOffsets", '{"persistent://t/ns/x": 7}', "latest")
    assert position(whole, "persistent://t/ns/x-partition-3", -1) == 7
    assert dumps({"b": 1, "a": 2}) == '{"a":2,"b":1}'
    for bad in ("soon", "[1]", "{}", '{"t": -3}', '{"t": "1"}', '{"t": true}'):
        with pytest.raises(ValueError, match="startingOffsets"):
            parse_offsets("startingOffsets", bad, "latest")


def test_options() -> None:
    opts = SourceOptions({**URL, "topics": "a, b,a"})
    assert opts.topics == ["persistent://public/default/a", "persistent://public/default/b"]
    assert opts.starting == "earliest" and opts.ending == "latest" and opts.fail_on_data_loss
    assert SourceOptions({**URL, "topic": "a"}, streaming=True).starting == "latest"
    legacy = SourceOptions({**URL, "topic": "a", "startingEntryId": "3", "endingEntryId": "9"})
    assert legacy.starting == {"persistent://public/default/a": 3}
    assert legacy.ending == {"persistent://public/default/a": 10}  # inclusive there, exclusive here
    opts = SourceOptions({**URL, "topicsPattern": "t1/ns/orders-.*", "failOnDataLoss": "false",
                          "maxEntriesPerTrigger": "50"})
    assert opts.pattern is not None and opts.pattern_namespace == ("persistent", "t1", "ns")
    assert not opts.fail_on_data_loss and opts.max_entries_per_trigger == 50
    for bad, message in [
        ({**URL}, "exactly one of"),
        ({**URL, "topic": "a", "topics": "b"}, "exactly one of"),
        ({**URL, "topics": "a,b", "startingEntryId": "1"}, "one topic"),
        ({**URL, "topic": "a", "endingOffsets": "earliest"}, "cannot be earliest"),
        ({**URL, "topic": "a", "failOnDataLoss": "maybe"}, "true or false"),
        ({**URL, "topic": "a", "maxEntriesPerTrigger": "0"}, "maxEntriesPerTrigger"),
        ({**URL, "topicsPattern": "a/b"}, "tenant/namespace/regex"),
        ({**URL, "topicsPattern": "t/ns/(("}, "not a valid regex"),
    ]:
        with pytest.raises(ValueError, match=message):
            SourceOptions(bad)
    with pytest.raises(ValueError, match="endingOffsets"):
        SourceOptions({**URL, "topic": "a", "endingOffsets": "latest"}, streaming=True)


def test_pattern_is_anchored_to_its_namespace() -> None:
    import re

    regex, namespace = _pattern("persistent://t1/ns/orders-.*")
    assert namespace == ("persistent", "t1", "ns")
    assert re.fullmatch(regex, "persistent://t1/ns/orders-eu")
    assert not re.fullmatch(regex, "persistent://t1/nsx/orders-eu")
    assert _pattern("orders.*")[1] == ("persistent", "public", "default")


def test_plan_ranges() -> None:
    planned = plan_ranges([("a", 0, 60)], 4)
    assert [(p.start, p.end) for p in planned] == [(0, 15), (15, 30), (30, 45), (45, 60)]
    # several topic-partitions: each at least one task, larger ones more; empty ones none
    planned = plan_ranges([("a", 0, 90), ("b", 5, 15), ("c", 7, 7), ("d", EARLIEST, 40)], 4)
    assert [(p.topic, p.start, p.end) for p in planned] == [
        ("a", 0, 30), ("a", 30, 60), ("a", 60, 90), ("b", 5, 15), ("d", EARLIEST, 40)]
    assert [p.index for p in planned] == [0, 1, 2, 3, 4]


def test_rate_cap() -> None:
    start = {"a": 0, "b": 10}
    latest = {"a": 100, "b": 20}
    assert cap(start, latest, 1000) == latest
    capped = cap(start, latest, 22)
    assert sum(capped[t] - start[t] for t in capped) <= 22
    assert capped["a"] > 0 and capped["b"] > 10  # both move on
    assert all(start[t] <= capped[t] <= latest[t] for t in capped)
    assert cap({"a": 5}, {"a": 5, "n": 3}, 2)["n"] == 2  # a new partition (from earliest) is capped too
