"""Read plans (`magnetar.core.ledger.plan`): where the sealed part of an entry range lies in S3.

`POST /magnetar/v1/reader/persistent/{tenant}/{namespace}/{topic}/plan` with
`{"startEntryId": 0, "endEntryId": 1000000, "maxEntries": 100000}` answers the sealed entries of
`[startEntryId, endEntryId)` as slices of segment objects, each with a presigned GET URL (the
whole object; fetch the slice with `Range: bytes=<range[0]>-<range[1]-1>`) and the byte offset of
every entry in it:

    {"firstEntryId": 0, "sealedEntryId": 1200, "nextEntryId": 1200, "expiresAt": 1764...,
     "segments": [{"key": "segments/...", "ledgerId": 0, "firstEntryId": 0, "lastEntryId": 399,
                   "range": [0, 9123456], "offsets": [0, 22871, ...], "url": "https://..."}]}

Entries from `nextEntryId` on are not planned: plan again from there while it is below
`min(endEntryId, sealedEntryId)` (a page holds at most `maxEntries`), then read the rest (the
unsealed tail) with `POST .../read`. Authorized like that read (consume on the topic), so a role
that may read the topic gets its bytes and no other. `"urls": false` plans without signing.
Persistent topics only: non-persistent ones store nothing.
"""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, ConfigDict, Field

from magnetar.adapters.aws import build_broker
from magnetar.adapters.aws.presign import DEFAULT_EXPIRES_S, MAX_EXPIRES_S, presigner
from magnetar.api.access import guarded
from magnetar.api.http import body, json_response, topic_name
from magnetar.api.models import INT64_MAX
from magnetar.core.authz import Access
from magnetar.core.ledger.plan import plan_sealed

router = Router()  # type: ignore[no-untyped-call]
DOMAIN = "persistent"
# Offsets are a few bytes of JSON each: 200,000 entries stay far below Lambda's 6 MB response.
MAX_PLAN_ENTRIES = 200_000


class ReadPlanRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    startEntryId: int = Field(default=0, ge=0, le=INT64_MAX)
    endEntryId: int = Field(default=INT64_MAX, ge=0, le=INT64_MAX)  # exclusive; default: up to the seal
    maxEntries: int = Field(default=MAX_PLAN_ENTRIES, ge=1, le=MAX_PLAN_ENTRIES)
    urls: bool = True
    expiresSeconds: int = Field(default=DEFAULT_EXPIRES_S, ge=60, le=MAX_EXPIRES_S)


class ReadPlanResponse(BaseModel):
    firstEntryId: int  # the first entry retention keeps
    sealedEntryId: int  # entries below it are sealed
    nextEntryId: int  # the plan covers [max(startEntryId, firstEntryId), nextEntryId)
    expiresAt: int | None = None  # ms since the epoch; the URLs stop working then
    segments: list[dict[str, Any]]


@guarded(router, "POST", f"/magnetar/v1/reader/{DOMAIN}/<tenant>/<namespace>/<topic>/plan", Access.CONSUME,
         DOMAIN, request=ReadPlanRequest, response=ReadPlanResponse)
def read_plan(tenant: str, namespace: str, topic: str) -> Response[str]:
    """Plan a read of an entry range: its sealed segments, byte ranges and presigned GET URLs."""
    name = topic_name(DOMAIN, tenant, namespace, topic)
    request = body(ReadPlanRequest)
    plan = plan_sealed(build_broker().metadata, name, request.startEntryId, request.endEntryId, request.maxEntries)
    sign = presigner() if request.urls and plan.segments else None
    segments = []
    for seg in plan.segments:
        item: dict[str, Any] = {"key": seg.key, "ledgerId": seg.ledger_id, "firstEntryId": seg.first_entry,
                                "lastEntryId": seg.last_entry, "range": list(seg.byte_range),
                                "offsets": list(seg.offsets)}
        if sign is not None:
            item["url"] = sign(seg.key, request.expiresSeconds)
        segments.append(item)
    out: dict[str, Any] = {"firstEntryId": plan.first_entry, "sealedEntryId": plan.sealed_end,
                           "nextEntryId": plan.next_entry, "segments": segments}
    if sign is not None:
        out["expiresAt"] = int(time.time() * 1000) + request.expiresSeconds * 1000
    return json_response(out)
