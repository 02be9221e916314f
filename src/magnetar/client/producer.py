"""Producer of one topic partition: client-side batching, compression, chunking, sequence ids;
order kept.

Messages wait in the current batch until it holds `batching_max_messages` messages or
`batching_max_allowed_size_in_bytes` bytes, or `batching_max_publish_delay_ms` has passed, or
`send()`/`flush()` asks for it; then it is *ready* (one batch = one entry). One request is in
flight at a time, so a producer's messages keep their order; while it is, ready batches queue, up
to `max_pending_messages` messages waiting (then `send` blocks), and the next request carries all
of them, joined again into batches up to the batching limits (with key-based batching, entries
of one key each), as one group append: one
broker invocation, one id reservation, one journal record, split only to fit the journal's record
size. A failed request is retried until `send_timeout_millis`. A message with a delivery time, or
one larger than the journal's record limit (chunked), travels alone.

Geo-replication: a message's `replication_clusters` / `disable_replication` are its entry's
(`replicationClusters` of the encoded batch; [] for disable_replication), so a batch never mixes
messages with different settings: a message whose setting differs from the current batch's
closes it and starts the next one, and batches joined again for a request are joined only with
neighbours of the same setting. (pulsar-client's batch container instead gives the whole batch
the setting of its first message.)
"""

from __future__ import annotations

import base64
import contextlib
import inspect
import logging
import threading
import time
import uuid
from concurrent.futures import Future
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from magnetar.client import exceptions
from magnetar.client.message import MessageId
from magnetar.client.producer_entries import (
    Pending,
    SendCallback,
    by_key,
    requests_of,
    same_replication,
    travels_alone,
    with_replication,
)
from magnetar.client.send_checks import after_ms, check_content, check_send, replicate_to_of
from magnetar.client.threads import Workers
from magnetar.client.tracing import traced_properties
from magnetar.client.transport import Transport, topic_path
from magnetar.client.types import (
    BatchingType,
    CompressionType,
    ProducerAccessMode,
    Result,
)
from magnetar.core.compression import Codec, compress
from magnetar.core.entry import Message, encode_messages
from magnetar.core.naming import TopicName
from magnetar.core.publish_pacing import PublishPacer, ShardPacers

if TYPE_CHECKING:
    from magnetar.client.crypto import MessageEncryptor
    from magnetar.client.publish_together import PublishGroups

log = logging.getLogger(__name__)
# pulsar-client closes a batch after 10 ms; here every request is an API call, a Lambda invocation, a
# DynamoDB reservation and a Kinesis record, so a busy producer lingers longer by default: its share
# of the end-to-end latency budget it splits with the seal latency target (core/ledger/pacing.py,
# DEFAULT_SEAL_LATENCY_MS, says how; docs/benchmarks.md measures it).
DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS = 100
IDLE_WAIT_S = 5.0  # an idle producer's sender thread wakes this seldom (many producers per process)
MAX_ENTRY_BYTES = 900 * 1024  # under Kinesis' 1 MiB record, with room for the entry's metadata
EXCLUSIVE_LEASE_MS = 30_000  # an exclusive producer renews its hold on the topic every third of it


def send_arguments(content: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """`send`'s arguments after the payload, by name (positional ones in pulsar-client's order),
    checked as `send` checks them: what a producer of several partitions routes by, then sends."""
    bound = _SEND.bind(None, content, *args, **kwargs)  # a wrong name or count: the call's TypeError
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    del arguments["self"]
    check_send(**arguments)
    del arguments["content"]
    return arguments


class Producer:
    _schema_version: int | None = None  # the topic schema's version its messages carry (client/schema.py)

    def __init__(
        self,
        transport: Transport,
        topic: TopicName,
        producer_name: str | None,
        batching_enabled: bool = True,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS,
        send_timeout_millis: int = 30_000,
        compression_type: CompressionType = CompressionType.NONE,
        chunking_enabled: bool = False,
        access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
        attach: bool = False,
        batching_type: BatchingType = BatchingType.Default,
        max_pending_messages: int = 1000,
        initial_sequence_id: int | None = None,
        encryptor: MessageEncryptor | None = None,
        pacers: ShardPacers | None = None,
        publish_groups: PublishGroups | None = None,
    ) -> None:
        self._transport = transport
        self._topic = topic
        self._name = producer_name or f"magnetar-{uuid.uuid4().hex[:12]}"
        self._path = f"/topics/{topic_path(topic)}"
        self._batching = batching_enabled
        self._max_messages = max(1, batching_max_messages) if batching_enabled else 1
        self._max_bytes = min(batching_max_allowed_size_in_bytes, MAX_ENTRY_BYTES)
        self._delay_s = batching_max_publish_delay_ms / 1000
        self._send_timeout_s = send_timeout_millis / 1000 if send_timeout_millis > 0 else 3600.0
        self._codec = Codec.parse(compression_type.value)
        self._encryptor = encryptor  # end-to-end encryption (client/crypto.py): it compresses each payload
        if encryptor is not None:
            self._codec = Codec.NONE  # ciphertext does not compress
        self._chunking = chunking_enabled
        self._batch: list[Pending] = []  # the batch being filled
        # ready to send, in order: batches, and delayed or chunked messages (each its own request)
        self._ready: list[list[Pending]] = []
        self._waiting = 0  # messages in ready batches and the current one, not yet in flight
        self._max_pending = max(1, max_pending_messages)
        self._batch_bytes = 0
        self._batch_started = 0.0
        self._flush_requested = False
        self._closed = False
        self._key_based = batching_type is BatchingType.KeyBased
        self._access_mode = access_mode
        self._attach_path = f"/magnetar/v1/producer/{topic_path(topic)}/{self._name}"
        last = self._attach() if attach or access_mode is not ProducerAccessMode.Shared else -1
        if initial_sequence_id is not None:  # pulsar-client: the first message gets the next one
            last = initial_sequence_id
        self._next_sequence_id = last + 1  # a named producer resumes its sequence after a restart
        self._last_sequence_id = last
        self._cond = threading.Condition()
        self._inflight = 0
        # spaces requests while the journal's shard is saturated (core/publish_pacing.py): the
        # producer's own until the broker names its topic's shard, then the one its client's
        # producers on that shard share
        self._pacer = PublishPacer()
        self._pacers = pacers
        self._stopped = threading.Event()  # closed: the lease renewal stops waiting
        # the client's producers of this topic: one's request carries what the others have ready
        # (client/publish_together.py); Shared producers only
        self._groups = publish_groups if access_mode is ProducerAccessMode.Shared else None
        if self._groups is not None:
            self._groups.join(str(topic), self)
        self._workers = Workers()
        self._workers.start(self._run, name=f"producer-{self._name}")
        if access_mode is not ProducerAccessMode.Shared:
            self._workers.start(self._keep_exclusive, name=f"lease-{self._name}")

    def _attach(self) -> int:
        """Register with the topic: Exclusive takes it or fails, WaitForExclusive waits for it."""
        body = {"accessMode": self._access_mode.value, "leaseMs": EXCLUSIVE_LEASE_MS}
        while True:
            try:
                return int(self._transport.call("PUT", self._attach_path, body)["lastSequenceId"])
            except exceptions.ProducerFenced:
                if self._access_mode is not ProducerAccessMode.WaitForExclusive:
                    raise
                time.sleep(1.0)

    def _keep_exclusive(self) -> None:
        # renewals hold the topic as Exclusive: ExclusiveWithFencing fences once, when it is created
        mode = ProducerAccessMode.Exclusive if self._access_mode is ProducerAccessMode.ExclusiveWithFencing \
            else self._access_mode
        body = {"accessMode": mode.value, "leaseMs": EXCLUSIVE_LEASE_MS}
        while not self._stopped.wait(EXCLUSIVE_LEASE_MS / 3000):
            try:
                self._transport.call("PUT", self._attach_path, body)
            except exceptions.PulsarException:
                log.warning("could not renew the exclusive producer lease", exc_info=True)

    # --- pulsar-client API -----------------------------------------------------------------
    def topic(self) -> str:
        return str(self._topic)

    def producer_name(self) -> str:
        return self._name

    def last_sequence_id(self) -> int:
        return self._last_sequence_id

    def send(self, content: bytes | None, properties: dict[str, str] | None = None, partition_key: str | None = None,
             ordering_key: str | None = None, sequence_id: int | None = None,
             replication_clusters: list[str] | None = None, disable_replication: bool = False,
             event_timestamp: int | None = None, deliver_at: int | None = None,
             deliver_after: timedelta | int | None = None) -> MessageId:
        """pulsar-client's `send`: `deliver_at` in ms since the epoch, `deliver_after` a `timedelta`
        (Magnetar also takes ms as an int). `replication_clusters` names the clusters of the
        topic's replication set the message is stored in (None or []: all of them),
        `disable_replication` stores it in this cluster only."""
        check_send(content, properties, partition_key, ordering_key, sequence_id, replication_clusters,
                   disable_replication, event_timestamp, deliver_at, deliver_after)
        future = self._enqueue(content, properties, partition_key, ordering_key, sequence_id, event_timestamp,
                               deliver_at, after_ms(deliver_after), None,
                               replicate_to_of(replication_clusters, disable_replication))
        self.flush()
        return future.result()

    def send_async(self, content: bytes | None, callback: SendCallback | None, properties: dict[str, str] | None = None,
                   partition_key: str | None = None, ordering_key: str | None = None, sequence_id: int | None = None,
                   replication_clusters: list[str] | None = None, disable_replication: bool = False,
                   event_timestamp: int | None = None, deliver_at: int | None = None,
                   deliver_after: timedelta | int | None = None) -> None:
        check_send(content, properties, partition_key, ordering_key, sequence_id, replication_clusters,
                   disable_replication, event_timestamp, deliver_at, deliver_after)
        if callback is not None and not callable(callback):
            raise TypeError(f"send_async(): incompatible function arguments: callback must be callable, not "
                            f"'{type(callback).__name__}'")
        self._enqueue(content, properties, partition_key, ordering_key, sequence_id, event_timestamp, deliver_at,
                      after_ms(deliver_after), callback, replicate_to_of(replication_clusters, disable_replication))

    def flush(self) -> None:
        """Send everything queued so far and wait until it is acknowledged (or failed)."""
        with self._cond:
            self._flush_requested = True
            self._cond.notify_all()
            while (self._batch or self._ready or self._inflight) and not self._closed:
                self._cond.wait(0.05)

    def close(self) -> None:
        if self._closed:
            self._workers.join()
            return
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._stopped.set()
        self._workers.join()  # the sender (its last request answered) and the lease renewal
        if self._groups is not None:
            self._groups.leave(str(self._topic), self)
        with contextlib.suppress(exceptions.PulsarException):  # releases an exclusive claim, ends its stats
            self._transport.call("DELETE", self._attach_path, deadline_s=5)

    def is_connected(self) -> bool:
        return not self._closed

    # --- batching ----------------------------------------------------------------------------
    def _enqueue(self, content: bytes | None, properties: dict[str, str] | None, partition_key: str | None,
                 ordering_key: str | None, sequence_id: int | None, event_timestamp: int | None,
                 deliver_at: int | None, deliver_after: int | None, callback: SendCallback | None,
                 replicate_to: tuple[str, ...] | None = None) -> Future[MessageId]:
        if self._closed:
            raise exceptions.AlreadyClosed("Producer already closed")
        null_value = content is None  # pulsar-client: None sends a null value (a tombstone)
        check_content(content)
        at = int(deliver_at or 0)
        if deliver_after:
            at = int(time.time() * 1000) + int(deliver_after)
        message = Message(content or b"", partition_key,
                          traced_properties({str(k): str(v) for k, v in (properties or {}).items()}),
                          int(event_timestamp or 0), ordering_key, null_value=null_value,
                          schema_version=self._schema_version)
        if self._encryptor is not None:
            message = self._encryptor.seal(message)
        with self._cond:
            seq = self._next_sequence_id if sequence_id is None else int(sequence_id)
            self._next_sequence_id = max(self._next_sequence_id, seq) + 1
            size = len(message.payload) + (self._encryptor.overhead() if self._encryptor is not None else 0)
            pending = Pending(message, size, Future(), callback, seq, at, replicate_to=replicate_to)
            if pending.size > MAX_ENTRY_BYTES:
                if not self._chunking:
                    raise exceptions.MessageTooBig(
                        f"Message of {pending.size} bytes exceeds {MAX_ENTRY_BYTES}; enable chunking_enabled")
                pending.chunks = self._chunk(message)
            while self._waiting >= self._max_pending and not self._closed:  # back-pressure
                self._flush_requested = True
                self._cond.notify_all()
                self._cond.wait(0.05)
            if at or pending.chunks:
                self._close_batch()  # what came before it goes before it
                self._ready.append([pending])
                self._waiting += 1
                self._flush_requested = True
                self._cond.notify_all()
                return pending.future
            if self._batch and (len(self._batch) >= self._max_messages
                                or self._batch_bytes + pending.size > self._max_bytes
                                or self._batch[0].replicate_to != pending.replicate_to):
                self._close_batch()
            if not self._batch:
                self._batch_started = time.monotonic()
            self._batch.append(pending)
            self._batch_bytes += pending.size
            self._waiting += 1
            if len(self._batch) >= self._max_messages or self._batch_bytes >= self._max_bytes:
                self._close_batch()
            self._cond.notify_all()
        return pending.future

    def _close_batch(self) -> None:
        """The current batch is complete: it joins the ready ones (the lock is held)."""
        if self._batch:
            self._ready.append(self._batch)
            self._batch, self._batch_bytes = [], 0

    def _chunk(self, message: Message) -> list[tuple[bytes, int, int]]:
        """Compress then split, as Pulsar does: each chunk is one entry, reassembled by consumers."""
        raw = encode_messages([message])
        packed = compress(self._codec, raw)
        return [(packed[i:i + MAX_ENTRY_BYTES], len(packed), len(raw)) for i in range(0, len(packed), MAX_ENTRY_BYTES)]

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._inflight or not self._ready:
                    if self._inflight:  # another producer's request carries some of its messages: after it
                        self._cond.wait(0.05)
                    elif self._batch:
                        due = self._batch_started + self._delay_s
                        if self._flush_requested or time.monotonic() >= due or self._closed:
                            self._close_batch()
                            break
                        self._cond.wait(max(0.0, due - time.monotonic()))
                    elif self._closed:
                        return
                    else:  # idle: every send, flush and close notifies; the timeout is only a safety net
                        self._flush_requested = False
                        self._cond.wait(IDLE_WAIT_S)
                wait = self._pacer.delay(time.monotonic())
                if wait > 0:  # the shard is saturated: messages gather meanwhile, the request goes fuller
                    self._cond.wait(wait)
                    continue
                if self._batch and time.monotonic() >= self._batch_started + self._delay_s:
                    self._close_batch()  # due while the previous request was out: it goes with this one
                if travels_alone(self._ready[0]):
                    work = [self._ready.pop(0)]
                else:  # every ready batch up to the next message that travels alone: one request
                    count = next((i for i, b in enumerate(self._ready) if travels_alone(b)), len(self._ready))
                    work, self._ready = self._ready[:count], self._ready[count:]
                self._inflight = sum(len(b) for b in work)
                self._waiting -= self._inflight
                if not self._batch and not self._ready:
                    self._flush_requested = False
                self._cond.notify_all()
            if work[0][0].chunks:
                self._publish_chunks(work[0][0])
            else:
                riders = self._groups.riders(str(self._topic), self) if self._groups is not None else []
                try:
                    tagged = [(self, e) for e in self._entries(work)]
                    tagged += [(rider, e) for rider, taken in riders for e in rider._entries(taken)]
                    owner = {id(e): producer for producer, e in tagged}
                    for request in requests_of([e for _, e in tagged]):
                        time.sleep(self._pacer.delay(time.monotonic()))  # the work's later requests too
                        self._publish([(owner[id(e)], e) for e in request])
                finally:
                    for rider, _ in riders:
                        rider._handed_back()
            self._handed_back()

    def _hand_over(self) -> list[list[Pending]]:
        """Another producer of this topic in the client is sending: what this one has ready and the
        batch it is filling go with that request — unless its own request is out (its later
        messages must not overtake it), and only up to a message that travels alone. They count
        as in flight until `_handed_back`."""
        with self._cond:
            if self._inflight or not (self._ready or self._batch):
                return []
            self._close_batch()
            count = next((i for i, b in enumerate(self._ready) if travels_alone(b)), len(self._ready))
            work, self._ready = self._ready[:count], self._ready[count:]
            self._inflight = sum(len(b) for b in work)
            self._waiting -= self._inflight
            if not self._ready:
                self._flush_requested = False
            self._cond.notify_all()
            return work

    def _handed_back(self) -> None:
        """Its messages in flight are answered (acknowledged or failed)."""
        with self._cond:
            self._inflight = 0
            self._cond.notify_all()

    def _entries(self, batches: list[list[Pending]]) -> list[list[Pending]]:
        """The ready batches of one request as its entries. Batches that queued while the previous
        request was in flight are joined again up to the batching limits (messages, bytes): at a
        low rate per partition the delay closes a batch after a message or two, and with
        key-based batching each key of it became an entry of its own, so a request carried
        hundreds of one-message entries — each with its own metadata on the journal, in the
        segment and through every consumer's claim. Joined, they are what one batch would have
        held had the producer been able to send sooner. With key-based batching each key's
        messages form its entries, ordered by their highest sequence ids (deduplication compares
        those, so they keep growing from one request to the next). Messages with different
        replication settings are never joined: each run of one setting is cut on its own."""
        entries: list[list[Pending]] = []
        for run in same_replication([p for b in batches for p in b]):
            groups = by_key(run) if self._key_based else [run]
            entries += [part for group in groups for part in self._cut(group)]
        return sorted(entries, key=lambda e: e[-1].sequence_id) if self._key_based else entries

    def _cut(self, messages: list[Pending]) -> list[list[Pending]]:
        """Consecutive messages cut into entries of at most `batching_max_messages` messages and
        `batching_max_allowed_size_in_bytes` bytes."""
        out: list[list[Pending]] = []
        size = 0
        for p in messages:
            if not out or len(out[-1]) >= self._max_messages or size + p.size > self._max_bytes:
                out.append([])
                size = 0
            out[-1].append(p)
            size += p.size
        return out

    def _post(self, body: dict[str, Any], nbytes: int) -> list[MessageId]:
        started = time.monotonic()
        self._pacer.starting(started, nbytes)
        response = self._transport.call("POST", self._path, body, deadline_s=self._send_timeout_s)
        shard = response.get("journalShard")
        if self._pacers is not None and isinstance(shard, str) and shard:
            self._pacer = self._pacers.of(shard)
        self._pacer.answered(started, time.monotonic(), nbytes, int(response.get("throttledMs") or 0))
        return [MessageId.from_text(r["messageId"], str(self._topic)) for r in response["messagePublishResults"]]

    def _encode(self, batch: list[Pending]) -> dict[str, Any]:
        messages = [p.message for p in batch]
        raw = encode_messages(messages)
        key = next((m.ordering_key or m.key for m in messages if (m.ordering_key or m.key)), None)
        body: dict[str, Any] = {
            "payload": base64.b64encode(compress(self._codec, raw)).decode(),
            "numMessages": len(batch), "compression": self._codec.value, "uncompressedSize": len(raw),
            "key": key, "batched": self._batching, "deliverAt": batch[0].deliver_at,
        }
        return with_replication(body, batch[0].replicate_to)

    def _publish(self, entries: list[tuple[Producer, list[Pending]]]) -> None:
        """One request: one batch (`batch`), or several appended together (`batches`, each with
        its sequence ids, and its producer when another producer of the client's is carried
        along); all of its messages succeed or fail together."""
        body: dict[str, Any] = {"producerName": self._name}
        if len(entries) == 1 and entries[0][0] is self:
            b = entries[0][1]
            body.update(sequenceId=b[0].sequence_id, highestSequenceId=b[-1].sequence_id, batch=self._encode(b))
        else:
            body["batches"] = [{**owner._encode(b), "sequenceId": b[0].sequence_id, "highestSequenceId": b[-1].sequence_id,
                                **({} if owner is self else {"producerName": owner._name})} for owner, b in entries]
        pendings = [(owner, p) for owner, b in entries for p in b]
        try:
            ids = self._post(body, sum(p.size for _, p in pendings))
        except exceptions.PulsarException as exc:
            for owner, b in entries:
                owner._fail(b, exc)
            return
        except Exception as exc:  # a bug must fail these messages, not end the sender (and every later send)
            log.exception("publish failed unexpectedly")
            for owner, b in entries:
                owner._fail(b, exceptions.UnknownError(f"{type(exc).__name__}: {exc}"))
            return
        for owner, b in entries:
            owner._last_sequence_id = max(owner._last_sequence_id, b[-1].sequence_id)
        for (owner, p), message_id in zip(pendings, ids, strict=True):
            owner._succeed(p, message_id)

    def _publish_chunks(self, pending: Pending) -> None:
        chunk_uuid = f"{self._name}-{pending.sequence_id}-{uuid.uuid4().hex[:8]}"
        key = pending.message.ordering_key or pending.message.key
        message_id: MessageId | None = None
        for index, (piece, total, uncompressed) in enumerate(pending.chunks):
            body = {
                "producerName": self._name, "sequenceId": pending.sequence_id, "highestSequenceId": pending.sequence_id,
                "batch": with_replication({
                    "payload": base64.b64encode(piece).decode(), "numMessages": 1, "compression": self._codec.value,
                    "uncompressedSize": uncompressed, "key": key, "batched": False,
                    "chunk": {"uuid": chunk_uuid, "chunkId": index, "numChunks": len(pending.chunks),
                              "totalSize": total},
                }, pending.replicate_to),
            }
            try:
                message_id = self._post(body, len(piece))[0]
            except exceptions.PulsarException as exc:
                self._fail([pending], exc)
                return
        self._last_sequence_id = max(self._last_sequence_id, pending.sequence_id)
        assert message_id is not None
        self._succeed(pending, message_id)

    def _succeed(self, p: Pending, message_id: MessageId) -> None:
        p.future.set_result(message_id)
        if p.callback:
            _safe(p.callback, Result.Ok, message_id)

    def _fail(self, batch: list[Pending], exc: exceptions.PulsarException) -> None:
        for p in batch:
            p.future.set_exception(exc)
            if p.callback:
                _safe(p.callback, Result.from_exception(exc), None)


def _safe(callback: SendCallback, result: Result, message_id: MessageId | None) -> None:
    try:
        callback(result, message_id)
    except Exception:  # a user callback must not kill the sender thread
        log.exception("send callback raised")


_SEND = inspect.signature(Producer.send)
