"""The core's ports on AWS: DynamoDB (metadata, cursors), S3 (segments), Kinesis (journal)."""

from __future__ import annotations

from functools import cache

from magnetar.adapters.aws.clients import client
from magnetar.config import (
    ResourceNames,
    auth_settings_from_env,
    cluster_name_from_env,
    seal_latency_ms_from_env,
    tail_reads_from_env,
)
from magnetar.core.broker import Broker
from magnetar.core.replication import Replicator


@cache
def build_broker() -> Broker:
    """The broker of this process (one per warm Lambda container), wired from the environment."""
    from magnetar.adapters.aws.dynamodb import DynamoMetadataStore
    from magnetar.adapters.aws.function_deployer import build_deployer
    from magnetar.adapters.aws.kinesis import KinesisJournal
    from magnetar.adapters.aws.s3 import S3SegmentStore
    from magnetar.adapters.aws.telemetry import aws_telemetry

    names = ResourceNames.from_env()
    config = None
    if names.config_region:  # the home replica, this region's replica when the home cannot be reached
        from magnetar.adapters.aws.dynamodb.base import ConfigurationReplicas

        config = ConfigurationReplicas(client("dynamodb", names.config_region), client("dynamodb"))
    from magnetar.adapters.aws.dynamodb.compaction import DynamoCompactionStore

    metadata = DynamoMetadataStore(names.table, config_table=names.config_table, config_dynamodb=config)
    broker = Broker(metadata, S3SegmentStore(names.bucket), KinesisJournal(names.stream),
                    auth=auth_settings_from_env(), tail_reads=tail_reads_from_env(),
                    seal_latency_ms=seal_latency_ms_from_env(), cluster_name=cluster_name_from_env(),
                    telemetry=aws_telemetry(), deployer=build_deployer())
    broker.deletion.compaction = DynamoCompactionStore(names.table, metadata.ddb)  # a deletion fences compaction
    return broker


@cache
def build_replicator() -> Replicator:
    """This cluster's replicators (geo-replication), on the broker of this process; the
    maintenance run also drives them (backlogs a failed remote left)."""
    from magnetar.adapters.remote import HttpRemoteClusters

    broker = build_broker()
    local = broker.cluster_name
    replicator = Replicator(broker.metadata, broker.reader, broker.clock, local,
                            HttpRemoteClusters(broker.metadata, local), broker.writer.policies)
    broker.maintenance.replication = replicator
    return replicator
