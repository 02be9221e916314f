"""Journal on Kinesis Data Streams.

A topic partition's records share one partition key, hence one shard, hence one order. A
partitioned topic's partitions are spread evenly over the shards with explicit hash keys
(`hash_key`): Kinesis would place each by the MD5 of its name, so 8 partitions on 2 shards would
often fall 6 to 2 or 7 to 1 and one shard would refuse writes the other could take. Tail reads
find the shard from the same hash key and the shard list, cached per container.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from magnetar.adapters.aws.clients import client, count_requests
from magnetar.core.errors import InvalidInput, JournalRefused, RetryableError
from magnetar.core.ledger import common
from magnetar.core.naming import TopicName
from magnetar.core.ports import JournalPosition, JournalRecord

MAX_RECORD_BYTES = 1024 * 1024  # Kinesis default record limit (data + partition key)
MAX_GET_RECORDS_CALLS = 3  # per tail read: GetRecords is limited to 5 calls/s per shard
SHARD_WRITE_BYTES_S = 1024 * 1024  # a shard takes 1 MiB/s of writes
# The longest an append retries, as a share of the writer's reservation deadline (10 s; checked just
# before the write and again after it): a write landing past the deadline is not acknowledged anyway
# (the producer retries it, the sealer treats the record as late), so retrying beyond it is wasted.
# Giving up costs a hole, which holds the partition's consumers for the hole grace (60 s).
PUT_RETRY_SHARE = 0.8
PUT_ATTEMPTS = 4  # attempts of an append failing for another transient reason
HASH_SPACE = 2**128  # Kinesis's hash keys: 0 .. 2^128 - 1


def hash_key(partition_key: str) -> int:
    """Where Kinesis places a journal key. A topic partition's key is its name: partition i of a
    partitioned topic sits at the MD5 of the topic's name (Kinesis's own rule, so the topic lands
    anywhere) plus i's bit-reversed fraction of the hash space (the van der Corput sequence: 0,
    1/2, 1/4, 3/4, 1/8, ...), so any N partitions are spread as evenly as N points can be — for a
    power of two, exactly N / S on each of S evenly split shards — whatever the partition count,
    which the journal does not know. Any other key is placed by its MD5, as Kinesis does."""
    try:
        topic = TopicName.parse(partition_key) if "://" in partition_key else None
    except InvalidInput:
        topic = None
    index = topic.partition_index if topic is not None else -1
    if topic is None or index < 0:
        return int(hashlib.md5(partition_key.encode()).hexdigest(), 16)
    base = int(hashlib.md5(str(topic.partitioned_topic).encode()).hexdigest(), 16)
    spread = int(format(index % HASH_SPACE, "0128b")[::-1], 2)
    return (base + spread) % HASH_SPACE


class KinesisJournal:
    max_record_bytes = MAX_RECORD_BYTES - 300  # room for the partition key

    def __init__(self, stream: str, kinesis: Any | None = None) -> None:
        self.stream = stream
        self.kinesis = kinesis or client("kinesis")
        self._writer = kinesis or _writer_client()
        self._shards: list[tuple[int, int, str]] | None = None
        self._lock = threading.Lock()
        # partition key -> (sequence of the last record read for it, the iterator that follows):
        # a tailing reader continues with one GetRecords instead of GetShardIterator + GetRecords.
        # Iterators live 5 minutes; an expired one falls back to a new iterator.
        self._next_iterators: dict[str, tuple[str, str]] = {}
        # shard -> (sequence of the last record of the last page read ahead, the iterator after it):
        # the journal consumer's read-ahead continues where its previous one ended with one GetRecords
        self._shard_iterators: dict[str, tuple[str, str]] = {}

    def append(self, partition_key: str, data: bytes, patience_s: float | None = None) -> JournalPosition:
        """One PutRecord. A shard's write throughput (1 MiB/s) refuses a large record until its
        budget has refilled by the record's size, so a refusal is retried after about that long
        (a record of a group append may be most of a MiB), not after the SDK's exponential backoff
        of up to seconds, which would idle the producer's one request in flight; the position says
        how long the refusals held it (`throttled_ms`, the producer's pacing signal). When every
        attempt was refused (none timed out or broke off, which might still land), the record is
        certainly not stored: `JournalRefused`."""
        # read now: verify shortens the deadline
        retry_s = common.WRITE_DEADLINE_MS * PUT_RETRY_SHARE / 1000 if patience_s is None else patience_s
        give_up = time.monotonic() + retry_s
        request: dict[str, Any] = {"StreamName": self.stream, "Data": data, "PartitionKey": partition_key,
                                   "ExplicitHashKey": str(hash_key(partition_key))}
        attempt, uncertain, throttled_s = 0, False, 0.0
        while True:
            attempt += 1
            try:
                response = self._writer.put_record(**request)
                return JournalPosition(response["ShardId"], response["SequenceNumber"], round(throttled_s * 1000))
            except (ClientError, BotoConnectionError, HTTPClientError) as exc:
                uncertain = uncertain or not _refused(exc)
                wait = _retry_wait(exc, len(data), attempt)
                if wait is None or time.monotonic() + wait > give_up:
                    if _throttled(exc):  # nothing acknowledged: the client retries the publish
                        refused = RetryableError if uncertain else JournalRefused
                        raise refused(f"The journal's shard refused the write for {retry_s:.0f} s "
                                      "(write throughput exceeded); retry") from None
                    raise
                if _throttled(exc):
                    throttled_s += wait
                time.sleep(wait)

    def shard_for(self, partition_key: str) -> str:
        value = hash_key(partition_key)
        for attempt in range(2):
            for lo, hi, shard_id in self._open_shards(refresh=attempt > 0):
                if lo <= value <= hi:
                    return shard_id
        raise LookupError(f"no open shard for partition key {partition_key!r}")

    def _open_shards(self, refresh: bool = False) -> list[tuple[int, int, str]]:
        with self._lock:
            if self._shards is None or refresh:
                shards: list[tuple[int, int, str]] = []
                kwargs: dict[str, Any] = {"StreamName": self.stream}
                while True:
                    page = self.kinesis.list_shards(**kwargs)
                    for s in page["Shards"]:
                        if "EndingSequenceNumber" in s.get("SequenceNumberRange", {}):
                            continue  # closed by a reshard
                        r = s["HashKeyRange"]
                        shards.append((int(r["StartingHashKey"]), int(r["EndingHashKey"]), s["ShardId"]))
                    if not page.get("NextToken"):
                        break
                    kwargs = {"NextToken": page["NextToken"]}
                self._shards = shards
            return self._shards

    def read_after(
        self, partition_key: str, after: JournalPosition | None, since_ms: int, max_records: int
    ) -> list[JournalRecord]:
        cached = self._next_iterators.pop(partition_key, None)
        if after is not None and cached is not None and cached[0] == after.sequence:
            shard_id, iterator = after.shard_id, cached[1]
            try:
                return self._read_pages(partition_key, shard_id, iterator, max_records)
            except self.kinesis.exceptions.ExpiredIteratorException:
                pass
        if after is not None:
            shard_id = after.shard_id
            iterator = self.kinesis.get_shard_iterator(
                StreamName=self.stream,
                ShardId=shard_id,
                ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                StartingSequenceNumber=after.sequence,
            )["ShardIterator"]
        else:
            shard_id = self.shard_for(partition_key)
            iterator = self.kinesis.get_shard_iterator(
                StreamName=self.stream,
                ShardId=shard_id,
                ShardIteratorType="AT_TIMESTAMP",
                Timestamp=datetime.fromtimestamp(max(since_ms, 0) / 1000, tz=UTC),
            )["ShardIterator"]
        return self._read_pages(partition_key, shard_id, iterator, max_records)

    def read_shard_after(self, after: JournalPosition, max_records: int, max_bytes: int) -> list[JournalRecord]:
        """One GetRecords on `after`'s shard (after a GetShardIterator unless the previous read ahead
        ended at or before `after`), one attempt: a throttled read (the shard's 5 reads a second
        are shared) or an expired iterator gives [], the caller seals what it has."""
        cached = self._shard_iterators.pop(after.shard_id, None)
        try:
            start = after.sequence
            if cached is not None and int(cached[0]) <= int(after.sequence):
                start, iterator = cached
            else:
                iterator = self._writer.get_shard_iterator(
                    StreamName=self.stream, ShardId=after.shard_id,
                    ShardIteratorType="AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=after.sequence,
                )["ShardIterator"]
            page = self._writer.get_records(ShardIterator=iterator, Limit=max(1, min(max_records, 10_000)))
        except (ClientError, BotoConnectionError, HTTPClientError):
            return []
        out: list[JournalRecord] = []
        size, whole_page = 0, True
        for r in page["Records"]:
            if int(r["SequenceNumber"]) <= int(after.sequence):
                continue  # read by the cached iterator, already in the caller's batch
            if out and size + len(r["Data"]) > max_bytes:
                whole_page = False
                break
            arrival = int(r["ApproximateArrivalTimestamp"].timestamp() * 1000)
            out.append(JournalRecord(JournalPosition(after.shard_id, r["SequenceNumber"]), r["PartitionKey"],
                                     r["Data"], arrival))
            size += len(r["Data"])
        following = page.get("NextShardIterator")
        if whole_page and following:
            last = page["Records"][-1]["SequenceNumber"] if page["Records"] else start
            self._shard_iterators[after.shard_id] = (last, following)
        return out

    def _read_pages(self, partition_key: str, shard_id: str, iterator: str, max_records: int) -> list[JournalRecord]:
        out: list[JournalRecord] = []
        for _ in range(MAX_GET_RECORDS_CALLS):
            page = self.kinesis.get_records(ShardIterator=iterator, Limit=10_000)
            for r in page["Records"]:
                if r["PartitionKey"] == partition_key:
                    arrival = int(r["ApproximateArrivalTimestamp"].timestamp() * 1000)
                    out.append(
                        JournalRecord(JournalPosition(shard_id, r["SequenceNumber"]), partition_key, r["Data"], arrival)
                    )
            iterator = page.get("NextShardIterator")
            if not iterator or not page["Records"] or page.get("MillisBehindLatest", 0) == 0 or len(out) >= max_records:
                break
        if iterator and out and len(out) <= max_records:
            self._next_iterators[partition_key] = (out[-1].position.sequence, iterator)
        return out[:max_records]


def _writer_client() -> Any:
    """A Kinesis client making one attempt per call: `KinesisJournal.append` retries itself."""
    session = boto3.session.Session()
    config = Config(retries={"total_max_attempts": 1}, connect_timeout=3, read_timeout=10,
                    max_pool_connections=64, tcp_keepalive=True)
    c = session.client("kinesis", config=config)
    return count_requests(c)  # counted like every other request


def _throttled(exc: Exception) -> bool:
    return isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") == (
        "ProvisionedThroughputExceededException")


def _refused(exc: Exception) -> bool:
    """The request was answered with a refusal: the record is certainly not stored (a timeout, a
    broken connection or a server error leave it unknown)."""
    if not isinstance(exc, ClientError):
        return False
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)) in range(400, 500)


def _retry_wait(exc: Exception, size: int, attempt: int) -> float | None:
    """Seconds to wait before putting a record again; None when retrying is pointless."""
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        if _throttled(exc):  # the shard's budget refills by the record's size in size / (1 MiB/s) at most
            refill: float = max(0.02, size / SHARD_WRITE_BYTES_S)
            return random.uniform(0.5, 1.0) * min(1.0, refill * 2.0 ** min(attempt - 1, 3))
        if status < 500 and code not in ("InternalFailure", "ServiceUnavailable", "KMSThrottlingException"):
            return None
    if attempt >= PUT_ATTEMPTS:
        return None
    return random.uniform(0, min(1.0, 0.05 * 2.0**attempt))  # a transient failure: full jitter
