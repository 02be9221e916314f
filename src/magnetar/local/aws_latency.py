"""Modeled AWS service latency at the emulator's endpoint (`--latency`).

Each (service, operation) has a p50 and a p99 from public figures; a request's latency is drawn
from the lognormal distribution with that median and 99th percentile
(mu = ln p50, sigma = ln(p99 / p50) / z0.99). The emulator forwards the request first and then
waits only the remainder, outside its serialization lock, so a modeled 60 ms S3 PUT does not hold
up other clients' requests. `--seed N` makes the draws reproducible (per process; the order of
concurrent requests still varies).

The figures are the latency a client in the same region sees for a small request (a few KB):
where AWS publishes a figure it is used; where it does not, the figure is an estimate stated as
one, with the public measurement or statement it is consistent with. docs/architecture.md
("AWS limits, locally") repeats the table.
"""

from __future__ import annotations

import math
import random
import threading
from dataclasses import dataclass

Z_99 = 2.3263478740408408  # the standard normal's 99th percentile

S3_PERF = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance-guidelines.html"
S3_LAMBDA_MEASURED = "https://kkc.github.io/2020/03/16/s3-latency/"
WARPSTREAM = "https://docs.warpstream.com/warpstream/configuration/low-latency-clusters"
DDB_PRODUCT = "https://aws.amazon.com/dynamodb/"
DDB_PAPER = "https://www.usenix.org/conference/atc22/presentation/elhemali"
DDB_TXN = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html"
KDS_EFO = "https://docs.aws.amazon.com/streams/latest/dev/enhanced-consumers.html"
KDS_FAQ = "https://aws.amazon.com/kinesis/data-streams/faqs/"


@dataclass(frozen=True)
class Figure:
    p50_ms: float
    p99_ms: float
    source: str  # a public URL the figure comes from (or is consistent with)
    note: str

    @property
    def mu(self) -> float:
        return math.log(self.p50_ms / 1000)

    @property
    def sigma(self) -> float:
        return math.log(self.p99_ms / self.p50_ms) / Z_99


# (service, operation) -> figure; (service, "*") is the service's default.
MODEL: dict[tuple[str, str], Figure] = {
    ("kinesis", "PutRecord"): Figure(20, 100, KDS_EFO, "estimate: below the ~70 ms put-to-push propagation AWS documents"),
    ("kinesis", "PutRecords"): Figure(30, 150, KDS_EFO, "estimate: PutRecord plus the larger body"),
    ("kinesis", "GetRecords"): Figure(15, 80, KDS_FAQ, "estimate: put-to-get typically < 1 s is dominated by polling"),
    ("kinesis", "*"): Figure(15, 80, KDS_FAQ, "estimate: control plane reads (ListShards, GetShardIterator)"),
    ("dynamodb", "GetItem"): Figure(3, 10, DDB_PAPER, "single-digit ms reads (the DynamoDB paper, product page)"),
    ("dynamodb", "Query"): Figure(4, 12, DDB_PAPER, "single-digit ms, a page of one partition"),
    ("dynamodb", "Scan"): Figure(8, 40, DDB_PRODUCT, "estimate: several partitions per page"),
    ("dynamodb", "BatchGetItem"): Figure(5, 20, DDB_PRODUCT, "estimate: parallel GetItems"),
    ("dynamodb", "PutItem"): Figure(5, 15, DDB_PAPER, "single-digit ms writes (3 replicas, 2 acks)"),
    ("dynamodb", "UpdateItem"): Figure(5, 15, DDB_PAPER, "as PutItem"),
    ("dynamodb", "DeleteItem"): Figure(5, 15, DDB_PAPER, "as PutItem"),
    ("dynamodb", "BatchWriteItem"): Figure(8, 30, DDB_PRODUCT, "estimate: parallel writes"),
    ("dynamodb", "TransactWriteItems"): Figure(15, 50, DDB_TXN, "estimate: two-phase (prepare, commit) = 2x writes"),
    ("dynamodb", "TransactGetItems"): Figure(8, 25, DDB_TXN, "estimate: 2x reads"),
    ("dynamodb", "*"): Figure(5, 20, DDB_PRODUCT, "control plane and the rest"),
    ("s3", "PUT"): Figure(80, 400, WARPSTREAM, "estimate: 60-130 ms measured same-region (" + S3_LAMBDA_MEASURED
                                               + "); WarpStream's S3 Standard produce p99 500 ms includes it"),
    ("s3", "POST"): Figure(80, 400, WARPSTREAM, "as PUT (DeleteObjects, multipart)"),
    ("s3", "DELETE"): Figure(30, 150, S3_PERF, "estimate"),
    ("s3", "GET"): Figure(30, 200, S3_PERF, "first byte: S3 documents 100-200 ms as the upper band"),
    ("s3", "HEAD"): Figure(20, 100, S3_PERF, "estimate: as a GET without a body"),
    ("s3", "*"): Figure(30, 200, S3_PERF, "as GET"),
}


class LatencyModel:
    def __init__(self, seed: int | None = None, model: dict[tuple[str, str], Figure] | None = None) -> None:
        self.model = model or MODEL
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def figure(self, service: str, operation: str) -> Figure | None:
        return self.model.get((service, operation)) or self.model.get((service, "*"))

    def delay_s(self, service: str, operation: str) -> float:
        """A draw of this operation's latency in seconds (0 for services the model does not know)."""
        f = self.figure(service, operation)
        if f is None:
            return 0.0
        with self._lock:
            return self._random.lognormvariate(f.mu, f.sigma)
