"""Producing: Pulsar's REST producer (`POST /topics/...`, also carrying several SDK batches in one
request: a group append) and producer registration (access modes, deduplication's last sequence id)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from magnetar.adapters.aws import build_broker
from magnetar.adapters.aws.connections import build_push
from magnetar.api.access import guarded, require
from magnetar.api.http import DOMAINS, body, json_response, no_content, topic_name
from magnetar.api.models import (
    AttachProducerResponse,
    BatchPublishResult,
    ProduceRequest,
    ProduceResponse,
    ProducerRequest,
    PublishResult,
)
from magnetar.api.routes.schemas import produce_request, refuse_untyped_publish
from magnetar.api.wire import batch_from_request
from magnetar.core.authz import Access
from magnetar.core.compression import decompress
from magnetar.core.entry import decode_messages
from magnetar.core.errors import InvalidInput
from magnetar.core.naming import TopicName
from magnetar.core.tracecontext import with_trace_context

router = Router()  # type: ignore[no-untyped-call]


def _publish_non_persistent(name: TopicName, request: ProduceRequest) -> dict[str, Any]:
    """Fanned out at once to the WebSocket consumers attached now; nothing is stored."""
    batch = batch_from_request(request)
    if batch.chunk is not None:
        raise InvalidInput("Chunked messages are not supported on non-persistent topics")
    messages = list(decode_messages(decompress(batch.compression, batch.payload, batch.uncompressed_size)))
    ids = build_push().publish_non_persistent(name, messages, request.producerName)
    first = next((i for i in ids if i.entry_id >= 0), ids[0])
    return ProduceResponse(messagePublishResults=[PublishResult(messageId=str(i)) for i in ids],
                           ledgerId=first.ledger_id, entryId=first.entry_id).model_dump(exclude_none=True)


def _traced(request: ProduceRequest) -> ProduceRequest:
    """REST messages published while this invocation is traced carry its trace context (the
    `traceparent` property), unless they name one of their own. SDK batches come encoded: the SDK
    sets it (client/tracing.py)."""
    traceparent = build_broker().telemetry.tracer.traceparent()
    if traceparent is None or request.messages is None:
        return request
    messages = [m.model_copy(update={"properties": with_trace_context(m.properties, traceparent)})
                for m in request.messages]
    return request.model_copy(update={"messages": messages})


def _each_batch(request: ProduceRequest) -> list[ProduceRequest]:
    """A `batches` body as one single-`batch` body per batch (its own sequence ids), validated already."""
    assert request.batches is not None
    return [
        ProduceRequest.model_construct(
            producerName=b.producerName or request.producerName, sequenceId=-1 if b.sequenceId is None else b.sequenceId,
            highestSequenceId=-1 if b.highestSequenceId is None else b.highestSequenceId, batched=request.batched,
            messages=None, batch=b, batches=None)
        for b in request.batches
    ]


def _publish_batches(name: TopicName, request: ProduceRequest) -> dict[str, Any]:
    """Several consecutive entries in one publish, of one producer or of several (a batch may name
    its own): on a persistent topic one group append (one reservation, one journal record: all or
    nothing); on a non-persistent one, fanned out in turn."""
    singles = _each_batch(request)
    results: list[BatchPublishResult] = []
    throttled_ms, shard = 0, ""
    if name.is_persistent:
        appended = build_broker().writer.append_group(name, [batch_from_request(r) for r in singles],
                                                      request.producerName, producers=[r.producerName for r in singles])
        results = [BatchPublishResult(messagePublishResults=[PublishResult(messageId=str(i)) for i in a.message_ids],
                                      ledgerId=a.ledger_id, entryId=a.entry_id, duplicate=a.duplicate)
                   for a in appended]
        throttled_ms, shard = appended[0].throttled_ms, appended[0].journal_shard
    else:
        for single in singles:
            one = ProduceResponse.model_validate(_publish_non_persistent(name, single))
            results.append(BatchPublishResult(messagePublishResults=one.messagePublishResults, ledgerId=one.ledgerId,
                                              entryId=one.entryId))
    return ProduceResponse(
        messagePublishResults=[r for b in results for r in b.messagePublishResults],
        ledgerId=results[0].ledgerId, entryId=results[0].entryId, duplicate=all(b.duplicate for b in results),
        batches=results, throttledMs=_throttled_ms(throttled_ms), journalShard=shard or None,
    ).model_dump(exclude_none=True)


def _throttled_ms(ms: int) -> int | None:
    return ms or None  # absent unless the shard held the write


def _bind(domain: str) -> None:
    @guarded(router, "POST", f"/topics/{domain}/<tenant>/<namespace>/<topic>", Access.PRODUCE, domain,
             request=ProduceRequest, response=ProduceResponse)
    def produce(tenant: str, namespace: str, topic: str) -> Response[str]:
        """Publish messages (Pulsar's REST producer), one SDK-encoded batch, or several batches
        appended together (consecutive entries, all or nothing)."""
        name = topic_name(domain, tenant, namespace, topic)
        request = _traced(produce_request(name))  # typed REST messages encoded with the topic's schema (routes/schemas.py)
        refuse_untyped_publish(name, request)  # schemaValidationEnforced
        if any(b is not None and b.origin is not None for b in [request.batch, *(request.batches or [])]):
            require(Access.SUPERUSER)  # replicated copies: the other clusters' replicators
        if request.batches is not None:
            return json_response(_publish_batches(name, request))
        if not name.is_persistent:
            return json_response(_publish_non_persistent(name, request))
        result = build_broker().writer.append(name, batch_from_request(request), request.producerName)
        response = ProduceResponse(
            messagePublishResults=[PublishResult(messageId=str(i)) for i in result.message_ids],
            ledgerId=result.ledger_id,
            entryId=result.entry_id,
            duplicate=result.duplicate,
            throttledMs=_throttled_ms(result.throttled_ms),
            journalShard=result.journal_shard or None,
        )
        return json_response(response.model_dump(exclude_none=True))

    producer = f"/magnetar/v1/producer/{domain}/<tenant>/<namespace>/<topic>/<producer>"

    @guarded(router, "PUT", producer, Access.PRODUCE, domain, request=ProducerRequest, response=AttachProducerResponse)
    def attach_producer(tenant: str, namespace: str, topic: str, producer: str) -> Response[str]:
        """Register a producer (access mode, lease); answers its last sequence id."""
        request = body(ProducerRequest)
        name = topic_name(domain, tenant, namespace, topic)
        writer = build_broker().writer
        writer.attach_producer(name, unquote(producer), request.accessMode, request.leaseMs)
        return json_response({"lastSequenceId": writer.metadata.last_sequence_id(name, unquote(producer))})

    @guarded(router, "DELETE", producer, Access.PRODUCE, domain)
    def detach_producer(tenant: str, namespace: str, topic: str, producer: str) -> Response[str]:
        """Close a producer."""
        build_broker().writer.detach_producer(topic_name(domain, tenant, namespace, topic), unquote(producer))
        return no_content()


for _domain in DOMAINS:
    _bind(_domain)
