"""Kinesis's limits (JSON, `X-Amz-Target: Kinesis_20131202.*`).

Per shard 1 MiB/s and 1,000 records/s of writes (token buckets; a partition key's shard is the
one whose hash-key range holds the key's MD5, read from moto's backend); PutRecord beyond them:
400 ProvisionedThroughputExceededException; PutRecords: the records beyond them fail one by one
(`ErrorCode`, `FailedRecordCount`), the rest are written. Record data ≤ 1 MiB
(ValidationException), data + key ≤ 1 MiB, PutRecords ≤ 500 records and ≤ 10 MiB
(InvalidArgumentException). GetRecords: 5 calls/s per shard shared by all readers, 2 MiB/s per
shard (a large answer puts the shard in debt: the calls after it are refused until the debt is
paid), GetShardIterator 5 calls/s per shard: ProvisionedThroughputExceededException.

Enhanced fan-out, emulated: a GetRecords or GetShardIterator carrying `X-Magnetar-Fan-Out-Consumer:
<name>` (the event-source mapping's `fan_out` mode, `magnetar.local.esm`) stands for a registered
consumer's SubscribeToShard. It is accounted on that consumer's own per-shard budget, 2 MiB/s of
reads (the same debt rule) and a window of 5 GetShardIterator calls/s, with no cap on its calls
(a subscription pushes; the emulation reads instead), and it takes nothing from the shard's shared
5 calls/s and 2 MiB/s. An empty fan-out read that asks to be held waits for the shard's next write
(`magnetar.local.aws_limits.fan_out_push`): an idle shard costs one read a hold, not one every 70 ms.

A shard's write budget can be spent from outside (`POST /_magnetar/aws-limits/kinesis/shard-writes`,
`{"stream", "shard", "bytes"}`), as another writer of that shard would spend it, into debt if the
bytes are more than the budget holds: the writes that follow are refused until it has refilled.
What a producer does on a saturated shard is then tested on any machine, however fast the
producer itself can send (LocalStack's chaos API is the same kind of control).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections import deque
from dataclasses import dataclass
from typing import Any

from magnetar.local.aws_limits.base import (
    MIB,
    EndpointBase,
    Response,
    _b64_len,
    _json_response,
    _PassThrough,
    _refused,
)
from magnetar.local.aws_limits.buckets import Bucket
from magnetar.local.aws_limits.fan_out_push import ShardWrites, hold_asked_s

# Kinesis (https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html)
KINESIS_SHARD_WRITE_BYTES_S = 1 * MIB
KINESIS_SHARD_WRITE_RECORDS_S = 1000
KINESIS_SHARD_READ_BYTES_S = 2 * MIB
KINESIS_SHARD_READ_CALLS_S = 5
KINESIS_SHARD_ITERATOR_CALLS_S = 5  # GetShardIterator, per open shard
KINESIS_MAX_RECORD = 1 * MIB
KINESIS_PUT_RECORDS_MAX = 500
KINESIS_PUT_RECORDS_BYTES = 10 * MIB
KINESIS_FAN_OUT_READ_BYTES_S = 2 * MIB  # per registered (enhanced fan-out) consumer and shard

FAN_OUT_HEADER = "X-Magnetar-Fan-Out-Consumer"  # the emulated SubscribeToShard's consumer name
_FAN_OUT_ENVIRON = "HTTP_" + FAN_OUT_HEADER.upper().replace("-", "_")


def fan_out_consumer(environ: dict[str, Any]) -> str | None:
    """The enhanced fan-out consumer a request reads for, if it is tagged as one."""
    name = str(environ.get(_FAN_OUT_ENVIRON, "")).strip()
    return name or None


def kinesis_error(code: str, message: str) -> Response:
    return _refused(_json_response("400 Bad Request", {"__type": code, "message": message},
                                   "application/x-amz-json-1.1"), code)


@dataclass
class _Shards:
    ranges: list[tuple[int, int, str]]
    read_at: float


class KinesisLimits(EndpointBase):
    """The endpoint's Kinesis operations (a mixin of `AwsEndpoint`)."""

    _shards: dict[tuple[str, str, str], _Shards]
    shard_writes: ShardWrites  # what each shard took: the held fan-out reads wake at the next write

    def _stream_name(self, request: dict[str, Any]) -> str:
        name = request.get("StreamName")
        if not name and request.get("StreamARN"):
            name = str(request["StreamARN"]).rsplit("/", 1)[-1]
        if not name:
            raise _PassThrough
        return str(name)

    def _shard_ranges(self, account: str, region: str, stream: str, refresh: bool = False) -> list[tuple[int, int, str]]:
        key = (account, region, stream)
        now = self.clock()
        cached = self._shards.get(key)
        if cached is not None and not refresh and now - cached.read_at < 5.0:
            return cached.ranges
        from moto.kinesis.models import kinesis_backends

        with self.backend_lock:
            try:
                s = kinesis_backends[account][region].streams[stream]
            except KeyError:
                raise _PassThrough from None
            ranges = [(sh.starting_hash, sh.ending_hash, sh.shard_id) for sh in s.shards.values() if sh.is_open]
        self._shards[key] = _Shards(ranges, now)
        return ranges

    def _shard_of(self, account: str, region: str, stream: str, record: dict[str, Any]) -> str:
        explicit = record.get("ExplicitHashKey")
        value = int(explicit) if explicit else int(hashlib.md5(str(record.get("PartitionKey", "")).encode()).hexdigest(), 16)
        for refresh in (False, True):
            for lo, hi, shard_id in self._shard_ranges(account, region, stream, refresh):
                if lo <= value <= hi:
                    return shard_id
        raise _PassThrough

    def _spend_shard_writes(self, environ: dict[str, Any], body: bytes) -> Response:
        """`POST SHARD_SPEND_PATH`: take `bytes` of a shard's write budget now (see the module)."""
        try:
            request = json.loads(body or b"{}")
            stream, shard, size = str(request["stream"]), str(request["shard"]), int(request["bytes"])
            if not stream or not shard or size < 0:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return _json_response("400 Bad Request", {"reason": 'expected {"stream": name, "shard": shard id, '
                                                      '"bytes": a count of at least 0}'}, "application/json")
        account, region = self._scope(environ)
        try:
            shards = {s for _, _, s in self._shard_ranges(account, region, stream, refresh=True)}
        except _PassThrough:
            shards = set()
        if shard not in shards:
            return _json_response("404 Not Found", {"reason": f"no open shard {shard} in stream {stream}"},
                                  "application/json")
        now = self.clock()
        with self.state.lock:
            bucket = self.state.bucket(("kw", account, region, stream, shard), KINESIS_SHARD_WRITE_BYTES_S, now)
            bucket.charge(size, now)
            left = bucket.tokens
        return _json_response("200 OK", {"stream": stream, "shard": shard, "budgetBytes": int(left)},
                              "application/json")

    def _kinesis(self, environ: dict[str, Any], operation: str, body: bytes) -> Response:
        if operation not in ("PutRecord", "PutRecords", "GetRecords", "GetShardIterator"):
            return self._forward(environ)
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return self._forward(environ)
        if operation == "GetRecords":
            return self._get_records(environ, request, body)
        account, region = self._scope(environ)
        stream = self._stream_name(request)
        if operation == "GetShardIterator":
            shard = str(request.get("ShardId", ""))
            consumer = fan_out_consumer(environ)  # a fan-out consumer's window is its own
            window = ("ki", account, region, stream, shard) if consumer is None else (
                "kfi", consumer, account, region, stream, shard)
            if not self._within_calls(window, KINESIS_SHARD_ITERATOR_CALLS_S):
                return kinesis_error("ProvisionedThroughputExceededException",
                                     f"Rate exceeded for shard {shard} in stream {stream} under account {account}.")
            return self._forward(environ)
        records = [request] if operation == "PutRecord" else list(request.get("Records") or [])
        sizes = []
        for i, r in enumerate(records):
            data_len = _b64_len(str(r.get("Data", "")))
            if data_len > KINESIS_MAX_RECORD:
                where = "data" if operation == "PutRecord" else f"records.{i + 1}.member.data"
                return kinesis_error("ValidationException", f"1 validation error detected: Value at '{where}' failed "
                                     f"to satisfy constraint: Member must have length less than or equal to {MIB}")
            size = data_len + len(str(r.get("PartitionKey", "")).encode())
            if size > KINESIS_MAX_RECORD:
                return kinesis_error("InvalidArgumentException", f"Record size {size} exceeds the limit of {MIB} "
                                     "bytes (data plus partition key)")
            sizes.append(size)
        if operation == "PutRecords":
            if len(records) > KINESIS_PUT_RECORDS_MAX:
                return kinesis_error("ValidationException", "1 validation error detected: Value at 'records' failed "
                                     "to satisfy constraint: Member must have length less than or equal to 500")
            if sum(sizes) > KINESIS_PUT_RECORDS_BYTES:
                return kinesis_error("InvalidArgumentException", "Records size exceeds 10 MB limit")
        shards = [self._shard_of(account, region, stream, r) for r in records]
        now = self.clock()
        accepted: list[bool] = []
        with self.state.lock:
            for size, shard in zip(sizes, shards, strict=True):
                b = self.state.bucket(("kw", account, region, stream, shard), KINESIS_SHARD_WRITE_BYTES_S, now)
                n = self.state.bucket(("kn", account, region, stream, shard), KINESIS_SHARD_WRITE_RECORDS_S, now)
                ok = b.level(now) >= size and n.level(now) >= 1
                if ok:
                    b.tokens -= size
                    n.tokens -= 1
                accepted.append(ok)

        def throttled(shard: str) -> str:
            return f"Rate exceeded for shard {shard} in stream {stream} under account {account}."

        if operation == "PutRecord":
            if not accepted[0]:
                return kinesis_error("ProvisionedThroughputExceededException", throttled(shards[0]))
            return self._written(self._forward(environ, body), account, region, stream, shards)
        if all(accepted):
            return self._written(self._forward(environ, body), account, region, stream, shards)
        results: list[dict[str, Any]] = [
            {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": throttled(shard)}
            for shard in shards
        ]
        kept = [r for r, ok in zip(records, accepted, strict=True) if ok]
        encryption = "NONE"
        if kept:
            status, headers, data = self._written(
                self._forward(environ, json.dumps({**request, "Records": kept}).encode()), account, region, stream,
                [shard for shard, ok in zip(shards, accepted, strict=True) if ok])
            if not status.startswith("200"):
                return status, headers, data
            answer = json.loads(data)
            encryption = answer.get("EncryptionType", encryption)
            written = iter(answer.get("Records", []))
            for i, ok in enumerate(accepted):
                if ok:
                    results[i] = next(written)
        failed = sum(1 for r in results if "ErrorCode" in r)
        return _refused(_json_response("200 OK", {"FailedRecordCount": failed, "Records": results,
                                                  "EncryptionType": encryption}, "application/x-amz-json-1.1"),
                        "records:ProvisionedThroughputExceededException", accepted.count(False))

    def _written(self, response: Response, account: str, region: str, stream: str, shards: list[str]) -> Response:
        """A put's answer, once the shards it wrote have woken their held fan-out reads."""
        if response[0].startswith("200"):
            self.shard_writes.wrote((account, region, stream, shard) for shard in shards)
        return response

    def _within_calls(self, key: tuple[str, ...], per_s: int, extra_refusal: Bucket | None = None) -> bool:
        """A sliding one-second window of calls: True (and the call counted) while under `per_s`."""
        now = self.clock()
        with self.state.lock:
            calls = self.state.calls.setdefault(key, deque())
            while calls and now - calls[0] >= 1.0:
                calls.popleft()
            if len(calls) >= per_s or (extra_refusal is not None and extra_refusal.level(now) <= 0):
                return False
            calls.append(now)
            return True

    def _get_records(self, environ: dict[str, Any], request: dict[str, Any], body: bytes) -> Response:
        try:
            decoded = base64.decodebytes(str(request.get("ShardIterator", "")).encode()).decode()  # moto's form
            stream, shard = decoded.split(":")[:2]
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return self._forward(environ)
        account, region = self._scope(environ)
        key = (account, region, stream, shard)
        consumer = fan_out_consumer(environ)
        if consumer is not None:
            return self._fan_out_get_records(environ, body, consumer, key)
        with self.state.lock:
            debt = self.state.bucket(("kb", *key), KINESIS_SHARD_READ_BYTES_S, self.clock())
        if not self._within_calls(("kr", *key), KINESIS_SHARD_READ_CALLS_S, debt):
            return kinesis_error("ProvisionedThroughputExceededException",
                                 f"Rate exceeded for Shard - {account}:{stream}:{shard}")
        status, headers, data = self._forward(environ)
        if status.startswith("200"):
            with self.state.lock:  # the answer's records (base64 in JSON: about 3/4 of its length)
                debt.charge(len(data) * 3 // 4, self.clock())
        return status, headers, data

    def _fan_out_get_records(self, environ: dict[str, Any], body: bytes, consumer: str,
                             key: tuple[str, str, str, str]) -> Response:
        """A registered consumer's read: its own 2 MiB/s per shard (refused while in debt), no call cap;
        held for the shard's next write when it asks and finds nothing (the module's docstring)."""
        account, _region, stream, shard = key
        with self.state.lock:
            budget = self.state.bucket(("kfb", consumer, *key), KINESIS_FAN_OUT_READ_BYTES_S, self.clock())
            in_debt = budget.level(self.clock()) <= 0
        if in_debt:
            return kinesis_error("ProvisionedThroughputExceededException",
                                 f"Rate exceeded for consumer {consumer} on Shard - {account}:{stream}:{shard}")
        status, headers, data = self.shard_writes.read_held(key, hold_asked_s(environ),
                                                            lambda: self._forward(environ, body))
        if status.startswith("200"):
            with self.state.lock:
                budget.charge(len(data) * 3 // 4, self.clock())
        return status, headers, data
