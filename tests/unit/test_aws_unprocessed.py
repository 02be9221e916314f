"""BatchGetItem/BatchWriteItem: the items DynamoDB leaves unprocessed (throttled partitions) are
retried with backoff, and a batch that stays throttled ends in a retryable error, not a spin."""

from __future__ import annotations

from typing import Any

import pytest

from magnetar.adapters.aws import clients
from magnetar.adapters.aws.connections import DynamoConnectionRegistry
from magnetar.adapters.aws.dynamodb import DynamoMetadataStore
from magnetar.core.errors import RetryableError


class Throttling:
    """A DynamoDB stub that leaves everything unprocessed `throttled` times, then takes it."""

    def __init__(self, throttled: int) -> None:
        self.throttled = throttled
        self.calls = 0

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.throttled:
            return {"Responses": {}, "UnprocessedKeys": RequestItems}
        return {"Responses": {t: [{"pk": k["pk"]} for k in spec["Keys"]] for t, spec in RequestItems.items()}}

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        return {"UnprocessedItems": RequestItems if self.calls <= self.throttled else {}}


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr("magnetar.adapters.aws.clients.time.sleep", slept.append)
    return slept


def test_unprocessed_keys_are_read_again_after_a_backoff(waits: list[float]) -> None:
    ddb = Throttling(throttled=2)
    found = DynamoMetadataStore("t", dynamodb=ddb)._batch_get([{"pk": {"S": "a"}, "sk": {"S": "b"}}])
    assert found == [{"pk": {"S": "a"}}] and ddb.calls == 3 and len(waits) == 2


def test_unprocessed_items_are_written_again_after_a_backoff(waits: list[float]) -> None:
    ddb = Throttling(throttled=3)
    DynamoConnectionRegistry("t", dynamodb=ddb)._batch_write([{"PutRequest": {"Item": {"pk": {"S": "a"}}}}])
    assert ddb.calls == 4 and len(waits) == 3 and all(w <= 2.0 for w in waits)


def test_a_batch_that_stays_throttled_is_a_retryable_error(waits: list[float]) -> None:
    with pytest.raises(RetryableError):
        DynamoMetadataStore("t", dynamodb=Throttling(throttled=100))._batch_get([{"pk": {"S": "a"}}])
    with pytest.raises(RetryableError):
        DynamoConnectionRegistry("t", dynamodb=Throttling(throttled=100))._batch_write([{"PutRequest": {"Item": {}}}])
    assert len(waits) == 2 * clients.UNPROCESSED_ATTEMPTS
