"""The base of the DynamoDB MetadataStore: the client and table, the item codecs, the
conditional write, single-item reads, the consistent BatchGetItem and the batch delete with their
backoff on unprocessed keys, key queries, and the decoders of the seal and writer items (read by
several mixins).
The table's layout is described in the package's docstring.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import msgpack
from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

from magnetar.adapters.aws.clients import UNPROCESSED_ATTEMPTS, client, unprocessed_backoff
from magnetar.core.errors import ConfigurationUnavailable, RetryableError
from magnetar.core.ledger.common import segment_key
from magnetar.core.naming import TopicName
from magnetar.core.ports import JournalPosition, ProducerActivity, SealState, SegmentMeta, WriterState

TRANSACTION_ITEMS = 100  # DynamoDB's limit per TransactWriteItems
TRANSACTION_BYTES = 3_500_000  # under its 4 MB, with room for the keys and conditions
# how long the configuration store's client leaves an unreachable home replica alone (s)
HOME_PAUSE_S = 3.0


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _int(item: dict[str, Any], name: str, default: int = 0) -> int:
    return int(item[name]["N"]) if name in item else default


def _tp(topic: TopicName | str) -> dict[str, str]:
    return _s(f"TP#{topic}")


def _condition_failed(exc: ClientError) -> bool:
    code = exc.response.get("Error", {}).get("Code", "")
    if code == "ConditionalCheckFailedException":
        return True
    if code == "TransactionCanceledException":
        reasons = exc.response.get("CancellationReasons", [])
        return any(r.get("Code") == "ConditionalCheckFailed" for r in reasons) or not reasons
    return False


class DynamoBase:
    """The table and client every mixin of DynamoMetadataStore works on, and their shared helpers."""

    def __init__(self, table: str, dynamodb: Any | None = None, config_table: str = "",
                 config_dynamodb: Any | None = None) -> None:
        self.table = table
        self.ddb = dynamodb or client("dynamodb")
        # the configuration store (tenants, clusters, namespaces, topic listings, schemas): the
        # instance's global table, written and read at its home replica; else this table
        self.config_table = config_table or table
        self.config_ddb = config_dynamodb or self.ddb

    def _db(self, config: bool) -> tuple[str, Any]:
        return (self.config_table, self.config_ddb) if config else (self.table, self.ddb)

    # --- small helpers -------------------------------------------------------------------
    def _if(self, operation: str, config: bool = False, **kwargs: Any) -> bool:
        """Run a conditional write; False (and nothing written) when its condition does not hold."""
        try:
            getattr(self._db(config)[1], operation)(**kwargs)
            return True
        except ClientError as exc:
            if _condition_failed(exc):
                return False
            raise

    def _transact(self, items: list[dict[str, Any]], config: bool = False) -> dict[int, str] | None:
        """One TransactWriteItems; None when it was applied, else the items that cancelled it, by
        position, with their reason ("ConditionalCheckFailed", "TransactionConflict",
        "ThrottlingError", …): nothing was written."""
        try:
            self._db(config)[1].transact_write_items(TransactItems=items)
            return None
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or []
            failed = {n: str(r.get("Code")) for n, r in enumerate(reasons) if r.get("Code") not in (None, "None")}
            return failed or dict.fromkeys(range(len(items)), "Unknown")

    def _transact_units(self, units: list[list[dict[str, Any]]], sizes: list[int],
                        alone: Callable[[int], bool] | None = None) -> list[bool]:
        """Independent conditional writes, each a *unit* of one or more transaction items applied
        all or nothing, in as few transactions as DynamoDB's limits allow (100 items, 4 MB). A
        transaction is all or nothing across its units too: a unit whose item cancelled it is
        dropped (False) and the others are sent again, so one contended unit never costs the
        others their write. `alone(i)`: how to write unit i when it is left on its own (a plain
        conditional write costs half a transaction's write units)."""
        done = [False] * len(units)
        groups: list[list[int]] = []
        count = size = 0
        for i, unit in enumerate(units):
            if not groups or count + len(unit) > TRANSACTION_ITEMS or size + sizes[i] > TRANSACTION_BYTES:
                groups.append([])
                count = size = 0
            groups[-1].append(i)
            count += len(unit)
            size += sizes[i]
        for group in groups:
            while group:
                if len(group) == 1 and alone is not None:
                    done[group[0]] = alone(group[0])
                    break
                items = [item for i in group for item in units[i]]
                failed_items = self._transact(items)
                if failed_items is None:
                    for i in group:
                        done[i] = True
                    break
                owner = [i for i in group for _ in units[i]]  # item position -> its unit
                failed = {owner[n] for n in failed_items if n < len(owner)}
                group = [i for i in group if i not in failed]
        return done

    def _put_new(self, item: dict[str, Any], config: bool = False) -> bool:
        return self._if("put_item", config, TableName=self._db(config)[0], Item=item,
                        ConditionExpression="attribute_not_exists(pk)")

    def _get(self, pk: str, sk: str, config: bool = False) -> dict[str, Any] | None:
        table, ddb = self._db(config)
        item: dict[str, Any] | None = ddb.get_item(
            TableName=table, Key={"pk": _s(pk), "sk": _s(sk)}, ConsistentRead=True
        ).get("Item")
        return item

    def _query_sks(self, pk: str, prefix: str = "", config: bool = False, consistent: bool = False) -> list[str]:
        out: list[str] = []
        table, ddb = self._db(config)
        kwargs: dict[str, Any] = {
            "TableName": table, **({"ConsistentRead": True} if consistent else {}),
            "KeyConditionExpression": "pk = :pk" + (" AND begins_with(sk, :p)" if prefix else ""),
            "ExpressionAttributeValues": {":pk": _s(pk), **({":p": _s(prefix)} if prefix else {})},
            "ProjectionExpression": "sk",
        }
        while True:
            page = ddb.query(**kwargs)
            out.extend(item["sk"]["S"][len(prefix):] for item in page["Items"])
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _batch_delete(self, keys: list[dict[str, Any]], config: bool = False) -> None:
        """BatchWriteItem, 25 deletes per request, unprocessed ones sent again with backoff."""
        table, ddb = self._db(config)
        for start in range(0, len(keys), 25):
            request: dict[str, Any] = {table: [{"DeleteRequest": {"Key": k}} for k in keys[start:start + 25]]}
            for attempt in range(UNPROCESSED_ATTEMPTS + 1):
                if attempt:
                    unprocessed_backoff(attempt - 1, "BatchWriteItem")
                request = ddb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
                if not request:
                    break
            else:
                raise RetryableError("DynamoDB throttled a batch delete; retry")

    def _batch_get(self, keys: list[dict[str, Any]], config: bool = False,
                   consistent: bool = True) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        table, ddb = self._db(config)
        for start in range(0, len(keys), 100):
            request: dict[str, Any] = {table: {"Keys": keys[start : start + 100], "ConsistentRead": consistent}}
            for attempt in range(UNPROCESSED_ATTEMPTS + 1):
                if attempt:
                    unprocessed_backoff(attempt - 1, "BatchGetItem")  # throttled keys: back off before asking again
                page = ddb.batch_get_item(RequestItems=request)
                found.extend(page["Responses"].get(table, []))
                request = page.get("UnprocessedKeys") or {}
                if not request:
                    break
            else:
                raise RetryableError("DynamoDB throttled a batch read; retry")
        return found

    # --- the seal and writer items' decoders ------------------------------------------------
    @staticmethod
    def _seal_from_item(item: dict[str, Any] | None) -> SealState:
        if not item:
            return SealState()
        position = None
        if "last_shard" in item:
            position = JournalPosition(item["last_shard"]["S"], item["last_seq"]["S"])
        holes = tuple(int(v["N"]) for v in item.get("recent_holes", {}).get("L", []))
        return SealState(
            next_entry=_int(item, "next_entry"),
            last_position=position,
            recent_holes=holes,
            sealed_entries=_int(item, "sealed_entries"),
            sealed_messages=_int(item, "sealed_messages"),
            sealed_bytes=_int(item, "sealed_bytes"),
            segment_count=_int(item, "segment_count"),
            rate_msgs=float(item["rate_msgs"]["N"]) if "rate_msgs" in item else 0.0,
            rate_bytes=float(item["rate_bytes"]["N"]) if "rate_bytes" in item else 0.0,
            rate_at=_int(item, "rate_at"),
            first_entry=_int(item, "first_entry"),
            trimmed_entries=_int(item, "trimmed_entries"),
            trimmed_messages=_int(item, "trimmed_messages"),
            trimmed_bytes=_int(item, "trimmed_bytes"),
            trash=tuple(sorted(item.get("trash", {}).get("SS", []))),
            push_epoch=_int(item, "push_epoch"),
            recent_segments=(unpack_segments(item["pk"]["S"][3:], item["recent_segments"]["B"])
                             if "recent_segments" in item else ()),
            hole_entries=_int(item, "hole_entries"),
            base=_int(item, "fence_base"),
            **(unpack_histograms(item["hist"]["B"]) if "hist" in item else {}),
        )

    @staticmethod
    def _writer_from_item(item: dict[str, Any] | None) -> WriterState | None:
        if not item or "deleted_at" in item:  # none, or fenced by a deletion: no topic
            return None

        def by_producer(name: str) -> dict[str, int]:
            return {k: int(v["N"]) for k, v in item.get(name, {}).get("M", {}).items()}

        last, msgs, sizes, since = (by_producer(n) for n in ("pub_last", "pub_msgs", "pub_bytes", "pub_since"))
        producers = {
            name: ProducerActivity(last.get(name, 0), msgs.get(name, 0), sizes.get(name, 0), since.get(name, 0))
            for name in set(last) | set(since)
        }
        return WriterState(
            _int(item, "next_entry"),
            _int(item, "ledger_id"),
            _int(item, "ledger_first_entry"),
            _int(item, "ledger_opened_at"),
            _int(item, "created_at"),
            messages_in=_int(item, "msg_in"),
            bytes_in=_int(item, "bytes_in"),
            producers=producers,
            backlog_blocked=item.get("backlog_blocked", {}).get("S", ""),
        )


def pack_segments(segments: tuple[SegmentMeta, ...]) -> bytes:
    """A seal state's newest segments as one small binary attribute (msgpack): no topic (the item's
    key) and no object key (`segment_key` of topic, ledger and ids), each entry's size rather than
    its 8-byte offset, so that the seal item stays within one write unit (1 KB)."""
    return msgpack.packb([[s.ledger_id, s.first_entry, s.last_entry, s.message_count, s.created_at,
                           s.max_publish_time, [b - a for a, b in itertools.pairwise(s.offsets)]]
                          for s in segments])


def pack_histograms(state: SealState) -> bytes:
    """The seal state's histograms (`core.metrics.buckets`) as one small binary attribute (msgpack)."""
    return msgpack.packb([list(state.write_latency), state.write_latency_ms, list(state.entry_sizes),
                          state.entry_size_bytes])


def unpack_histograms(data: bytes) -> dict[str, Any]:
    latency, latency_ms, sizes, size_bytes = msgpack.unpackb(data)
    return {"write_latency": tuple(latency), "write_latency_ms": latency_ms, "entry_sizes": tuple(sizes),
            "entry_size_bytes": size_bytes}


def unpack_segments(topic: str, data: bytes) -> tuple[SegmentMeta, ...]:
    name = TopicName.parse(topic)
    out = []
    for ledger, first, last, count, created, max_publish, sizes in msgpack.unpackb(data):
        offsets = (0, *itertools.accumulate(sizes))
        out.append(SegmentMeta(topic, ledger, first, last, segment_key(name, ledger, first, last), offsets, count,
                               created, max_publish))
    return tuple(out)


class ConfigurationReplicas:
    """The configuration store's client: every request at the home replica; a read the home
    region cannot answer (unreachable: a region outage) goes to this region's replica of the
    global table instead, which may lag the home by the replication delay. Writes have no such
    fallback: a policy edited while the home region is out is refused (ConfigurationUnavailable,
    a 503 to retry), never written where a last-writer-wins replication could lose it.

    Once the home failed to answer, it is left alone for `pause_s`: reads go to this region's
    replica at once and writes are refused at once, rather than each request waiting out the
    SDK's retries of a connection that will not come (seconds each). The first request past the
    pause tries the home again (the others keep away from it meanwhile); its answer ends the
    pause. So for up to `pause_s` after the home region is back, reads may still come from this
    region's replica (behind by the replication delay)."""

    READS = frozenset({"get_item", "query", "batch_get_item", "scan"})
    UNREACHABLE = (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError)

    def __init__(self, home: Any, local: Any, pause_s: float = HOME_PAUSE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.home = home
        self.local = local
        self.pause_s = pause_s
        self.clock = clock
        self._paused_until = 0.0  # 0: the home answers
        self._lock = threading.Lock()
        meta = getattr(home, "meta", None)
        self.region = getattr(meta, "region_name", None) or "its home region"

    def _try_home(self) -> bool:
        """Whether this request goes to the home: not within a pause; the first past one does
        (and keeps the others away until it has its answer)."""
        with self._lock:
            if not self._paused_until:
                return True
            now = self.clock()
            if now < self._paused_until:
                return False
            self._paused_until = now + self.pause_s
            return True

    def _home_call(self, call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        try:
            answer = call(**kwargs)
        except self.UNREACHABLE:
            self._paused_until = self.clock() + self.pause_s
            raise
        self._paused_until = 0.0
        return answer

    def _unavailable(self) -> ConfigurationUnavailable:
        return ConfigurationUnavailable(
            f"The configuration store's home replica ({self.region}) is unreachable: configuration changes "
            "are refused until it answers again (reads are served from this region's replica); retry later")

    def __getattr__(self, operation: str) -> Any:
        call = getattr(self.home, operation)
        if not callable(call) or operation.startswith("_"):
            return call
        if operation not in self.READS:

            def write(**kwargs: Any) -> Any:
                if not self._try_home():
                    raise self._unavailable()
                try:
                    return self._home_call(call, kwargs)
                except self.UNREACHABLE as exc:
                    raise self._unavailable() from exc

            return write

        def read(**kwargs: Any) -> Any:
            if self._try_home():
                try:
                    return self._home_call(call, kwargs)
                except self.UNREACHABLE:
                    pass
            return getattr(self.local, operation)(**kwargs)

        return read
