"""Client failover across clusters (client/failover.py): pulsar-client 3.13's `ServiceInfo`,
`AutoClusterFailover` and `ServiceInfoProvider`.

Two independent local clusters in processes of their own (A without authentication, B with
token authentication, so that the per-cluster authentication of each `ServiceInfo` is what
reaches B), shared by the module. An outage of A is staged by `outage()`. Before them: the
argument validation, the failover check's counting on a scripted probe, the TCP probe, and the
transport's switch on httpx's test transport."""

from __future__ import annotations

import functools
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

import magnetar
from magnetar.client import exceptions, transport
from magnetar.client.admin import AdminClient
from magnetar.client.failover import AutoClusterFailoverProvider, probe
from magnetar.client.transport import ServiceSwitched, Transport
from magnetar.local.cluster import LocalUpProcess
from magnetar.security.tokens import create_token, new_secret_key

ServiceInfo = magnetar.ServiceInfo
AutoClusterFailover = magnetar.AutoClusterFailover


# --- arguments, as pulsar-client checks them ----------------------------------------------------
def test_arguments_are_checked_as_pulsar_client_checks_them() -> None:
    primary = ServiceInfo("http://127.0.0.1:1")
    with pytest.raises(ValueError, match="Argument service_url is expected to be of type 'str'"):
        ServiceInfo(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Argument authentication is expected to be either None"):
        ServiceInfo("http://h:1", "token")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="The scheme part is missing"):
        ServiceInfo("127.0.0.1:8080")
    with pytest.raises(ValueError, match="Argument primary is expected to be of type 'ServiceInfo'"):
        AutoClusterFailover("http://h:1", [primary])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Argument secondary is expected to be of type 'list'"):
        AutoClusterFailover(primary, primary)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one ServiceInfo"):
        AutoClusterFailover(primary, [])
    with pytest.raises(ValueError, match=r"Argument secondary\[1\] is expected to be of type 'ServiceInfo' and not 'str'"):
        AutoClusterFailover(primary, [primary, "http://h:2"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="Argument check_interval_ms is expected to be of type 'int'"):
        AutoClusterFailover(primary, [primary], check_interval_ms=0.5)  # type: ignore[arg-type]
    for name in ("check_interval_ms", "failover_threshold", "switch_back_threshold"):
        with pytest.raises(ValueError, match=f"Argument {name} is expected to be greater than 0"):
            AutoClusterFailover(primary, [primary], **{name: 0})
    config = AutoClusterFailover(primary, [ServiceInfo("https://b:443")])
    assert (config.check_interval_ms, config.failover_threshold, config.switch_back_threshold) == (5000, 1, 1)
    assert repr(config.secondary[0]) == "ServiceInfo(service_url='https://b:443', use_tls=True, tls_trust_certs_file_path=None)"

    with pytest.raises(ValueError, match="'str', 'AutoClusterFailover' or 'ServiceInfoProvider'"):
        magnetar.Client(8080)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="set authentication on each ServiceInfo instead"):
        magnetar.Client(config, magnetar.AuthenticationToken("t"))
    with pytest.raises(ValueError, match="set tls_trust_certs_file_path on each ServiceInfo instead"):
        magnetar.Client(config, tls_trust_certs_file_path="/ca.pem")

    class Wrong(magnetar.ServiceInfoProvider):
        def initial_service_info(self) -> Any:
            return "http://127.0.0.1:1"

    with pytest.raises(ValueError, match=r"Expected a magnetar\.ServiceInfo instance"):
        magnetar.Client(Wrong())
    assert magnetar.ServiceInfoProvider().close() is None
    with pytest.raises(NotImplementedError):
        magnetar.ServiceInfoProvider().initial_service_info()


# --- the failover check, on a scripted probe -----------------------------------------------------
class Scripted:
    """A probe answering from a set of available service URLs; it records what it probed."""

    def __init__(self, *up: str) -> None:
        self.up = set(up)
        self.probed: list[str] = []

    def __call__(self, url: str) -> bool:
        self.probed.append(url)
        return url in self.up


def test_failover_check_counts_consecutive_probes_as_pulsar_client() -> None:
    a, b, c = ServiceInfo("http://a:1"), ServiceInfo("http://b:1"), ServiceInfo("http://c:1")
    probe_ = Scripted("http://a:1", "http://c:1")
    provider = AutoClusterFailoverProvider(
        AutoClusterFailover(a, [b, c], check_interval_ms=10, failover_threshold=2, switch_back_threshold=3), probe_)
    switches: list[str] = []
    provider._update = lambda info: switches.append(info.service_url)
    assert provider.initial_service_info() is a

    provider.check()  # the primary answers
    probe_.up.discard("http://a:1")
    provider.check()  # one failure: below the threshold
    assert provider.current is a and not switches
    probe_.up.add("http://a:1")
    provider.check()  # a success resets the count
    probe_.up.discard("http://a:1")
    provider.check()
    assert provider.current is a
    provider.check()  # the second consecutive failure: the first available secondary (b is down too)
    assert provider.current is c and switches == ["http://c:1"]
    assert probe_.probed[-3:] == ["http://a:1", "http://b:1", "http://c:1"]

    probe_.up.add("http://a:1")
    provider.check()
    provider.check()  # two successes of the primary in a row
    probe_.up.discard("http://a:1")
    provider.check()  # a failure resets them
    probe_.up.add("http://a:1")
    provider.check()
    provider.check()
    assert provider.current is c
    provider.check()  # the third in a row: back to the primary
    assert provider.current is a and switches == ["http://c:1", "http://a:1"]

    # on a secondary that fails `failover_threshold` times, an available primary is taken at once
    probe_.up = {"http://b:1"}
    provider.check()
    provider.check()
    assert provider.current is b
    probe_.up = {"http://a:1"}
    provider.check()  # b fails once (a's success counts toward the switch back: 1 of 3)
    assert provider.current is b
    provider.check()  # b fails twice: the primary answers, switch at once
    assert provider.current is a and switches[-1] == "http://a:1"


def test_the_probe_is_a_tcp_connect_to_the_service_url_host_and_port() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert probe(f"http://127.0.0.1:{port}/some/path")
        assert probe(f"http://127.0.0.1:1,127.0.0.1:{port}")  # the hosts of the URL in order
    assert not probe(f"http://127.0.0.1:{port}")  # closed: refused
    assert not probe("not a url")


def test_the_prober_thread_switches_and_stops_with_the_client() -> None:
    config = AutoClusterFailover(ServiceInfo("http://a.invalid:1"), [ServiceInfo("http://b.invalid:1")],
                                 check_interval_ms=20, failover_threshold=2)
    provider = AutoClusterFailoverProvider(config, Scripted("http://b.invalid:1"))
    updates: list[str] = []
    done = threading.Event()

    def update(info: magnetar.ServiceInfo) -> None:
        updates.append(info.service_url)
        done.set()

    provider.initialize(update)
    assert done.wait(5) and updates == ["http://b.invalid:1"]
    provider.close()
    assert provider._thread is not None and not provider._thread.is_alive()


# --- the transport's switch (httpx's test transport) ----------------------------------------------
@pytest.fixture
def mock_http(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    state: dict[str, Any] = {"requests": []}

    def handler(request: httpx.Request) -> httpx.Response:
        state["requests"].append(request)
        response: httpx.Response = state["handler"](request)
        return response

    monkeypatch.setattr(transport.httpx, "Client", functools.partial(httpx.Client, transport=httpx.MockTransport(handler)))
    return state


def test_a_request_failing_to_connect_is_retried_on_the_new_service_with_its_authentication(
        mock_http: dict[str, Any]) -> None:
    t = Transport("http://a.test:8080", 5.0, magnetar.AuthenticationToken("token-a"))

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "a.test":
            t.switch("http://b.test:8080", magnetar.AuthenticationToken("token-b"))  # the prober, meanwhile
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json={"ok": True})

    mock_http["handler"] = handler
    assert t.call("GET", "/admin/v2/tenants") == {"ok": True}
    first, retried = mock_http["requests"]
    assert (first.url.host, first.headers["authorization"]) == ("a.test", "Bearer token-a")
    assert (str(retried.url), retried.headers["authorization"]) == (
        "http://b.test:8080/admin/v2/tenants", "Bearer token-b")
    assert t.generation == 1 and t.base == "http://b.test:8080"

    # a request pinned to the former service (acknowledgements) is not sent to the new one
    with pytest.raises(ServiceSwitched):
        t.call("POST", "/ack", {}, generation=0)
    t.switch("http://c.test", None)  # no authentication there
    mock_http["handler"] = lambda request: httpx.Response(200, json={})
    t.call("GET", "/x")
    assert "authorization" not in mock_http["requests"][-1].headers
    t.close()


def test_a_client_switches_by_its_provider_callback(mock_http: dict[str, Any]) -> None:
    class Provider(magnetar.ServiceInfoProvider):
        def __init__(self) -> None:
            self.update: Callable[[magnetar.ServiceInfo], None] | None = None
            self.closed = False

        def initial_service_info(self) -> magnetar.ServiceInfo:
            return ServiceInfo("http://a.test", magnetar.AuthenticationToken("token-a"))

        def initialize(self, on_service_info_update: Callable[[magnetar.ServiceInfo], None]) -> None:
            self.update = on_service_info_update

        def close(self) -> None:
            self.closed = True

    mock_http["handler"] = lambda request: httpx.Response(200, json={"partitions": 0})
    provider = Provider()
    client = magnetar.Client(provider)
    client.get_topic_partitions("persistent://public/default/t")
    assert provider.update is not None
    provider.update(ServiceInfo("https://b.test", magnetar.AuthenticationToken("token-b"),
                                websocket_url="wss://ws.b.test"))
    client.get_topic_partitions("persistent://public/default/t")
    with pytest.raises(ValueError):
        provider.update("https://c.test")  # type: ignore[arg-type]
    a, b = mock_http["requests"]
    assert (a.url.host, a.headers["authorization"]) == ("a.test", "Bearer token-a")
    assert (b.url.host, b.headers["authorization"]) == ("b.test", "Bearer token-b")
    assert client._websocket_url == "wss://ws.b.test"
    assert client.get_service_info().service_url == "https://b.test"
    client.close()
    assert provider.closed


# --- two clusters -------------------------------------------------------------------------------
class Cluster:
    def __init__(self, proc: LocalUpProcess, token: str | None = None) -> None:
        self.proc, self.url, self.token = proc, proc.url, token

    def auth(self) -> magnetar.AuthenticationToken | None:
        return magnetar.AuthenticationToken(self.token) if self.token else None

    def info(self) -> magnetar.ServiceInfo:
        return ServiceInfo(self.url, self.auth())

    def contents(self, topic: str) -> list[bytes]:
        """What the topic holds, read on this cluster alone (a plain client of its own)."""
        client = magnetar.Client(self.url, self.auth())
        try:
            reader = client.create_reader(topic, magnetar.MessageId.earliest)
            out: list[bytes] = []
            while reader.has_message_available():
                out.append(reader.read_next(5000).data())
            return out
        finally:
            client.close()


def _wait_closed(port: int, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(0.05)


def outage(cluster: Cluster) -> Callable[[], None]:
    """Take the cluster down (its process ends: its endpoint refuses connections, as an
    unreachable cluster does); the function returned brings it back on the same ports (with
    empty state: a new emulator). The one place that knows how an outage is staged."""
    proc = cluster.proc
    assert proc.proc is not None
    proc.proc.kill()
    proc.proc.wait()
    _wait_closed(proc.port)
    _wait_closed(proc.aws_port)  # its emulator ends with it

    def restore() -> None:
        proc.__enter__()

    return restore


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Cluster]]:
    key = new_secret_key()
    key_file = Path(tmp_path_factory.mktemp("auth")) / "secret.key"
    key_file.write_bytes(key)
    a = LocalUpProcess(maintenance_interval_s=0)
    b = LocalUpProcess(maintenance_interval_s=0, extra_args=[
        "--auth", "--token-secret-key", str(key_file), "--superuser-role", "admin"])
    # one after the other, from this thread: a local cluster's processes end with the thread that started them
    with a, b:
        yield Cluster(a), Cluster(b, create_token("admin", secret_key=key))


def _receive(consumer: Any, timeout_s: float = 20) -> bytes:
    message = consumer.receive(int(timeout_s * 1000))
    consumer.acknowledge(message)
    data: bytes = message.data()
    return data


def _wait_for(what: Callable[[], bool], timeout_s: float) -> float:
    start = time.monotonic()
    while not what():
        assert time.monotonic() - start < timeout_s, "not within the time"
        time.sleep(0.05)
    return time.monotonic() - start


def test_auto_cluster_failover_moves_producers_and_consumers_and_switches_back(
        clusters: tuple[Cluster, Cluster]) -> None:
    a, b = clusters
    topic = f"persistent://public/default/failover-{uuid.uuid4().hex[:8]}"
    client = magnetar.Client(AutoClusterFailover(
        primary=ServiceInfo(a.url), secondary=[b.info()],  # B's token: presented to B only
        check_interval_ms=200, failover_threshold=2, switch_back_threshold=2))
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        polled = client.subscribe(topic, "polled", initial_position=magnetar.InitialPosition.Earliest,
                                  delivery="poll")
        pushed = client.subscribe(topic, "pushed", initial_position=magnetar.InitialPosition.Earliest,
                                  delivery="push")
        producer.send(b"on-a")
        assert _receive(polled) == b"on-a" and _receive(pushed) == b"on-a"

        restore = outage(a)
        try:
            sent = time.monotonic()
            producer.send(b"on-b")  # retried until the client has switched to B
            assert time.monotonic() - sent < 5
            assert client.get_service_info().service_url == b.url
            assert _receive(polled) == b"on-b" and _receive(pushed) == b"on-b"
            producer.send(b"on-b-2")
            assert _receive(polled) == b"on-b-2" and _receive(pushed) == b"on-b-2"
        finally:
            restore()
        # A is back (empty): with deduplication, as a just-started cluster's first journal write may
        # stall past the write deadline: the retried publish and the late record settle on one copy
        # (without it, an at-least-once duplicate: docs/semantics.md, "Late records")
        with closing(AdminClient(a.url)) as admin_a:
            admin_a.set_deduplication("public/default", True)
        # two successful probes, and the client is on A again
        assert _wait_for(lambda: client.get_service_info().service_url == a.url, 5) < 5
        producer.send(b"back-on-a")
        assert _receive(polled) == b"back-on-a" and _receive(pushed) == b"back-on-a"
        assert producer.last_sequence_id() == 3  # one sequence across the clusters: 0, 1, 2, 3
    finally:
        client.close()
    assert b.contents(topic) == [b"on-b", b"on-b-2"]
    assert a.contents(topic) == [b"back-on-a"]


def test_a_service_info_provider_switches_by_callback_with_each_clusters_authentication(
        clusters: tuple[Cluster, Cluster]) -> None:
    a, b = clusters

    class Provider(magnetar.ServiceInfoProvider):
        update: Callable[[magnetar.ServiceInfo], None]

        def initial_service_info(self) -> magnetar.ServiceInfo:
            return a.info()

        def initialize(self, on_service_info_update: Callable[[magnetar.ServiceInfo], None]) -> None:
            self.update = on_service_info_update

    topic = f"persistent://public/default/provider-{uuid.uuid4().hex[:8]}"
    provider = Provider()
    client = magnetar.Client(provider, operation_timeout_seconds=5)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
        producer.send(b"1-on-a")
        assert _receive(consumer) == b"1-on-a"
        provider.update(ServiceInfo(b.url, magnetar.AuthenticationToken("not-a-token")))
        with pytest.raises(exceptions.AuthenticationError):
            producer.send(b"refused")  # B checks the token of B's ServiceInfo
        provider.update(b.info())
        producer.send(b"2-on-b")
        assert _receive(consumer) == b"2-on-b"
        provider.update(a.info())
        producer.send(b"3-on-a")
        assert _receive(consumer) == b"3-on-a"
    finally:
        client.close()
    assert b.contents(topic) == [b"2-on-b"]
    assert a.contents(topic) == [b"1-on-a", b"3-on-a"]


def test_a_switch_listener_that_runs_late_keeps_what_came_from_the_new_service(cluster: Any) -> None:
    """The switch's listeners run after the switch, on the thread that switched: a consumer may
    already have polled the new service, and its application acknowledged what came. Those
    messages and acks are kept (dropping the acks, the new service redelivered the message)."""
    topic = f"persistent://public/default/late-switch-{uuid.uuid4().hex[:8]}"
    client = magnetar.Client(cluster.url)
    try:
        consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest,
                                    delivery="poll")
        producer = client.create_producer(topic, batching_enabled=False)
        moved = client._transport
        moved.remove_switch_listener(consumer._on_switch)  # held back: it runs late, below
        # another name of the same cluster: a switch (a new service generation) to where the data is
        moved.switch(cluster.url.replace("127.0.0.1", "localhost"), None)
        producer.send(b"after-the-switch")
        first = consumer.receive(20_000)
        assert first.data() == b"after-the-switch"
        consumer.acknowledge(first)
        producer.send(b"second")
        consumer._on_switch()  # the late listener
        second = consumer.receive(20_000)
        assert second.data() == b"second"
        consumer.acknowledge(second)
        consumer.close()  # its acks are sent
        admin = AdminClient(cluster.url)
        try:
            stats = admin.topic_stats(topic)["subscriptions"]["s"]
        finally:
            admin.close()
        assert stats["msgBacklog"] == 0, f"an acknowledgement was dropped: {stats}"
    finally:
        client.close()
