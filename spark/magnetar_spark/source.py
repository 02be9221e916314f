"""`spark.read.format("magnetar")`: a PySpark 4 Python data source over Magnetar's HTTP API.

It reads one topic (or one partition of a partitioned topic, by its `-partition-<i>` name) as a
batch, with the columns of the Pulsar Spark connector:

    value                binary
    __key                string
    __topic              string
    __messageId          binary   (32 bytes, see `message_id_bytes`)
    __publishTime        timestamp
    __eventTime          timestamp (null when the producer set none)
    __messageProperties  map<string,string>

Planning (on the driver) asks the broker for the topic's last entry id once
(`GET /admin/v2/.../lastMessageId`) and splits the entry ids `[startingEntryId, last]` into
`partitions` contiguous ranges; each Spark task then pages through its range with the
non-durable reader endpoint (`POST /magnetar/v1/reader/.../read`). Because the end is fixed at
planning, a query sees a consistent prefix of the topic, whatever is produced meanwhile.

Options (case-insensitive):

    service.url        the HTTP API, e.g. http://127.0.0.1:8080 (required)
    topic              persistent://tenant/ns/name, tenant/ns/name, or a short name (required)
    partitions         number of Spark input partitions (default 4)
    startingEntryId    first entry id to read, inclusive (default 0)
    endingEntryId      last entry id to read, inclusive (default: the last entry at planning)
    pageSize           entries per read request, 1..1000 (default 1000)
    requestTimeoutMs   timeout of one HTTP request (default 30000)
    maxRetries         retries of a transient failure: connection error, 429, 5xx (default 5)
    readTimeoutMs      how long a task waits for entries below the snapshot that are not
                       readable yet before failing (default 30000)
    pulsar.client.authPluginClassName
                       org.apache.pulsar.client.impl.auth.AuthenticationToken (the Pulsar
                       connector's option), or aws-iam (SigV4 with the node's AWS credentials)
    pulsar.client.authParams
                       token:XYZ or file:///path/to/token (read on each node, at each request);
                       for aws-iam optionally region:NAME

Credentials go on every request, from the driver (planning) and the executors (reading).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import (
    BinaryType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from magnetar.core.entry import MessageIdData
from magnetar.core.errors import InvalidInput
from magnetar.core.naming import TopicName

SHORT_NAME = "magnetar"
MAX_PAGE_SIZE = 1000  # the read endpoint's limit on maxEntries
DEFAULT_PARTITIONS = 4
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MESSAGE_ID = struct.Struct(">qqqq")
_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
# What a response too large for Lambda (6 MB) or API Gateway looks like: retried with a smaller page.
_TOO_LARGE_STATUS = frozenset({413, 500, 502})

SCHEMA = StructType(
    [
        StructField("value", BinaryType(), True),
        StructField("__key", StringType(), True),
        StructField("__topic", StringType(), True),
        StructField("__messageId", BinaryType(), True),
        StructField("__publishTime", TimestampType(), True),
        StructField("__eventTime", TimestampType(), True),
        StructField("__messageProperties", MapType(StringType(), StringType(), True), True),
    ]
)


class MagnetarSourceError(RuntimeError):
    """The broker refused a request (its `reason` is in the message) or the read cannot go on."""

    def __init__(self, message: str, status: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


# --- message ids -------------------------------------------------------------------------------
def message_id_bytes(text: str) -> bytes:
    """The `__messageId` column: a message id `"L:E:P:B"` as 32 bytes.

    Layout: four big-endian signed 64-bit integers, in order ledger id, entry id, partition
    index, batch index (-1 for "none", as in the text form). The SDK's `MessageId.serialize()`
    writes the same layout, so `MessageId.deserialize(row["__messageId"])` gives the id back.
    """
    mid = MessageIdData.parse(text)
    return _MESSAGE_ID.pack(mid.ledger_id, mid.entry_id, mid.partition, mid.batch_index)


def message_id_from_bytes(data: bytes) -> str:
    """The inverse of `message_id_bytes`: 32 bytes back to `"L:E:P:B"`."""
    if len(data) != _MESSAGE_ID.size:
        raise ValueError(f"a message id is {_MESSAGE_ID.size} bytes, got {len(data)}")
    return str(MessageIdData(*_MESSAGE_ID.unpack(bytes(data))))


def _timestamp(ms: int | None) -> datetime | None:
    return None if not ms else _EPOCH + timedelta(milliseconds=int(ms))


# --- options -----------------------------------------------------------------------------------
def _int_option(
    options: Mapping[str, str], name: str, default: int, minimum: int, maximum: int | None = None
) -> int:
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"magnetar: option {name!r} must be an integer, got {raw!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise ValueError(f"magnetar: option {name!r} must be {bounds}, got {value}")
    return value


AUTH_PLUGIN_OPTION = "pulsar.client.authPluginClassName"
AUTH_PARAMS_OPTION = "pulsar.client.authParams"
TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"


class _TokenAuth:
    """`Authorization: Bearer` from Pulsar's token parameters: `token:XYZ` or `file:///path` (read at
    each request on the node making it, so a rotated file is used at once); other text is the
    token. A callable `auth=` for httpx (which is imported on the executors only when used)."""

    def __init__(self, params: str) -> None:
        text = params.strip()
        self._token = text[len("token:"):].strip() if text.startswith("token:") else None
        self._path: str | None = None
        if text.startswith("file:"):
            from urllib.parse import unquote, urlsplit

            self._path = unquote(urlsplit(text).path) if text.startswith("file://") else text[len("file:"):]
        elif self._token is None:
            self._token = text

    def token(self) -> str:
        if self._path is None:
            return self._token or ""
        from pathlib import Path

        try:
            return Path(self._path).expanduser().read_text().strip()
        except OSError as exc:
            raise MagnetarSourceError(f"magnetar: cannot read the token file {self._path}: {exc}",
                                      status=401, reason=str(exc)) from None

    def __call__(self, request: Any) -> Any:  # httpx calls it for every request it sends
        request.headers["Authorization"] = f"Bearer {self.token()}"
        return request


def _option(options: Mapping[str, str], name: str) -> str | None:
    """An option by its name, case-insensitively (Spark's options are; a plain dict is not)."""
    value = options.get(name)
    if value is None:
        lowered = name.lower()
        value = next((v for k, v in options.items() if str(k).lower() == lowered), None)
    return None if value is None or str(value).strip() == "" else str(value).strip()


class _Settings:
    """The validated options; plain attributes, so it pickles to the executors."""

    def __init__(self, options: Mapping[str, str]) -> None:
        url = options.get("service.url") or options.get("serviceUrl")
        if not url:
            raise ValueError("magnetar: option 'service.url' is required (e.g. http://127.0.0.1:8080)")
        self.service_url = str(url).rstrip("/")
        topic = options.get("topic")
        if not topic:
            raise ValueError("magnetar: option 'topic' is required (e.g. persistent://public/default/orders)")
        try:
            self.topic = TopicName.parse(str(topic).strip())
        except InvalidInput as exc:
            raise ValueError(f"magnetar: {exc.reason}") from None
        self.partitions = _int_option(options, "partitions", DEFAULT_PARTITIONS, 1)
        self.page_size = _int_option(options, "pageSize", MAX_PAGE_SIZE, 1, MAX_PAGE_SIZE)
        self.request_timeout_s = _int_option(options, "requestTimeoutMs", 30_000, 1) / 1000
        self.max_retries = _int_option(options, "maxRetries", 5, 0)
        self.read_timeout_s = _int_option(options, "readTimeoutMs", 30_000, 0) / 1000
        # the credentials as given (strings pickle; each node builds its own signer from them)
        self.auth_plugin = _option(options, AUTH_PLUGIN_OPTION)
        self.auth_params = _option(options, AUTH_PARAMS_OPTION)
        self.authentication()  # a bad plugin or parameters fail here, on the driver

    def authentication(self) -> Any:
        """A fresh `httpx.Auth` for the options' credentials, or None."""
        plugin, params = self.auth_plugin or "", self.auth_params
        if not plugin and params is None:
            return None
        if plugin.lower() in ("aws-iam", "awsiam", "sigv4") or plugin.endswith("AuthenticationAwsIam"):
            try:  # the SDK's signer: needs the magnetar wheel (not only the --py-files zip) and botocore
                from magnetar.client.auth import from_params
            except ImportError as exc:
                raise ValueError(f"magnetar: {AUTH_PLUGIN_OPTION}={plugin} needs the magnetar package installed "
                                 f"on every node (the wheel) and botocore: {exc}") from None
            return from_params(plugin, params)
        if plugin and plugin not in (TOKEN_PLUGIN, "token", "AuthenticationToken"):
            raise ValueError(f"magnetar: option {AUTH_PLUGIN_OPTION} must be {TOKEN_PLUGIN} or aws-iam, got {plugin!r}")
        if params is None:
            raise ValueError(f"magnetar: option {AUTH_PARAMS_OPTION} is required with {AUTH_PLUGIN_OPTION}: "
                             "token:XYZ or file:///path/to/token")
        return _TokenAuth(params)

    @property
    def topic_path(self) -> str:
        t = self.topic
        return "/".join(
            quote(part, safe="") for part in (t.domain.value, t.tenant, t.namespace, t.local_name)
        )


# --- HTTP ----------------------------------------------------------------------------------------
class _Broker:
    """The HTTP calls to the broker about one topic, with retries of transient failures."""

    def __init__(self, settings: _Settings, transport: Any = None) -> None:
        import httpx  # on the executors too: imported where used

        self._httpx = httpx
        self.settings = settings
        self.client = httpx.Client(
            base_url=settings.service_url,
            timeout=settings.request_timeout_s,
            headers={"Accept": "application/json", "User-Agent": "magnetar-spark"},
            transport=transport,
            auth=settings.authentication(),
        )

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> _Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self,
        method: str,
        path: str,
        what: str,
        body: dict[str, Any] | None = None,
        fail_fast: frozenset[int] = frozenset(),
    ) -> Any:
        """The JSON answer; retries transient failures except the statuses in `fail_fast`."""
        topic = self.settings.topic
        attempt = 0
        while True:
            try:
                response = self.client.request(method, path, json=body)
            except self._httpx.TransportError as exc:
                if attempt >= self.settings.max_retries:
                    raise MagnetarSourceError(
                        f"magnetar: {what} of {topic} failed: cannot reach {self.settings.service_url}: {exc}"
                    ) from exc
            else:
                if response.status_code < 400:
                    try:
                        return response.json()
                    except ValueError:
                        raise MagnetarSourceError(
                            f"magnetar: {what} of {topic} failed: the answer is not JSON: {response.text[:200]!r}",
                            status=response.status_code,
                        ) from None
                reason = _reason(response)
                status = response.status_code
                if (
                    status not in _TRANSIENT_STATUS
                    or status in fail_fast
                    or attempt >= self.settings.max_retries
                ):
                    raise MagnetarSourceError(
                        f"magnetar: {what} of {topic} failed: HTTP {response.status_code}: {reason}",
                        status=response.status_code,
                        reason=reason,
                    )
            time.sleep(min(0.2 * 2**attempt, 5.0))
            attempt += 1

    def last_entry_id(self) -> int:
        body = self._call("GET", f"/admin/v2/{self.settings.topic_path}/lastMessageId", "lastMessageId")
        return int(body["entryId"])


def _reason(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("reason"):
        return str(body["reason"])
    text = (response.text or "").strip()
    return text[:500] or response.reason_phrase or "no reason given"


# --- planning and rows ------------------------------------------------------------------------
def split_range(start: int, end: int, parts: int) -> list[tuple[int, int]]:
    """`[start, end]` (inclusive) as at most `parts` contiguous, nearly equal, non-empty ranges."""
    count = end - start + 1
    if count <= 0:
        return []
    parts = max(1, min(parts, count))
    size, extra = divmod(count, parts)
    out = []
    lo = start
    for i in range(parts):
        hi = lo + size + (1 if i < extra else 0) - 1
        out.append((lo, hi))
        lo = hi + 1
    return out


def _row(message: dict[str, Any], decode: Any, typed: Any = None) -> tuple[Any, ...]:
    """One row; `typed` (magnetar_spark/typed.py's TypedTopic): a topic with a schema, whose
    fields are the columns before the metadata ones."""
    meta = (
        message.get("key"),
        message.get("topic"),
        message_id_bytes(message["messageId"]),
        _timestamp(message.get("publishTime")),
        _timestamp(message.get("eventTime")),
        dict(message.get("properties") or {}),
    )
    if typed is not None:
        return typed.row(message, meta)  # type: ignore[no-any-return]
    return (decode(message.get("payload") or ""), *meta)


def typed_topic(options: Mapping[str, str]) -> Any:
    """The topic's schema as typed columns (magnetar_spark/typed.py), asked once on the driver;
    None for a topic without schema (or of a type typed columns are not made of)."""
    from magnetar_spark.typed import TypedTopic

    name = _option(options, "topic")
    if name is None:  # several topics: the binary value column
        return None
    settings = _Settings(options)
    base = TopicName.parse(name).partitioned_topic
    path = "/admin/v2/schemas/" + "/".join(quote(p, safe="") for p in (base.tenant, base.namespace, base.local_name))
    with _Broker(settings) as broker:
        try:
            return TypedTopic.fetch(lambda suffix: broker._call("GET", suffix, "schema", fail_fast=frozenset({404})),
                                    path)
        except MagnetarSourceError as exc:
            if exc.status == 404:
                return None
            raise


class MagnetarDataSource(DataSource):
    """`spark.read.format("magnetar")`: see the module docstring for the options."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        """The connector's columns; for a topic with an AVRO, JSON or primitive schema, its fields
        (typed) instead of the binary value (magnetar_spark/typed.py)."""
        typed = self._typed()
        return typed.schema if typed is not None else SCHEMA

    def _typed(self) -> Any:
        if "_typed_topic" not in self.__dict__:
            self._typed_topic = typed_topic(self.options)
        return self._typed_topic

    def reader(self, schema: StructType) -> DataSourceReader:
        fixed = self.schema()
        if [f.name for f in schema.fields] != [f.name for f in fixed.fields]:
            raise ValueError(f"magnetar: the schema is fixed: {fixed.simpleString()}")
        # topic / topics / topicsPattern, offsets, failOnDataLoss: magnetar_spark.options and .reading
        from magnetar_spark.options import SourceOptions
        from magnetar_spark.reading import BatchReader

        reader = BatchReader(SourceOptions(self.options))
        reader.typed = self._typed()  # a topic with a schema: typed columns (magnetar_spark/typed.py)
        return reader

    def streamReader(self, schema: StructType) -> Any:
        """`spark.readStream.format("magnetar")`: magnetar_spark.stream."""
        from magnetar_spark.options import SourceOptions
        from magnetar_spark.stream import MagnetarStreamReader

        reader = MagnetarStreamReader(SourceOptions(self.options, streaming=True))
        reader.typed = self._typed()  # a topic with a schema: typed columns (magnetar_spark/typed.py)
        return reader

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        """`df.write.format("magnetar")`: magnetar_spark.sink."""
        from magnetar_spark.sink import MagnetarWriter

        return MagnetarWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        """`df.writeStream.format("magnetar")`: magnetar_spark.sink."""
        from magnetar_spark.sink import MagnetarStreamWriter

        return MagnetarStreamWriter(self.options, schema, overwrite)
