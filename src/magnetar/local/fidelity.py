"""How faithfully the local stack imitates AWS: service limits and modeled latency.

One settings object for the whole local runtime: the emulator process enforces the AWS
service limits at its endpoint (Kinesis, DynamoDB, S3: `magnetar.local.aws_limits`) and adds
modeled service latency; the runtime enforces Lambda's, API Gateway's and the WebSocket API's
limits and adds Lambda's invocation overhead. `magnetar local up --aws-limits on|off
--aws-latency` sets it; docs/architecture.md says what each setting enforces and approximates.
"""

from __future__ import annotations

import math
import random
import threading
from dataclasses import dataclass

# A new account's Lambda concurrency quota per region (AWS documents 1,000; accounts created
# recently may start lower until AWS raises them).
DEFAULT_LAMBDA_CONCURRENCY = 1000


@dataclass(frozen=True)
class AwsFidelity:
    limits: bool = True  # enforce AWS's documented service limits, with AWS's errors (the default, as issue #9 asks)
    latency: bool = False  # add modeled AWS latency per operation (p50/p99 from public figures)
    lambda_concurrency: int = DEFAULT_LAMBDA_CONCURRENCY  # with limits: invocations beyond it are throttled
    seed: int | None = None  # the latency model's random seed (reproducible runs)

    def emulator_args(self) -> list[str]:
        """The emulator process's command-line options for these settings."""
        args = ["--limits", "on" if self.limits else "off"]
        if self.latency:
            args.append("--latency")
        if self.seed is not None:
            args += ["--seed", str(self.seed)]
        return args


EMULATOR_AS_IS = AwsFidelity(limits=False)  # no limits, no modeled latency

# --- the runtime's side: Lambda, API Gateway (HTTP and WebSocket APIs), event-source mapping ----
# Each figure's source is in docs/architecture.md, "AWS runtime limits and latency, locally".
HTTP_INTEGRATION_TIMEOUT_S = 30.0  # HTTP API: maximum integration timeout (not adjustable)
WEBSOCKET_IDLE_TIMEOUT_S = 600.0  # WebSocket API: idle connection timeout, 10 min
WEBSOCKET_MAX_CONNECTION_S = 7200.0  # WebSocket API: connection duration, 2 h
ESM_POLL_INTERVAL_S = 1.0  # Kinesis event-source mapping: each shard polled once a second
GLOBAL_TABLE_REPLICATION_MS = 1000  # DynamoDB global tables: a change reaches the other replicas in about a second

# Modeled latency, (p50, p99) in seconds
LAMBDA_WARM_OVERHEAD = (0.002, 0.010)  # Invoke of a warm execution environment
LAMBDA_COLD_START = (0.8, 1.5)  # a new environment: Python 3.12, Magnetar's layer (pydantic, Powertools, boto3)
HTTP_API_OVERHEAD = (0.004, 0.010)  # HTTP API, request and response together
WEBSOCKET_API_OVERHEAD = (0.004, 0.010)  # WebSocket API, per message (no published figure: the HTTP API's)
# The round trip between two regions a replicator's request makes (the clusters of a local instance
# share one machine): ~70-80 ms between us-east-1 and eu-west-1, AWS's inter-region latency figures
# (CloudPing); added to each replicator request with --aws-latency, unless --inter-region-rtt-ms says
INTER_REGION_RTT_MS = 75.0


def inter_region_rtt_ms(fidelity: AwsFidelity, explicit: float | None) -> float:
    """The round trip added to another cluster's replicator requests: `explicit` if given, else
    INTER_REGION_RTT_MS with modeled latency on, else none."""
    if explicit is not None:
        return explicit
    return INTER_REGION_RTT_MS if fidelity.latency else 0.0


@dataclass(frozen=True)
class RuntimeTimeouts:
    """API Gateway's timing limits, enforced with `AwsFidelity.limits` (tests shorten them)."""

    http_integration_s: float = HTTP_INTEGRATION_TIMEOUT_S
    websocket_idle_s: float = WEBSOCKET_IDLE_TIMEOUT_S
    websocket_max_connection_s: float = WEBSOCKET_MAX_CONNECTION_S


AWS_TIMEOUTS = RuntimeTimeouts()


class LatencyModel:
    """Seeded samples of modeled latencies: log-normal through the figure's p50 and p99, capped
    at three times the p99. `added_s` sums what the runtime has added (tests, reports)."""

    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.added_s = 0.0

    def sample(self, figure: tuple[float, float]) -> float:
        p50, p99 = figure
        sigma = math.log(p99 / p50) / 2.326  # z of the 99th percentile
        with self._lock:
            value = min(p50 * math.exp(sigma * self._random.gauss()), 3 * p99)
        return value

    def delay(self, figure: tuple[float, float], already_s: float = 0.0) -> float:
        """The delay to add now: a sample, less what the emulation already spent (never < 0)."""
        value = max(0.0, self.sample(figure) - already_s)
        with self._lock:
            self.added_s += value
        return value


def latency_model(fidelity: AwsFidelity) -> LatencyModel | None:
    return LatencyModel(fidelity.seed) if fidelity.latency else None
