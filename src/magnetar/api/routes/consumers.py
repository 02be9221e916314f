"""Consuming over HTTP: durable subscriptions with long-poll receive, acks, redelivery, seek and
unsubscribe (`/magnetar/v1/consumer/...`), and non-durable reads for readers and Spark
(`/magnetar/v1/reader/...`).

A consumer of a partitioned topic receives from all its partitions with one long poll: the same
`.../<topic>/<subscription>/<consumer>/receive` route on the partitioned topic's own name, with
`partitions` (the indexes it subscribed to) in the body; the entries name their partition, acks
ride along by partition (`acks.partitions`), and `.../ack` takes several partitions' acks the same
way; `joined` names other consumers of the subscription (a client's consumers polling together)
that the same poll serves, each with its own `maxMessages` and acks, their part of the answer in
`joined` by consumer. The same route rather than a new one: Pulsar's REST naming has the partitioned topic's name
for its partitions' operations, and a grant on the partitioned topic covers its partitions
(core/authz.py). Subscribe, close, seek and redeliver stay per partition."""

from __future__ import annotations

import base64
import uuid
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from magnetar.adapters.aws import build_broker
from magnetar.adapters.aws.connections import build_push
from magnetar.api.access import guarded
from magnetar.api.http import DOMAINS, body, json_response, no_content, query, topic_name
from magnetar.api.models import (
    AckRequest,
    AckResponse,
    KeySharedMeta,
    PositionResponse,
    ReadRequest,
    ReadResponse,
    ReceiveRequest,
    ReceiveResponse,
    SeekRequest,
    SeekResponse,
    SubscribeRequest,
    SubscribeResponse,
)
from magnetar.api.openapi import Param
from magnetar.api.wire import acks_from_request, entry_messages, entry_to_wire
from magnetar.core.acks import NO_ACKS, Acks
from magnetar.core.authz import Access
from magnetar.core.dispatch_partitions import (
    ConsumerAsk,
    PartitionReceived,
    acknowledge_partitions,
    next_seal_of_partitions,
    receive_partitions_together,
    receive_topic_together,
)
from magnetar.core.entry import MessageIdData
from magnetar.core.errors import InvalidInput, NotAllowed
from magnetar.core.key_shared import AUTO_SPLIT, KeySharedPolicy
from magnetar.core.naming import TopicName
from magnetar.core.push import NON_PERSISTENT_POLL_REASON
from magnetar.core.schema.registry import schema_id
from magnetar.core.schema.values import ValueDecoder

router = Router()  # type: ignore[no-untyped-call]


def _push_only(domain: str) -> None:
    """Non-persistent topics store nothing to poll: their consumers are WebSocket (push) consumers."""
    if domain != "persistent":
        raise NotAllowed(NON_PERSISTENT_POLL_REASON)


def _bind(domain: str) -> None:
    base = f"/magnetar/v1/consumer/{domain}/<tenant>/<namespace>/<topic>/<subscription>"

    @guarded(router, "PUT", f"{base}/<consumer>", Access.CONSUME, domain, request=SubscribeRequest,
             response=SubscribeResponse, errors=(405,))
    def subscribe(tenant: str, namespace: str, topic: str, subscription: str, consumer: str) -> Response[str]:
        """Subscribe a consumer (creating the subscription)."""
        _push_only(domain)
        request = body(SubscribeRequest)
        state = build_broker().subscriptions.subscribe(
            topic_name(domain, tenant, namespace, topic),
            unquote(subscription),
            unquote(consumer),
            request.subscriptionType,
            request.initialPosition,
            request.ackTimeoutMs,
            key_shared=_key_shared(request.keySharedPolicy),
            start_inclusive=request.startMessageIdInclusive,
            priority_level=request.priorityLevel,
            replicate_state=request.replicateSubscriptionState,
        )
        return json_response({"subscriptionType": state.subscription_type, "consumers": sorted(state.consumers),
                              "epoch": state.epoch})

    @guarded(router, "DELETE", f"{base}/<consumer>", Access.CONSUME, domain)
    def close_consumer(tenant: str, namespace: str, topic: str, subscription: str, consumer: str) -> Response[str]:
        """Close a consumer (its unacknowledged messages go to the others)."""
        build_broker().subscriptions.close_consumer(
            topic_name(domain, tenant, namespace, topic), unquote(subscription), unquote(consumer)
        )
        return no_content()

    @guarded(router, "POST", f"{base}/<consumer>/receive", Access.CONSUME, domain, request=ReceiveRequest,
             response=ReceiveResponse, errors=(405,))
    def receive(tenant: str, namespace: str, topic: str, subscription: str, consumer: str) -> Response[str]:
        """Long-poll for messages (acks may ride along); with `partitions`, a partitioned topic's.

        On a partitioned topic's own name, `partitions` lists the partitions to poll in one request."""
        _push_only(domain)
        name = topic_name(domain, tenant, namespace, topic)
        request = body(ReceiveRequest)
        if request.partitions is not None:
            return _receive_partitions(name, unquote(subscription), unquote(consumer), request)
        if request.acks and request.acks.partitions is not None:
            raise InvalidInput("Acknowledgements by partition need a receive with partitions")
        if request.joined:
            return _receive_together(name, unquote(subscription), unquote(consumer), request)
        result = build_broker().subscriptions.receive(
            name,
            unquote(subscription),
            unquote(consumer),
            request.maxMessages,
            request.waitMs,
            request.requestId or str(uuid.uuid4()),
            acks_from_request(request.acks, unquote(consumer)) if request.acks else NO_ACKS,
            request.minMessages,
            request.deferAcks,
        )
        partition = name.partition_index
        entries = [entry_to_wire(d.entry, partition, d.redelivery_count, d.acked_indexes) for d in result.entries]
        answer: dict[str, object] = {"entries": entries, "epoch": result.epoch}
        if result.next_seal_in_ms is not None:
            answer["nextSealInMs"] = result.next_seal_in_ms
        if not result.acks_applied:
            answer["unappliedAcks"] = [partition]
        return json_response(answer)

    @guarded(router, "POST", f"{base}/<consumer>/ack", Access.CONSUME, domain, request=AckRequest, response=AckResponse,
             errors=(405,))
    def acknowledge(tenant: str, namespace: str, topic: str, subscription: str, consumer: str) -> Response[str]:
        """Acknowledge (individually, cumulatively, batch indexes) or negatively acknowledge messages.

        On a partitioned topic's own name, `partitions` carries several partitions' acks in one request."""
        request = body(AckRequest)
        name = topic_name(domain, tenant, namespace, topic)
        if request.partitions is not None:
            acks = _partition_acks(request, unquote(consumer))
            epochs = acknowledge_partitions(build_broker().subscriptions, name, unquote(subscription), acks)
            return json_response({"markDeleteEntryId": -1, "epoch": 0, "epochs": {str(p): e for p, e in epochs.items()}})
        state = build_broker().subscriptions.acknowledge(name, unquote(subscription),
                                                         acks_from_request(request, unquote(consumer)))
        return json_response({"markDeleteEntryId": state.mark_delete - 1, "epoch": state.epoch})

    @guarded(router, "POST", f"{base}/<consumer>/redeliver", Access.CONSUME, domain)
    def redeliver(tenant: str, namespace: str, topic: str, subscription: str, consumer: str) -> Response[str]:
        """Redeliver the consumer's unacknowledged messages."""
        build_broker().subscriptions.redeliver_unacknowledged(
            topic_name(domain, tenant, namespace, topic), unquote(subscription), unquote(consumer)
        )
        return no_content()

    @guarded(router, "DELETE", f"{base}/<consumer>/subscription", Access.CONSUME, domain)
    def unsubscribe(tenant: str, namespace: str, topic: str, subscription: str, consumer: str) -> Response[str]:
        """Delete the subscription."""
        build_broker().subscriptions.unsubscribe(
            topic_name(domain, tenant, namespace, topic), unquote(subscription), unquote(consumer)
        )
        return no_content()

    @guarded(router, "POST", f"{base}/seek", Access.CONSUME, domain, request=SeekRequest, response=SeekResponse)
    def seek(tenant: str, namespace: str, topic: str, subscription: str) -> Response[str]:
        """Move the subscription to a message id or a publish time."""
        request = body(SeekRequest)
        entry_id = MessageIdData.parse(request.messageId).entry_id if request.messageId else None
        name = topic_name(domain, tenant, namespace, topic)
        state = build_broker().subscriptions.seek(name, unquote(subscription), entry_id, request.timestamp)
        build_push().after_seek(name, unquote(subscription))  # its WebSocket consumers start over
        return json_response({"position": state.read_position, "epoch": state.epoch})

    # --- non-durable reads (readers, Spark) --------------------------------------------------
    reader = f"/magnetar/v1/reader/{domain}/<tenant>/<namespace>/<topic>"

    @guarded(router, "POST", f"{reader}/read", Access.CONSUME, domain, request=ReadRequest, response=ReadResponse)
    def read(tenant: str, namespace: str, topic: str) -> Response[str]:
        """Read entries from an entry id on, without a subscription (readers, Spark)."""
        name = topic_name(domain, tenant, namespace, topic)
        request = body(ReadRequest)
        first, entries = build_broker().read_retained(name, request.startEntryId, request.maxEntries)
        next_entry = entries[-1].entry_id + 1 if entries else request.startEntryId
        live = [e for e in entries if not e.hole]
        out: dict[str, Any] = {"nextEntryId": next_entry, "firstEntryId": first}
        if request.format == "entries":
            if request.decode:
                raise InvalidInput("decode applies to format messages")
            out["entries"] = [entry_to_wire(e, name.partition_index, 0, []) for e in live]
        else:
            out["messages"] = [m for e in live for m in entry_messages(str(name), name.partition_index, e)]
            if request.decode and out["messages"]:
                decoder = ValueDecoder(build_broker().schemas.store.get_schemas(schema_id(name)))
                for message in out["messages"]:
                    if "encryptionContext" not in message and not message.get("nullValue"):
                        message.update(decoder.decode(base64.b64decode(message["payload"]),
                                                      message.get("schemaVersion")))
        return json_response(out)

    @guarded(router, "GET", f"{reader}/position", Access.CONSUME, domain, response=PositionResponse,
             query={"timestamp": Param({"type": "integer", "minimum": 0}, required=True,
                                       description="Publish time (ms since the epoch)")})
    def position_at(tenant: str, namespace: str, topic: str) -> Response[str]:
        """The first entry published at or after a time."""
        timestamp = query("timestamp")
        if timestamp is None or not timestamp.isdigit():
            raise InvalidInput("Query parameter timestamp (ms) is required")
        entry_id = build_broker().entry_at_time(topic_name(domain, tenant, namespace, topic), int(timestamp))
        return json_response({"entryId": entry_id})


def _key_shared(meta: KeySharedMeta | None) -> KeySharedPolicy:
    """The core's policy for a subscribe's `keySharedPolicy` (AUTO_SPLIT ignores ranges, as Pulsar)."""
    if meta is None:
        return AUTO_SPLIT
    ranges = tuple((r.start, r.end) for r in meta.hashRanges) if meta.keySharedMode == "STICKY" else None
    return KeySharedPolicy(ranges, meta.allowOutOfOrderDelivery)


def _partition_acks(request: AckRequest, consumer: str) -> dict[int, Acks]:
    """`partitions` of an ack request (index -> that partition's acks); nothing else beside it."""
    if request.messageIds or request.nacks or request.cumulative or request.batchSizes:
        raise InvalidInput("Acknowledgements by partition go in partitions only")
    out: dict[int, Acks] = {}
    for key, acks in (request.partitions or {}).items():
        if not key.isdigit() or len(key) > 6:
            raise InvalidInput(f"Invalid partition index {key!r}")
        if acks.partitions is not None:
            raise InvalidInput("Acknowledgements by partition cannot nest")
        out[int(key)] = acks_from_request(acks, consumer)
    return out


def _receive_partitions(name: TopicName, subscription: str, consumer: str, request: ReceiveRequest) -> Response[str]:
    """One long poll over several partitions of the partitioned topic `name`, for the consumer and
    any joined ones (dispatch_partitions)."""
    asks = [ConsumerAsk(consumer, request.maxMessages, _partition_acks(request.acks, consumer) if request.acks else {})]
    asks += [ConsumerAsk(j.consumer, j.maxMessages, _partition_acks(j.acks, j.consumer) if j.acks else {})
             for j in request.joined or ()]
    got = receive_partitions_together(build_broker().subscriptions, name, request.partitions or [], subscription, asks,
                                      request.waitMs, request.requestId or str(uuid.uuid4()), request.minMessages)
    out: dict[str, Any] = {**_received(got[consumer]), "epoch": 0}
    if request.joined:
        out["joined"] = {j.consumer: _received(got[j.consumer]) for j in request.joined}
    return json_response(out)


def _receive_together(name: TopicName, subscription: str, consumer: str, request: ReceiveRequest) -> Response[str]:
    """One long poll of a topic (not a partitioned topic's own name) for the consumer and the joined
    ones (a client's consumers of the subscription polling together)."""
    partition = name.partition_index

    def acks_of(acks: AckRequest | None, who: str) -> dict[int, Acks]:
        if acks is None:
            return {}
        if acks.partitions is not None:
            raise InvalidInput("Acknowledgements by partition need a receive with partitions")
        return {partition: acks_from_request(acks, who)}

    asks = [ConsumerAsk(consumer, request.maxMessages, acks_of(request.acks, consumer))]
    asks += [ConsumerAsk(j.consumer, j.maxMessages, acks_of(j.acks, j.consumer)) for j in request.joined or ()]
    got = receive_topic_together(build_broker().subscriptions, name, subscription, asks, request.waitMs,
                                 request.requestId or str(uuid.uuid4()), request.minMessages)

    def part(received: PartitionReceived) -> dict[str, Any]:
        return _received({partition: received}, one_topic=True)

    return json_response({**part(got[consumer]), "joined": {j.consumer: part(got[j.consumer])
                                                             for j in request.joined or ()}})


def _received(got: dict[int, PartitionReceived], one_topic: bool = False) -> dict[str, Any]:
    """One consumer's part of a receive over partitions, as the wire has it: its entries, each
    partition's epoch (`epochs`; `epoch` for the receive of one topic), when the next seal is due,
    the partitions whose acknowledgements a lost race left unwritten (to be sent again)."""
    out: dict[str, Any] = {"entries": [entry_to_wire(d.entry, p, d.redelivery_count, d.acked_indexes)
                                       for p, r in got.items() for d in r.entries]}
    if one_topic:
        out["epoch"] = next(iter(got.values())).epoch
    else:
        out["epochs"] = {str(p): r.epoch for p, r in got.items()}
    next_seal = next_seal_of_partitions(got)
    if next_seal is not None:
        out["nextSealInMs"] = next_seal
    unapplied = sorted(p for p, r in got.items() if not r.acks_applied)
    if unapplied:
        out["unappliedAcks"] = unapplied
    return out


for _domain in DOMAINS:
    _bind(_domain)
