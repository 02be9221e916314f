"""The clients' side of authentication against `magnetar local up --auth` in its own process: the
SDK (polling and push consumers, readers, partitioned topics, a rotating token), the admin
client's permission calls, and the command line (`magnetar tokens`, `--auth-params`,
`MAGNETAR_AUTH_TOKEN`, the permission commands). The broker's route x role table is
tests/e2e/test_security.py's."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, TypeVar

import pytest
from typer.testing import CliRunner

import magnetar
from magnetar.cli.main import app
from magnetar.client import exceptions
from magnetar.client.admin import AdminClient

T = TypeVar("T")
runner = CliRunner(env={"MAGNETAR_AUTH_TOKEN": None, "MAGNETAR_AUTH_PARAMS": None, "MAGNETAR_AUTH_PLUGIN": None})
TENANT = f"auth-{uuid.uuid4().hex[:6]}"
NS = f"{TENANT}/ns"
PROPAGATION_S = 15  # a grant reaches every warm container within its 10 s cache


def cli(*args: str, env: dict[str, str | None] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=env)
    return result.exit_code, result.output


class Secured:
    def __init__(self, url: str, key_file: Path, tmp: Path, aws_endpoint: str) -> None:
        self.url, self.key_file, self.tmp, self.aws_endpoint = url, key_file, tmp, aws_endpoint

    def token(self, role: str, expiry: str | None = None) -> str:
        """A token made by `magnetar tokens create` (its last line)."""
        code, out = cli("tokens", "create", "--secret-key", f"file://{self.key_file}", "--subject", role,
                        *(["--expiry-time", expiry] if expiry else []))
        assert code == 0, out
        return out.strip().splitlines()[-1]

    def auth(self, role: str) -> magnetar.AuthenticationToken:
        return magnetar.AuthenticationToken(self.token(role))

    def client(self, role: str | None, **options: Any) -> magnetar.Client:
        return magnetar.Client(self.url, self.auth(role) if role else None, **options)

    def admin(self, role: str = "admin") -> AdminClient:
        return AdminClient(self.url, authentication=self.auth(role))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    from magnetar.local.cluster import LocalUpProcess

    tmp = Path(tmp_path_factory.mktemp("auth-clients"))
    key_file = tmp / "secret.key"
    code, out = cli("tokens", "create-secret-key", "--output", str(key_file))
    assert code == 0, out
    try:
        proc = LocalUpProcess(maintenance_interval_s=0, extra_args=[
            "--auth", "--token-secret-key", str(key_file), "--superuser-role", "admin"])
    except TypeError as exc:  # a LocalUpProcess without extra_args: the server side is not there yet
        pytest.skip(f"LocalUpProcess(extra_args=...) is not available: {exc}")
    with proc:
        s = Secured(proc.url, key_file, tmp, proc.aws_endpoint)
        with closing(s.admin()) as admin:
            admin.create_tenant(TENANT, admin_roles=["tenant-admin"], allowed_clusters=["standalone"])
            admin.create_namespace(NS)
        yield s


def eventually(attempt: Callable[[], T], timeout_s: float = PROPAGATION_S) -> T:
    """`attempt()` until it stops raising AuthorizationError (a grant on its way to the caches)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return attempt()
        except exceptions.AuthorizationError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def topic_name(prefix: str) -> str:
    return f"persistent://{NS}/{prefix}-{uuid.uuid4().hex[:6]}"


# --- the SDK ---------------------------------------------------------------------------------------
def test_the_superuser_token_administers_produces_and_consumes(secured: Secured) -> None:
    topic = topic_name("super")
    calls: list[str] = []
    token = secured.token("admin")

    def supplier() -> str:
        calls.append(token)
        return token

    with closing(magnetar.Client(secured.url, magnetar.AuthenticationToken(supplier))) as client, \
            closing(secured.admin()) as admin:
        assert TENANT in admin.tenants()
        admin.create_topic(topic)
        polled = client.subscribe(topic, "poll", initial_position=magnetar.InitialPosition.Earliest)
        pushed = client.subscribe(topic, "push", initial_position=magnetar.InitialPosition.Earliest, delivery="push")
        producer = client.create_producer(topic)
        producer.send(b"one")
        for consumer in (polled, pushed):
            message = consumer.receive(timeout_millis=15_000)
            assert message.data() == b"one"
            consumer.acknowledge(message)
        reader = client.create_reader(topic, magnetar.MessageId.earliest)
        assert reader.read_next(timeout_millis=15_000).data() == b"one"
    assert len(calls) > 5  # the supplier was asked at every request, not once


def test_an_idle_consumers_watch_carries_the_credentials(secured: Secured, monkeypatch: pytest.MonkeyPatch) -> None:
    """The idle watch (client/idle_watch.py) connects with the consumer's credentials and rings."""
    from magnetar.client import consumer as consumer_module
    from magnetar.client import idle_watch

    monkeypatch.setattr(consumer_module, "IDLE_S", 1.0)
    monkeypatch.setattr(consumer_module, "MAX_POLL_MS", 2_000)
    monkeypatch.setattr(idle_watch, "LOOK_S", 60.0)  # a delivery within the test is the watch's ring
    topic = topic_name("watch")
    with closing(secured.client("admin")) as client:
        consumer = client.subscribe(topic, "idle", initial_position=magnetar.InitialPosition.Earliest)
        with pytest.raises(exceptions.Timeout):
            consumer.receive(timeout_millis=3_000)  # idle: the watch connects meanwhile
        deadline = time.monotonic() + 10
        while not consumer._watch.connected:
            assert time.monotonic() < deadline and consumer._watch.available(), "the watch connected"
            time.sleep(0.05)
        with pytest.raises(exceptions.Timeout):
            consumer.receive(timeout_millis=2_500)  # the polls of the connect's settling time
        producer = client.create_producer(topic, batching_enabled=False)
        started = time.monotonic()
        producer.send(b"rung")
        assert consumer.receive(timeout_millis=20_000).data() == b"rung"
        assert time.monotonic() - started < 15


def test_partitioned_topics_and_multi_topic_consumers_carry_the_credentials(secured: Secured) -> None:
    topic = topic_name("parts")
    with closing(secured.admin()) as admin:
        admin.create_partitioned_topic(topic, 3)
    with closing(secured.client("admin")) as client:
        consumer = client.subscribe(topic, "all", initial_position=magnetar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(6):
            producer.send(f"m{i}".encode(), partition_key=f"k{i}")
        got = set()
        while len(got) < 6:
            message = consumer.receive(timeout_millis=15_000)
            got.add(message.data())
            consumer.acknowledge(message)
        assert got == {f"m{i}".encode() for i in range(6)}


def test_without_credentials_every_call_is_an_authentication_error(secured: Secured) -> None:
    topic = topic_name("anon")
    with closing(secured.client(None)) as client:
        with pytest.raises(exceptions.AuthenticationError) as refused:
            client.create_producer(topic)
        assert refused.value.status == 401 and refused.value.reason
        with pytest.raises(exceptions.AuthenticationError):
            client.subscribe(topic, "s", delivery="push")
    with closing(AdminClient(secured.url)) as anonymous, pytest.raises(exceptions.AuthenticationError):
        anonymous.tenants()
    forged = magnetar.AuthenticationToken(secured.token("admin") + "x")
    with closing(AdminClient(secured.url, forged)) as admin, pytest.raises(exceptions.AuthenticationError):
        admin.tenants()


def test_an_expired_token_is_an_authentication_error(secured: Secured) -> None:
    with closing(magnetar.Client(secured.url, magnetar.AuthenticationToken(secured.token("admin", "2s")))) as client:
        time.sleep(3)
        with pytest.raises(exceptions.AuthenticationError, match=r"(?i)expired"):
            client.create_producer(topic_name("late"))


def test_a_produce_only_role_produces_but_cannot_consume(secured: Secured) -> None:
    topic = topic_name("writer")
    with closing(secured.admin("tenant-admin")) as admin:  # the tenant's admin grants on its namespace
        admin.grant_permission_on_namespace(NS, "writer", ["produce"])
        assert admin.namespace_permissions(NS)["writer"] == ["produce"]
    with closing(secured.client("writer")) as writer:
        producer = eventually(lambda: writer.create_producer(topic))
        assert producer.send(b"written") is not None
        with pytest.raises(exceptions.AuthorizationError) as refused:
            writer.subscribe(topic, "nope")
        assert refused.value.status == 403 and refused.value.reason
        with pytest.raises(exceptions.AuthorizationError):
            writer.subscribe(topic, "nope-push", delivery="push")
    with closing(secured.client("stranger")) as stranger, pytest.raises(exceptions.AuthorizationError):
        stranger.create_producer(topic)


def test_topic_grants_and_revocation_through_the_admin_client(secured: Secured) -> None:
    topic = topic_name("granted")
    with closing(secured.admin()) as admin:
        admin.grant_permission_on_topic(topic, "topic-reader", ["consume"])
        assert admin.topic_permissions(topic)["topic-reader"] == ["consume"]
    with closing(secured.client("topic-reader")) as reader:
        eventually(lambda: reader.subscribe(topic, "r")).close()
    with closing(secured.admin()) as admin:
        admin.revoke_permission_on_topic(topic, "topic-reader")
        assert "topic-reader" not in admin.topic_permissions(topic)


def test_an_iam_principal_signs_every_request(secured: Secured) -> None:
    import boto3

    iam = boto3.client("iam", endpoint_url=secured.aws_endpoint, region_name="us-east-1",
                       aws_access_key_id="test", aws_secret_access_key="test")
    user = f"spark-{uuid.uuid4().hex[:6]}"
    arn = iam.create_user(UserName=user)["User"]["Arn"]
    key = iam.create_access_key(UserName=user)["AccessKey"]
    session = boto3.Session(aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"],
                            region_name="us-east-1")
    topic = topic_name("iam")
    with closing(secured.admin()) as admin:
        admin.grant_permission_on_namespace(NS, arn, ["produce", "consume"])
    # polling only: the WebSocket API's $connect authorizer takes tokens (a SigV4-signed upgrade is
    # sent, see test_client_auth.py, but the local runtime's $connect does not verify SigV4)
    with closing(magnetar.Client(secured.url, magnetar.AuthenticationAwsIam(session=session))) as client:
        polled = eventually(lambda: client.subscribe(topic, "iam-poll",
                                                     initial_position=magnetar.InitialPosition.Earliest))
        client.create_producer(topic).send(b"signed")
        assert polled.receive(timeout_millis=15_000).data() == b"signed"
    env: dict[str, str | None] = {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
                                  "AWS_SESSION_TOKEN": None, "AWS_PROFILE": None, "AWS_DEFAULT_REGION": "us-east-1"}
    code, out = cli("produce", topic, "-m", "from-cli", "--service-url", secured.url, "--auth-plugin", "aws-iam",
                    env=env)
    assert code == 0 and "1 messages successfully produced" in out, out


# --- the command line ----------------------------------------------------------------------------
def test_cli_with_auth_params_and_the_environment(secured: Secured) -> None:
    topic = topic_name("cli")
    url = ["--service-url", secured.url]
    admin_token = secured.token("admin")
    token_file = secured.tmp / "cli.token"
    token_file.write_text(secured.token("cli-user") + "\n")

    code, out = cli("admin", "tenants", "list", *url)
    assert code == 1 and "error" in out  # anonymous: refused, one line, exit 1
    code, out = cli("admin", "namespaces", "grant-permission", NS, "--role", "cli-user", "--actions",
                    "produce,consume", *url, "--auth-params", f"token:{admin_token}")
    assert code == 0, out
    code, out = cli("admin", "namespaces", "permissions", NS, *url, env={"MAGNETAR_AUTH_TOKEN": admin_token})
    assert code == 0 and '"cli-user"' in out and "consume" in out and "produce" in out

    deadline = time.monotonic() + PROPAGATION_S
    while (result := cli("produce", topic, "-m", "via-cli", *url, "--auth-params", f"file://{token_file}"))[0]:
        assert time.monotonic() < deadline, result[1]
        time.sleep(1)
    assert "1 messages successfully produced" in result[1]
    code, out = cli("consume", topic, "-s", "cli-sub", "-p", "Earliest", "--timeout", "15", *url,
                    env={"MAGNETAR_AUTH_TOKEN": token_file.read_text().strip()})
    assert code == 0 and "content:via-cli" in out, out

    code, out = cli("admin", "namespaces", "revoke-permission", NS, "--role", "cli-user", *url,
                    "--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken",
                    "--auth-params", f"token:{admin_token}")
    assert code == 0, out
    code, out = cli("admin", "namespaces", "permissions", NS, *url, env={"MAGNETAR_AUTH_TOKEN": admin_token})
    assert code == 0 and "cli-user" not in out


def test_cli_permission_commands(secured: Secured) -> None:
    topic = topic_name("cli-perm")
    tenant = f"cli-{uuid.uuid4().hex[:6]}"
    env: dict[str, str | None] = {"MAGNETAR_AUTH_TOKEN": secured.token("admin"), "MAGNETAR_SERVICE_URL": secured.url}
    for args, expect in [
        (("admin", "tenants", "create", tenant, "--admin-roles", "ops,boss"), "created tenant"),
        (("admin", "tenants", "get", tenant), '"boss"'),
        (("admin", "tenants", "update", tenant, "--admin-roles", "ops"), "updated tenant"),
        (("admin", "topics", "grant-permission", topic, "--role", "t-user", "--actions", "consume"), "granted"),
        (("admin", "topics", "permissions", topic), '"t-user"'),
        (("admin", "topics", "revoke-permission", topic, "--role", "t-user"), "revoked"),
        (("admin", "namespaces", "grant-subscription-permission", NS, "--subscription", "billing",
          "--roles", "a,b"), "billing"),
        (("admin", "namespaces", "subscription-permissions", NS), '"billing"'),
        (("admin", "namespaces", "revoke-subscription-permission", NS, "--subscription", "billing",
          "--role", "b"), "revoked"),
    ]:
        code, out = cli(*args, env=env)
        assert code == 0 and expect in out, (args, out)
    with closing(secured.admin()) as admin:
        assert admin.subscription_permissions(NS)["billing"] == ["a"]
        assert admin.get_tenant(tenant)["adminRoles"] == ["ops"]
    code, out = cli("admin", "topics", "permissions", topic, env=env | {"MAGNETAR_AUTH_TOKEN": secured.token("nobody")})
    assert code == 1 and "error" in out
