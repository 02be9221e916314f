"""AWS's service limits at the emulator's endpoint: a WSGI middleware around moto's app.

Every AWS client of the local stack (Magnetar's functions, the event-source mapping, tests,
boto3 in a shell) goes through it, so a limit holds for all of them together, as on AWS. A
refused request gets the error AWS answers with (code, HTTP status, message as AWS words it), so
botocore's retry logic treats it exactly as it would AWS's:

- Kinesis (JSON, `X-Amz-Target: Kinesis_20131202.*`): per shard 1 MiB/s and 1,000 records/s of
  writes (token buckets; a partition key's shard is the one whose hash-key range holds the key's
  MD5, read from moto's backend); PutRecord beyond them: 400 ProvisionedThroughputExceededException;
  PutRecords: the records beyond them fail one by one (`ErrorCode`, `FailedRecordCount`), the rest
  are written. Record data ≤ 1 MiB (ValidationException), data + key ≤ 1 MiB, PutRecords ≤ 500
  records and ≤ 10 MiB (InvalidArgumentException). GetRecords: 5 calls/s per shard shared by all
  readers, 2 MiB/s per shard (a large answer puts the shard in debt: the calls after it are
  refused until the debt is paid), GetShardIterator 5 calls/s per shard:
  ProvisionedThroughputExceededException.
- DynamoDB (`X-Amz-Target: DynamoDB_20120810.*`): item ≤ 400 KB (ValidationException), transactions
  ≤ 100 items and 4 MB, BatchWriteItem ≤ 25; per partition key value ~1,000 write units/s and
  ~3,000 read units/s (writes ceil(KB), transactional x2; reads ceil(4 KB), eventually consistent
  half). A hot key answers ProvisionedThroughputExceededException (on-demand wording, with
  `ThrottlingReasons`); a transaction touching one is cancelled (TransactionCanceledException,
  reason ThrottlingError); BatchWriteItem returns the throttled items as UnprocessedItems.
- S3 (REST): per bucket and prefix (the key up to its last '/'), 3,500 PUT/COPY/POST/DELETE and
  5,500 GET/HEAD requests/s: 503 SlowDown.

Everything else passes through unchanged. The model's approximations are in docs/architecture.md
("AWS limits, locally"). Modeled latency (`magnetar.local.aws_latency`) is added here too, after
the request is applied and outside the serialization lock.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
import threading
import time
import uuid
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

from magnetar.local.aws_latency import LatencyModel

MIB = 1024 * 1024
KB = 1024

# Kinesis (https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html)
KINESIS_SHARD_WRITE_BYTES_S = 1 * MIB
KINESIS_SHARD_WRITE_RECORDS_S = 1000
KINESIS_SHARD_READ_BYTES_S = 2 * MIB
KINESIS_SHARD_READ_CALLS_S = 5
KINESIS_SHARD_ITERATOR_CALLS_S = 5  # GetShardIterator, per open shard
KINESIS_MAX_RECORD = 1 * MIB
KINESIS_PUT_RECORDS_MAX = 500
KINESIS_PUT_RECORDS_BYTES = 10 * MIB
# DynamoDB (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html)
DDB_MAX_ITEM = 400 * KB
DDB_PARTITION_WCU_S = 1000
DDB_PARTITION_RCU_S = 3000
DDB_TXN_MAX_ITEMS = 100
DDB_TXN_MAX_BYTES = 4 * MIB
DDB_BATCH_WRITE_MAX = 25
# S3 (https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html)
S3_PREFIX_WRITES_S = 3500
S3_PREFIX_READS_S = 5500

DDB_THROTTLED = ("Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling "
                 "your table or index so please try again shortly. If exceptions persist, check if you have a hot "
                 "key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html.")
DDB_ITEM_TOO_LARGE = "Item size has exceeded the maximum allowed size"
DDB_UPDATE_TOO_LARGE = "Item size to update has exceeded the maximum allowed size"

_WRITE_OPS = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/")
_EQUALITY = re.compile(r"(#?[\w.]+)\s*=\s*(:\w+)")

REFUSED_HEADER = "x-magnetar-refused"
REFUSED_COUNT_HEADER = "x-magnetar-refused-count"
REFUSALS_PATH = "/_magnetar/aws-limits"  # GET: what the limits refused, by service.operation:code

StartResponse = Callable[..., Any]
Response = tuple[str, list[tuple[str, str]], bytes]


class Bucket:
    """A token bucket: `rate` tokens a second, at most `capacity`; `charge` may go into debt."""

    __slots__ = ("capacity", "rate", "stamp", "tokens")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate, self.capacity, self.tokens, self.stamp = rate, capacity, capacity, now

    def level(self, now: float) -> float:
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        return self.tokens

    def take(self, n: float, now: float) -> bool:
        if self.level(now) >= min(n, self.capacity):
            self.tokens -= n
            return True
        return False

    def charge(self, n: float, now: float) -> None:
        self.level(now)
        self.tokens -= n


@dataclass
class _Shards:
    ranges: list[tuple[int, int, str]]
    read_at: float


@dataclass
class _State:
    """The limits' counters (one lock; every operation on it is a few dictionary look-ups)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    buckets: dict[tuple[str, ...], Bucket] = field(default_factory=dict)
    calls: dict[tuple[str, ...], deque[float]] = field(default_factory=dict)

    def bucket(self, key: tuple[str, ...], rate: float, now: float, capacity: float | None = None) -> Bucket:
        b = self.buckets.get(key)
        if b is None:
            b = self.buckets[key] = Bucket(rate, rate if capacity is None else capacity, now)
        return b


def _b64_len(s: str) -> int:
    return len(s) * 3 // 4 - (2 if s.endswith("==") else 1 if s.endswith("=") else 0)


def _number_size(n: str) -> int:
    digits = n.lstrip("-").replace(".", "").lstrip("0").rstrip("0") or "0"
    return (len(digits) + 1) // 2 + 1


def attribute_size(value: dict[str, Any]) -> int:
    """DynamoDB's size of one attribute value (developerguide/CapacityUnitCalculations.html)."""
    if len(value) != 1:
        return 1
    kind, v = next(iter(value.items()))
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return _number_size(v)
    if kind == "B":
        return _b64_len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(x.encode()) for x in v)
    if kind == "NS":
        return sum(_number_size(x) for x in v)
    if kind == "BS":
        return sum(_b64_len(x) for x in v)
    if kind == "L":
        return 3 + sum(1 + attribute_size(x) for x in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + attribute_size(x) for k, x in v.items())
    return 0


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + attribute_size(value) for name, value in item.items())


def _json_response(status: str, body: dict[str, Any], content_type: str, crc: bool = False) -> Response:
    data = json.dumps(body, separators=(",", ":")).encode()
    headers = [("Content-Type", content_type), ("Content-Length", str(len(data))),
               ("x-amzn-RequestId", str(uuid.uuid4()))]
    if crc:
        headers.append(("x-amz-crc32", str(zlib.crc32(data) & 0xFFFFFFFF)))
    return status, headers, data


def _refused(response: Response, code: str, count: int = 1) -> Response:
    """Mark a response the limits made (counted, then the marks are taken off: see `refusals`)."""
    status, headers, data = response
    return status, [*headers, (REFUSED_HEADER, code), (REFUSED_COUNT_HEADER, str(count))], data


def kinesis_error(code: str, message: str) -> Response:
    return _refused(_json_response("400 Bad Request", {"__type": code, "message": message},
                                   "application/x-amz-json-1.1"), code)


def dynamodb_error(code: str, message: str, **extra: Any) -> Response:
    prefix = "com.amazon.coral.validate#" if code == "ValidationException" else "com.amazonaws.dynamodb.v20120810#"
    return _refused(_json_response("400 Bad Request", {"__type": prefix + code, "message": message, **extra},
                                   "application/x-amz-json-1.0", crc=True), code)


def s3_slow_down() -> Response:
    request_id = uuid.uuid4().hex[:16].upper()
    data = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
            f"<Message>Please reduce your request rate.</Message><RequestId>{request_id}</RequestId>"
            f"<HostId>{base64.b64encode(uuid.uuid4().bytes).decode()}</HostId></Error>").encode()
    return _refused(("503 Slow Down", [("Content-Type", "application/xml"), ("Content-Length", str(len(data))),
                                       ("x-amz-request-id", request_id)], data), "SlowDown")


class AwsEndpoint:
    """The middleware: `limits` enforces the limits above, `latency` adds modeled latency.

    `app` is the serialized moto app; `backend_lock` is its lock, taken for the few reads of
    moto's backends (a stream's shards, a table's key schema, a stored item's size)."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]], limits: bool = True,
                 latency: LatencyModel | None = None, backend_lock: threading.Lock | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.limits = limits
        self.latency = latency
        self.backend_lock = backend_lock or threading.Lock()
        self.clock = clock
        self.state = _State()
        self._shards: dict[tuple[str, str, str], _Shards] = {}
        self._key_schemas: dict[tuple[str, str, str], tuple[str, str | None]] = {}
        self.refusals: Counter[str] = Counter()  # "kinesis.GetRecords:ProvisionedThroughputExceededException" -> n

    # --- WSGI -----------------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        started = time.monotonic()
        if environ.get("PATH_INFO") == REFUSALS_PATH and environ.get("REQUEST_METHOD") == "GET":
            with self.state.lock:
                report = {"limits": self.limits, "refusals": dict(sorted(self.refusals.items()))}
            status, headers, data = _json_response("200 OK", report, "application/json")
            start_response(status, headers)
            return [data]
        service, operation, body = self._classify(environ)
        response = self._handle(environ, service, operation, body) if service else self._forward(environ)
        marks = {k: v for k, v in response[1] if k in (REFUSED_HEADER, REFUSED_COUNT_HEADER)}
        if marks:
            with self.state.lock:
                self.refusals[f"{service}.{operation}:{marks[REFUSED_HEADER]}"] += int(marks[REFUSED_COUNT_HEADER])
            response = response[0], [h for h in response[1] if h[0] not in marks], response[2]
        if self.latency is not None and service:
            remaining = self.latency.delay_s(service, operation) - (time.monotonic() - started)
            if remaining > 0:
                time.sleep(remaining)  # outside moto's lock: other requests go on meanwhile
        status, headers, data = response
        start_response(status, headers)
        return [data]

    def _classify(self, environ: dict[str, Any]) -> tuple[str, str, bytes | None]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target:
            prefix, _, operation = target.partition(".")
            service = {"Kinesis_20131202": "kinesis", "DynamoDB_20120810": "dynamodb"}.get(prefix, "")
            if service:
                return service, operation, self._read_body(environ)
            return "", "", None
        scope = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
        query = str(environ.get("QUERY_STRING", ""))
        if (scope is not None and scope.group(3) == "s3") or ("X-Amz-Credential=" in query and "%2Fs3%2F" in query):
            return "s3", str(environ.get("REQUEST_METHOD", "GET")), None
        return "", "", None

    @staticmethod
    def _read_body(environ: dict[str, Any]) -> bytes:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        stream = environ["wsgi.input"]
        body: bytes = stream.read(length) if length else stream.read() if environ.get("wsgi.input_terminated") else b""
        environ["wsgi.input"] = BytesIO(body)
        return body

    def _forward(self, environ: dict[str, Any], body: bytes | None = None) -> Response:
        if body is not None:
            environ["wsgi.input"] = BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        captured: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
            captured["status"], captured["headers"] = status, list(headers)
            return lambda _data: None

        data = b"".join(self.app(environ, capture))
        return captured["status"], captured["headers"], data

    def _handle(self, environ: dict[str, Any], service: str, operation: str, body: bytes | None) -> Response:
        if not self.limits:
            return self._forward(environ)
        try:
            if service == "kinesis":
                return self._kinesis(environ, operation, body or b"")
            if service == "dynamodb":
                return self._dynamodb(environ, operation, body or b"")
            return self._s3(environ, operation)
        except _PassThrough:
            return self._forward(environ)

    # --- account and region of a request --------------------------------------------------
    @staticmethod
    def _scope(environ: dict[str, Any]) -> tuple[str, str]:
        m = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
        access_key, region = (m.group(1), m.group(2)) if m else ("", "us-east-1")
        try:
            from moto.iam.models import get_account_id_from

            return get_account_id_from(access_key), region
        except Exception:
            return "123456789012", region

    # --- Kinesis ----------------------------------------------------------------------------
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

    def _kinesis(self, environ: dict[str, Any], operation: str, body: bytes) -> Response:
        if operation not in ("PutRecord", "PutRecords", "GetRecords", "GetShardIterator"):
            return self._forward(environ)
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return self._forward(environ)
        if operation == "GetRecords":
            return self._get_records(environ, request)
        account, region = self._scope(environ)
        stream = self._stream_name(request)
        if operation == "GetShardIterator":
            shard = str(request.get("ShardId", ""))
            if not self._within_calls(("ki", account, region, stream, shard), KINESIS_SHARD_ITERATOR_CALLS_S):
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
            return self._forward(environ, body)
        if all(accepted):
            return self._forward(environ, body)
        results: list[dict[str, Any]] = [
            {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": throttled(shard)}
            for shard in shards
        ]
        kept = [r for r, ok in zip(records, accepted, strict=True) if ok]
        encryption = "NONE"
        if kept:
            status, headers, data = self._forward(environ, json.dumps({**request, "Records": kept}).encode())
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

    def _get_records(self, environ: dict[str, Any], request: dict[str, Any]) -> Response:
        try:
            decoded = base64.decodebytes(str(request.get("ShardIterator", "")).encode()).decode()  # moto's form
            stream, shard = decoded.split(":")[:2]
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return self._forward(environ)
        account, region = self._scope(environ)
        key = (account, region, stream, shard)
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

    # --- DynamoDB ---------------------------------------------------------------------------
    def _key_schema(self, account: str, region: str, table: str) -> tuple[str, str | None]:
        key = (account, region, table)
        schema = self._key_schemas.get(key)
        if schema is None:
            from moto.dynamodb.models import dynamodb_backends

            with self.backend_lock:
                try:
                    t = dynamodb_backends[account][region].tables[table]
                except KeyError:
                    raise _PassThrough from None
                schema = (t.hash_key_attr, t.range_key_attr)
            self._key_schemas[key] = schema
        return schema

    def _stored_size(self, account: str, region: str, table: str, key: dict[str, Any]) -> int:
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodb.models.dynamo_type import DynamoType

        hash_attr, range_attr = self._key_schema(account, region, table)
        try:
            with self.backend_lock:
                t = dynamodb_backends[account][region].tables[table]
                item = t.get_item(DynamoType(key[hash_attr]), DynamoType(key[range_attr]) if range_attr else None)
                return int(item.size()) if item is not None else 0
        except Exception:
            return 0

    def _partition(self, account: str, region: str, table: str, item_or_key: dict[str, Any]) -> tuple[str, ...]:
        hash_attr, _ = self._key_schema(account, region, table)
        value = json.dumps(item_or_key.get(hash_attr), sort_keys=True)
        return account, region, table, value

    def _dynamodb(self, environ: dict[str, Any], operation: str, body: bytes) -> Response:
        if operation not in _WRITE_OPS and operation not in ("GetItem", "Query", "BatchGetItem", "TransactGetItems"):
            return self._forward(environ)
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return self._forward(environ)
        account, region = self._scope(environ)
        if operation in ("GetItem", "Query"):
            return self._read(environ, operation, request, account, region)
        if operation in ("BatchGetItem", "TransactGetItems"):
            return self._multi_read(environ, operation, request, account, region)
        if operation == "BatchWriteItem":
            return self._batch_write(environ, request, account, region)
        if operation == "TransactWriteItems":
            return self._transact_write(environ, request, account, region)
        table = str(request.get("TableName", ""))
        if operation == "PutItem":
            size = item_size(request.get("Item") or {})
            if size > DDB_MAX_ITEM:
                return dynamodb_error("ValidationException", DDB_ITEM_TOO_LARGE)
            partition = self._partition(account, region, table, request.get("Item") or {})
        else:
            key = request.get("Key") or {}
            partition = self._partition(account, region, table, key)
            stored = self._stored_size(account, region, table, key)
            if operation == "UpdateItem":
                added = item_size(request.get("ExpressionAttributeValues") or {}) + sum(
                    item_size({k: v.get("Value", {"NULL": True})}) for k, v in (request.get("AttributeUpdates") or {}).items())
                if added > DDB_MAX_ITEM:
                    return dynamodb_error("ValidationException", DDB_UPDATE_TOO_LARGE)
                size = min(stored + added, DDB_MAX_ITEM)  # moto checks the resulting item's size itself
            else:
                size = stored
        units = max(1, math.ceil(size / KB))
        if not self._take_writes([(partition, units)]):
            return self._throttled(table, account, region, "TableWriteKeyRangeThroughputExceeded")
        return self._forward(environ, body)

    def _throttled(self, table: str, account: str, region: str, reason: str) -> Response:
        arn = f"arn:aws:dynamodb:{region}:{account}:table/{table}"
        return dynamodb_error("ProvisionedThroughputExceededException", DDB_THROTTLED,
                              ThrottlingReasons=[{"reason": reason, "resource": arn}])

    def _take_writes(self, charges: list[tuple[tuple[str, ...], int]]) -> bool:
        """All or nothing: every partition has the units, then they are taken."""
        now = self.clock()
        with self.state.lock:
            needed: dict[tuple[str, ...], int] = {}
            for partition, units in charges:
                needed[partition] = needed.get(partition, 0) + units
            buckets = {p: self.state.bucket(("dw", *p), DDB_PARTITION_WCU_S, now) for p in needed}
            if any(buckets[p].level(now) < min(n, DDB_PARTITION_WCU_S) for p, n in needed.items()):
                return False
            for p, n in needed.items():
                buckets[p].tokens -= n
            return True

    def _writes_available(self, partition: tuple[str, ...], units: int) -> bool:
        now = self.clock()
        with self.state.lock:
            return self.state.bucket(("dw", *partition), DDB_PARTITION_WCU_S, now).level(now) >= units

    def _read_bucket(self, partition: tuple[str, ...], now: float) -> Bucket:
        return self.state.bucket(("dr", *partition), DDB_PARTITION_RCU_S, now)

    def _read(self, environ: dict[str, Any], operation: str, request: dict[str, Any], account: str,
              region: str) -> Response:
        table = str(request.get("TableName", ""))
        if operation == "GetItem":
            partition = self._partition(account, region, table, request.get("Key") or {})
        else:
            partition = self._query_partition(request, account, region, table)
        now = self.clock()
        with self.state.lock:
            bucket = self._read_bucket(partition, now)
            refused = bucket.level(now) <= 0
        if refused:
            return self._throttled(table, account, region, "TableReadKeyRangeThroughputExceeded")
        status, headers, data = self._forward(environ)
        if status.startswith("200"):  # units of what was read (the answer's length: a slight over-estimate)
            units = max(1, math.ceil(len(data) / (4 * KB)))
            factor = 1.0 if request.get("ConsistentRead") else 0.5
            with self.state.lock:
                bucket.charge(units * factor, self.clock())
        return status, headers, data

    def _query_partition(self, request: dict[str, Any], account: str, region: str, table: str) -> tuple[str, ...]:
        if request.get("IndexName"):
            raise _PassThrough  # an index's partitions are not the table's: not modeled
        hash_attr, _ = self._key_schema(account, region, table)
        names = request.get("ExpressionAttributeNames") or {}
        values = request.get("ExpressionAttributeValues") or {}
        for name, placeholder in _EQUALITY.findall(str(request.get("KeyConditionExpression", ""))):
            if names.get(name, name) == hash_attr and placeholder in values:
                return account, region, table, json.dumps(values[placeholder], sort_keys=True)
        conditions = request.get("KeyConditions") or {}
        if hash_attr in conditions:
            return account, region, table, json.dumps((conditions[hash_attr].get("AttributeValueList") or [None])[0],
                                                      sort_keys=True)
        raise _PassThrough

    def _multi_read(self, environ: dict[str, Any], operation: str, request: dict[str, Any], account: str,
                    region: str) -> Response:
        """BatchGetItem, TransactGetItems: the sizes, and read units charged per key (no partial answers)."""
        reads: list[tuple[str, dict[str, Any], float]] = []
        if operation == "TransactGetItems":
            items = request.get("TransactItems") or []
            if len(items) > DDB_TXN_MAX_ITEMS:
                return dynamodb_error("ValidationException", "1 validation error detected: Value at 'transactItems' "
                                      "failed to satisfy constraint: Member must have length less than or equal to 100")
            reads = [(str(i.get("Get", {}).get("TableName", "")), i.get("Get", {}).get("Key") or {}, 2.0) for i in items]
        else:
            for table, spec in (request.get("RequestItems") or {}).items():
                factor = 1.0 if spec.get("ConsistentRead") else 0.5
                reads += [(str(table), k, factor) for k in spec.get("Keys") or []]
        charges = [(self._partition(account, region, t, k), f) for t, k, f in reads]
        now = self.clock()
        with self.state.lock:
            buckets = [(self._read_bucket(p, now), f) for p, f in charges]
            hot = [i for i, (b, _) in enumerate(buckets) if b.level(now) <= 0]
            if not hot:
                for b, f in buckets:
                    b.charge(f, now)
        if hot:
            table = reads[hot[0]][0]
            if operation == "TransactGetItems":
                return self._cancelled(len(reads), hot)
            return self._throttled(table, account, region, "TableReadKeyRangeThroughputExceeded")
        return self._forward(environ)

    def _cancelled(self, n: int, hot: list[int]) -> Response:
        reasons = [{"Code": "ThrottlingError", "Message": DDB_THROTTLED} if i in hot else {"Code": "None"}
                   for i in range(n)]
        codes = ", ".join(r["Code"] for r in reasons)
        return _refused(_json_response("400 Bad Request", {
            "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "Message": f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
            "CancellationReasons": reasons,
        }, "application/x-amz-json-1.0", crc=True), "TransactionCanceledException(ThrottlingError)")

    def _batch_write(self, environ: dict[str, Any], request: dict[str, Any], account: str, region: str) -> Response:
        requests = [(str(table), r) for table, rs in (request.get("RequestItems") or {}).items() for r in rs or []]
        if len(requests) > DDB_BATCH_WRITE_MAX:
            return dynamodb_error("ValidationException", "Too many items requested for the BatchWriteItem call")
        admitted: dict[str, list[dict[str, Any]]] = {}
        unprocessed: dict[str, list[dict[str, Any]]] = {}
        for table, r in requests:
            if "PutRequest" in r:
                item = r["PutRequest"].get("Item") or {}
                size = item_size(item)
                if size > DDB_MAX_ITEM:
                    return dynamodb_error("ValidationException", DDB_ITEM_TOO_LARGE)
                partition = self._partition(account, region, table, item)
            else:
                key = (r.get("DeleteRequest") or {}).get("Key") or {}
                partition = self._partition(account, region, table, key)
                size = self._stored_size(account, region, table, key)
            ok = self._take_writes([(partition, max(1, math.ceil(size / KB)))])
            (admitted if ok else unprocessed).setdefault(table, []).append(r)
        if not unprocessed:
            return self._forward(environ)
        if not admitted:
            return self._throttled(requests[0][0], account, region, "TableWriteKeyRangeThroughputExceeded")
        status, headers, data = self._forward(environ, json.dumps({**request, "RequestItems": admitted}).encode())
        if not status.startswith("200"):
            return status, headers, data
        answer = json.loads(data)
        left = answer.get("UnprocessedItems") or {}
        for table, rs in unprocessed.items():
            left.setdefault(table, []).extend(rs)
        answer["UnprocessedItems"] = left
        return _refused(_json_response("200 OK", answer, "application/x-amz-json-1.0", crc=True),
                        "UnprocessedItems", sum(len(rs) for rs in unprocessed.values()))

    def _transact_write(self, environ: dict[str, Any], request: dict[str, Any], account: str, region: str) -> Response:
        items = request.get("TransactItems") or []
        if len(items) > DDB_TXN_MAX_ITEMS:
            return dynamodb_error("ValidationException", "1 validation error detected: Value at 'transactItems' failed "
                                  "to satisfy constraint: Member must have length less than or equal to 100")
        charges: list[tuple[tuple[str, ...], int]] = []
        total = 0
        for entry in items:
            (kind, op), = entry.items() if len(entry) == 1 else (("", {}),)
            table = str(op.get("TableName", ""))
            if kind == "Put":
                size = item_size(op.get("Item") or {})
                if size > DDB_MAX_ITEM:
                    return dynamodb_error("ValidationException", DDB_ITEM_TOO_LARGE)
                partition = self._partition(account, region, table, op.get("Item") or {})
            else:
                key = op.get("Key") or {}
                partition = self._partition(account, region, table, key)
                size = item_size(key) + item_size(op.get("ExpressionAttributeValues") or {})
                if kind == "Update" and size > DDB_MAX_ITEM:
                    return dynamodb_error("ValidationException", DDB_UPDATE_TOO_LARGE)
                if kind in ("Update", "Delete"):
                    size = min(DDB_MAX_ITEM, size + self._stored_size(account, region, table, key))
            total += size
            charges.append((partition, 2 * max(1, math.ceil(size / KB))))
        if total > DDB_TXN_MAX_BYTES:
            return dynamodb_error("ValidationException", "Transaction request cannot be larger than 4 MB")
        if not self._take_writes(charges):
            hot = [i for i, (p, n) in enumerate(charges) if not self._writes_available(p, n)]
            return self._cancelled(len(items), hot or [0])
        return self._forward(environ)

    # --- S3 ---------------------------------------------------------------------------------
    def _s3(self, environ: dict[str, Any], method: str) -> Response:
        host = str(environ.get("HTTP_HOST", "")).split(":")[0]
        path = str(environ.get("PATH_INFO", "/")).lstrip("/")
        labels = host.split(".")
        if len(labels) > 1 and not host.replace(".", "").isdigit() and (labels[1] == "s3" or host.endswith(".localhost")):
            bucket, key = labels[0], path
        else:
            bucket, _, key = path.partition("/")
        prefix = key.rpartition("/")[0]
        reading = method in ("GET", "HEAD")
        rate = S3_PREFIX_READS_S if reading else S3_PREFIX_WRITES_S
        now = self.clock()
        with self.state.lock:
            ok = self.state.bucket(("s3r" if reading else "s3w", bucket, prefix), rate, now).take(1, now)
        if not ok:
            self._drain(environ)
            return s3_slow_down()
        return self._forward(environ)

    @staticmethod
    def _drain(environ: dict[str, Any]) -> None:
        """Read a refused request's body, so the connection can carry the next request."""
        length = int(environ.get("CONTENT_LENGTH") or 0)
        stream = environ["wsgi.input"]
        while length > 0:
            chunk = stream.read(min(length, 1 << 16))
            if not chunk:
                break
            length -= len(chunk)


class _PassThrough(Exception):
    """The request is not one the limits model (unknown stream or table...): moto answers it."""
