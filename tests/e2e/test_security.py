"""Authentication and authorization from the outside, against `magnetar local up --auth` in its
own process: every route x role (the table of docs/security.md), tenant isolation through the
SDK, raw HTTP and the WebSocket API, resources that cannot be seized without a grant, token
expiry, subscription restrictions, and AWS IAM (SigV4) principals."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

import magnetar
from http_helpers import HTTP
from magnetar.api.access import ROUTE_TABLE, RouteAccess
from magnetar.api.app import app  # noqa: F401 - registers every route in ROUTE_TABLE
from magnetar.client import exceptions
from magnetar.client.admin import AdminClient
from magnetar.core.authz import Access
from magnetar.local.cluster import LocalUpProcess
from magnetar.security.tokens import create_token, new_secret_key
from ws_helpers import open_ws, refusal, send

TENANT_A, TENANT_B = f"a-{uuid.uuid4().hex[:6]}", f"b-{uuid.uuid4().hex[:6]}"
NS_A, NS_B = f"{TENANT_A}/ns", f"{TENANT_B}/ns"
PROPAGATION_S = 15  # a grant change reaches every warm container within 10 s (their cache)


class Secured:
    def __init__(self, proc: LocalUpProcess, key: bytes) -> None:
        self.proc, self.key, self.url = proc, key, proc.url
        # one client for every raw request (it is thread-safe): a new one is a new TLS context,
        # ~36 ms of CPU each, which the route table's 1,652 requests paid one by one
        self._http = httpx.Client(timeout=30)

    def token(self, role: str, expires_in_s: int | None = None) -> str:
        return create_token(role, secret_key=self.key, expires_in_s=expires_in_s)

    def headers(self, role: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(role)}"} if role else {}

    def http(self, method: str, path: str, role: str | None, body: Any = None) -> httpx.Response:
        return self._http.request(method, self.url + path, headers=self.headers(role), json=body)

    def client(self, role: str) -> magnetar.Client:
        return magnetar.Client(self.url, authentication=magnetar.AuthenticationToken(self.token(role)))

    def admin(self, role: str = "admin") -> AdminClient:
        return AdminClient(self.url, authentication=magnetar.AuthenticationToken(self.token(role)))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    key = new_secret_key()
    key_file = Path(tmp_path_factory.mktemp("auth")) / "secret.key"
    key_file.write_bytes(key)
    with LocalUpProcess(maintenance_interval_s=0, extra_args=[
            "--auth", "--token-secret-key", str(key_file), "--superuser-role", "admin",
            "--metrics-role", "prometheus"]) as proc:
        s = Secured(proc, key)
        admin = s.admin()
        admin.create_tenant(TENANT_A, admin_roles=["alice"], allowed_clusters=["standalone"])
        admin.create_tenant(TENANT_B, admin_roles=["bob"], allowed_clusters=["standalone"])
        admin.create_namespace(NS_A)
        admin.create_namespace(NS_B)
        # a topic the route table never names: the deletes of namespace and tenant A stay refused (409)
        admin.create_topic(f"persistent://{NS_A}/keeper")
        admin.grant_permission_on_namespace(NS_A, "writer-a", ["produce"])
        admin.grant_permission_on_namespace(NS_A, "reader-a", ["consume"])
        admin.grant_permission_on_namespace(NS_B, "writer-b", ["produce"])
        admin.grant_permission_on_namespace(NS_B, "reader-b", ["consume"])
        admin.close()
        yield s
        s._http.close()


# --- the route x role table ------------------------------------------------------------------
ROLES = ("anonymous", "nobody", "admin", "alice", "bob", "writer-a", "reader-a")


def expected(access: Access, role: str) -> bool:
    """The table of docs/security.md, for a route on tenant A's namespace `ns` and its topics."""
    if access is Access.PUBLIC:
        return True
    if role == "anonymous":
        return False
    return {
        Access.AUTHENTICATED: True,
        Access.SUPERUSER: role == "admin",
        Access.TENANT_ADMIN: role in ("admin", "alice"),
        Access.NAMESPACE_MEMBER: role in ("admin", "alice", "writer-a", "reader-a"),
        Access.LOOKUP: role in ("admin", "alice", "writer-a", "reader-a"),
        Access.PRODUCE: role in ("admin", "alice", "writer-a"),
        Access.CONSUME: role in ("admin", "alice", "reader-a"),
        Access.FUNCTIONS: role in ("admin", "alice"),  # or a `functions` grant: none in this table
        Access.METRICS: role == "admin",  # or a metrics role (`prometheus` here): none in this table
    }[access]


PARAMS = {"tenant": TENANT_A, "namespace": "ns", "topic": "table-topic", "subscription": "table-sub",
          "consumer": "c1", "producer": "p1", "role": "somebody-else", "version": "0", "cluster": "table-cluster",
          "function": "table-function", "key": "table-key", "numMessages": "1", "timestamp": "0"}


def concrete(path: str) -> str:
    return re.sub(r"<(\w+)>", lambda m: PARAMS[m.group(1)], path)


def test_every_route_enforces_the_role_table(secured: Secured) -> None:
    assert len(ROUTE_TABLE) > 100

    def call(route: RouteAccess, role: str) -> str | None:
        """What is wrong with `role`'s answer on `route` (None: as the table says)."""
        # a body that keeps tenant A as it is when a superuser's request goes through
        body = {"adminRoles": ["alice"], "allowedClusters": ["standalone"]} if "/tenants/" in route.path else None
        response = secured.http(route.method, concrete(route.path), None if role == "anonymous" else role, body)
        status, allowed = response.status_code, expected(route.access, role)
        refused = 401 if role == "anonymous" else 403
        if status >= 500 or (allowed and status in (401, 403)) or (not allowed and status != refused):
            return f"{route.method} {route.path} as {role}: {status} {response.text[:80]}"
        if not allowed and "reason" not in response.json():
            return f"{route.method} {route.path} as {role}: no reason"
        return None

    with ThreadPoolExecutor(8) as pool:  # the routes' checks are independent of each other
        wrong = [w for w in pool.map(lambda case: call(*case), [(r, role) for r in ROUTE_TABLE for role in ROLES]) if w]
    assert not wrong, "\n".join(wrong)


def test_metrics_are_for_superusers_and_the_metrics_role_only(secured: Secured) -> None:
    for role, status in (("anonymous", 401), ("nobody", 403), ("alice", 403), ("writer-a", 403),
                         ("admin", 200), ("prometheus", 200)):
        response = secured.http("GET", "/metrics", None if role == "anonymous" else role)
        assert response.status_code == status, (role, response.text[:200])
        if status == 200:
            assert f'pulsar_topics_count{{cluster="standalone",namespace="{NS_A}"}}' in response.text
        else:
            assert response.json()["reason"], role
    # the metrics role reads metrics, nothing else
    assert secured.http("GET", f"/admin/v2/namespaces/{TENANT_A}", "prometheus").status_code == 403
    assert secured.http("GET", "/admin/v2/tenants", "prometheus").status_code == 403
    assert secured.http("GET", "/admin/v2/brokers/health", "prometheus").status_code == 200  # any authenticated role


def test_security_doc_has_the_route_table_of_the_code() -> None:
    from magnetar.api import route_table

    document = route_table.DOC.read_text()
    assert route_table.rewritten(document) == document, "run: python -m magnetar.api.route_table"


# --- tenant isolation through every door ----------------------------------------------------
def test_a_producer_of_tenant_a_cannot_touch_tenant_b(secured: Secured) -> None:
    topic_b = f"persistent://{NS_B}/orders"
    with closing(secured.client("writer-a")) as client, pytest.raises(exceptions.AuthorizationError):
        client.create_producer(topic_b).send(b"intrusion")
    response = secured.http("POST", f"/topics/persistent/{NS_B}/orders", "writer-a",
                            {"messages": [{"payload": "aGk="}]})
    assert response.status_code == 403 and "writer-a" in response.json()["reason"]
    status, body = refusal(secured, f"/ws/v2/producer/persistent/{NS_B}/orders", secured.headers("writer-a"))
    assert status == 403 and "reason" in body
    # and on its own tenant it produces, through all three doors
    with closing(secured.client("writer-a")) as client:
        assert client.create_producer(f"persistent://{NS_A}/orders").send(b"ok") is not None
    with open_ws(secured, f"/ws/v2/producer/persistent/{NS_A}/orders", secured.headers("writer-a")) as ws:
        assert send(ws, "over websocket")["result"] == "ok"
    assert secured.http("POST", f"/topics/persistent/{NS_A}/orders", "writer-a",
                        {"messages": [{"payload": "aGk="}]}).status_code == 200


def test_anonymous_callers_get_401_on_every_door(secured: Secured) -> None:
    assert secured.http("GET", f"/admin/v2/persistent/{NS_A}", None).status_code == 401
    with closing(magnetar.Client(secured.url)) as client, pytest.raises(exceptions.AuthenticationError):
        client.create_producer(f"persistent://{NS_A}/anon").send(b"x")
    status, body = refusal(secured, f"/ws/v2/consumer/persistent/{NS_A}/anon/sub")
    assert status == 401 and "reason" in body
    forged = create_token("admin", secret_key=new_secret_key())  # signed with another key
    response = HTTP.get(secured.url + "/admin/v2/tenants", headers={"Authorization": f"Bearer {forged}"})
    assert response.status_code == 401 and "signature" in response.json()["reason"]


def test_a_tenant_admin_cannot_administer_another_tenant(secured: Secured) -> None:
    topic_b = f"persistent://{NS_B}/policies"
    with closing(secured.admin("bob")) as bob:
        bob.create_topic(topic_b)
    quota = {"limitSize": 1, "limitTime": -1, "policy": "producer_exception"}
    for method, path, body in [
        ("POST", f"/admin/v2/namespaces/{NS_B}/backlogQuota", quota),
        ("POST", f"/admin/v2/persistent/{NS_B}/policies/backlogQuota", quota),
        ("POST", f"/admin/v2/namespaces/{NS_B}/permissions/alice", ["produce", "consume"]),
        ("GET", f"/admin/v2/persistent/{NS_B}/policies/subscriptions", None),
        ("PUT", f"/admin/v2/namespaces/{TENANT_B}/sneaky", None),
    ]:
        assert secured.http(method, path, "alice", body).status_code == 403, path
    with closing(secured.admin("bob")) as bob:
        assert bob.get_backlog_quotas(NS_B) == {}  # nothing was written
        assert "alice" not in bob.namespace_permissions(NS_B)
        assert f"{TENANT_B}/sneaky" not in bob.namespaces(TENANT_B)


def test_cluster_writes_are_for_superusers_and_replication_for_tenant_admins(secured: Secured) -> None:
    east = f"east-{uuid.uuid4().hex[:6]}"
    for method in ("PUT", "POST", "DELETE"):  # a tenant admin may not touch the instance's clusters
        response = secured.http(method, f"/admin/v2/clusters/{east}", "alice", {"serviceUrl": "http://east:8080"})
        assert response.status_code == 403 and "superusers only" in response.json()["reason"], method
    assert secured.http("GET", "/admin/v2/clusters/standalone", "alice").status_code == 403
    assert "standalone" in secured.http("GET", "/admin/v2/clusters", "alice").json()  # any authenticated role
    assert secured.http("GET", "/admin/v2/clusters", None).status_code == 401
    with closing(secured.admin()) as admin:
        assert east not in admin.clusters()  # nothing was written
        admin.create_cluster(east, {"serviceUrl": "http://east:8080"})
        admin.update_tenant(TENANT_A, ["alice"], ["standalone", east])
    path = f"/admin/v2/namespaces/{NS_A}/replication"
    assert secured.http("POST", path, "alice", ["standalone", east]).status_code == 204
    assert secured.http("GET", path, "alice").json() == sorted(["standalone", east])
    assert secured.http("POST", path, "bob", ["standalone"]).status_code == 403  # not bob's tenant
    assert secured.http("POST", path, "writer-a", ["standalone"]).status_code == 403  # a grant is not admin
    assert secured.http("GET", path, "alice").json() == sorted(["standalone", east])
    assert secured.http("POST", path, "alice", ["standalone"]).status_code == 204
    with closing(secured.admin()) as admin:
        admin.update_tenant(TENANT_A, ["alice"], ["standalone"])
        admin.delete_cluster(east)


# --- nothing can be seized without a grant ------------------------------------------------------
def test_exclusive_producer_and_subscription_cannot_be_seized(secured: Secured) -> None:
    topic = f"persistent://{NS_B}/exclusive-{uuid.uuid4().hex[:6]}"
    with closing(secured.client("writer-b")) as owner, closing(secured.client("reader-b")) as reader:
        producer = owner.create_producer(topic, access_mode=magnetar.ProducerAccessMode.Exclusive)
        consumer = reader.subscribe(topic, "owned", consumer_type=magnetar.ConsumerType.Exclusive)
        with closing(secured.client("writer-a")) as intruder:
            with pytest.raises(exceptions.AuthorizationError):
                intruder.create_producer(topic, access_mode=magnetar.ProducerAccessMode.Exclusive)
            with pytest.raises(exceptions.AuthorizationError):
                intruder.subscribe(topic, "owned", consumer_type=magnetar.ConsumerType.Exclusive)
        sub = f"/magnetar/v1/consumer/persistent/{NS_B}/{topic.rsplit('/', 1)[1]}/owned"
        for method, path, body in [("POST", f"{sub}/seek", {"messageId": "0:0:-1"}),
                                   ("DELETE", f"{sub}/intruder/subscription", None)]:
            assert secured.http(method, path, "writer-a", body).status_code == 403
            assert secured.http(method, path, "alice", body).status_code == 403  # another tenant's admin
        # the owners still hold both
        producer.send(b"still mine")
        assert consumer.receive(timeout_millis=10_000).data() == b"still mine"
        producer.close()
        consumer.close()


def test_a_subscription_restriction_admits_only_its_roles(secured: Secured) -> None:
    topic = f"persistent://{NS_A}/restricted-{uuid.uuid4().hex[:6]}"
    with closing(secured.admin("alice")) as alice:
        alice.grant_permission_on_namespace(NS_A, "reader-a2", ["consume"])
        alice.grant_permission_on_subscription(NS_A, "billing", ["reader-a"])
        assert alice.subscription_permissions(NS_A)["billing"] == ["reader-a"]
    deadline = time.monotonic() + PROPAGATION_S
    while True:
        with closing(secured.client("reader-a2")) as other:
            try:
                other.subscribe(topic, "billing")
            except exceptions.AuthorizationError:
                break
        assert time.monotonic() < deadline, "the restriction never took effect"
        time.sleep(1)
    with closing(secured.client("reader-a2")) as other:
        other.subscribe(topic, "analytics").close()  # unrestricted subscriptions stay open to it
    with closing(secured.client("reader-a")) as owner:
        owner.subscribe(topic, "billing").close()


def test_a_revoked_grant_stops_working(secured: Secured) -> None:
    topic = f"persistent://{NS_A}/revoked-{uuid.uuid4().hex[:6]}"
    with closing(secured.admin("alice")) as alice:
        alice.grant_permission_on_topic(topic, "temp", ["produce"])
        assert alice.topic_permissions(topic)["temp"] == ["produce"]
    deadline = time.monotonic() + PROPAGATION_S
    while secured.http("POST", "/topics/" + topic.replace("://", "/"), "temp",
                       {"messages": [{"payload": "aGk="}]}).status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(1)
    with closing(secured.admin("alice")) as alice:
        alice.revoke_permission_on_topic(topic, "temp")
    deadline = time.monotonic() + PROPAGATION_S
    while secured.http("POST", "/topics/" + topic.replace("://", "/"), "temp",
                       {"messages": [{"payload": "aGk="}]}).status_code != 403:
        assert time.monotonic() < deadline, "the revoked grant still works"
        time.sleep(1)


def test_an_expired_token_is_refused_even_while_its_authorization_is_cached(secured: Secured) -> None:
    token = secured.token("admin", expires_in_s=3)
    headers = {"Authorization": f"Bearer {token}"}
    assert HTTP.get(secured.url + "/admin/v2/tenants", headers=headers).status_code == 200
    time.sleep(4)
    response = HTTP.get(secured.url + "/admin/v2/tenants", headers=headers)
    assert response.status_code == 401 and "expired" in response.json()["reason"].lower()


def test_a_browser_token_in_the_query_opens_a_websocket(secured: Secured) -> None:
    path = f"/ws/v2/producer/persistent/{NS_A}/browser?token={secured.token('writer-a')}"
    with open_ws(secured, path) as ws:
        assert send(ws, "from a browser")["result"] == "ok"


# --- AWS IAM principals (SigV4) -------------------------------------------------------------
def test_an_iam_principal_is_granted_like_a_role(secured: Secured) -> None:
    endpoint = secured.proc.aws_endpoint
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                       aws_access_key_id="test", aws_secret_access_key="test")
    user = f"emr-{uuid.uuid4().hex[:6]}"
    arn = iam.create_user(UserName=user)["User"]["Arn"]
    key = iam.create_access_key(UserName=user)["AccessKey"]
    session = boto3.Session(aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"],
                            region_name="us-east-1")
    topic = f"persistent://{NS_A}/iam-{uuid.uuid4().hex[:6]}"
    auth = magnetar.AuthenticationAwsIam(session=session)
    with closing(magnetar.Client(secured.url, authentication=auth)) as client, pytest.raises(exceptions.AuthorizationError):
        client.create_producer(topic).send(b"before the grant")
    with closing(secured.admin("alice")) as alice:
        alice.grant_permission_on_namespace(NS_A, arn, ["produce"])
    deadline = time.monotonic() + PROPAGATION_S
    while True:
        try:
            with closing(magnetar.Client(secured.url, authentication=auth)) as client:
                client.create_producer(topic).send(b"signed")
            break
        except exceptions.AuthorizationError:
            assert time.monotonic() < deadline
            time.sleep(1)
    wrong = boto3.Session(aws_access_key_id=key["AccessKeyId"], aws_secret_access_key="x" * 40, region_name="us-east-1")
    with closing(magnetar.Client(secured.url, authentication=magnetar.AuthenticationAwsIam(session=wrong))) as client, \
            pytest.raises((exceptions.AuthenticationError, exceptions.AuthorizationError)):
        client.create_producer(topic).send(b"forged")
