"""Bodies of the broker's HTTP API.

Produce follows Pulsar's REST producer (`POST /topics/{domain}/{tenant}/{ns}/{topic}`,
`ProducerMessages` in, `messagePublishResults` out). Consume has no Pulsar REST equivalent; its
message shape follows Pulsar's WebSocket API (`messageId`, `payload`, `properties`,
`publishTime`, `redeliveryCount`, `key`).
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from magnetar.core.dispatch import MAX_WAIT_MS

INT64_MAX = 2**63 - 1  # Pulsar's ids, times and sizes are Java longs (and msgpack's limit)
INT32_MAX = 2**31 - 1  # Pulsar's rates in messages and its limits are Java ints


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


def decode_b64(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("payload is not valid base64") from None


class ProducerMessage(_Body):
    """`payload` null (or `nullValue` true with no payload) sends a null value: a tombstone,
    which topic compaction takes as the deletion of its key; distinct from "" (an empty message, as in Pulsar)."""

    payload: str | None = None
    properties: dict[str, str] = Field(default_factory=dict)
    key: str | None = None
    eventTime: int = Field(default=0, ge=0, le=INT64_MAX)
    nullValue: bool = False
    # Pulsar's REST producer: the clusters this message is stored in / stored here only
    replicationClusters: ClusterList | None = Field(default=None, max_length=64)
    disableReplication: bool = False

    @field_validator("payload")
    @classmethod
    def _valid_base64(cls, value: str | None) -> str | None:
        if value is not None:
            decode_b64(value)
        return value

    @model_validator(mode="after")
    def _null_or_payload(self) -> ProducerMessage:
        if self.nullValue and self.payload:
            raise ValueError("a null value (nullValue) carries no payload")
        if not self.is_null and "payload" not in self.model_fields_set:
            raise ValueError("payload is required (null for a null value)")
        return self

    @property
    def is_null(self) -> bool:
        return self.nullValue or ("payload" in self.model_fields_set and self.payload is None)


class ChunkModel(_Body):
    uuid: str = Field(min_length=1, max_length=128)
    chunkId: int = Field(ge=0)
    numChunks: int = Field(ge=1, le=100_000)
    totalSize: int = Field(ge=0, le=INT64_MAX)


class OriginModel(_Body):
    """A replicated copy's origin (a replicator's publish; superusers only): the cluster that
    stored the entry first, its id there, and the metadata it was published with."""

    cluster: str = Field(min_length=1, max_length=255)
    ledgerId: int = Field(ge=0, le=INT64_MAX)
    entryId: int = Field(ge=0, le=INT64_MAX)
    producerName: str = Field(default="", max_length=255)
    sequenceId: int = Field(default=-1, ge=-1, le=INT64_MAX)
    highestSequenceId: int = Field(default=-1, ge=-1, le=INT64_MAX)
    publishTime: int = Field(ge=0, le=INT64_MAX)


ClusterList = list[Annotated[str, StringConstraints(min_length=1, max_length=255)]]


class BatchModel(_Body):
    """A batch the SDK encoded (msgpack messages, compressed): stored as it comes."""

    payload: str
    numMessages: int = Field(ge=1, le=10_000)
    compression: str = "NONE"
    uncompressedSize: int = Field(ge=0, le=INT64_MAX)
    key: str | None = None
    batched: bool = True
    deliverAt: int = Field(default=0, ge=0, le=INT64_MAX)
    chunk: ChunkModel | None = None
    # in `batches` only (each batch its own; with `batch`, the request's are used)
    sequenceId: int | None = Field(default=None, ge=-1, le=INT64_MAX)
    highestSequenceId: int | None = Field(default=None, ge=-1, le=INT64_MAX)
    # in `batches` only: the batch's producer when it is not the request's (a client's producers of
    # one topic publishing together; each producer's batches in its order)
    producerName: str | None = Field(default=None, min_length=1, max_length=255)
    # geo-replication: the clusters this batch is stored in (pulsar-client's replication_clusters;
    # [] with disable_replication; absent: the topic's replication clusters), and a replicated copy's origin
    replicationClusters: ClusterList | None = Field(default=None, max_length=64)
    origin: OriginModel | None = None

    @field_validator("payload")
    @classmethod
    def _valid_base64(cls, value: str) -> str:
        decode_b64(value)
        return value


MAX_BATCHES_PER_REQUEST = 1_000  # the writer's MAX_ENTRIES_PER_APPEND


class ProduceRequest(_Body):
    """Pulsar's REST producer body (`messages`), one SDK-encoded `batch`, or several `batches`:
    consecutive entries appended all together or not at all (one journal record, up to its
    1 MiB), each with its own sequence ids; the response then lists each one's results."""

    producerName: str = Field(default="rest-producer", min_length=1, max_length=255)
    sequenceId: int = Field(default=-1, ge=-1, le=INT64_MAX)
    highestSequenceId: int = Field(default=-1, ge=-1, le=INT64_MAX)
    batched: bool = True
    messages: list[ProducerMessage] | None = Field(default=None, min_length=1)
    batch: BatchModel | None = None
    batches: list[BatchModel] | None = Field(default=None, min_length=1, max_length=MAX_BATCHES_PER_REQUEST)
    # Pulsar's ProducerMessages: typed `messages` (the payload as text; api/routes/schemas.py encodes them)
    schemaVersion: int = Field(default=-1, ge=-1, le=INT64_MAX)
    keySchema: str | None = None
    valueSchema: str | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> ProduceRequest:
        if [self.messages, self.batch, self.batches].count(None) != 2:
            raise ValueError("give one of messages, batch or batches")
        if self.batch is not None and (self.batch.sequenceId is not None or self.batch.highestSequenceId is not None
                                       or self.batch.producerName is not None):
            raise ValueError("batch: the producer and sequence ids go on the request (inside a batch only with "
                             "batches)")
        if self.batches is not None and any(b.chunk is not None for b in self.batches):
            raise ValueError("batches: a chunk travels alone, as batch")
        return self


class PublishResult(BaseModel):
    messageId: str
    errorCode: int = 0
    schemaVersion: int = 0


class BatchPublishResult(BaseModel):
    """One batch of a `batches` publish: its entry and its messages' ids."""

    messagePublishResults: list[PublishResult]
    ledgerId: int
    entryId: int
    duplicate: bool = False


class ProduceResponse(BaseModel):
    """With `batches`: `batches` holds each batch's results in request order, the top-level
    `messagePublishResults` all of them in the same order, `ledgerId`/`entryId` the first entry's,
    `duplicate` whether every batch was one."""

    messagePublishResults: list[PublishResult]
    ledgerId: int
    entryId: int
    duplicate: bool = False
    batches: list[BatchPublishResult] | None = None
    throttledMs: int | None = Field(
        default=None, description="Present when the journal's shard was saturated: how long the write waited for "
        "its write budget. A producer spaces its next requests by it instead of sending into refusals.")
    journalShard: str | None = Field(
        default=None, description="The journal shard the write went to: a client's producers whose writes share "
        "a shard pace their requests together.")


class ProducerRequest(_Body):
    accessMode: Literal["Shared", "Exclusive", "WaitForExclusive", "ExclusiveWithFencing"] = "Shared"
    leaseMs: int = Field(default=30_000, ge=1_000, le=600_000)


class TenantRequest(_Body):
    """Pulsar's TenantInfo; `allowedClusters` absent: this cluster only."""

    adminRoles: list[str] = Field(default_factory=list)
    allowedClusters: list[str] | None = None


class ClusterDataRequest(BaseModel):
    """Pulsar's ClusterData: a cluster's URLs (each checked for its scheme when set) and how other
    clusters authenticate to it. Pulsar's other fields (proxyServiceUrl, TLS settings...) are
    accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    serviceUrl: str | None = Field(default=None, strict=True, max_length=2048)
    serviceUrlTls: str | None = Field(default=None, strict=True, max_length=2048)
    brokerServiceUrl: str | None = Field(default=None, strict=True, max_length=2048)
    brokerServiceUrlTls: str | None = Field(default=None, strict=True, max_length=2048)
    authenticationPlugin: str | None = Field(default=None, strict=True, max_length=1024)
    authenticationParameters: str | None = Field(default=None, strict=True, max_length=16_384)


class HashRange(_Body):
    """An inclusive range of key hashes (Pulsar's IntRange; hashes are 0..65535)."""

    start: int = Field(ge=-INT32_MAX - 1, le=INT32_MAX)
    end: int = Field(ge=-INT32_MAX - 1, le=INT32_MAX)


class KeySharedMeta(_Body):
    """A Key_Shared consumer's policy (Pulsar's KeySharedMeta): AUTO_SPLIT shares the hash range
    evenly among the consumers; STICKY gives this consumer exactly `hashRanges` (refused, 409
    ConsumerAssignError, when they overlap another consumer's); `allowOutOfOrderDelivery` lets a
    key move to a new consumer without waiting for the old one's unacknowledged messages."""

    keySharedMode: Literal["AUTO_SPLIT", "STICKY"] = "AUTO_SPLIT"
    hashRanges: list[HashRange] = Field(default_factory=list, max_length=64)
    allowOutOfOrderDelivery: bool = False


class SubscribeRequest(_Body):
    subscriptionType: Literal["Exclusive", "Shared", "Failover", "Key_Shared"] = "Exclusive"
    initialPosition: Literal["Earliest", "Latest"] = "Latest"
    ackTimeoutMs: int = Field(default=0, ge=0, le=INT64_MAX)
    keySharedPolicy: KeySharedMeta | None = None  # Key_Shared only (ignored on other types, as in Pulsar)
    # a subscription created at Latest starts at the last message, not after it (pulsar-client's
    # start_message_id_inclusive); no effect on an existing subscription or at Earliest
    startMessageIdInclusive: bool = False
    # Pulsar's priorityLevel (0 the highest): a Failover subscription's active consumers are those of
    # the highest level present
    priorityLevel: int = Field(default=0, ge=0, le=2**31 - 1)
    # Pulsar's replicateSubscriptionState: the subscription's position crosses to the topic's other clusters
    replicateSubscriptionState: bool = False


class ReplicatedAcksRequest(_Body):
    """What a replicated subscription acknowledged in another cluster (that cluster's replicator):
    per cluster of origin, the highest origin entry id its acknowledged prefix holds."""

    cluster: str = Field(min_length=1, max_length=255)
    subscriptionType: Literal["Exclusive", "Shared", "Failover", "Key_Shared"] = "Exclusive"
    originAcked: dict[Annotated[str, StringConstraints(min_length=1, max_length=255)],
                      Annotated[int, Field(ge=-1, le=INT64_MAX)]] = Field(max_length=64)


class ReplicatedAcksResponse(BaseModel):
    markDeletePosition: int  # the subscription's first entry not acknowledged, here


class AckRequest(_Body):
    """Message ids `ledger:entry:partition:batchIndex`; `batchSizes` (entry id -> messages in it)
    lets the broker track batch-index acknowledgements; `epoch` ignores acks from before a seek."""

    messageIds: list[str] = Field(default_factory=list, max_length=100_000)
    batchSizes: dict[str, int] = Field(default_factory=dict)
    cumulative: str | None = None
    nacks: list[str] = Field(default_factory=list, max_length=100_000)
    nackDelayMs: int = Field(default=60_000, ge=0, le=7 * 24 * 3600 * 1000)
    epoch: int | None = Field(default=None, ge=-INT64_MAX - 1, le=INT64_MAX)
    # on a partitioned topic's own name: the acknowledgements of each partition, by its index
    partitions: dict[str, AckRequest] | None = Field(default=None, max_length=256)


class JoinedReceive(_Body):
    """Another consumer of the subscription that a receive serves too."""

    consumer: str = Field(min_length=1, max_length=256)
    maxMessages: int = Field(default=100, ge=1, le=10_000)
    acks: AckRequest | None = None  # its acknowledgements (over partitions: by partition, `acks.partitions`)


class ReceiveRequest(_Body):
    maxMessages: int = Field(default=100, ge=1, le=10_000)
    minMessages: int = Field(default=1, ge=1, le=10_000)  # return early once this many are ready
    waitMs: int = Field(default=0, ge=0, le=MAX_WAIT_MS)
    requestId: str = Field(default="", max_length=128)
    acks: AckRequest | None = None  # acknowledgements riding along with the poll
    # the client sends `acks` again when the answer lists them in `unappliedAcks`: a poll that hands
    # out nothing while the topic's next seal is expected leaves them for the next poll's claim
    # (one cursor write for both) instead of writing them alone
    deferAcks: bool = False
    # on a partitioned topic's own name: one poll for these partitions (acks: `acks.partitions`)
    partitions: list[int] | None = Field(default=None, min_length=1, max_length=256)
    # other consumers of the subscription this poll serves as well (a client's consumers polling
    # together: one look and one claim for all of them)
    joined: list[JoinedReceive] | None = Field(default=None, min_length=1, max_length=31)


class ReadRequest(_Body):
    startEntryId: int = Field(default=0, ge=0, le=INT64_MAX)
    maxEntries: int = Field(default=100, ge=1, le=1000)
    format: Literal["messages", "entries"] = "messages"
    # messages only: each value decoded with the topic's schema (`value`, `schemaType`; `valueError`)
    decode: bool = False


class SeekRequest(_Body):
    messageId: str | None = None
    timestamp: int | None = Field(default=None, ge=0, le=INT64_MAX)

    @model_validator(mode="after")
    def _one_target(self) -> SeekRequest:
        if (self.messageId is None) == (self.timestamp is None):
            raise ValueError("give either messageId or timestamp")
        return self


class ConsumerMessage(BaseModel):
    """A null value (a tombstone) comes with `payload` "" and `nullValue` true (absent otherwise)."""

    messageId: str
    payload: str
    properties: dict[str, str]
    publishTime: int
    eventTime: int
    redeliveryCount: int
    key: str | None
    producerName: str
    topic: str
    nullValue: bool | None = None
    # end to end encrypted (absent otherwise): `payload` is the ciphertext; Pulsar's WebSocket
    # encryptionContext (PIP-290): keys {name: {keyValue, metadata}}, param (the IV), algorithm,
    # compressionType, uncompressedMessageSize
    encryptionContext: dict[str, Any] | None = None
    schemaVersion: int | None = None  # written with this version of the topic's schema (absent: none)
    # a reader's `decode`: the value decoded with its schema (JSON data), the schema's type, or why not
    value: Any = None
    schemaType: str | None = None
    valueError: str | None = None


class RetentionPolicies(_Body):
    """Pulsar's RetentionPolicies (-1: infinite)."""

    retentionTimeInMinutes: int
    retentionSizeInMB: int


class BacklogQuotaRequest(BaseModel):
    """Pulsar's BacklogQuota (limitSize bytes, limitTime seconds; -1: no limit)."""

    model_config = ConfigDict(extra="ignore")  # Pulsar clients also send the deprecated `limit`

    limitSize: int = -1
    limitTime: int = -1
    policy: Literal["producer_request_hold", "producer_exception", "consumer_backlog_eviction"] = (
        "producer_request_hold"
    )


class PublishRateRequest(_Body):
    """Pulsar's PublishRate: what each topic partition accepts per second (-1 or 0: no limit)."""

    publishThrottlingRateInMsg: int = Field(default=-1, strict=True, le=INT32_MAX)  # Pulsar's int
    publishThrottlingRateInByte: int = Field(default=-1, strict=True, le=INT64_MAX)  # Pulsar's long


class DispatchRateRequest(_Body):
    """Pulsar's DispatchRate: what each subscription is handed per `ratePeriodInSecond` (-1 or 0:
    no limit); `relativeToPublishRate` adds the topic's publish rate to the limits."""

    dispatchThrottlingRateInMsg: int = Field(default=-1, strict=True, le=INT32_MAX)
    dispatchThrottlingRateInByte: int = Field(default=-1, strict=True, le=INT64_MAX)
    ratePeriodInSecond: int = Field(default=1, strict=True, le=INT32_MAX)
    relativeToPublishRate: bool = Field(default=False, strict=True)


# --- responses (documented in the OpenAPI document, magnetar.api.openapi) ----------------------
class TenantInfo(BaseModel):
    adminRoles: list[str]
    allowedClusters: list[str]


class ClusterDataResponse(BaseModel):
    """Pulsar's ClusterData ("" for a field not set)."""

    serviceUrl: str
    serviceUrlTls: str
    brokerServiceUrl: str
    brokerServiceUrlTls: str
    authenticationPlugin: str
    authenticationParameters: str


class TopicLookupData(BaseModel):
    """Pulsar's LookupData: where a binary protocol client serves the topic ("" for a URL not set)."""

    brokerUrl: str
    brokerUrlTls: str
    httpUrl: str
    httpUrlTls: str
    nativeUrl: str


class PartitionedTopicMetadata(BaseModel):
    partitions: int


class LastMessageId(BaseModel):
    ledgerId: int
    entryId: int
    partitionIndex: int


class MessageIdBody(BaseModel):
    """Pulsar's MessageIdImpl as the admin API takes it (create a subscription at, reset a cursor
    to): `MessageId.earliest` is (-1, -1), `MessageId.latest` (INT64_MAX, INT64_MAX)."""

    model_config = ConfigDict(extra="ignore")  # batchIndex, isExcluded... of Pulsar's clients
    ledgerId: int = Field(ge=-1, le=INT64_MAX)
    entryId: int = Field(ge=-1, le=INT64_MAX)
    partitionIndex: int = Field(default=-1, ge=-1, le=INT32_MAX)


class AttachProducerResponse(BaseModel):
    lastSequenceId: int


class SubscribeResponse(BaseModel):
    subscriptionType: str
    consumers: list[str]
    epoch: int


class WireEntry(BaseModel):
    """An entry as the SDK receives it: metadata plus the still-compressed batch (base64)."""

    ledgerId: int
    entryId: int
    partition: int
    batched: bool
    redeliveryCount: int
    publishTime: int
    producerName: str
    sequenceId: int
    numMessages: int
    compression: str
    uncompressedSize: int
    payload: str
    key: str | None = None
    ackedIndexes: list[int] | None = None
    chunk: ChunkModel | None = None


class JoinedReceived(BaseModel):
    """What a receive handed out to one of its joined consumers (as the receive's own fields)."""

    entries: list[WireEntry]
    epoch: int | None = None  # one topic
    epochs: dict[str, int] | None = None  # over partitions
    unappliedAcks: list[int] | None = None
    nextSealInMs: int | None = None


class ReceiveResponse(BaseModel):
    """Entries name their partition; a multi-partition receive gives each partition's cursor
    epoch in `epochs`, and in `unappliedAcks` the partitions whose acks must be sent again (a
    receive of one topic: its partition index, -1 when it is not a partition); what it handed out
    to its joined consumers is in `joined`, by consumer."""

    entries: list[WireEntry]
    epoch: int
    epochs: dict[str, int] | None = None
    unappliedAcks: list[int] | None = None
    nextSealInMs: int | None = Field(default=None, description=(
        "When the topic's next seal is due (ms from now), when the broker can tell (a receive over several "
        "partitions: the first of theirs, when each is known): a consumer that keeps up finds nothing new before "
        "then"))
    joined: dict[str, JoinedReceived] | None = None


class AckResponse(BaseModel):
    """A multi-partition ack answers `epochs` by partition (`markDeleteEntryId` -1, `epoch` 0)."""

    markDeleteEntryId: int
    epoch: int
    epochs: dict[str, int] | None = None


class SeekResponse(BaseModel):
    position: int
    epoch: int


class ReadResponse(BaseModel):
    """`messages` (format=messages) or `entries` (format=entries), and where to read next."""

    nextEntryId: int
    # the first entry id retention keeps; a read from below it lost `startEntryId..firstEntryId-1`
    firstEntryId: int | None = None
    messages: list[ConsumerMessage] | None = None
    entries: list[WireEntry] | None = None


class PositionResponse(BaseModel):
    entryId: int
