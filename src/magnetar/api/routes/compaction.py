"""Topic compaction (`magnetar.core.compaction`): Pulsar's trigger and status, and the compacted read.

- `PUT /admin/v2/persistent/{tenant}/{namespace}/{topic}/compaction`: start a run (409 while one
  runs) and run it as far as a step's budget allows; the maintenance run continues it. On a
  partitioned topic, every partition.
- `GET .../compaction`: Pulsar's LongRunningProcessStatus (`status` NOT_RUN, RUNNING, SUCCESS,
  ERROR; `lastError`).
- `POST /magnetar/v1/reader/persistent/{tenant}/{namespace}/{topic}/compacted`: the read of a
  reader with `is_read_compacted`: below the compaction horizon the compacted view (whole entries
  with `ackedIndexes` naming the messages not in it), from the horizon on the topic itself.
"""

from __future__ import annotations

from typing import Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, ConfigDict, Field

from magnetar.adapters.aws import build_broker
from magnetar.adapters.aws.compaction import build_compactor
from magnetar.api.access import guarded
from magnetar.api.http import body, json_response, no_content, topic_name
from magnetar.api.models import INT64_MAX
from magnetar.api.wire import entry_messages, entry_to_wire
from magnetar.core.authz import Access
from magnetar.core.compaction import DEFAULT_BUDGET_S, ERROR, NOT_RUN, RUNNING, SUCCESS, CompactionState
from magnetar.core.errors import TopicNotFound
from magnetar.core.naming import TopicName

router = Router()  # type: ignore[no-untyped-call]
DOMAIN = "persistent"  # Pulsar compacts persistent topics only


class LongRunningProcessStatus(BaseModel):
    status: Literal["NOT_RUN", "RUNNING", "SUCCESS", "ERROR"]
    lastError: str | None = None


class CompactedReadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    startEntryId: int = Field(default=0, ge=0, le=INT64_MAX)
    maxEntries: int = Field(default=100, ge=1, le=1000)
    format: Literal["messages", "entries", "ids"] = "messages"  # ids: the view's entry ids and masks only


class CompactedReadResponse(BaseModel):
    nextEntryId: int
    horizon: int  # the compacted view holds the entries below it
    entries: list[dict[str, Any]] | None = None
    messages: list[dict[str, Any]] | None = None
    ids: list[dict[str, Any]] | None = None  # format "ids": {"entryId", "ackedIndexes"} below the horizon


def _partitions(name: TopicName) -> list[TopicName]:
    count = build_broker().metadata.get_partitions(name) if name.partition_index < 0 else None
    return [name.partition(i) for i in range(count)] if count else [name]


def _combined(states: list[CompactionState]) -> dict[str, Any]:
    """A partitioned topic's status: the worst of its partitions' (ERROR, RUNNING, then the rest)."""
    for status in (ERROR, RUNNING):
        for state in states:
            if state.status == status:
                return state.status_body()
    if states and all(s.status == SUCCESS for s in states):
        return {"status": SUCCESS}
    return {"status": NOT_RUN} if all(s.status == NOT_RUN for s in states) else {"status": RUNNING}


one = f"/admin/v2/{DOMAIN}/<tenant>/<namespace>/<topic>/compaction"


@guarded(router, "PUT", one, Access.TENANT_ADMIN, DOMAIN, errors=(409,))
def trigger_compaction(tenant: str, namespace: str, topic: str) -> Response[str]:
    """Start compacting the topic (each partition of a partitioned topic); 409 while a run is in progress."""
    name = topic_name(DOMAIN, tenant, namespace, topic)
    names = _partitions(name)
    compactor = build_compactor()
    for partition in names:
        try:
            compactor.trigger(partition, DEFAULT_BUDGET_S / len(names))
        except TopicNotFound:
            if partition == name:
                raise  # (a partition nothing was ever published to has nothing to compact)
    return no_content()


@guarded(router, "GET", one, Access.TENANT_ADMIN, DOMAIN, response=LongRunningProcessStatus)
def compaction_status(tenant: str, namespace: str, topic: str) -> Response[str]:
    """The status of the topic's compaction (Pulsar's LongRunningProcessStatus)."""
    name = topic_name(DOMAIN, tenant, namespace, topic)
    names = _partitions(name)
    if names == [name] and build_broker().metadata.get_topic_state(name)[1] is None:
        raise TopicNotFound(f"Topic {name} not found")
    compactor = build_compactor()
    return json_response(_combined([compactor.status(partition) for partition in names]))


@guarded(router, "POST", f"/magnetar/v1/reader/{DOMAIN}/<tenant>/<namespace>/<topic>/compacted", Access.CONSUME,
         DOMAIN, request=CompactedReadRequest, response=CompactedReadResponse)
def read_compacted(tenant: str, namespace: str, topic: str) -> Response[str]:
    """Read the compacted view from an entry id on: below the horizon the latest value of each key,
    then the topic itself (readers and consumers with is_read_compacted)."""
    name = topic_name(DOMAIN, tenant, namespace, topic)
    request = body(CompactedReadRequest)
    if request.format == "ids":  # the object index alone: what a compacted consumer filters with
        kept, next_entry, state = build_compactor().view.kept(name, request.startEntryId, request.maxEntries)
        return json_response({"nextEntryId": next_entry, "horizon": state.horizon,
                              "ids": [{"entryId": e, "ackedIndexes": list(mask)} for e, mask in kept]})
    page, next_entry, state = build_compactor().view.read(name, request.startEntryId, request.maxEntries)
    items = [(item.entry, list(item.mask)) for item in page]
    if request.startEntryId >= state.horizon:  # past the view (or never compacted): the topic itself
        entries = build_broker().read_entries(name, max(request.startEntryId, state.horizon), request.maxEntries)
        next_entry = entries[-1].entry_id + 1 if entries else max(request.startEntryId, state.horizon)
        items = [(e, []) for e in entries if not e.hole]
    out: dict[str, Any] = {"nextEntryId": next_entry, "horizon": state.horizon}
    if request.format == "entries":
        out["entries"] = [entry_to_wire(e, name.partition_index, 0, mask) for e, mask in items]
    else:
        out["messages"] = [m for e, mask in items
                           for i, m in enumerate(entry_messages(str(name), name.partition_index, e)) if i not in mask]
    return json_response(out)
