"""`magnetar verify` over topic compaction: a run with a compaction crash point compacts its topic.

Its topic gets the compactionThreshold policy (1 byte), so every maintenance run of the workload
compacts what was sealed since (while compaction.after_write / after_commit kill it now and then),
and the last maintenance run, with no crash point left, finishes whatever a crash left half-done.
After the run (`check`), for every partition:
- every object the committed generation's index names exists in S3;
- the view holds each key's latest acknowledged message below the horizon, or a later message of
  that key (a send whose acknowledgement was lost may be stored), never an older one, and only
  messages that were sent, one per key.
"""

from __future__ import annotations

import contextlib
from typing import Any

from magnetar.core.naming import TopicName
from magnetar.verify.history import History

POINTS = ("compaction.after_write", "compaction.after_commit")


def compacts(crash_points: dict[str, int]) -> bool:
    return any(p.startswith("compaction.") for p in crash_points)


def prepare(topic: str) -> None:
    """The run's topic (created now unless partitioned: a partitioned one is) gets the policy."""
    from magnetar.adapters.aws import build_broker
    from magnetar.core.errors import AlreadyExists
    from magnetar.core.policies import COMPACTION_THRESHOLD

    admin = build_broker().admin
    name = TopicName.parse(topic)
    if admin.metadata.get_partitions(name) is None:
        with contextlib.suppress(AlreadyExists):
            admin.create_topic(name)
    admin.set_topic_policy(name, COMPACTION_THRESHOLD, 1)


def _key_of(payload: str) -> str:
    """The workload sends `<producer>-<i>` with partition key `k<i % 7>` (runner._produce)."""
    return f"k{int(payload.rsplit('-', 1)[1]) % 7}"


def check(partitions: list[Any], history: History) -> None:
    from botocore.exceptions import ClientError

    from magnetar.adapters.aws.clients import client
    from magnetar.adapters.aws.compaction import build_compactor
    from magnetar.config import ResourceNames

    compactor = build_compactor()
    s3 = client("s3")
    bucket = ResourceNames.from_env().bucket
    sent = {s.payload for s in history.sends}
    for topic in partitions:
        # a run still in flight (the last maintenance run's step budget ran out on a loaded
        # machine) is finished first: what is checked is the state a resumed run reaches
        state = compactor.store.get_state(topic)
        for _ in range(20):
            if state.progress is None and not state.trash_generation:
                break
            state = compactor.run(topic, budget_s=30)
        if state.generation == 0:
            if any(s.message_id is not None and s.message_id[2] == topic.partition_index for s in history.sends):
                history.compaction_violations.append(f"{topic}: never compacted")
            continue
        position = 0
        while True:
            objects = compactor.store.list_objects(topic, state.generation, position, limit=100)
            for obj in objects:
                try:
                    s3.head_object(Bucket=bucket, Key=obj.key)
                except ClientError:
                    history.missing_objects.append(obj.key)
                position = obj.last_entry + 1
            if len(objects) < 100:
                break
        view: dict[str, tuple[int, int]] = {}
        position = 0
        while True:
            page, position, _ = compactor.view.read(topic, position, 100, state)
            if not page:
                break
            for item in page:
                e = item.entry
                for i, m in enumerate(e.messages):
                    if i in item.mask:
                        continue
                    payload = m.payload.decode()
                    if payload not in sent or m.key in view:
                        history.compaction_violations.append(f"{topic}: {payload} (key {m.key}) should not be in the view")
                    view[str(m.key)] = (e.entry_id, i if e.batched else -1)
        latest: dict[str, tuple[int, int]] = {}
        for s in history.sends:
            if s.message_id is None or s.message_id[2] != topic.partition_index or s.message_id[1] >= state.horizon:
                continue
            key, at = _key_of(s.payload), (s.message_id[1], s.message_id[3])
            latest[key] = max(latest.get(key, at), at)
        for key, at in latest.items():
            if key not in view:
                history.compaction_violations.append(f"{topic}: key {key} (latest at {at}) missing from the view")
            elif view[key] < at:
                history.compaction_violations.append(f"{topic}: key {key} at {view[key]} in the view, {at} is later")
