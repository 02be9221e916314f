"""Pulsar's basic authentication provider through every door of `magnetar local up --auth` with
`MAGNETAR_AUTH_BASIC_CONF` (an htpasswd file: one MD5 ($apr1$) and one CRYPT user, as `htpasswd -m`
and `-d` write them): the SDK's `AuthenticationBasic` (long polling and push), raw HTTP, the
WebSocket API, and the official pulsar-client through the binary protocol proxy. The role is the
user name and the usual grants decide; a wrong password or an unknown user is a 401 with a reason
(the proxy: an authentication error), never a 500."""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, TypeVar

import pytest
from passlib.hash import apr_md5_crypt, des_crypt

import magnetar
from http_helpers import HTTP
from magnetar.client import exceptions
from magnetar.client.admin import AdminClient
from magnetar.config import ENV_BASIC_AUTH_CONF
from ws_helpers import open_ws, refusal, send

T = TypeVar("T")
PASSWORDS = {"root": "root-pw", "alice": "alice:pw with colon", "bob": "bob-pw"}
TENANT = f"basic-{uuid.uuid4().hex[:6]}"
NS = f"{TENANT}/ns"
PROPAGATION_S = 15  # a grant reaches every warm container within its 10 s cache


@pytest.fixture(scope="module")
def cluster_basic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from magnetar.local.cluster import LocalUpProcess
    from magnetar.security.tokens import new_secret_key

    tmp = Path(tmp_path_factory.mktemp("basic-auth"))
    htpasswd = tmp / ".htpasswd"
    htpasswd.write_text("# htpasswd -m / -d\n"
                        f"root:{apr_md5_crypt.hash(PASSWORDS['root'])}\n"
                        f"alice:{apr_md5_crypt.hash(PASSWORDS['alice'])}\n"
                        f"bob:{des_crypt.hash(PASSWORDS['bob'])}\n")
    key_file = tmp / "secret.key"
    key_file.write_bytes(new_secret_key())
    os.environ[ENV_BASIC_AUTH_CONF] = f"file://{htpasswd}"  # inherited by `local up` only
    try:
        proc = LocalUpProcess(maintenance_interval_s=0, extra_args=[
            "--auth", "--token-secret-key", str(key_file), "--superuser-role", "root"])
        proc.__enter__()
    finally:
        os.environ.pop(ENV_BASIC_AUTH_CONF, None)
    try:
        with closing(AdminClient(proc.url, authentication=basic("root"))) as admin:
            admin.create_tenant(TENANT, admin_roles=[], allowed_clusters=["standalone"])
            admin.create_namespace(NS)
            admin.grant_permission_on_namespace(NS, "alice", ["produce", "consume"])
            admin.grant_permission_on_namespace(NS, "bob", ["consume"])
        yield proc
    finally:
        proc.__exit__(None, None, None)


def basic(user: str, password: str | None = None) -> magnetar.AuthenticationBasic:
    return magnetar.AuthenticationBasic(user, PASSWORDS.get(user, "x") if password is None else password)


def header(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def eventually(attempt: Callable[[], T], errors: tuple[type[Exception], ...] = (exceptions.AuthorizationError,),
               timeout_s: float = PROPAGATION_S) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return attempt()
        except errors:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def topic_name(prefix: str) -> str:
    return f"persistent://{NS}/{prefix}-{uuid.uuid4().hex[:6]}"


def test_sdk_users_are_their_roles_and_wrong_passwords_are_refused(cluster_basic: Any) -> None:
    topic = topic_name("sdk")
    with closing(magnetar.Client(cluster_basic.url, basic("alice"))) as alice, \
            closing(magnetar.Client(cluster_basic.url, basic("bob"))) as bob:
        polled = eventually(lambda: bob.subscribe(topic, "poll", initial_position=magnetar.InitialPosition.Earliest))
        pushed = eventually(lambda: alice.subscribe(topic, "push", delivery="push",
                                                    initial_position=magnetar.InitialPosition.Earliest))
        producer = eventually(lambda: alice.create_producer(topic))
        producer.send(b"from alice")
        for consumer in (polled, pushed):
            message = consumer.receive(timeout_millis=15_000)
            assert message.data() == b"from alice"
            consumer.acknowledge(message)
        with pytest.raises(exceptions.AuthorizationError):  # bob may consume, not produce
            bob.create_producer(topic).send(b"from bob")
    for auth in (basic("alice", "wrong"), basic("nobody", "x"), basic("bob", PASSWORDS["alice"])):
        with closing(magnetar.Client(cluster_basic.url, auth)) as client, \
                pytest.raises(exceptions.AuthenticationError) as refused:
            client.create_producer(topic).send(b"x")
        assert "Unknown user or wrong password" in refused.value.reason
        assert isinstance(refused.value, magnetar.ConnectError)  # as pulsar-client's refused connection
    with closing(magnetar.Client(cluster_basic.url, basic("invalid", "123456"))) as client, \
            pytest.raises(magnetar.ConnectError):  # pulsar-client's suite: test_invalid_basic_auth
        client.subscribe(topic, "my-sub", consumer_type=magnetar.ConsumerType.Shared)


def test_http_answers_401_with_a_reason_never_500(cluster_basic: Any) -> None:
    url = cluster_basic.url + "/admin/v2/tenants"
    assert HTTP.get(url, headers=header("root", PASSWORDS["root"])).status_code == 200
    assert HTTP.get(url, headers=header("alice", PASSWORDS["alice"])).status_code == 403  # not a superuser
    for headers in (header("root", "wrong"), header("ghost", "x"), {"Authorization": "Basic %%%not-base64"},
                    {"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()}):
        response = HTTP.get(url, headers=headers)
        assert response.status_code == 401, (headers, response.text)
        assert response.json()["reason"]


def test_websocket_connects_with_basic_credentials(cluster_basic: Any) -> None:
    path = f"/ws/v2/producer/{topic_name('ws').replace('://', '/')}"
    with open_ws(cluster_basic, path, header("alice", PASSWORDS["alice"])) as ws:
        assert send(ws, "over websocket")["result"] == "ok"
    status, body = refusal(cluster_basic, path, header("alice", "wrong"))
    assert status == 401 and "wrong password" in body["reason"]
    status, body = refusal(cluster_basic, path, header("bob", PASSWORDS["bob"]))  # consume only
    assert status == 403 and "bob" in body["reason"]


def official_client(url: str, user: str, password: str, timeout_s: int = 15) -> Any:
    """pulsar-client on `url` (the binary protocol's, or the HTTP API's) with basic credentials."""
    pulsar = pytest.importorskip("pulsar")
    import logging

    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    return pulsar.Client(url, authentication=pulsar.AuthenticationBasic(user, password),
                         operation_timeout_seconds=timeout_s, logger=logger)


def test_official_client_authenticates_with_basic(cluster_basic: Any) -> None:
    pulsar = pytest.importorskip("pulsar")
    topic = topic_name("official")

    def client(user: str, password: str, timeout_s: int = 15) -> Any:
        return official_client(cluster_basic.pulsar_url, user, password, timeout_s)

    alice, bob = client("alice", PASSWORDS["alice"]), client("bob", PASSWORDS["bob"])
    wrong = client("alice", "wrong", timeout_s=3)
    try:
        consumer = eventually(lambda: bob.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest),
                              (pulsar.AuthorizationError,))
        eventually(lambda: alice.create_producer(topic), (pulsar.AuthorizationError,)).send(b"basic")
        assert consumer.receive(timeout_millis=15_000).data() == b"basic"
        with pytest.raises(pulsar.AuthorizationError):
            bob.create_producer(topic)
        # refused at the connect (pulsar-client retries a refused handshake until its operation timeout)
        with pytest.raises(pulsar.PulsarException):
            wrong.create_producer(topic)
    finally:
        for c in (alice, bob, wrong):
            c.close()


def test_official_client_on_the_http_url_looks_up_with_its_credentials(cluster_basic: Any) -> None:
    """Given the HTTP API's URL, the official client sends its credentials with the topic lookup
    (`GET /lookup/v2/topic/...`: a role that may produce or consume) and again on the binary
    protocol it is sent to."""
    pulsar = pytest.importorskip("pulsar")
    topic = topic_name("official-http")

    def client(user: str, password: str, timeout_s: int = 15) -> Any:
        return official_client(cluster_basic.url, user, password, timeout_s)

    alice, bob, wrong = client("alice", PASSWORDS["alice"]), client("bob", PASSWORDS["bob"]), client("alice", "no", 3)
    try:
        consumer = eventually(lambda: bob.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest),
                              (pulsar.AuthorizationError, pulsar.ConnectError))
        eventually(lambda: alice.create_producer(topic), (pulsar.AuthorizationError, pulsar.ConnectError)).send(b"http")
        assert consumer.receive(timeout_millis=15_000).data() == b"http"
        with pytest.raises(pulsar.PulsarException):  # bob may look up (he consumes) but not produce
            bob.create_producer(topic)
        with pytest.raises(pulsar.PulsarException):  # the lookup itself is refused: 401
            wrong.create_producer(topic)
    finally:
        for c in (alice, bob, wrong):
            c.close()
