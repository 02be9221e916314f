"""The port through which registered functions get a compute environment of their own
(`FunctionDeployer`), and the records that cross it. On AWS a registered function is a Lambda
function (`magnetar.adapters.aws.function_deployer`); locally the same adapter talks to the local
runtime's emulated Lambda API; unit tests use `magnetar.adapters.memory_functions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class FunctionDeployment:
    """What a registered function's Lambda function is made of (core/functions/deployment.py
    derives it from the FunctionConfig): its memory (Pulsar's `resources`), timeout (`timeoutMs`)
    and reserved concurrency (`parallelism`: at most that many invocations at once).
    `restart`: a new value starts new execution environments (`functions restart`)."""

    fqfn: str
    memory_mb: int
    timeout_s: int
    concurrency: int
    restart: str = ""


@dataclass(frozen=True)
class DeployedFunction:
    """A registered function's Lambda function as it is now."""

    fqfn: str
    arn: str
    state: str  # Lambda's State: Pending, Active, Inactive, Failed
    last_update: str  # Lambda's LastUpdateStatus: Successful, InProgress, Failed
    memory_mb: int
    timeout_s: int
    concurrency: int | None  # reserved concurrency (None: none reserved)
    reason: str = ""  # why the state or the last update failed

    @property
    def ready(self) -> bool:
        return self.state == "Active" and self.last_update != "Failed"


class FunctionDeployer(Protocol):
    """Creates, updates and removes the Lambda function of each registered function."""

    def deploy(self, deployment: FunctionDeployment) -> DeployedFunction:
        """Create the function's Lambda function, or bring it to `deployment` (idempotent). Raises
        InvalidInput for settings Lambda refuses (a reserved concurrency the account cannot give),
        Conflict while another change of it is still in progress."""
        ...

    def describe(self, fqfn: str) -> DeployedFunction | None:
        """The function's Lambda function, None when there is none."""
        ...

    def remove(self, fqfn: str) -> bool:
        """Delete the function's Lambda function; False when there was none."""
        ...
