"""The writer counter (TP#<topic>, WRITER): entry reservations with deduplication, the publish
rate's virtual clocks, producers' activity, exclusive-producer leases, ledger rolls and the
backlog-quota block."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from magnetar.adapters.aws.dynamodb.base import DynamoBase, _condition_failed, _int, _n, _s, _tp
from magnetar.adapters.aws.dynamodb.deletion import LIVE
from magnetar.core.errors import (
    BacklogQuotaExceeded,
    ProducerFenced,
    RetryableError,
    TooManyRequests,
    TopicNotFound,
)
from magnetar.core.naming import TopicName
from magnetar.core.ports import DedupRecord, ProducerClaim, ProducerShare, RateClaim, Reservation

_RATE_ATTRS = ("rate_tat_msgs", "rate_tat_bytes")  # publish rate: virtual clocks (ns) on the writer counter
_RATE_CACHE = 10_000


class WriterItems(DynamoBase):
    """The WRITER item of each topic partition."""

    def __init__(self, table: str, dynamodb: Any | None = None, config_table: str = "",
                 config_dynamodb: Any | None = None) -> None:
        super().__init__(table, dynamodb, config_table, config_dynamodb)
        # publish rate: the virtual clocks this container last saw per topic partition, to pick the
        # form of the reservation write (a hint: a wrong guess costs one more write, never a wrong answer)
        self._rate_tats: dict[str, tuple[int, int]] = {}

    _FENCE = "(attribute_not_exists(exclusive_producer) OR exclusive_producer = :p OR exclusive_until < :now)"

    def _reserve(self, topic: TopicName, claim: ProducerClaim, condition: str, extra: dict[str, Any]) -> Reservation:
        # The id, the topic's and the producer's counters (stats), the dedup record and the
        # publish rate's virtual clocks: one write.
        update = "SET next_entry = next_entry + :ids, msg_in = if_not_exists(msg_in, :zero) + :m," \
                 " bytes_in = if_not_exists(bytes_in, :zero) + :b"
        values: dict[str, Any] = {
            ":ids": _n(claim.entries), ":zero": _n(0), ":p": _s(claim.producer), ":now": _n(claim.now_ms),
            ":m": _n(claim.messages), ":b": _n(claim.size), **extra,
        }
        names: dict[str, str] = {}  # only names the expressions use (DynamoDB refuses others)
        # each producer's counters; several producers' batches: each one's, and each fenced
        for i, share in enumerate(claim.shares or (ProducerShare(claim.producer, claim.messages, claim.size),)):
            p = "#p"  # the request's own producer, fenced by `condition` already
            if share.producer == claim.producer:
                names[p] = claim.producer
            else:
                p = f"#p{i}"
                names[p] = share.producer
                values[f":p{i}"] = _s(share.producer)
                condition += f" AND {self._FENCE.replace(':p', f':p{i}')}"
            values[f":m{i}"], values[f":b{i}"] = _n(share.messages), _n(share.size)
            update += (f", pub_last.{p} = :now, pub_msgs.{p} = if_not_exists(pub_msgs.{p}, :zero) + :m{i},"
                       f" pub_bytes.{p} = if_not_exists(pub_bytes.{p}, :zero) + :b{i}")
        if claim.deduplicate:
            update += (", dedup_seq.#p = :seq, dedup_entry.#p = next_entry, dedup_ledger.#p = ledger_id,"
                       " dedup_at.#p = :now, #ids = :ids")
            values[":seq"] = _n(claim.sequence_id)
            names["#p"] = claim.producer
            names["#ids"] = _dedup_ids(claim.producer)
        if claim.rate is not None:
            rate_update, rate_condition = self._rate_parts(str(topic), claim.rate, values)
            update += rate_update
            condition += rate_condition
        old = self.ddb.update_item(
            TableName=self.table,
            Key={"pk": _tp(topic), "sk": _s("WRITER")},
            UpdateExpression=update,
            ConditionExpression=condition + " AND attribute_not_exists(backlog_blocked)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_OLD",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )["Attributes"]
        if claim.rate is not None:
            self._remember_rate(str(topic), claim.rate, old)
        return Reservation(
            _int(old, "ledger_id"), _int(old, "next_entry"), _int(old, "ledger_first_entry"), _int(old, "ledger_opened_at")
        )

    # --- the publish rate: a GCRA token bucket (policies.admit) on the writer counter ----------
    # Each limited dimension keeps a virtual clock `tat` (ns). DynamoDB has no max(), so the write
    # takes one of two forms, each with the condition under which it computes policies.admit:
    # "add" (tat in [now, now + burst]: tat += cost) and "reset" (tat < now or absent:
    # tat = now + cost). Above now + burst both fail: the publish is refused. The clocks only
    # grow, so a clock this container saw is never ahead of the stored one: a guess of "add" is
    # right or refused, and a wrong "reset" (another container moved the clock meanwhile) costs
    # one retry, which the failed write's old item tells exactly.
    def _rate_parts(self, topic: str, rate: RateClaim, values: dict[str, Any]) -> tuple[str, str]:
        seen = self._rate_tats.get(topic, (0, 0))
        update = condition = ""
        for i, (attr, cost) in enumerate(zip(_RATE_ATTRS, (rate.msg_cost_ns, rate.byte_cost_ns), strict=True)):
            if not cost:
                continue
            values[":rnow"] = _n(rate.now_ns)
            if seen[i] >= rate.now_ns:  # the clock runs ahead of now: add to it
                values[f":rc{i}"] = _n(cost)
                values[":rahead"] = _n(rate.now_ns + rate.burst_ns)
                update += f", {attr} = {attr} + :rc{i}"
                condition += f" AND {attr} BETWEEN :rnow AND :rahead"
            else:  # behind now (or never set): it restarts from now
                values[f":rnew{i}"] = _n(rate.now_ns + cost)
                update += f", {attr} = :rnew{i}"
                condition += f" AND (attribute_not_exists({attr}) OR {attr} < :rnow)"
        return update, condition

    def _remember_rate(self, topic: str, rate: RateClaim, old: dict[str, Any]) -> None:
        """The clocks after a write that succeeded (old clocks plus this publish's cost)."""
        tats = []
        for attr, cost in zip(_RATE_ATTRS, (rate.msg_cost_ns, rate.byte_cost_ns), strict=True):
            tat = _int(old, attr)
            tats.append(max(tat, rate.now_ns) + cost if cost else tat)
        self._seen_rate(topic, (tats[0], tats[1]))

    def _seen_rate(self, topic: str, tats: tuple[int, int]) -> None:
        if len(self._rate_tats) >= _RATE_CACHE:
            self._rate_tats.clear()
        self._rate_tats[topic] = tats

    def _rate_refusal(self, topic: TopicName, rate: RateClaim, item: dict[str, Any]) -> bool:
        """After a failed reservation: raise TooManyRequests if the rate refused it; True if only
        this container's guess of the write's form was wrong (the stored clocks are now known)."""
        stored = (_int(item, _RATE_ATTRS[0]), _int(item, _RATE_ATTRS[1]))
        for tat, cost in zip(stored, (rate.msg_cost_ns, rate.byte_cost_ns), strict=True):
            if cost and tat > rate.now_ns + rate.burst_ns:
                self._seen_rate(str(topic), stored)
                wait_ms = (tat - rate.now_ns - rate.burst_ns) // 1_000_000 + 1
                raise TooManyRequests(
                    f"Publish rate of {topic} exceeded ({rate.description}); retry in {wait_ms} ms") from None
        guessed = self._rate_tats.get(str(topic), (0, 0))
        self._seen_rate(str(topic), stored)
        return any(cost and (g >= rate.now_ns) != (t >= rate.now_ns)
                   for g, t, cost in zip(guessed, stored, (rate.msg_cost_ns, rate.byte_cost_ns), strict=True))

    @staticmethod
    def _dedup_record(item: dict[str, Any], producer: str) -> DedupRecord | None:
        seq = item.get("dedup_seq", {}).get("M", {}).get(producer)
        if seq is None:
            return None
        return DedupRecord(
            int(seq["N"]),
            int(item["dedup_ledger"]["M"][producer]["N"]),
            int(item["dedup_entry"]["M"][producer]["N"]),
            int(item["dedup_at"]["M"][producer]["N"]),
            int(item.get(_dedup_ids(producer), {}).get("N", 1)),  # absent: written before group appends
        )

    def reserve_entry(self, topic: TopicName, claim: ProducerClaim) -> Reservation | DedupRecord:
        condition = f"attribute_exists(pk) AND {LIVE} AND {self._FENCE}"
        extra: dict[str, Any] = {}
        if claim.deduplicate:  # a group is new when all of it is: its lowest sequence id is
            condition += " AND (attribute_not_exists(dedup_seq.#p) OR dedup_seq.#p < :low)"
            extra[":low"] = _n(claim.lowest_sequence_id)
        for _ in range(3):  # a second try only when the publish rate's form was guessed wrong
            try:
                return self._reserve(topic, claim, condition, extra)
            except ClientError as exc:
                if not _condition_failed(exc):
                    raise
                item: dict[str, Any] | None = exc.response.get("Item")  # type: ignore[assignment]
            if not item or "deleted_at" in item:  # none, or fenced by a deletion (`dynamodb.deletion`)
                raise TopicNotFound(f"Topic {topic} not found")
            if "backlog_blocked" in item:
                policy = item["backlog_blocked"]["S"]
                raise BacklogQuotaExceeded(f"Cannot publish on {topic}: backlog quota exceeded", policy)
            holder = item.get("exclusive_producer", {}).get("S")
            if holder and _int(item, "exclusive_until") >= claim.now_ms and any(p != holder for p in claim.producers):
                raise ProducerFenced(f"Topic {topic} has an exclusive producer: {holder}")
            record = self._dedup_record(item, claim.producer)
            if claim.deduplicate and record is not None and record.sequence_id >= claim.lowest_sequence_id:
                return record
            if claim.rate is not None and self._rate_refusal(topic, claim.rate, item):
                continue
            if record is None:
                raise RetryableError(f"Writer state of {topic} changed meanwhile; retry")
            return record
        raise RetryableError(f"Writer state of {topic} changed meanwhile; retry")

    def replace_reservation(self, topic: TopicName, claim: ProducerClaim, lost_entry: int) -> Reservation:
        condition = f"attribute_exists(pk) AND {LIVE} AND {self._FENCE} AND dedup_entry.#p = :lost"
        try:
            return self._reserve(topic, claim, condition, {":lost": _n(lost_entry)})
        except ClientError as exc:
            if _condition_failed(exc):
                item: dict[str, Any] = exc.response.get("Item") or {}  # type: ignore[assignment]
                if not item or "deleted_at" in item:
                    raise TopicNotFound(f"Topic {topic} not found") from None
                if "backlog_blocked" in item:
                    policy = item["backlog_blocked"]["S"]
                    raise BacklogQuotaExceeded(f"Cannot publish on {topic}: backlog quota exceeded", policy) from None
                raise RetryableError("The producer's last publish changed meanwhile; retry") from None
            raise

    def last_sequence_id(self, topic: TopicName, producer: str) -> int:
        item = self._get(f"TP#{topic}", "WRITER")
        record = self._dedup_record(item, producer) if item else None
        return record.sequence_id if record else -1

    def claim_exclusive(self, topic: TopicName, producer: str, now_ms: int, lease_ms: int) -> bool:
        return self._if(
            "update_item",
            TableName=self.table,
            Key={"pk": _tp(topic), "sk": _s("WRITER")},
            UpdateExpression="SET exclusive_producer = :p, exclusive_until = :until",
            ConditionExpression=f"attribute_exists(pk) AND {LIVE} AND {self._FENCE}",
            ExpressionAttributeValues={":p": _s(producer), ":now": _n(now_ms), ":until": _n(now_ms + lease_ms)},
        )

    def release_exclusive(self, topic: TopicName, producer: str) -> None:
        try:
            self.ddb.update_item(
                TableName=self.table,
                Key={"pk": _tp(topic), "sk": _s("WRITER")},
                UpdateExpression="REMOVE exclusive_producer, exclusive_until",
                ConditionExpression="exclusive_producer = :p",
                ExpressionAttributeValues={":p": _s(producer)},
            )
        except ClientError as exc:
            if not _condition_failed(exc):
                raise

    # --- producers, ledgers, the backlog quota -------------------------------------------------
    def set_backlog_blocked(self, topic: TopicName, policy: str) -> None:
        kwargs: dict[str, Any] = {"UpdateExpression": "REMOVE backlog_blocked"}
        if policy:
            kwargs = {"UpdateExpression": "SET backlog_blocked = :p", "ExpressionAttributeValues": {":p": _s(policy)}}
        self._if(
            "update_item",
            TableName=self.table,
            Key={"pk": _tp(topic), "sk": _s("WRITER")},
            ConditionExpression=f"attribute_exists(pk) AND {LIVE}",
            **kwargs,
        )

    def touch_producer(self, topic: TopicName, producer: str, now_ms: int) -> None:
        kwargs: dict[str, Any] = {  # 0: the producer closed, forget it
            "UpdateExpression": "REMOVE pub_since.#p, pub_last.#p, pub_msgs.#p, pub_bytes.#p"}
        if now_ms:
            kwargs = {"UpdateExpression": "SET pub_since.#p = if_not_exists(pub_since.#p, :now)",
                      "ExpressionAttributeValues": {":now": _n(now_ms)}}
        self._if(
            "update_item",
            TableName=self.table,
            Key={"pk": _tp(topic), "sk": _s("WRITER")},
            ConditionExpression=f"attribute_exists(pk) AND {LIVE} AND attribute_exists(pub_since)",
            ExpressionAttributeNames={"#p": producer},
            **kwargs,
        )

    def roll_ledger(self, topic: TopicName, expected_ledger: int, now_ms: int) -> bool:
        return self._if(
            "update_item",
            TableName=self.table,
            Key={"pk": _tp(topic), "sk": _s("WRITER")},
            UpdateExpression="SET ledger_id = ledger_id + :one, ledger_first_entry = next_entry, ledger_opened_at = :now",
            ConditionExpression=f"ledger_id = :expected AND {LIVE}",
            ExpressionAttributeValues={":one": _n(1), ":now": _n(now_ms), ":expected": _n(expected_ledger)},
        )


def _dedup_ids(producer: str) -> str:
    """The attribute holding how many ids a producer's last publish took (a group append takes
    several). Top-level, one per producer, so topics created before group appends existed need
    no map created first (a nested SET needs its map to exist)."""
    return f"dedup_ids#{producer}"
