"""The sealer's items (TP#<topic>): the seal state (SEAL) and the segment list (SEG#<last entry>),
committed, trimmed and listed; and a topic's seal and writer state read together."""

from __future__ import annotations

import array
from typing import Any

from magnetar.adapters.aws.dynamodb.base import DynamoBase, _int, _n, _s, _tp, pack_histograms, pack_segments
from magnetar.core.naming import TopicName
from magnetar.core.ports import SealState, SegmentCommit, SegmentMeta, WriterState

_SEG_WIDTH = 20


def _seg_sk(last_entry: int) -> str:
    return f"SEG#{last_entry:0{_SEG_WIDTH}d}"


class SealerItems(DynamoBase):
    """The SEAL and SEG# items of each topic partition."""

    def get_seal_states(self, topics: list[str]) -> dict[str, SealState]:
        items = self._batch_get([{"pk": _tp(t), "sk": _s("SEAL")} for t in topics])
        return {item["pk"]["S"][3:]: self._seal_from_item(item) for item in items}

    def commit_segments(self, commits: list[SegmentCommit]) -> list[bool]:
        # one unit per commit (the segment's put and the seal state's update): 50 in a transaction
        units = [self._commit_items(c.segment, c.expected_next_entry, c.new_state) for c in commits]
        return self._transact_units(units, [len(c.segment.offsets) * 8 + 1_000 for c in commits])

    def _commit_items(self, segment: SegmentMeta, expected_next_entry: int,
                      new_state: SealState) -> list[dict[str, Any]]:
        # The sealer sets only its own attributes of the seal item: a trim (maintenance) may
        # change first_entry, trimmed_* and trash meanwhile, and must not be overwritten.
        values: dict[str, Any] = {
            ":expected": _n(expected_next_entry),
            ":next": _n(new_state.next_entry),
            ":holes": {"L": [_n(h) for h in new_state.recent_holes]},
            ":entries": _n(new_state.sealed_entries),
            ":messages": _n(new_state.sealed_messages),
            ":bytes": _n(new_state.sealed_bytes),
            ":segments": _n(new_state.segment_count),
            ":rate_msgs": {"N": f"{new_state.rate_msgs:.6f}"},
            ":rate_bytes": {"N": f"{new_state.rate_bytes:.3f}"},
            ":rate_at": _n(new_state.rate_at),
            ":recent": {"B": pack_segments(new_state.recent_segments)},
            ":hist": {"B": pack_histograms(new_state)},
            ":hole_entries": _n(new_state.hole_entries),
        }
        update = (
            "SET next_entry = :next, recent_holes = :holes, sealed_entries = :entries,"
            " sealed_messages = :messages, sealed_bytes = :bytes, segment_count = :segments,"
            " rate_msgs = :rate_msgs, rate_bytes = :rate_bytes, rate_at = :rate_at, recent_segments = :recent,"
            " hist = :hist, hole_entries = :hole_entries"
        )
        if new_state.last_position is not None:
            update += ", last_shard = :shard, last_seq = :seq"
            values[":shard"] = _s(new_state.last_position.shard_id)
            values[":seq"] = _s(new_state.last_position.sequence)
        condition = "next_entry = :expected"
        if expected_next_entry == 0:  # (the item may exist already: a push connection announced itself)
            condition = "(attribute_not_exists(next_entry) OR next_entry = :expected)"
        # of the incarnation the state was read from: a topic deleted and created again starts
        # its seal state at its fence (`base`), and a commit computed from the old one fails
        condition += " AND fence_base = :base" if new_state.base else " AND attribute_not_exists(fence_base)"
        if new_state.base:
            values[":base"] = _n(new_state.base)
        if new_state.push_epoch == 0:  # the sealer skips the connections' lookup: none may have come
            condition += " AND attribute_not_exists(push_epoch)"
        segment_item = {
            "pk": _tp(segment.topic),
            "sk": _s(_seg_sk(segment.last_entry)),
            "ledger_id": _n(segment.ledger_id),
            "first_entry": _n(segment.first_entry),
            "last_entry": _n(segment.last_entry),
            "key": _s(segment.key),
            "offsets": {"B": array.array("Q", segment.offsets).tobytes()},
            "message_count": _n(segment.message_count),
            "created_at": _n(segment.created_at),
            "max_publish_time": _n(segment.max_publish_time),
        }
        return [
            {"Put": {"TableName": self.table, "Item": segment_item, "ConditionExpression": "attribute_not_exists(pk)"}},
            {
                "Update": {
                    "TableName": self.table,
                    "Key": {"pk": _tp(segment.topic), "sk": _s("SEAL")},
                    "UpdateExpression": update,
                    "ConditionExpression": condition,
                    "ExpressionAttributeValues": values,
                }
            },
        ]

    def announce_push_connection(self, topic: TopicName) -> None:
        self.ddb.update_item(TableName=self.table, Key={"pk": _tp(str(topic)), "sk": _s("SEAL")},
                             UpdateExpression="ADD push_epoch :one", ExpressionAttributeValues={":one": _n(1)})

    def trim_segments(self, topic: TopicName, segments: list[SegmentMeta], expected_first_entry: int) -> bool:
        if not segments:
            return True
        if len(segments) > 99:
            raise ValueError("a trim takes at most 99 segments (DynamoDB transactions hold 100 items)")
        deletes = [
            {
                "Delete": {
                    "TableName": self.table,
                    "Key": {"pk": _tp(topic), "sk": _s(_seg_sk(seg.last_entry))},
                    "ConditionExpression": "attribute_exists(pk)",
                }
            }
            for seg in segments
        ]
        condition = "first_entry = :expected"
        if expected_first_entry == 0:
            condition = "attribute_not_exists(first_entry) OR first_entry = :expected"
        seal_update = {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": _tp(topic), "sk": _s("SEAL")},
                "UpdateExpression": (
                    "SET first_entry = :first, trimmed_entries = if_not_exists(trimmed_entries, :zero) + :e,"
                    " trimmed_messages = if_not_exists(trimmed_messages, :zero) + :m,"
                    " trimmed_bytes = if_not_exists(trimmed_bytes, :zero) + :b ADD trash :keys"
                ),
                "ConditionExpression": f"attribute_exists(pk) AND ({condition})",
                "ExpressionAttributeValues": {
                    ":first": _n(segments[-1].last_entry + 1),
                    ":expected": _n(expected_first_entry),
                    ":zero": _n(0),
                    ":e": _n(sum(seg.last_entry - seg.first_entry + 1 for seg in segments)),
                    ":m": _n(sum(seg.message_count for seg in segments)),
                    ":b": _n(sum(seg.size for seg in segments)),
                    ":keys": {"SS": [seg.key for seg in segments]},
                },
            }
        }
        return self._if("transact_write_items", TransactItems=[*deletes, seal_update])

    def clear_trash(self, topic: TopicName, keys: list[str]) -> None:
        if keys:
            self.ddb.update_item(
                TableName=self.table,
                Key={"pk": _tp(topic), "sk": _s("SEAL")},
                UpdateExpression="DELETE trash :keys",
                ExpressionAttributeValues={":keys": {"SS": list(keys)}},
            )

    def list_segments(self, topic: TopicName, from_entry: int, limit: int) -> list[SegmentMeta]:
        page = self.ddb.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={":pk": _tp(topic), ":lo": _s(_seg_sk(max(from_entry, 0))), ":hi": _s("SEG#~")},
            Limit=limit,
            ConsistentRead=True,
        )
        out: list[SegmentMeta] = []
        for item in page["Items"]:
            offsets = array.array("Q")
            offsets.frombytes(item["offsets"]["B"])
            out.append(
                SegmentMeta(
                    str(topic),
                    _int(item, "ledger_id"),
                    _int(item, "first_entry"),
                    _int(item, "last_entry"),
                    item["key"]["S"],
                    tuple(offsets),
                    _int(item, "message_count"),
                    _int(item, "created_at"),
                    _int(item, "max_publish_time"),
                )
            )
        return out

    def get_topic_state(self, topic: TopicName) -> tuple[SealState, WriterState | None]:
        return self.get_topic_states([topic])[str(topic)]

    def get_topic_states(self, topics: list[TopicName],
                         consistent: bool = True) -> dict[str, tuple[SealState, WriterState | None]]:
        keys = [{"pk": _tp(topic), "sk": _s(sk)} for topic in dict.fromkeys(topics) for sk in ("SEAL", "WRITER")]
        found = {(item["pk"]["S"], item["sk"]["S"]): item for item in self._batch_get(keys, consistent=consistent)}
        return {str(topic): (self._seal_from_item(found.get((f"TP#{topic}", "SEAL"))),
                             self._writer_from_item(found.get((f"TP#{topic}", "WRITER"))))
                for topic in topics}
