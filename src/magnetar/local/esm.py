"""Kinesis event-source mapping emulation: per-shard ordered batches, retried as AWS retries.

What it reproduces from the real mapping (see the CDK stack for the settings):
- one poller per shard, records in shard order, at most `batch_size` per invocation, gathered
  for up to `batching_window_s`; idle shards are polled every `poll_interval_s`;
- a failed invocation (the handler raised or died) is retried with the same batch, forever
  (MaximumRetryAttempts -1, no bisect);
- `ReportBatchItemFailures`: the mapping resumes from the lowest failed sequence number;
- a throttled invocation (the account's Lambda concurrency in use, `AwsFidelity.limits`) is not a
  function error: the batch is retried with the same backoff, counted in `throttled_invocations`.

Enhanced fan-out (`fan_out=True`, `LocalCluster.journal_fan_out`) emulates a mapping on a registered
stream consumer (SubscribeToShard). moto has no SubscribeToShard streaming, so the mapping still
calls GetRecords, but as a subscription behaves: (a) a read of an idle shard asks the emulator to
hold it until the shard's next write (`FAN_OUT_HOLD_S`; the emulator answers it 0 to 70 ms after the
write, the push delay AWS gives for enhanced fan-out: `magnetar.local.aws_limits.fan_out_push`), so
an idle shard costs a read a hold; an emulator that does not hold (limits off, LocalStack) is read
every `FAN_OUT_PUSH_INTERVAL_S` instead; there is no batching window unless one is set (a batch is
what one read returns); (b) its GetShardIterator and GetRecords requests
carry `X-Magnetar-Fan-Out-Consumer: <consumer>` (a botocore hook on a client of its own, so the
functions' reads stay untagged), and the emulator's limits (`magnetar.local.aws_limits.kinesis`)
account them on that consumer's dedicated 2 MiB/s per shard instead of the shard's shared
5 GetRecords/s and 2 MiB/s. Its requests are counted as `kinesis.GetRecords(fan-out)` and
`kinesis.GetShardIterator(fan-out)`: on AWS they are one SubscribeToShard per shard every 5 minutes.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from typing import Any

import boto3

from magnetar.adapters.aws.clients import REQUESTS, client
from magnetar.local.aws_limits.fan_out_push import HELD_HEADER, HOLD_HEADER
from magnetar.local.aws_limits.kinesis import FAN_OUT_HEADER
from magnetar.local.fidelity import ESM_POLL_INTERVAL_S, AwsFidelity
from magnetar.local.lambda_runtime import LocalFunction, Throttled

log = logging.getLogger(__name__)
REGION = "us-east-1"
FAN_OUT_PUSH_INTERVAL_S = 0.07  # enhanced fan-out: records pushed ~70 ms after they arrive
FAN_OUT_HOLD_S = 1.0  # an idle shard's read waits this long at the emulator for the shard's next write


def tag_fan_out(kinesis: Any, consumer: str) -> Any:
    """Mark `kinesis`'s GetRecords and GetShardIterator as reads of enhanced fan-out consumer
    `consumer` (the emulator accounts them on the consumer's own budget); returns the client."""

    def tag(request: Any, **_: Any) -> None:
        request.headers[FAN_OUT_HEADER] = consumer

    for operation in ("GetRecords", "GetShardIterator"):
        kinesis.meta.events.register(f"before-sign.kinesis.{operation}", tag)
    return kinesis


def _fan_out_client(consumer: str) -> Any:
    """A Kinesis client of the mapping's own (the shared one serves the functions' untagged reads),
    configured as the shared one, its requests counted apart from the shared reads."""
    shared = client("kinesis")
    kinesis = boto3.session.Session().client("kinesis", config=shared.meta.config)

    def count(event_name: str = "", **_: Any) -> None:
        REQUESTS(event_name=f"{event_name}(fan-out)")

    kinesis.meta.events.register("before-send", count)
    return tag_fan_out(kinesis, consumer)


def poll_interval(fidelity: AwsFidelity, configured_s: float) -> float:
    """The idle-shard poll interval: AWS's once a second with modeled latency, else as configured
    (the test suite polls every 0.2 s)."""
    return max(configured_s, ESM_POLL_INTERVAL_S) if fidelity.latency else configured_s


class KinesisEventSourceMapping:
    def __init__(
        self,
        function: LocalFunction,
        stream: str,
        batch_size: int,
        batching_window_s: float,
        poll_interval_s: float = 0.5,
        retry_backoff_s: float = 0.2,
        fan_out: bool = False,
        consumer: str | None = None,
    ) -> None:
        self.function = function
        self.stream = stream
        self.batch_size = batch_size
        self.fan_out = fan_out
        # enhanced fan-out: pushed ~70 ms after arrival, gathered for the window if one is set
        self.batching_window_s = batching_window_s
        self.poll_interval_s = FAN_OUT_PUSH_INTERVAL_S if fan_out else poll_interval_s
        self.retry_backoff_s = retry_backoff_s
        self.consumer = consumer or f"{function.name}-fan-out"
        self.kinesis = _fan_out_client(self.consumer) if fan_out else client("kinesis")
        self._hold = threading.local()  # this shard thread's next read: how long it may be held (ms)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.invocations = 0
        self.failed_invocations = 0
        self.throttled_invocations = 0
        self.stream_arn = ""

    def start(self) -> None:
        if self.fan_out:  # the reads of an idle shard ask to be held until its next write
            self.kinesis.meta.events.register("before-sign.kinesis.GetRecords", self._ask_hold,
                                              unique_id=f"magnetar-fan-out-hold-{id(self)}")
        summary = self.kinesis.describe_stream_summary(StreamName=self.stream)["StreamDescriptionSummary"]
        self.stream_arn = summary["StreamARN"]
        shards = self.kinesis.list_shards(StreamName=self.stream)["Shards"]
        for shard in shards:
            t = threading.Thread(target=self._poll_shard, args=(shard["ShardId"],), name=f"esm-{shard['ShardId']}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)

    def _iterator(self, shard_id: str, after: str | None, at: str | None = None) -> str:
        kwargs: dict[str, Any] = {"StreamName": self.stream, "ShardId": shard_id}
        if at is not None:
            kwargs.update(ShardIteratorType="AT_SEQUENCE_NUMBER", StartingSequenceNumber=at)
        elif after is not None:
            kwargs.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=after)
        else:
            kwargs.update(ShardIteratorType="TRIM_HORIZON")
        backoff = 0.2
        while True:  # a throttled GetShardIterator (5/s per shard) is retried, as the ESM does
            try:
                iterator: str = self.kinesis.get_shard_iterator(**kwargs)["ShardIterator"]
                return iterator
            except Exception:
                if self._stop.is_set():
                    raise
                log.warning("GetShardIterator failed on %s; retrying in %.1f s", shard_id, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _ask_hold(self, request: Any, **_: Any) -> None:
        hold_ms = getattr(self._hold, "ms", 0)
        if hold_ms:
            request.headers[HOLD_HEADER] = str(hold_ms)

    def _poll_shard(self, shard_id: str) -> None:
        checkpoint: str | None = None  # last sequence number successfully processed
        iterator = self._iterator(shard_id, None)
        while not self._stop.is_set():
            try:
                batch, iterator, held = self._gather(iterator)
            except Exception:
                log.exception("GetRecords failed on %s", shard_id)
                self._stop.wait(1.0)
                iterator = self._iterator(shard_id, checkpoint)
                continue
            if not batch:
                if not held:  # the emulator answered at once: read again after the interval
                    self._stop.wait(self.poll_interval_s)
                continue
            resume_at = self._invoke_until_done(shard_id, batch)
            if resume_at is None:
                checkpoint = batch[-1]["SequenceNumber"]
            else:
                index = next(i for i, r in enumerate(batch) if r["SequenceNumber"] == resume_at)
                checkpoint = batch[index - 1]["SequenceNumber"] if index else checkpoint
                self._stop.wait(self.retry_backoff_s)
                iterator = self._iterator(shard_id, None, at=resume_at)

    def _gather(self, iterator: str) -> tuple[list[dict[str, Any]], str, bool]:
        """A batch (up to the batch size, gathered for the batching window), the iterator after it, and
        whether an empty first read was held at the emulator for the shard's next write."""
        batch: list[dict[str, Any]] = []
        started = time.monotonic()
        held = False
        while len(batch) < self.batch_size:
            # only the first read of a batch may wait for a write: a batching window's reads are its own
            self._hold.ms = int(FAN_OUT_HOLD_S * 1000) if self.fan_out and not batch else 0
            page = self.kinesis.get_records(ShardIterator=iterator, Limit=self.batch_size - len(batch))
            held = HELD_HEADER in page.get("ResponseMetadata", {}).get("HTTPHeaders", {})
            iterator = page["NextShardIterator"]
            batch.extend(page["Records"])
            if not batch or time.monotonic() - started >= self.batching_window_s or self._stop.is_set():
                break
            if not page["Records"]:
                self._stop.wait(min(self.poll_interval_s, self.batching_window_s))
        return batch, iterator, held

    def _event(self, shard_id: str, batch: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "Records": [
                {
                    "kinesis": {
                        "kinesisSchemaVersion": "1.0",
                        "partitionKey": r["PartitionKey"],
                        "sequenceNumber": r["SequenceNumber"],
                        "data": base64.b64encode(r["Data"]).decode(),
                        "approximateArrivalTimestamp": r["ApproximateArrivalTimestamp"].timestamp(),
                    },
                    "eventSource": "aws:kinesis",
                    "eventVersion": "1.0",
                    "eventID": f"{shard_id}:{r['SequenceNumber']}",
                    "eventName": "aws:kinesis:record",
                    "invokeIdentityArn": "arn:aws:iam::000000000000:role/local",
                    "awsRegion": REGION,
                    "eventSourceARN": self.stream_arn,
                }
                for r in batch
            ]
        }

    def _invoke_until_done(self, shard_id: str, batch: list[dict[str, Any]]) -> str | None:
        """Invoke with the batch until an invocation succeeds; the sequence to resume at, if any."""
        backoff = self.retry_backoff_s
        event = self._event(shard_id, batch)
        while not self._stop.is_set():
            self.invocations += 1
            try:
                response = self.function.invoke(event) or {}
            except (KeyboardInterrupt, SystemExit):
                raise
            except Throttled as exc:
                self.throttled_invocations += 1
                log.info("journal consumer throttled on %s (%s); retrying the batch", shard_id, exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            except BaseException as exc:
                self.failed_invocations += 1
                log.warning("journal consumer failed on %s (%s); retrying the batch", shard_id, exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            failures: list[str] = [str(f["itemIdentifier"]) for f in response.get("batchItemFailures", [])]
            return min(failures, key=int) if failures else None
        return None
