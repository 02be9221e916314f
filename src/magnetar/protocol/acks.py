"""The binary protocol's acknowledgements as the core's `Acks`: ACK commands (whole entries, batch
indexes, cumulative), ids' signedness, and two sets of acks joined into one write."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from magnetar.core.acks import Acks
from magnetar.protocol import pulsar_api_pb2 as pb
from magnetar.protocol.messages import acked_indexes


def acks_of(cmds: list[Any], batch_sizes: Mapping[int, int], consumer: str) -> Acks:
    """ACK commands as the core's acknowledgements (whole entries, batch indexes, cumulative);
    `batch_sizes`: the sizes of the entries handed out (pulsar-client's ack sets name none)."""
    whole: set[int] = set()
    batch: dict[int, tuple[int, set[int]]] = {}
    cumulative: tuple[int, int, int] | None = None
    for cmd in cmds:
        ack = cmd.ack
        for mid in ack.message_id:
            entry = signed(mid.entryId)
            if entry < 0:
                continue
            # pulsar-client sends ack sets without the batch size: the size of the entry handed out
            size = mid.batch_size if mid.HasField("batch_size") else batch_sizes.get(entry, 0)
            partial = acked_indexes(list(mid.ack_set), size) if mid.ack_set and size > 0 else None
            if ack.ack_type == pb.CommandAck.Cumulative:
                index = len(prefix(partial)) - 1 if partial is not None else -1
                cumulative = max(cumulative or (entry, size, index), (entry, size, index))
            elif partial is not None and len(partial) < size:
                batch.setdefault(entry, (size, set()))[1].update(partial)
            else:
                whole.add(entry)
    return Acks(tuple(sorted(whole)), tuple((e, n, tuple(sorted(ix))) for e, (n, ix) in sorted(batch.items())),
                cumulative, consumer=consumer)


def joined(a: Acks, b: Acks) -> Acks:
    """Two consumers' worth of acknowledgements as one (whole entries win over their batch indexes)."""
    whole = set(a.entries) | set(b.entries)
    batch: dict[int, tuple[int, set[int]]] = {}
    for entry, size, indexes in (*a.batch, *b.batch):
        batch.setdefault(entry, (size, set()))[1].update(indexes)
    return Acks(tuple(sorted(whole)), tuple((e, n, tuple(sorted(ix))) for e, (n, ix) in sorted(batch.items())
                                           if e not in whole), a.cumulative, a.nacks, consumer=a.consumer or b.consumer)


def signed(value: int) -> int:
    """A uint64 id as the int64 it stands for (-1 travels as 2**64 - 1)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def prefix(indexes: list[int] | None) -> list[int]:
    """The leading run 0, 1, 2... of acknowledged indexes (what a cumulative ack covers in a batch)."""
    out: list[int] = []
    for i, index in enumerate(sorted(indexes or [])):
        if index != i:
            break
        out.append(index)
    return out
