"""The configuration store as a DynamoDB global table, on one emulator (`local up --clusters`).

On AWS the configuration table is a global table: a replica in every cluster's region, each
region's changes copied to the others asynchronously (about a second), the last writer winning
per item. Magnetar writes only at the home replica (the first cluster's region) and reads there,
falling back to its own region's replica when the home cannot be reached
(`adapters.aws.dynamodb.base.ConfigurationReplicas`). Locally every cluster's region gets its own
replica (the same table name, in its region, on the shared emulator) and `ConfigurationReplication`
copies the home's changes to them after a settable delay.

How: the home table has a DynamoDB stream (new and old images, as a global table's replication
needs), which this process reads every fraction of the delay. The stream is the cheap and correct
source: it carries every change once, in the order the home applied it, deletes included (a
scan-and-diff would read the whole table on every pass, and would see a delete only as an item
gone missing). Each change is applied to every other replica once it is `delay` old (by the
record's creation time), in stream order, so the replicas end as the home is: the last writer
wins, as between a global table's replicas (only the home is ever written here, so there is no
concurrent write in two regions to settle).

A region off the network (`LocalNetwork`) neither sends nor receives: while the home's cluster is
out nothing is copied; a replica whose cluster is out gets its changes when it is back. AWS's own
replication is not a client of any cluster: this runs in the instance's process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from magnetar.local.fidelity import GLOBAL_TABLE_REPLICATION_MS
from magnetar.local.network import LocalNetwork

log = logging.getLogger(__name__)

DEFAULT_DELAY_MS = GLOBAL_TABLE_REPLICATION_MS
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=3, read_timeout=10)
_KEY = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
_ATTRIBUTES = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}]
_STREAM = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
_SHARDS_EVERY_S = 5.0  # how often the stream's shards are listed again (a split adds one)


@dataclass(frozen=True)
class Change:
    due: float  # when the other replicas apply it (epoch seconds: the change's time + the delay)
    key: dict[str, Any]
    image: dict[str, Any] | None  # the item as the home has it now; None: deleted


@dataclass
class ConfigurationReplication:
    endpoint: str
    table: str
    home_region: str
    replica_regions: tuple[str, ...]
    delay_ms: int = DEFAULT_DELAY_MS
    network: LocalNetwork | None = None
    copied: int = 0  # changes applied to a replica (each replica counts)
    _pending: deque[Change] = field(default_factory=deque)
    _applied: dict[str, int] = field(default_factory=dict)  # replica region -> changes of _pending applied
    _iterators: dict[str, str | None] = field(default_factory=dict)  # shard -> its next iterator (None: closed)
    _last_sequence: dict[str, str] = field(default_factory=dict)
    _stream_arn: str = ""
    _streams: Any = None
    _replicas: dict[str, Any] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _client(self, service: str, region: str) -> Any:
        return boto3.session.Session().client(  # type: ignore[call-overload]
            service, region_name=region, endpoint_url=self.endpoint, config=_CONFIG,
            aws_access_key_id="test", aws_secret_access_key="test")

    def provision(self) -> None:
        """The home table with its stream, and a replica of it in every other region (idempotent)."""
        home = self._client("dynamodb", self.home_region)
        _create(home, self.table, stream=True)
        description = home.describe_table(TableName=self.table)["Table"]
        if not description.get("StreamSpecification", {}).get("StreamEnabled"):  # made before, without one
            home.update_table(TableName=self.table, StreamSpecification=_STREAM)
            description = home.describe_table(TableName=self.table)["Table"]
        self._stream_arn = description["LatestStreamArn"]
        for region in self.replica_regions:
            _create(self._client("dynamodb", region), self.table, stream=False)

    def start(self) -> ConfigurationReplication:
        if not self._stream_arn:
            self.provision()
        self._streams = self._client("dynamodbstreams", self.home_region)
        self._replicas = {region: self._client("dynamodb", region) for region in self.replica_regions}
        self._applied = dict.fromkeys(self.replica_regions, 0)
        self._list_shards()
        self._thread = threading.Thread(target=self._run, name="configuration-replication", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def poll_s(self) -> float:
        """How often the stream is read: a fraction of the delay, so a change is copied within a
        few tens of milliseconds of being due."""
        return min(0.25, max(0.05, self.delay_ms / 4000))

    def _out(self, region: str) -> bool:
        if self.network is None:
            return False
        cluster = self.network.cluster_in(region)
        return cluster is not None and self.network.is_out(cluster)

    def _run(self) -> None:
        listed = time.monotonic()
        while not self._stop.is_set():
            try:
                if not self._out(self.home_region):
                    if time.monotonic() - listed > _SHARDS_EVERY_S:
                        self._list_shards()
                        listed = time.monotonic()
                    self._read_stream()
                self._apply_due()
            except Exception as exc:  # the emulator stopping, a refused request: the next pass tries again
                if self._stop.is_set():
                    return
                log.warning("configuration replication: %s", exc)
            wait = self.poll_s
            if self._pending:
                wait = min(wait, max(0.0, self._pending[0].due - time.time()))
            self._stop.wait(wait)

    def _list_shards(self) -> None:
        shards = self._streams.describe_stream(StreamArn=self._stream_arn)["StreamDescription"]["Shards"]
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self._streams.get_shard_iterator(
                    StreamArn=self._stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]

    def _read_stream(self) -> None:
        delay_s = self.delay_ms / 1000
        for shard_id, iterator in list(self._iterators.items()):
            while iterator is not None:
                try:
                    page = self._streams.get_records(ShardIterator=iterator, Limit=1000)
                except ClientError as exc:
                    if exc.response.get("Error", {}).get("Code") != "ExpiredIteratorException":
                        raise
                    iterator = self._resume(shard_id)
                    continue
                for record in page["Records"]:
                    data = record["dynamodb"]
                    created = data.get("ApproximateCreationDateTime")  # AWS: to the second; moto: to the ms
                    at = min(created.timestamp(), time.time()) if created is not None else time.time()
                    self._pending.append(Change(at + delay_s, data["Keys"],
                                                data.get("NewImage") if record["eventName"] != "REMOVE" else None))
                    self._last_sequence[shard_id] = data["SequenceNumber"]
                iterator = page.get("NextShardIterator")
                if not page["Records"]:
                    break
            self._iterators[shard_id] = iterator

    def _resume(self, shard_id: str) -> str:
        after = self._last_sequence.get(shard_id)
        kwargs: dict[str, Any] = ({"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
                                  if after else {"ShardIteratorType": "TRIM_HORIZON"})
        iterator: str = self._streams.get_shard_iterator(StreamArn=self._stream_arn, ShardId=shard_id,
                                                         **kwargs)["ShardIterator"]
        return iterator

    def _apply_due(self) -> None:
        now = time.time()
        for region, replica in self._replicas.items():
            if self._out(region):
                continue
            done = self._applied[region]
            while done < len(self._pending) and self._pending[done].due <= now:
                change = self._pending[done]
                if change.image is None:
                    replica.delete_item(TableName=self.table, Key=change.key)
                else:
                    replica.put_item(TableName=self.table, Item=change.image)
                done += 1
                self._applied[region] = done
                self.copied += 1
        applied_by_all = min(self._applied.values(), default=len(self._pending))
        for _ in range(applied_by_all):  # what every replica has: forgotten
            self._pending.popleft()
        for region in self._applied:
            self._applied[region] -= applied_by_all


def _create(ddb: Any, table: str, stream: bool) -> None:
    try:
        ddb.create_table(TableName=table, AttributeDefinitions=_ATTRIBUTES, KeySchema=_KEY,
                         BillingMode="PAY_PER_REQUEST", **({"StreamSpecification": _STREAM} if stream else {}))
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceInUseException":
            raise
