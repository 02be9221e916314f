"""What `send` and `send_async` check of their arguments, as pulsar-client does (its `_build_msg`),
and the per-message settings they turn into."""

from __future__ import annotations

from datetime import timedelta

from magnetar.client.types import check_properties, check_type, check_type_or_none


def check_content(content: object) -> None:
    """pulsar-client's BytesSchema.encode check of a payload (None: a null value): a TypeError."""
    if content is not None and not isinstance(content, bytes):
        raise TypeError(f"Invalid record obj of type {type(content)} - expected type is {bytes}")


def check_send(content: object, properties: object, partition_key: object, ordering_key: object,
               sequence_id: object, replication_clusters: object, disable_replication: object,
               event_timestamp: object, deliver_at: object, deliver_after: object) -> None:
    """pulsar-client's argument checks of `send`/`send_async` (its `_build_msg`): the payload's
    TypeError first, then ValueErrors (a TypeError for a property that is not str to str)."""
    check_content(content)
    check_properties(properties)
    check_type_or_none(str, partition_key, "partition_key")
    check_type_or_none(str, ordering_key, "ordering_key")
    check_type_or_none(int, sequence_id, "sequence_id")
    check_type_or_none(list, replication_clusters, "replication_clusters")
    check_type(bool, disable_replication, "disable_replication")
    check_type_or_none(int, event_timestamp, "event_timestamp")
    check_type_or_none(int, deliver_at, "deliver_at")
    check_type_or_none((timedelta, int), deliver_after, "deliver_after")


def replicate_to_of(replication_clusters: list[str] | None, disable_replication: bool) -> tuple[str, ...] | None:
    """pulsar-client's per-message replication: `disable_replication` stores the message in this
    cluster only (it wins over a list, as in pulsar-client, which applies it last); a non-empty
    `replication_clusters` names the clusters; None or [] leaves the topic's replication clusters."""
    if disable_replication:
        return ()
    if not replication_clusters:
        return None
    if not all(isinstance(c, str) and c for c in replication_clusters):
        raise ValueError("replication_clusters must be a list of cluster names (non-empty str)")
    return tuple(dict.fromkeys(replication_clusters))


def after_ms(deliver_after: timedelta | int | None) -> int | None:
    if isinstance(deliver_after, timedelta):
        return int(deliver_after.total_seconds() * 1000)
    return deliver_after
