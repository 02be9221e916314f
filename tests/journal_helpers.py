"""A topic's journal shard and its write budget, for tests of what a producer does when the shard
is saturated (importable: pytest puts tests/ on sys.path)."""

from __future__ import annotations

from typing import Any

import pytest

from http_helpers import HTTP
from magnetar.local.aws_limits import SHARD_SPEND_PATH


def journal_shard(cluster: Any, topic: str) -> str:
    """The journal shard of a persistent topic's writes, as a REST publish of an empty message names it."""
    path = topic.removeprefix("persistent://")
    answer = HTTP.post(f"{cluster.url}/topics/persistent/{path}", json={"messages": [{"payload": ""}]}, timeout=30)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["journalShard"])


def spend_shard_writes(cluster: Any, shard: str, nbytes: int) -> None:
    """Spend `nbytes` of the shard's write budget at the emulator, as another writer of the shard
    would, into debt past the one second it holds: the writes of the next moments are refused
    until it has refilled, however fast the machine lets the producer under test send."""
    answer = HTTP.post(f"{cluster.endpoint}{SHARD_SPEND_PATH}",
                        json={"stream": cluster.names.stream, "shard": shard, "bytes": nbytes}, timeout=30)
    if answer.status_code == 404 and "reason" not in answer.text:
        pytest.skip("the AWS endpoint is not Magnetar's emulator: a shard's budget cannot be spent from outside")
    assert answer.status_code == 200, answer.text
