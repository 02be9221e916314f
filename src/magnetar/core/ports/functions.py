"""The ports of Pulsar Functions and the records that cross them: the registry and the functions'
state (`FunctionStore`, part of the metadata store), and the compute environment each registered
function gets (`FunctionDeployer`). On AWS a registered function is a Lambda function
(`magnetar.adapters.aws.function_deployer`); locally the same adapter talks to the local runtime's
emulated Lambda API; unit tests use `magnetar.adapters.memory_functions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class FunctionRecord:
    """A registered function (Pulsar Functions' registry, configuration store): its FunctionConfig
    (JSON text, `magnetar.functions.config`), version (1 at creation, +1 per update), desired
    state, and where its code is. `inputs` and `topics_pattern` are what the input index holds."""

    tenant: str
    namespace: str
    name: str
    config: str  # FunctionConfig JSON
    version: int = 1
    state: str = "RUNNING"  # RUNNING | STOPPED
    created_at: int = 0
    updated_at: int = 0
    code_key: str = ""  # the code's object in the cluster's bucket ("" when none: functionArn)
    code_size: int = 0
    code_sha256: str = ""
    code_cluster: str = ""  # the cluster whose bucket holds the code
    inputs: tuple[str, ...] = ()  # full topic names
    topics_pattern: str = ""

    @property
    def fqfn(self) -> str:
        return f"{self.tenant}/{self.namespace}/{self.name}"


@dataclass(frozen=True)
class StateValue:
    """One key of a function's state: a value (bytes) or a counter, and its version."""

    key: str
    value: bytes | None = None
    counter: int | None = None
    version: int = 0


class FunctionStore(Protocol):
    """Pulsar Functions: the registry (configuration store: FUNCTIONS#<tenant>/<ns> items and the
    input index) and the functions' state (this cluster's table: FNSTATE#<fqfn> items)."""

    def create_function(self, record: FunctionRecord) -> bool:
        """Record the function and its input index entries, all or nothing; False when it exists."""
        ...

    def update_function(self, record: FunctionRecord, previous: FunctionRecord) -> bool:
        """Replace `previous` by `record` (its index entries too) if the stored version is still
        `previous.version`; False, nothing written, otherwise (or when it no longer exists)."""
        ...

    def get_function(self, tenant: str, namespace: str, name: str) -> FunctionRecord | None: ...

    def list_functions(self, tenant: str, namespace: str) -> list[str]: ...

    def set_function_state(self, tenant: str, namespace: str, name: str, state: str) -> bool:
        """Set the desired state (RUNNING, STOPPED); False when the function does not exist."""
        ...

    def delete_function(self, record: FunctionRecord) -> bool:
        """Forget the function and its index entries; False when it did not exist."""
        ...

    def functions_of_input(self, topic: str) -> list[str]:
        """The functions (fqfn) that name `topic` among their inputs (one query)."""
        ...

    def function_patterns(self, namespace: str) -> dict[str, str]:
        """fqfn -> topicsPattern of the functions consuming a pattern of the namespace (one query)."""
        ...

    def get_function_state(self, fqfn: str, key: str) -> StateValue | None: ...

    def put_function_state(self, fqfn: str, key: str, value: bytes) -> int:
        """Set a key's value (a counter there is dropped); the key's new version."""
        ...

    def set_function_counter(self, fqfn: str, key: str, value: int) -> int:
        """Set a counter (a value there is dropped); the key's new version."""
        ...

    def incr_function_counter(self, fqfn: str, key: str, amount: int) -> int:
        """Add `amount` to a counter (0 when unset) in one atomic write; the value after."""
        ...

    def delete_function_state(self, fqfn: str, key: str) -> bool:
        """Forget one key; False when it was not set."""
        ...

    def clear_function_state(self, fqfn: str) -> int:
        """Forget every key of the function's state; how many there were."""
        ...

    def claim_function_lease(self, fqfn: str, owner: str, now_ms: int, lease_ms: int) -> bool:
        """Take the function's dispatch lease for `owner` until `now_ms + lease_ms` (one conditional
        write): when it is free, has run out or is `owner`'s already; False when another holds it."""
        ...

    def release_function_lease(self, fqfn: str, owner: str) -> None:
        """Give the lease up if `owner` holds it."""
        ...


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
