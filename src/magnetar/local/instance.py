"""`magnetar local up --clusters east,west`: a Pulsar instance of several clusters on one machine.

One AWS emulator; each cluster in a process of its own (`local up --cluster-name NAME`) and in a
region of its own on that emulator (its table, stream, bucket, journal consumer and maintenance
schedule, as a stack per region would have), on consecutive ports from `--port` and
`--pulsar-port`; all share one configuration store, emulated as a global table: a replica in
every cluster's region, the home's changes copied to the others after a delay
(`magnetar.local.config_replication`). Outages are staged through `magnetar.local.network`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from magnetar.config import (
    ENV_AUTH_ENABLED,
    ENV_BUCKET,
    ENV_CLUSTER_NAME,
    ENV_CONFIG_REGION,
    ENV_CONFIG_TABLE,
    ENV_METRICS_ROLES,
    ENV_SEAL_LATENCY_MS,
    ENV_STREAM,
    ENV_SUPERUSER_ROLES,
    ENV_TABLE,
    ENV_TAIL_READS,
    ENV_TOKEN_SECRET_KEY,
    ENV_WS_ENDPOINT,
)
from magnetar.core.clusters import valid_cluster_name
from magnetar.local.cluster import _die_with_parent, _wait_for_port, start_emulator
from magnetar.local.config_replication import DEFAULT_DELAY_MS, ConfigurationReplication
from magnetar.local.fidelity import AwsFidelity
from magnetar.local.network import LocalNetwork

LOCAL_CONFIG_TABLE = "magnetar-configuration"
# the regions the clusters of a local instance live in, in order (the first holds the
# configuration store's home replica)
LOCAL_REGIONS = ("us-east-1", "eu-west-1", "us-west-2", "ap-southeast-1", "eu-central-1", "ap-northeast-1",
                 "sa-east-1", "ca-central-1")
MAX_LOCAL_CLUSTERS = len(LOCAL_REGIONS)
# what each cluster process sets for itself: never inherited from the process that starts the instance
_CLUSTER_SETTINGS = frozenset({ENV_TABLE, ENV_BUCKET, ENV_STREAM, ENV_WS_ENDPOINT, ENV_CLUSTER_NAME, ENV_AUTH_ENABLED,
                               ENV_SUPERUSER_ROLES, ENV_METRICS_ROLES, ENV_TOKEN_SECRET_KEY, ENV_TAIL_READS,
                               ENV_SEAL_LATENCY_MS})


@dataclass(frozen=True)
class ClusterProcess:
    name: str
    region: str
    port: int
    pulsar_port: int | None
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pulsar_url(self) -> str | None:
        return f"pulsar://{self.host}:{self.pulsar_port}" if self.pulsar_port else None


def check_cluster_names(names: list[str]) -> list[str]:
    if not names:
        raise ValueError("Name at least one cluster")
    if len(names) > MAX_LOCAL_CLUSTERS:
        raise ValueError(f"At most {MAX_LOCAL_CLUSTERS} local clusters")
    if len(set(names)) != len(names):
        raise ValueError("Cluster names must differ")
    for name in names:
        if not valid_cluster_name(name):
            raise ValueError(f"Invalid cluster name {name!r}: letters, digits and _ - = : . only")
    return names


@dataclass
class LocalInstance:
    clusters: list[str]
    host: str = "127.0.0.1"
    port: int = 8080
    pulsar_port: int = 6650  # 0: no binary protocol
    aws_port: int = 4566
    aws_endpoint: str | None = None
    fidelity: AwsFidelity = field(default_factory=AwsFidelity)
    cluster_args: list[str] = field(default_factory=list)  # more `local up` options for every cluster
    # how long the configuration store's home takes to reach the other regions' replicas (ms)
    config_replication_delay_ms: int = DEFAULT_DELAY_MS
    config_replication: ConfigurationReplication | None = None
    processes: list[ClusterProcess] = field(default_factory=list)
    emulator: subprocess.Popen[bytes] | None = None
    directory: Path | None = None
    _children: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return self.aws_endpoint or f"http://{self.host}:{self.aws_port}"

    def start(self) -> LocalInstance:
        check_cluster_names(self.clusters)
        if self.aws_endpoint is None:
            self.emulator = start_emulator(self.host, self.aws_port, self.fidelity)
        # each cluster process configures its own AWS environment (--aws-endpoint); this process's
        # stays as it was (an instance started by a test must not move the test's clients)
        self.directory = Path(tempfile.mkdtemp(prefix="magnetar-instance-"))
        regions = LOCAL_REGIONS[:len(self.clusters)]
        network = LocalNetwork(self.directory, tuple(self.clusters), regions)
        network.write_clusters()
        home = LOCAL_REGIONS[0]
        # the configuration store's replicas, replicating before any cluster writes to the home
        self.config_replication = ConfigurationReplication(
            self.endpoint, LOCAL_CONFIG_TABLE, home, regions[1:], self.config_replication_delay_ms, network).start()
        self.processes = [ClusterProcess(name, LOCAL_REGIONS[i], self.port + i,
                                         self.pulsar_port + i if self.pulsar_port else None, self.host)
                          for i, name in enumerate(self.clusters)]
        for process in self.processes:
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith("AWS_ENDPOINT_URL") and k not in _CLUSTER_SETTINGS}
            env.update({"AWS_REGION": process.region, "AWS_DEFAULT_REGION": process.region,
                        ENV_CONFIG_TABLE: LOCAL_CONFIG_TABLE, ENV_CONFIG_REGION: home})
            self._children.append(subprocess.Popen(
                [sys.executable, "-m", "magnetar.cli.main", "local", "up", "--cluster-name", process.name,
                 "--host", self.host, "--port", str(process.port), "--pulsar-port", str(process.pulsar_port or 0),
                 "--aws-endpoint", self.endpoint, "--instance-dir", str(self.directory), *self.cluster_args],
                stdout=subprocess.DEVNULL, env=env,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            ))
        for process, child in zip(self.processes, self._children, strict=True):
            _wait_for_port(self.host, process.port, 90, child)
            if process.pulsar_port:
                _wait_for_port(self.host, process.pulsar_port, 30, child)
        return self

    def stop(self) -> None:
        if self.config_replication is not None:
            self.config_replication.stop()
        for child in self._children:
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
        for child in self._children:
            try:
                child.wait(timeout=20)
            except subprocess.TimeoutExpired:
                child.kill()
        if self.emulator is not None:
            self.emulator.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.emulator.wait(timeout=5)
        self._children.clear()

    def __enter__(self) -> LocalInstance:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
