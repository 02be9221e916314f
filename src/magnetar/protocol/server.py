"""The protocol proxy's TCP server: one asyncio task per client connection.

The proxy is stateless: ids, cursors and ordering stay in DynamoDB, Kinesis and S3, reached
through the same core services the broker functions use (`magnetar.core.broker.Broker`, built by
`magnetar.adapters.aws.build_broker`). The core is synchronous (AWS SDK calls); its calls run on a
thread pool of their own, so a long poll never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from magnetar.core.broker import Broker
from magnetar.core.publish_pacing import ShardPacers
from magnetar.protocol.connection import Connection

if TYPE_CHECKING:
    from magnetar.core.push.service import PushService

log = logging.getLogger(__name__)

SERVER_VERSION = "Magnetar proxy 0.1"
MAX_PROTOCOL_VERSION = 21  # the newest protocol version the proxy answers with (the client's if older)
DEFAULT_WORKERS = 128  # threads for core calls: each polling consumer holds one while its long poll waits


def _default_broker() -> Broker:
    from magnetar.adapters.aws import build_broker

    return build_broker()


def _default_push() -> PushService:
    from magnetar.adapters.aws.connections import build_push

    return build_push()


@dataclass
class ProxySettings:
    host: str = "127.0.0.1"
    port: int = 6650  # 0: any free port (`ProxyServer.port` tells which once started)
    advertised_host: str | None = None  # the host the lookup answers name; the bound host by default
    workers: int = DEFAULT_WORKERS
    producer_lease_ms: int = 30_000  # an exclusive producer's lease, renewed every third of it
    consumer_lease_ms: int = 30_000  # a consumer's lease, renewed while its connection lives
    keep_alive_s: float = 30.0  # PING a client silent this long; close its connection after twice that
    # A producer that keeps SENDing while its appends are under way gets at most one append per this
    # interval: its SENDs wait (until this long after its previous append began) to share one
    # reservation and one journal record, as the SDK's batches wait for its request in flight. A
    # producer whose SENDs come one at a time (a synchronous `send`, a slow rate) never waits.
    append_interval_ms: int = 250
    # TLS (`pulsar+ssl://`) on a port of its own, beside the plain one: a PEM certificate chain and its key.
    # On AWS the load balancer terminates TLS instead (infra/magnetar_cdk/pulsar_protocol.py).
    tls_port: int | None = None  # 0: any free port (`ProxyServer.tls_port` tells which)
    tls_cert_file: str = ""
    tls_key_file: str = ""


@dataclass
class ProxyServer:
    settings: ProxySettings = field(default_factory=ProxySettings)
    broker_factory: Callable[[], Broker] = _default_broker
    port: int = 0
    connections: set[Connection] = field(default_factory=set)
    _server: asyncio.Server | None = None
    _tls_server: asyncio.Server | None = None
    tls_port: int = 0
    _executor: ThreadPoolExecutor | None = None
    _broker: Broker | None = None
    push_factory: Callable[[], PushService] = _default_push
    _push: PushService | None = None
    pacers: ShardPacers = field(default_factory=ShardPacers)  # its producers' pace per journal shard

    @property
    def broker(self) -> Broker:
        if self._broker is None:
            self._broker = self.broker_factory()
        return self._broker

    @property
    def push(self) -> PushService:
        """The push service (non-persistent topics: a publish fans out to the WebSocket consumers)."""
        if self._push is None:
            self._push = self.push_factory()
        return self._push

    @property
    def executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.settings.workers, thread_name_prefix="pulsar-proxy")
        return self._executor

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.settings.advertised_host or self.settings.host}:{self.port}"

    @property
    def tls_service_url(self) -> str | None:
        if self._tls_server is None:
            return None
        return f"pulsar+ssl://{self.settings.advertised_host or self.settings.host}:{self.tls_port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.settings.host, self.settings.port,
                                                  reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("Pulsar binary protocol on %s", self.service_url)
        if self.settings.tls_port is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self.settings.tls_cert_file, self.settings.tls_key_file)
            self._tls_server = await asyncio.start_server(self._accept, self.settings.host, self.settings.tls_port,
                                                          reuse_address=True, ssl=context)
            self.tls_port = self._tls_server.sockets[0].getsockname()[1]
            log.info("Pulsar binary protocol over TLS on %s", self.tls_service_url)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(self, reader, writer)
        connection.task = asyncio.current_task()
        self.connections.add(connection)
        try:
            await connection.serve()
        finally:
            self.connections.discard(connection)

    async def stop(self) -> None:
        """Stop listening and drop every connection (clients reconnect, to this proxy or another)."""
        for listening in (self._server, self._tls_server):
            if listening is not None:
                listening.close()
        serving = [c.task for c in self.connections if c.task is not None]
        for connection in list(self.connections):
            connection.abort()
        if serving:  # each connection's task ends once its transport is gone
            await asyncio.wait(serving, timeout=2)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


class ProxyThread:
    """The proxy on an event loop of its own thread (beside `magnetar local up`'s HTTP API, tests)."""

    def __init__(self, settings: ProxySettings, broker_factory: Callable[[], Broker] = _default_broker) -> None:
        self.server = ProxyServer(settings, broker_factory)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pulsar-proxy", daemon=True)

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def service_url(self) -> str:
        return self.server.service_url

    def start(self) -> ProxyThread:
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=10)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
