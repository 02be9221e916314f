"""`FunctionDeployer` in memory (unit tests): the registered functions' Lambda functions as records,
with Lambda's rule on reserved concurrency (the account keeps `UNRESERVED_MINIMUM` unreserved)."""

from __future__ import annotations

import threading
from dataclasses import replace

from magnetar.core.errors import InvalidInput
from magnetar.core.ports.functions import DeployedFunction, FunctionDeployment

UNRESERVED_MINIMUM = 100  # Lambda keeps this much of the account's concurrency unreserved


class MemoryFunctionDeployer:
    def __init__(self, account_concurrency: int = 1_000, region: str = "us-east-1",
                 account: str = "000000000000") -> None:
        self.account_concurrency = account_concurrency
        self.region, self.account = region, account
        self.functions: dict[str, DeployedFunction] = {}
        self.deployments: list[FunctionDeployment] = []  # every deploy, in order
        self.restarts: dict[str, str] = {}
        self._lock = threading.Lock()

    def arn(self, fqfn: str) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account}:function:{fqfn.replace('/', '-')}"

    def deploy(self, deployment: FunctionDeployment) -> DeployedFunction:
        with self._lock:
            reserved = sum(f.concurrency or 0 for k, f in self.functions.items() if k != deployment.fqfn)
            if reserved + deployment.concurrency > self.account_concurrency - UNRESERVED_MINIMUM:
                raise InvalidInput(
                    f"Specified ReservedConcurrentExecutions for function decreases account's "
                    f"UnreservedConcurrentExecution below its minimum value of [{UNRESERVED_MINIMUM}].")
            current = self.functions.get(deployment.fqfn)
            deployed = DeployedFunction(deployment.fqfn, self.arn(deployment.fqfn), "Active", "Successful",
                                        deployment.memory_mb, deployment.timeout_s, deployment.concurrency)
            self.functions[deployment.fqfn] = deployed if current is None else replace(
                current, memory_mb=deployment.memory_mb, timeout_s=deployment.timeout_s,
                concurrency=deployment.concurrency)
            self.restarts[deployment.fqfn] = deployment.restart
            self.deployments.append(deployment)
            return self.functions[deployment.fqfn]

    def describe(self, fqfn: str) -> DeployedFunction | None:
        return self.functions.get(fqfn)

    def remove(self, fqfn: str) -> bool:
        with self._lock:
            return self.functions.pop(fqfn, None) is not None
