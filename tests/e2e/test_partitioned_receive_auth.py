"""A grant on a partitioned topic covers the multi-partition receive of its partitions
(the route on the partitioned topic's own name), on a stack with authentication on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

import magnetar
from http_helpers import HTTP
from magnetar.client import exceptions
from magnetar.client.admin import AdminClient
from magnetar.local.cluster import LocalUpProcess
from magnetar.security.tokens import create_token, new_secret_key
from sdk_helpers import receive_until_quiet

NS = f"g-{uuid.uuid4().hex[:6]}/ns"


class Stack:
    def __init__(self, proc: LocalUpProcess, key: bytes) -> None:
        self.url, self.key = proc.url, key

    def token(self, role: str) -> str:
        return create_token(role, secret_key=self.key)

    def client(self, role: str) -> magnetar.Client:
        return magnetar.Client(self.url, authentication=magnetar.AuthenticationToken(self.token(role)))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    key = new_secret_key()
    key_file = Path(tmp_path_factory.mktemp("auth")) / "secret.key"
    key_file.write_bytes(key)
    with LocalUpProcess(maintenance_interval_s=0, extra_args=[
            "--auth", "--token-secret-key", str(key_file), "--superuser-role", "admin"]) as proc:
        s = Stack(proc, key)
        with closing(AdminClient(s.url, authentication=magnetar.AuthenticationToken(s.token("admin")))) as admin:
            admin.create_tenant(NS.split("/")[0], allowed_clusters=["standalone"])
            admin.create_namespace(NS)
        yield s


def test_a_grant_on_the_partitioned_topic_covers_the_receive_of_its_partitions(stack: Stack) -> None:
    topic = f"persistent://{NS}/granted-{uuid.uuid4().hex[:6]}"
    other = f"persistent://{NS}/other-{uuid.uuid4().hex[:6]}"
    with closing(AdminClient(stack.url, authentication=magnetar.AuthenticationToken(stack.token("admin")))) as admin:
        admin.create_partitioned_topic(topic, 3)
        admin.create_partitioned_topic(other, 3)
        admin.grant_permission_on_topic(topic, "carol", ["consume"])
    with closing(stack.client("admin")) as producer_client:
        producer = producer_client.create_producer(topic, batching_enabled=False)
        for i in range(9):
            producer.send(f"m{i}".encode(), partition_key=f"k{i}")
    with closing(stack.client("carol")) as carol:
        consumer = carol.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
        got = receive_until_quiet(consumer, 3000)
        assert sorted(m.data() for m in got) == sorted(f"m{i}".encode() for i in range(9))
        with pytest.raises(exceptions.AuthorizationError):
            carol.subscribe(other, "s")  # the grant is on one partitioned topic, not the namespace
    # the multi-partition route itself: allowed on the granted topic, refused on the other one
    headers = {"Authorization": f"Bearer {stack.token('carol')}"}
    base = f"{stack.url}/magnetar/v1/consumer/{{}}/s/c/receive"
    body = {"partitions": [0, 1, 2], "waitMs": 0}
    refused = HTTP.post(base.format(other.replace("://", "/")), json=body, headers=headers)
    assert refused.status_code == 403 and refused.json()["reason"]
    allowed = HTTP.post(base.format(topic.replace("://", "/")), json=body, headers=headers)
    assert allowed.status_code == 404, allowed.text  # authorized; consumer c is simply not subscribed
