"""Client failover across the clusters of an instance: pulsar-client's `ServiceInfo`,
`AutoClusterFailover` and `ServiceInfoProvider` (pulsar-client >= 3.6), passed to
`magnetar.Client` where the service URL goes.

The SDK talks stateless HTTP, so a switch is the transport's base URL and authentication changing
(client/transport.py): every producer, consumer and reader of the client goes on with the new
cluster from its next request, requests in flight that fail to connect are retried there, and
push consumers reconnect there (client/push.py). Consumers attach to the new cluster at their
next poll (the subscription is created there at the consumer's `initial_position` if it does not
exist); acknowledgements only go to the cluster that delivered the message. Producers keep their
sequence ids; deduplication is per cluster (docs/semantics.md, "Client failover").
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

from magnetar.client.auth import Authentication
from magnetar.client.types import check_type, check_type_or_none

log = logging.getLogger(__name__)

# pulsar-client's probe gives up on a host after 30 s (AutoClusterFailover's probeTimeout)
PROBE_TIMEOUT_S = 30.0
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "pulsar": 6650, "pulsar+ssl": 6651}


class ServiceInfoProvider:
    """
    Base class for Python-defined service discovery and failover providers.

    Subclasses must return the initial :class:`ServiceInfo` and may keep the
    provided update callback to push later service changes into the client.
    """

    def initial_service_info(self) -> ServiceInfo:
        raise NotImplementedError

    def initialize(self, on_service_info_update: Callable[[ServiceInfo], None]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """
        Stop background work and release resources.

        This is invoked by :meth:`Client.close`.
        """
        return None


class ServiceInfo:
    """
    Connection information for one cluster endpoint.

    This is primarily used with :class:`AutoClusterFailover`. `authentication` is presented to
    this cluster only (it replaces the client's while this cluster is current).
    `tls_trust_certs_file_path` is accepted and has no effect over HTTPS (as the client's own).
    `websocket_url` (Magnetar's, keyword only): where push consumers connect on this cluster
    (default: the service URL with http -> ws, https -> wss; on AWS, the stack's `WebSocketUrl`).
    """

    def __init__(self,
                 service_url: str,
                 authentication: Authentication | None = None,
                 tls_trust_certs_file_path: str | None = None,
                 *,
                 websocket_url: str | None = None) -> None:
        check_type(str, service_url, "service_url")
        check_type_or_none(Authentication, authentication, "authentication")
        check_type_or_none(str, tls_trust_certs_file_path, "tls_trust_certs_file_path")
        check_type_or_none(str, websocket_url, "websocket_url")
        if "://" not in service_url:
            raise ValueError(f"The scheme part is missing: {service_url}")
        self._service_url = service_url
        self._authentication = authentication
        self._tls_trust_certs_file_path = tls_trust_certs_file_path
        self._websocket_url = websocket_url

    @property
    def service_url(self) -> str:
        return self._service_url

    @property
    def use_tls(self) -> bool:
        return self._service_url.split("://", 1)[0].lower() in ("https", "wss", "pulsar+ssl")

    @property
    def tls_trust_certs_file_path(self) -> str | None:
        return self._tls_trust_certs_file_path

    @property
    def authentication(self) -> Authentication | None:
        return self._authentication

    @property
    def websocket_url(self) -> str | None:
        return self._websocket_url

    def __repr__(self) -> str:
        return (
            "ServiceInfo("
            f"service_url={self.service_url!r}, "
            f"use_tls={self.use_tls!r}, "
            f"tls_trust_certs_file_path={self.tls_trust_certs_file_path!r})"
        )


class AutoClusterFailover:
    """
    Cluster-level automatic failover configuration for :class:`Client`.

    A daemon thread of the client probes the current cluster every `check_interval_ms`; after
    `failover_threshold` consecutive failed probes it switches to the first available secondary
    (in order). While on a secondary it also probes the primary and switches back after
    `switch_back_threshold` consecutive successful probes (at once if the secondary itself has
    failed `failover_threshold` times and the primary answers). A probe is a TCP connect to the
    service URL's host and port, as pulsar-client probes.
    """

    def __init__(self,
                 primary: ServiceInfo,
                 secondary: list[ServiceInfo],
                 check_interval_ms: int = 5000,
                 failover_threshold: int = 1,
                 switch_back_threshold: int = 1) -> None:
        check_type(ServiceInfo, primary, "primary")
        check_type(list, secondary, "secondary")
        check_type(int, check_interval_ms, "check_interval_ms")
        check_type(int, failover_threshold, "failover_threshold")
        check_type(int, switch_back_threshold, "switch_back_threshold")

        if not secondary:
            raise ValueError("Argument secondary is expected to contain at least one ServiceInfo")

        for index, service_info in enumerate(secondary):
            if not isinstance(service_info, ServiceInfo):
                raise ValueError(f"Argument secondary[{index}] is expected to be of type 'ServiceInfo' and not "
                                 f"'{type(service_info).__name__}'")

        if check_interval_ms <= 0:
            raise ValueError("Argument check_interval_ms is expected to be greater than 0")
        if failover_threshold <= 0:
            raise ValueError("Argument failover_threshold is expected to be greater than 0")
        if switch_back_threshold <= 0:
            raise ValueError("Argument switch_back_threshold is expected to be greater than 0")

        self.primary = primary
        self.secondary = list(secondary)
        self.check_interval_ms = check_interval_ms
        self.failover_threshold = failover_threshold
        self.switch_back_threshold = switch_back_threshold

    def __repr__(self) -> str:
        return (
            "AutoClusterFailover("
            f"primary={self.primary!r}, "
            f"secondary={self.secondary!r}, "
            f"check_interval_ms={self.check_interval_ms!r}, "
            f"failover_threshold={self.failover_threshold!r}, "
            f"switch_back_threshold={self.switch_back_threshold!r})"
        )


def probe(service_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connection to one of the service URL's hosts opens (they are tried in order).

    This is pulsar-client's probe (AutoClusterFailover: resolve, connect, close). It is cheap,
    sends no request (so it needs no authentication and is not metered as an API request), and
    detects what failover is for: a cluster that cannot be reached (DNS, network, an endpoint
    that is down). An endpoint that accepts connections but fails requests passes it: a
    `ServiceInfoProvider` with a health check of its own covers that."""
    try:
        parts = urlsplit(service_url)
    except ValueError:
        return False
    default_port = DEFAULT_PORTS.get(parts.scheme.lower())
    for host in parts.netloc.rsplit("@", 1)[-1].split(","):  # pulsar-client's URLs may list several hosts
        try:
            one = urlsplit(f"//{host.strip()}")
            name, port = one.hostname, one.port or default_port
        except ValueError:
            continue
        if not name or not port:
            continue
        try:
            with socket.create_connection((name, port), timeout=timeout_s):
                return True
        except OSError:
            continue
    return False


class AutoClusterFailoverProvider(ServiceInfoProvider):
    """The `ServiceInfoProvider` behind an `AutoClusterFailover`: pulsar-client's failover check,
    on a daemon thread (stopped by `close`). Each check starts `check_interval_ms` after the
    previous one ended; consecutive failures and recoveries are counted as pulsar-client counts
    them (reset by a switch)."""

    def __init__(self, config: AutoClusterFailover, probe: Callable[[str], bool] = probe) -> None:
        self._config = config
        self._probe = probe
        self._current = config.primary
        self._failures = 0  # consecutive failed probes of the current cluster
        self._recoveries = 0  # consecutive successful probes of the primary, while on a secondary
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._update: Callable[[ServiceInfo], None] | None = None

    @property
    def current(self) -> ServiceInfo:
        return self._current

    def initial_service_info(self) -> ServiceInfo:
        return self._config.primary

    def initialize(self, on_service_info_update: Callable[[ServiceInfo], None]) -> None:
        self._update = on_service_info_update
        self._thread = threading.Thread(target=self._run, name="magnetar-cluster-failover", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _run(self) -> None:
        interval_s = self._config.check_interval_ms / 1000
        while not self._stop.wait(interval_s):
            try:
                self.check()
            except Exception:  # the check must go on whatever one round met
                log.exception("cluster failover check failed")

    def _available(self, service: ServiceInfo) -> bool:
        available = self._probe(service.service_url)
        log.debug("probed %s: %s", service.service_url, "available" if available else "unavailable")
        return available

    def check(self) -> None:
        """One round of pulsar-client's failover check."""
        config = self._config
        if self._current is config.primary:
            if self._available(self._current):
                self._failures = 0
                return
            self._failures += 1
            if self._failures < config.failover_threshold:
                return
            for service in config.secondary:
                if self._stop.is_set():
                    return
                if self._available(service):
                    self._switch_to(service)
                    return
            return
        if self._available(self._current):
            self._failures = 0
            self._check_switch_back(None)
            return
        self._failures += 1
        if self._failures < config.failover_threshold:
            self._check_switch_back(None)
            return
        if self._available(config.primary):  # the secondary is down: back to the primary at once
            self._switch_to(config.primary)
            return
        self._check_switch_back(False)

    def _check_switch_back(self, primary_available: bool | None) -> None:
        if primary_available is None:
            primary_available = self._available(self._config.primary)
        if not primary_available:
            self._recoveries = 0
            return
        self._recoveries += 1
        if self._recoveries >= self._config.switch_back_threshold:
            self._switch_to(self._config.primary)

    def _switch_to(self, service: ServiceInfo) -> None:
        if service is self._current or self._stop.is_set():
            return
        log.info("cluster failover: switching from %s to %s", self._current.service_url, service.service_url)
        self._current = service
        self._failures = 0
        self._recoveries = 0
        if self._update is not None:
            self._update(service)
