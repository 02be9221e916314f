"""A registered function's Lambda function, from its FunctionConfig (Pulsar's names, Lambda's units):

- `resources.ram` (bytes) and `resources.cpu` (cores) become the function's memory, the one
  resource Lambda sizes: the larger of the RAM in MB and 1,769 MB per core (Lambda gives a function
  one vCPU per 1,769 MB), within Lambda's 128 to 10,240 MB; 1,024 MB when neither is given (Pulsar's
  default 1 GB of RAM);
- `timeoutMs` becomes the function's timeout, rounded up to seconds (60 s when not given), at most
  `MAX_TIMEOUT_MS`: the dispatcher (a Lambda function of 15 minutes at most) waits for each
  invocation and must have time left to store what it returns;
- `parallelism` becomes the function's reserved concurrency: at most that many invocations at once.

`check_resources` refuses what Lambda cannot give with a reason (400).
"""

from __future__ import annotations

import math

from magnetar.core.errors import InvalidInput
from magnetar.core.ports.functions import FunctionDeployment
from magnetar.functions.config import FunctionConfig

MB = 1024 * 1024
MIN_MEMORY_MB = 128
MAX_MEMORY_MB = 10_240
MB_PER_VCPU = 1_769  # Lambda: a function gets one vCPU per 1,769 MB of memory
MAX_CPU = MAX_MEMORY_MB / MB_PER_VCPU  # 5.79 vCPUs at 10,240 MB
DEFAULT_MEMORY_MB = 1_024  # Pulsar's default RAM (1 GB)
DEFAULT_TIMEOUT_MS = 60_000
MAX_TIMEOUT_MS = 300_000
MAX_PARALLELISM = 1_000  # Lambda's default account concurrency
INVOCATION_MARGIN_MS = 2_000  # the runtime stops a batch this long before the function's timeout


def memory_mb(config: FunctionConfig) -> int:
    """The Lambda memory of the function's `resources` (see the module's docstring)."""
    ram, cpu = config.resources.ram, config.resources.cpu
    if ram is None and cpu is None:
        return DEFAULT_MEMORY_MB
    from_ram = math.ceil(ram / MB) if ram is not None else 0
    from_cpu = math.ceil(cpu * MB_PER_VCPU) if cpu is not None else 0
    return max(MIN_MEMORY_MB, from_ram, from_cpu)


def timeout_ms(config: FunctionConfig) -> int:
    """How long one invocation of the function may take (ms, whole seconds)."""
    return math.ceil((config.timeoutMs or DEFAULT_TIMEOUT_MS) / 1000) * 1000


def processing_budget_ms(config: FunctionConfig) -> int:
    """How long the runtime processes one batch (EFFECTIVELY_ONCE's retries in place stop then), so
    that the invocation returns before Lambda ends it."""
    total = timeout_ms(config)
    return max(500, total - min(INVOCATION_MARGIN_MS, total // 4))


def deployment_of(config: FunctionConfig, restart: str = "") -> FunctionDeployment:
    return FunctionDeployment(config.fqfn, memory_mb(config), timeout_ms(config) // 1000, config.parallelism,
                              restart)


def check_resources(config: FunctionConfig) -> None:
    """400 with a reason for resources, timeout or parallelism Lambda cannot give."""
    ram, cpu = config.resources.ram, config.resources.cpu
    if cpu is not None:
        if cpu <= 0:
            raise InvalidInput(f"resources.cpu must be positive ({cpu} given)")
        if cpu * MB_PER_VCPU > MAX_MEMORY_MB:
            raise InvalidInput(f"resources.cpu {cpu:g} needs {math.ceil(cpu * MB_PER_VCPU):,} MB of Lambda memory "
                               f"({MB_PER_VCPU:,} MB per vCPU): Lambda gives at most {MAX_MEMORY_MB:,} MB "
                               f"({MAX_CPU:.2f} vCPUs)")
    if ram is not None and not MIN_MEMORY_MB * MB <= ram <= MAX_MEMORY_MB * MB:
        raise InvalidInput(f"resources.ram must be from {MIN_MEMORY_MB * MB} ({MIN_MEMORY_MB} MB) to "
                           f"{MAX_MEMORY_MB * MB} ({MAX_MEMORY_MB:,} MB) bytes, Lambda's memory range ({ram} given)")
    if config.timeoutMs is not None and not 1 <= config.timeoutMs <= MAX_TIMEOUT_MS:
        raise InvalidInput(f"timeoutMs must be from 1 to {MAX_TIMEOUT_MS} ({config.timeoutMs} given): the "
                           "dispatcher waits for each invocation within its own 15 minutes")
    if not 1 <= config.parallelism <= MAX_PARALLELISM:
        raise InvalidInput(f"parallelism must be from 1 to {MAX_PARALLELISM} ({config.parallelism} given)")
