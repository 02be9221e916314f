"""Pulsar Functions' ports in memory (unit tests): the registry and the functions' state
(`MemoryFunctionStore`, part of `MemoryMetadataStore`), and `FunctionDeployer`: the registered
functions' Lambda functions as records, with Lambda's rule on reserved concurrency (the account
keeps `UNRESERVED_MINIMUM` unreserved)."""

from __future__ import annotations

import threading
from dataclasses import replace

from magnetar.core.errors import InvalidInput
from magnetar.core.ports.functions import DeployedFunction, FunctionDeployment, FunctionRecord, StateValue

UNRESERVED_MINIMUM = 100  # Lambda keeps this much of the account's concurrency unreserved


class MemoryFunctionStore:
    """The FunctionStore part of MemoryMetadataStore (the registry and the functions' state)."""

    functions: dict[str, FunctionRecord]
    function_state: dict[str, dict[str, StateValue]]
    function_leases: dict[str, tuple[str, int]]  # fqfn -> (owner, until ms)
    _lock: threading.RLock

    def create_function(self, record: FunctionRecord) -> bool:
        with self._lock:
            return self.functions.setdefault(record.fqfn, record) is record

    def update_function(self, record: FunctionRecord, previous: FunctionRecord) -> bool:
        with self._lock:
            current = self.functions.get(record.fqfn)
            if current is None or current.version != previous.version:
                return False
            self.functions[record.fqfn] = record
            return True

    def get_function(self, tenant: str, namespace: str, name: str) -> FunctionRecord | None:
        return self.functions.get(f"{tenant}/{namespace}/{name}")

    def list_functions(self, tenant: str, namespace: str) -> list[str]:
        return sorted(r.name for r in self.functions.values() if (r.tenant, r.namespace) == (tenant, namespace))

    def set_function_state(self, tenant: str, namespace: str, name: str, state: str) -> bool:
        with self._lock:
            current = self.functions.get(f"{tenant}/{namespace}/{name}")
            if current is None:
                return False
            self.functions[current.fqfn] = replace(current, state=state)
            return True

    def delete_function(self, record: FunctionRecord) -> bool:
        with self._lock:
            return self.functions.pop(record.fqfn, None) is not None

    def functions_of_input(self, topic: str) -> list[str]:
        return sorted(fqfn for fqfn, r in self.functions.items() if topic in r.inputs)

    def function_patterns(self, namespace: str) -> dict[str, str]:
        from magnetar.core.functions.registry import pattern_namespace

        return {fqfn: r.topics_pattern for fqfn, r in self.functions.items()
                if r.topics_pattern and pattern_namespace(r) == namespace}

    def get_function_state(self, fqfn: str, key: str) -> StateValue | None:
        return self.function_state.get(fqfn, {}).get(key)

    def _set_state(self, fqfn: str, key: str, value: bytes | None, counter: int | None) -> StateValue:
        with self._lock:
            keys = self.function_state.setdefault(fqfn, {})
            previous = keys.get(key)
            keys[key] = StateValue(key, value, counter, (previous.version if previous else 0) + 1)
            return keys[key]

    def put_function_state(self, fqfn: str, key: str, value: bytes) -> int:
        return self._set_state(fqfn, key, value, None).version

    def set_function_counter(self, fqfn: str, key: str, value: int) -> int:
        return self._set_state(fqfn, key, None, value).version

    def incr_function_counter(self, fqfn: str, key: str, amount: int) -> int:
        with self._lock:
            previous = self.get_function_state(fqfn, key)
            counter = self._set_state(fqfn, key, None, ((previous.counter or 0) if previous else 0) + amount).counter
            assert counter is not None
            return counter

    def delete_function_state(self, fqfn: str, key: str) -> bool:
        with self._lock:
            return self.function_state.get(fqfn, {}).pop(key, None) is not None

    def clear_function_state(self, fqfn: str) -> int:
        with self._lock:
            return len(self.function_state.pop(fqfn, {}))

    def claim_function_lease(self, fqfn: str, owner: str, now_ms: int, lease_ms: int) -> bool:
        with self._lock:
            held = self.function_leases.get(fqfn)
            if held is not None and held[0] != owner and held[1] > now_ms:
                return False
            self.function_leases[fqfn] = (owner, now_ms + lease_ms)
            return True

    def release_function_lease(self, fqfn: str, owner: str) -> None:
        with self._lock:
            if self.function_leases.get(fqfn, ("", 0))[0] == owner:
                del self.function_leases[fqfn]


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
