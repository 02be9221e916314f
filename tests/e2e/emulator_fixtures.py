"""An emulator of the module's own (AWS limits on) and a fresh DynamoDB table on it, for tests of
the DynamoDB adapter and of the emulator itself. A test module takes the fixture by importing
`ddb_fixture` (named `ddb` for the tests)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from magnetar.local.cluster import free_port, start_emulator
from magnetar.local.fidelity import AwsFidelity


@pytest.fixture(scope="module", name="ddb")
def ddb_fixture() -> Iterator[Any]:
    port = free_port()
    proc = start_emulator("127.0.0.1", port, AwsFidelity(limits=True))
    try:
        yield boto3.client("dynamodb", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                           aws_access_key_id="test", aws_secret_access_key="test")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def fresh_table(ddb: Any) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                           {"AttributeName": "sk", "AttributeType": "S"}])
    return name
