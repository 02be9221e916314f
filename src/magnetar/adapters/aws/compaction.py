"""Topic compaction on AWS: the Compactor of this process, wired to the broker's ports and the
compaction items of the metadata table; it also hooks into the broker's maintenance run."""

from __future__ import annotations

from functools import cache

from magnetar.adapters.aws import build_broker
from magnetar.config import ResourceNames
from magnetar.core.compaction import Compactor


@cache
def build_compactor() -> Compactor:
    from magnetar.adapters.aws.dynamodb.compaction import DynamoCompactionStore

    broker = build_broker()
    compactor = Compactor(broker.metadata, broker.segments, broker.reader,
                          DynamoCompactionStore(ResourceNames.from_env().table), broker.clock)
    broker.maintenance.compaction = compactor  # the maintenance run starts and continues compactions
    return compactor
