"""`magnetar local up`: the emulator, the resources, the HTTP API and the event-source mapping."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from magnetar.config import (
    CLUSTER_NAME,
    DEFAULT_SUPERUSER_ROLE,
    ENV_AUTH_ENABLED,
    ENV_CLUSTER_NAME,
    ENV_FUNCTION_CODE,
    ENV_FUNCTION_LAYERS,
    ENV_FUNCTION_LOG_GROUP,
    ENV_FUNCTION_ROLE,
    ENV_METRICS_ROLES,
    ENV_SEAL_LATENCY_MS,
    ENV_SUPERUSER_ROLES,
    ENV_TAIL_READS,
    ENV_TOKEN_SECRET_KEY,
    ENV_TOPIC_LEVEL_METRICS,
    ENV_WS_ENDPOINT,
    JOURNAL_BATCH_SIZE,
    LOCAL_RESOURCES,
    LOCAL_SHARD_COUNT,
    MAINTENANCE_INTERVAL_S,
    ResourceNames,
    journal_batching_window_s,
)
from magnetar.core.ledger.pacing import check_seal_latency
from magnetar.local.apigw import build_app
from magnetar.local.authorizers import LocalAuthorizers
from magnetar.local.esm import KinesisEventSourceMapping, poll_interval
from magnetar.local.fidelity import EMULATOR_AS_IS, AwsFidelity, latency_model
from magnetar.local.function_logs import FunctionLogs, default_directory
from magnetar.local.function_workers import ENV_FUNCTION_WORKERS, WORKERS
from magnetar.local.lambda_runtime import (
    AUTHORIZER,
    BROKER,
    JOURNAL_CONSUMER,
    MAINTENANCE,
    WEBSOCKET,
    LambdaSettings,
    configure,
)
from magnetar.local.network import LocalNetwork
from magnetar.local.scheduler import Schedule
from magnetar.local.sigv4 import EmulatorIam

if TYPE_CHECKING:
    from magnetar.protocol import ProxyThread

log = logging.getLogger(__name__)


def _cut_lifespan(record: logging.LogRecord) -> bool:
    """Drop uvicorn's report of the lifespan task cancelled when a cluster's doors are closed at
    once (an outage staged on a local instance): it is what was asked, not a failure."""
    if record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError):
        return False
    return "asyncio.exceptions.CancelledError" not in record.getMessage()  # logged as the traceback's text


# Ports for the local stack's listeners are picked at random below Linux's ephemeral range
# (32768-60999 by default): a port the kernel chose (bind to 0) is one it hands to outgoing
# connections too, and one of the many clients of a test run took it between the pick and the
# listener's bind (measured: a proxy failed "address already in use" and ten tests with it).
# Drawn from the OS's randomness, not the `random` module's state, which a test framework may seed
# alike in several processes (seen once: a test's instance answered on its port as another
# cluster would, most likely the other test worker's, which had drawn the same port).
_LISTEN_PORTS = range(15_000, 32_768)
_draw = random.SystemRandom()
_handed_out: set[int] = set()
_ports_lock = threading.Lock()


def free_port() -> int:
    """A port free to listen on now, not handed out before by this process."""
    with _ports_lock:
        for _ in range(200):
            port = _draw.choice(_LISTEN_PORTS)
            if port not in _handed_out and _is_free(port):
                _handed_out.add(port)
                return port
    with socket.socket() as s:  # the range is taken (unlikely): one the kernel picks
        s.bind(("127.0.0.1", 0))
        chosen: int = s.getsockname()[1]
        return chosen


def free_run(n: int) -> int:
    """A first port with the n - 1 following ones free too (a local instance's clusters)."""
    for _ in range(50):
        base = free_port()
        if base + n < 65535 and all(_is_free(base + i) for i in range(n)):
            with _ports_lock:
                _handed_out.update(range(base, base + n))
            return base
    raise RuntimeError("no run of free ports")


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _wait_for_port(host: str, port: int, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the process meant to listen on {port} exited with code {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout_s}s")


def check_port_free(host: str, port: int, what: str) -> None:
    """An OSError (EADDRINUSE) when another process listens on host:port: a cluster must not take
    over another's HTTP API or emulator, nor say it is up on a port that is not its own."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind: TIME_WAIT is not "in use"
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise OSError(errno.EADDRINUSE, f"{host}:{port} ({what}) is in use by another process: "
                                            "stop it or choose another port") from None


def _die_with_parent() -> None:
    """Child processes end when `magnetar local up` ends, even on SIGKILL (Linux)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_emulator(host: str, port: int, fidelity: AwsFidelity = EMULATOR_AS_IS) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "magnetar.local.emulator", "--host", host, "--port", str(port),
         *fidelity.emulator_args()],
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        # a process group of its own: a signal to the whole job (Ctrl-C in a terminal, `timeout`)
        # stops `local up`, which stops what reads the emulator before the emulator itself
        process_group=0,
    )
    _wait_for_port(host, port, 30, proc)
    return proc


# what the broker creates registered functions' Lambda functions with, locally (the stack's are its
# resources': infra/magnetar_cdk/pulsar_functions.py); the local runtime runs functions/function_runtime
LOCAL_FUNCTION_DEPLOYMENT = {
    ENV_FUNCTION_ROLE: "arn:aws:iam::000000000000:role/magnetar-function-runtime",
    ENV_FUNCTION_CODE: "magnetar-local-assets/function_runtime.zip",
    ENV_FUNCTION_LAYERS: "arn:aws:lambda:us-east-1:000000000000:layer:magnetar-core:1",
    ENV_FUNCTION_LOG_GROUP: "/magnetar/functions",
}


def configure_aws_environment(endpoint: str | None) -> None:
    """Standard AWS SDK variables only: per-service AWS_ENDPOINT_URL_<SERVICE> still win."""
    if endpoint:
        os.environ["AWS_ENDPOINT_URL"] = endpoint
    os.environ.setdefault("AWS_DEFAULT_REGION", os.environ.get("AWS_REGION", "us-east-1"))
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")  # the functions log at INFO on AWS
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "magnetar")
    if not (os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE")):
        os.environ["AWS_ACCESS_KEY_ID"] = "test"
        os.environ["AWS_SECRET_ACCESS_KEY"] = "test"


@dataclass
class LocalCluster:
    host: str = "127.0.0.1"
    port: int = 8080
    aws_port: int = 4566
    aws_endpoint: str | None = None  # an already running emulator (LocalStack...): moto is not started
    names: ResourceNames = LOCAL_RESOURCES
    poll_interval_s: float = 1.0  # the event-source mapping polls an idle shard once a second, as on AWS
    maintenance_interval_s: float = MAINTENANCE_INTERVAL_S  # the EventBridge schedule (0: never, tests)
    maintenance: Schedule | None = None
    # authentication and authorization (off by default, as Pulsar standalone): the token key file
    # the authorizer verifies with, and the superuser roles
    auth: bool = False
    token_secret_key: str | None = None
    superuser_roles: tuple[str, ...] = (DEFAULT_SUPERUSER_ROLE,)
    metrics_roles: tuple[str, ...] = ()  # may scrape GET /metrics besides the superusers (MAGNETAR_METRICS_ROLES)
    # GET /metrics at topic level by default (MAGNETAR_TOPIC_LEVEL_METRICS); None: as the environment says
    topic_level_metrics: bool | None = None
    fidelity: AwsFidelity = field(default_factory=AwsFidelity)  # AWS limits and modeled latency (magnetar.local.fidelity)
    # the journal consumer's mapping on an enhanced fan-out consumer (SubscribeToShard, emulated:
    # magnetar.local.esm): its own 2 MiB/s per shard, records pushed ~70 ms after arrival. On by
    # default, as the stack deploys it (`journalFanOut`).
    journal_fan_out: bool = True
    # the journal mapping's batching window (s); None: as the stack's default (0 with fan-out, 1 without)
    journal_batching_window_s: int | None = None
    # how long the journal consumer may hold a busy shard's batch before sealing it (ms,
    # MAGNETAR_SEAL_LATENCY_MS, the stack's sealLatencyMs); None: the default (ledger.pacing)
    seal_latency_ms: int | None = None
    journal_shards: int = LOCAL_SHARD_COUNT  # the journal stream's shards (each takes 1 MiB/s, 1,000 records/s)
    # consumers read unsealed entries from the journal's tail (MAGNETAR_TAIL_READS); None: as the
    # stack sets it, off with the fan-out journal consumer (the journal's one reader), on without
    tail_reads: bool | None = None
    # Pulsar's binary protocol (magnetar.protocol): the proxy's port beside the HTTP API; None: off, 0: a free port
    pulsar_port: int | None = None
    # the proxy's TLS port (pulsar+ssl://) beside the plain one, with a PEM certificate chain and key; None: off
    pulsar_tls_port: int | None = None
    pulsar_tls_cert_file: str = ""
    pulsar_tls_key_file: str = ""
    cluster_name: str = CLUSTER_NAME  # this cluster's name in the instance (MAGNETAR_CLUSTER_NAME)
    proxy: ProxyThread | None = None
    # a cluster of a local instance (`local up --clusters`): the network where outages are staged
    # (its doors close while it is off the network)
    network: LocalNetwork | None = None
    # added to every request another cluster's replicator makes here (the inter-region round trip;
    # the clusters of a local instance share one machine): 0, none
    inter_region_rtt_ms: float = 0.0
    # the functions' logs (their stdout: log lines and EMF metrics), one file per function; None:
    # <temp dir>/magnetar-<port>/logs (function_logs.default_directory)
    logs_dir: str | None = None
    function_logs: FunctionLogs | None = None
    emulator: subprocess.Popen[bytes] | None = None
    esm: KinesisEventSourceMapping | None = None
    _config: uvicorn.Config | None = None
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None
    _stopped: bool = field(default=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pulsar_tls_url(self) -> str | None:
        """pulsar+ssl://host:port when the proxy serves TLS too."""
        return self.proxy.server.tls_service_url if self.proxy is not None else None

    @property
    def pulsar_url(self) -> str | None:
        """The binary protocol's service URL (pulsar://host:port) when the proxy runs."""
        return self.proxy.service_url if self.proxy is not None else None

    @property
    def endpoint(self) -> str:
        return self.aws_endpoint or f"http://{self.host}:{self.aws_port}"

    def start(self) -> LocalCluster:
        from magnetar.core.clusters import valid_cluster_name

        if not valid_cluster_name(self.cluster_name):
            raise ValueError(f"Invalid cluster name {self.cluster_name!r}: letters, digits and _ - = : . only")
        check_port_free(self.host, self.port, "the HTTP API, --port")
        if self.network is not None:  # the other clusters' regions are reached through the instance's network
            from magnetar.adapters.aws.clients import add_client_hook

            add_client_hook(self.network.partition(self.cluster_name))
        if self.aws_endpoint is None:
            check_port_free(self.host, self.aws_port, "the AWS emulator, --aws-port")
            self.emulator = start_emulator(self.host, self.aws_port, self.fidelity)
        configure_aws_environment(self.endpoint)
        os.environ.update(self.names.as_env())
        os.environ[ENV_CLUSTER_NAME] = self.cluster_name
        tail_reads = (not self.journal_fan_out) if self.tail_reads is None else self.tail_reads
        os.environ[ENV_TAIL_READS] = "on" if tail_reads else "off"
        if self.topic_level_metrics is not None:
            os.environ[ENV_TOPIC_LEVEL_METRICS] = "true" if self.topic_level_metrics else "false"
        if self.seal_latency_ms is None:
            os.environ.pop(ENV_SEAL_LATENCY_MS, None)
        else:
            os.environ[ENV_SEAL_LATENCY_MS] = str(check_seal_latency(self.seal_latency_ms))
        # the WebSocket API's management endpoint and Lambda's Invoke API are emulated on our port
        os.environ[ENV_WS_ENDPOINT] = self.url
        os.environ["AWS_ENDPOINT_URL_LAMBDA"] = self.url
        os.environ[ENV_FUNCTION_WORKERS] = "process"  # registered functions' code: a worker process each
        # the broker creates registered functions' Lambda functions through the emulated Lambda API
        # (magnetar.local.lambda_api) as the stack lets it on AWS: these name what it creates them with
        os.environ.update(LOCAL_FUNCTION_DEPLOYMENT)
        authorizers = self._configure_auth()
        # the runtime's fidelity: one account (one concurrency pool) and one latency model for all
        latency = latency_model(self.fidelity)
        settings = LambdaSettings.from_fidelity(self.fidelity, latency)
        self.function_logs = settings.logs = FunctionLogs(
            Path(self.logs_dir) if self.logs_dir else default_directory(self.port))
        configure(settings)
        from magnetar.local.provision import provision

        provision(self.names, self.journal_shards, self.cluster_name)
        self.esm = KinesisEventSourceMapping(
            JOURNAL_CONSUMER,
            self.names.stream,
            JOURNAL_BATCH_SIZE,
            journal_batching_window_s(self.journal_fan_out, self.journal_batching_window_s),
            poll_interval_s=poll_interval(self.fidelity, self.poll_interval_s),
            fan_out=self.journal_fan_out,
        )
        self.esm.start()
        self.maintenance = Schedule(MAINTENANCE, self.maintenance_interval_s)
        self.maintenance.start()
        self._config = uvicorn.Config(
            build_app(BROKER, schedules={"maintenance": self.maintenance}, websocket=WEBSOCKET,
                      authorizers=authorizers, fidelity=self.fidelity, latency=latency, network=self.network,
                      inter_region_rtt_ms=self.inter_region_rtt_ms),
            host=self.host, port=self.port, log_level="warning", timeout_keep_alive=30
        )
        if self.pulsar_port is not None:
            self._start_proxy(self.pulsar_port)
            if self.proxy is not None:
                self.pulsar_port = self.proxy.port
        # recorded in the instance (tenant `public` allowing it) before its HTTP port opens: whoever
        # waits for the port (an instance starting its clusters) may name it at once
        self.register_cluster()
        self._open_http()
        if self.network is not None:
            threading.Thread(target=self._watch_network, name="network", daemon=True).start()
        return self

    def _open_http(self) -> None:
        assert self._config is not None
        self._server = uvicorn.Server(self._config)
        self._thread = threading.Thread(target=self._server.run, name="http-api", daemon=True)
        self._thread.start()
        _wait_for_port(self.host, self.port, 30)

    def _watch_network(self) -> None:
        """Close this cluster's doors while the network says it is out, open them when it is back."""
        assert self.network is not None
        out = False
        while not self._stopped:
            now_out = self.network.is_out(self.cluster_name)
            if now_out != out:
                out = now_out
                log.warning("cluster %s %s the network", self.cluster_name, "off" if out else "back on")
                if out:
                    self._close_doors()
                else:
                    self._open_doors()
            time.sleep(0.1)

    def _close_doors(self) -> None:
        logging.getLogger("uvicorn.error").addFilter(_cut_lifespan)  # the cut lifespan is not an error
        if self.proxy is not None:  # the binary protocol's connections first: they are cut at once
            self.proxy.stop()
            self.proxy = None
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True  # open connections (long polls, WebSockets) are cut
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _open_doors(self) -> None:
        self._open_http()
        if self.pulsar_port is not None:
            self._start_proxy(self.pulsar_port)

    def register_cluster(self) -> None:
        """Record this cluster, with its URLs, in the instance's configuration store and let tenant
        `public` allow it (the core's `AdminService.join_instance`, as the stack's registration does)."""
        from magnetar.adapters.aws.clients import client
        from magnetar.adapters.aws.dynamodb import DynamoMetadataStore
        from magnetar.core.admin import AdminService
        from magnetar.core.clusters import ClusterData
        from magnetar.core.ports import SystemClock

        names = self.names
        store = DynamoMetadataStore(names.table, config_table=names.config_table,
                                    config_dynamodb=client("dynamodb", names.config_region) if names.config_region else None)
        plugin = parameters = ""
        if self.auth and self.token_secret_key is not None:  # the other clusters' replicators come in as a superuser
            from magnetar.security.tokens import create_token, read_key_material

            plugin = "token"
            parameters = "token:" + create_token(self.superuser_roles[0],
                                                 secret_key=read_key_material(self.token_secret_key))
        data = ClusterData(service_url=self.url, broker_service_url=self.pulsar_url or "",
                           broker_service_url_tls=self.pulsar_tls_url or "", authentication_plugin=plugin,
                           authentication_parameters=parameters)
        AdminService(store, SystemClock(), cluster_name=self.cluster_name).join_instance(self.cluster_name, data)

    def _start_proxy(self, port: int) -> None:
        """The binary protocol proxy, in process, on the same core and adapters as the broker function."""
        from magnetar.protocol import ProxySettings, ProxyThread

        try:
            self.proxy = ProxyThread(ProxySettings(host=self.host, port=port, tls_port=self.pulsar_tls_port,
                                                   tls_cert_file=self.pulsar_tls_cert_file,
                                                   tls_key_file=self.pulsar_tls_key_file)).start()
        except OSError as exc:  # the port is taken (another cluster, a Pulsar standalone): the rest still runs
            log.warning("Pulsar binary protocol off: cannot listen on %s:%s: %s", self.host, port, exc)

    def _configure_auth(self) -> LocalAuthorizers | None:
        """The functions' auth settings (as the stack sets them) and API Gateway's authorizers."""
        if not self.auth:
            os.environ.pop(ENV_AUTH_ENABLED, None)
            return None
        if self.token_secret_key is None:
            raise ValueError("Authentication needs a token secret key file")
        os.environ[ENV_AUTH_ENABLED] = "true"
        os.environ[ENV_SUPERUSER_ROLES] = ",".join(self.superuser_roles)
        os.environ[ENV_METRICS_ROLES] = ",".join(self.metrics_roles)
        key = self.token_secret_key
        os.environ[ENV_TOKEN_SECRET_KEY] = key if key.startswith(("file:", "data:")) else f"file://{os.path.abspath(key)}"
        return LocalAuthorizers(AUTHORIZER, EmulatorIam(self.endpoint))

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.proxy is not None:
            self.proxy.stop()
        if self._server is not None:
            self._server.should_exit = True
        if self.esm is not None:
            self.esm.stop()
        if self.maintenance is not None:
            self.maintenance.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)
        WORKERS.close()
        if self.function_logs is not None:
            self.function_logs.close()
        if self.emulator is not None:
            self.emulator.terminate()
            try:
                self.emulator.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.emulator.kill()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LocalUpProcess:
    """`magnetar local up` in a process of its own, on free ports (benchmarks, tests, perf)."""

    def __init__(self, poll_interval_s: float | None = None, maintenance_interval_s: float | None = None,
                 extra_args: list[str] | None = None, port: int = 0, pulsar_port: int = 0) -> None:
        """`port`, `pulsar_port`: the HTTP API's and the binary protocol's (0: a free one)."""
        self.maintenance_interval_s = maintenance_interval_s
        self.extra_args = list(extra_args or [])  # more `local up` options (e.g. --auth ...)
        self.port, self.aws_port, self.pulsar_port = port or free_port(), free_port(), pulsar_port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.pulsar_url = f"pulsar://127.0.0.1:{self.pulsar_port}"  # the binary protocol proxy
        self.aws_endpoint = f"http://127.0.0.1:{self.aws_port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LocalUpProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "magnetar.cli.main", "local", "up", "--port", str(self.port),
             "--aws-port", str(self.aws_port), "--pulsar-port", str(self.pulsar_port),
             *(["--maintenance-interval", str(self.maintenance_interval_s)] if self.maintenance_interval_s is not None
               else []), *self.extra_args],
            stdout=subprocess.DEVNULL,
            env=env,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        _wait_for_port("127.0.0.1", self.port, 60)
        _wait_for_port("127.0.0.1", self.pulsar_port, 30)  # the proxy starts before the HTTP API
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
