"""What the writer, the reader and the sealer share: where a topic partition's data lives, and
the timing rule that makes a hole safe to declare.

- `journal_key`: the Kinesis partition key of a topic partition (its records stay in one shard,
  in order); the writer appends under it and the reader reads the tail under it.
- `segment_key`: the S3 key of a sealed segment, naming its ledger and exact entry range (so a
  re-put after a crash writes the same bytes again).
- `WRITE_DEADLINE_MS` < `HOLE_GRACE_MS`: a writer never writes a reservation older than the
  deadline, so once the journal holds a later entry reserved more than the grace ago, the writer
  of a missing id is certainly past its deadline and the sealer may tombstone the id.
"""

from __future__ import annotations

import hashlib
import os
from urllib.parse import quote

from magnetar.core.naming import TopicName

# The functions read both from their environment (the verifier shortens them for a run; a
# deployment has no reason to): MAGNETAR_WRITE_DEADLINE_MS, MAGNETAR_HOLE_GRACE_MS.
ENV_WRITE_DEADLINE_MS = "MAGNETAR_WRITE_DEADLINE_MS"
ENV_HOLE_GRACE_MS = "MAGNETAR_HOLE_GRACE_MS"
# a writer never writes a reservation older than this, nor acknowledges a write completed past it
WRITE_DEADLINE_MS = int(os.environ.get(ENV_WRITE_DEADLINE_MS) or 10_000)
# a missing id is fenced off as a hole once a later id's reservation is this old
HOLE_GRACE_MS = int(os.environ.get(ENV_HOLE_GRACE_MS) or 60_000)


def journal_key(topic: str) -> str:
    """Kinesis partition key of a topic partition (keys are limited to 256 characters)."""
    return topic if len(topic) <= 256 else "sha256:" + hashlib.sha256(topic.encode()).hexdigest()


def segment_key(topic: TopicName, ledger_id: int, first: int, last: int) -> str:
    return (
        f"segments/{topic.tenant}/{topic.namespace}/{topic.domain}/{quote(topic.local_name, safe='')}"
        f"/{ledger_id:016x}/{first:016x}-{last:016x}.seg"
    )
