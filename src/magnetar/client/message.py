"""MessageId and Message, with the official pulsar-client's method names."""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass, field
from functools import total_ordering
from typing import TYPE_CHECKING, Any, ClassVar

from magnetar.client.types import check_native
from magnetar.core.entry import Entry, MessageIdData

if TYPE_CHECKING:
    from magnetar.client.crypto import EncryptionContext

_ID_FORMAT = ">qqqq"  # ledger, entry, partition, batch index: 32 bytes, big-endian


@total_ordering
class MessageId:
    earliest: ClassVar[MessageId]
    latest: ClassVar[MessageId]

    def __init__(self, partition: int = -1, ledger_id: int = -1, entry_id: int = -1, batch_index: int = -1,
                 topic: str = "", batch_size: int = 0) -> None:
        for name, value in (("partition", partition), ("ledger_id", ledger_id), ("entry_id", entry_id),
                            ("batch_index", batch_index)):
            if type(value) is not int:  # pulsar-client's constructor takes ints (a TypeError otherwise)
                check_native(int, value, f"MessageId {name}")
        self._data = MessageIdData(ledger_id, entry_id, partition, batch_index)
        self._topic = topic  # which topic partition: acknowledgements of multi-topic consumers route by it
        self._batch_size = batch_size  # messages in the entry (batch-index acknowledgement)
        self._chunks: tuple[MessageId, ...] = ()  # a chunked message: the ids of all its chunks
        # which stay on a service delivered it (Transport.generation; None: not received): after a
        # client failover, acknowledgements go only to the cluster that delivered the message
        self._generation: int | None = None

    def ledger_id(self) -> int:
        return self._data.ledger_id

    def entry_id(self) -> int:
        return self._data.entry_id

    def partition(self) -> int:
        return self._data.partition

    def batch_index(self) -> int:
        return self._data.batch_index

    def serialize(self) -> bytes:
        d = self._data
        return struct.pack(_ID_FORMAT, d.ledger_id, d.entry_id, d.partition, d.batch_index)

    @staticmethod
    def deserialize(message_id_bytes: bytes, topic: str | None = None) -> MessageId:
        """The id `serialize()` gave; `topic` (as in pulsar-client, for multi-topic consumers) says
        which topic partition it belongs to, so that it can be acknowledged through such a consumer."""
        data = message_id_bytes
        if not isinstance(data, bytes | bytearray):
            raise ValueError(f"Argument message_id_bytes is expected to be of type 'bytes' and not "
                             f"'{type(data).__name__}'")
        if len(data) != struct.calcsize(_ID_FORMAT):
            raise ValueError(f"a serialized MessageId is {struct.calcsize(_ID_FORMAT)} bytes, got {len(data)}")
        if topic is not None and not isinstance(topic, str):
            raise ValueError("Argument topic is expected to be either None or of type 'str'")
        ledger_id, entry_id, partition, batch_index = struct.unpack(_ID_FORMAT, bytes(data))
        return MessageId(partition, ledger_id, entry_id, batch_index, topic or "")

    @classmethod
    def wrap(cls, msg_id: MessageId) -> MessageId:
        """pulsar-client wraps its native id in the Python class; Magnetar's ids are already that
        class, so this gives an equal id (topic and batch size kept)."""
        if not isinstance(msg_id, MessageId):
            raise ValueError(f"Argument msg_id is expected to be of type 'MessageId' and not '{type(msg_id).__name__}'")
        d = msg_id._data
        wrapped = cls(d.partition, d.ledger_id, d.entry_id, d.batch_index, msg_id._topic, msg_id._batch_size)
        wrapped._chunks = msg_id._chunks
        return wrapped

    @staticmethod
    def from_text(text: str, topic: str = "") -> MessageId:
        d = MessageIdData.parse(text)
        return MessageId(d.partition, d.ledger_id, d.entry_id, d.batch_index, topic)

    def topic_name(self) -> str:
        return self._topic

    def wire(self) -> str:
        """The `ledger:entry:partition:batch` form of the HTTP API."""
        return str(self._data)

    def _key(self) -> tuple[int, int, int, int]:
        d = self._data
        return (d.partition, d.ledger_id, d.entry_id, d.batch_index)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageId) and self._data == other._data

    def __lt__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented  # a TypeError, as pulsar-client's
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._data)

    def __str__(self) -> str:
        d = self._data
        return f"({d.ledger_id},{d.entry_id},{d.partition},{d.batch_index})"

    __repr__ = __str__


MessageId.earliest = MessageId(-1, -1, -1, -1)
MessageId.latest = MessageId(-1, 2**63 - 1, 2**63 - 1, -1)


@dataclass
class Message:
    _data: bytes
    _message_id: MessageId
    _topic: str
    _properties: dict[str, str] = field(default_factory=dict)
    _partition_key: str = ""
    _publish_timestamp: int = 0
    _event_timestamp: int = 0
    _redelivery_count: int = 0
    _producer_name: str = ""

    _ordering_key: str = ""
    _null_value: bool = False  # a tombstone: data() is b"" as in pulsar-client, has_null_value() tells
    _encryption: dict[str, Any] | None = None  # end-to-end encryption context, as stored (core/encryption.py)
    _decryption_failed: bool = False  # delivered still encrypted (crypto_failure_action CONSUME)
    _schema_version: int | None = None  # the topic schema's version the value was written with
    _schema: Any = None  # a typed consumer's or reader's schema (magnetar.schema): value() decodes with it
    _replicated_from: str = ""  # a replicated copy: the cluster it was published in (geo-replication)

    @classmethod
    def from_wire(cls, m: dict[str, Any]) -> Message:
        """A message in Pulsar's WebSocket/REST shape."""
        return cls(
            base64.b64decode(m.get("payload") or ""),
            MessageId.from_text(m["messageId"], m["topic"]),
            m["topic"],
            m.get("properties") or {},
            m.get("key") or "",
            m.get("publishTime", 0),
            m.get("eventTime", 0),
            m.get("redeliveryCount", 0),
            m.get("producerName", ""),
            _null_value=bool(m.get("nullValue")),
            _schema_version=m["schemaVersion"] if isinstance(m.get("schemaVersion"), int) else None,
            _replicated_from=str(m.get("replicatedFrom") or ""),
        )

    @classmethod
    def from_entry(cls, entry: Entry, partition: int, redelivery_count: int, skip: set[int] | None = None) -> list[Message]:
        """The messages of a received entry (the SDK decompresses), minus those already acked."""
        out = []
        for i, m in enumerate(entry.messages):
            if skip and i in skip:
                continue
            mid = MessageId(partition, entry.ledger_id, entry.entry_id, i if entry.batched else -1, entry.topic,
                            entry.num_messages if entry.batched else 0)
            out.append(cls(m.payload, mid, entry.topic, m.properties, m.key or "", entry.publish_time, m.event_time,
                           redelivery_count, entry.producer_name, m.ordering_key or "", m.null_value,
                           _encryption=m.encryption, _schema_version=m.schema_version,
                           _replicated_from=entry.replicated_from))
        return out

    def data(self) -> bytes:
        return self._data

    def value(self) -> Any:
        """The value: decoded by the consumer's or reader's schema (`schema=`), else the bytes."""
        if self._schema is not None and not self._null_value:
            return self._schema.decode_message(self)
        return self._data

    def schema_version(self) -> str:
        """pulsar-client's form of the version of the topic's schema the message was written with:
        Pulsar's 8-byte big-endian version as text, one character per byte
        ('\x00' * 8 for version 0; `.encode()` gives the bytes back); "" when it has none.
        `int_schema_version()` is the number."""
        if self._schema_version is None:
            return ""
        return struct.pack(">q", self._schema_version).decode("latin-1")

    def int_schema_version(self) -> int:
        """The schema version as a number (pulsar-client's native message has it too); -1 when none."""
        return -1 if self._schema_version is None else self._schema_version

    def message_id(self) -> MessageId:
        return self._message_id

    def topic_name(self) -> str:
        return self._topic

    def properties(self) -> dict[str, str]:
        return dict(self._properties)

    def partition_key(self) -> str:
        return self._partition_key

    def ordering_key(self) -> str:
        return self._ordering_key or self._partition_key

    def publish_timestamp(self) -> int:
        return self._publish_timestamp

    def event_timestamp(self) -> int:
        return self._event_timestamp

    def redelivery_count(self) -> int:
        return self._redelivery_count

    def producer_name(self) -> str:
        return self._producer_name

    def is_replicated(self) -> bool:
        """Whether the message is a replicated copy, stored first in another cluster of the
        topic's replication set (Pulsar's `Message.isReplicated()`)."""
        return bool(self._replicated_from)

    def replicated_from(self) -> str:
        """The cluster a replicated copy was published in; "" for a message published in this
        cluster (Pulsar's `Message.getReplicatedFrom()`)."""
        return self._replicated_from

    def has_null_value(self) -> bool:
        """pulsar-client's null value (a tombstone, sent as `send(None)`): `data()` and `value()`
        are then empty bytes, as pulsar-client gives them."""
        return self._null_value

    def encryption_context(self) -> EncryptionContext | None:
        """pulsar-client's: how the message was encrypted (its keys, IV, algorithm, compression),
        `is_decryption_failed()` True when it was delivered still encrypted; None when it was not
        encrypted."""
        if self._encryption is None:
            return None
        from magnetar.client.crypto import EncryptionContext

        return EncryptionContext(self._encryption, self._decryption_failed)

    def __repr__(self) -> str:
        return f"Message(id={self._message_id}, topic={self._topic!r}, {len(self._data)} bytes)"


def acknowledged_id(message: object, method: str) -> MessageId:
    """The id an acknowledgement names: a Message's, or a MessageId; anything else is the
    TypeError pulsar-client raises."""
    if isinstance(message, Message):
        return message.message_id()
    if isinstance(message, MessageId):
        return message
    raise TypeError(f"{method}(): incompatible function arguments: a Message or a MessageId, not "
                    f"'{type(message).__name__}'")
