"""`MagnetarFunction`: a Pulsar function's Lambda function declared as infrastructure code.

For teams that deploy a function with their own CDK app rather than through `magnetar functions
create`: the construct makes a Lambda function running the functions runtime
(functions/function_runtime) with the team's code in its own package, on the Magnetar stack's core
layer, with its own execution role (its log group, the functions' state, the schemas) and the
settings the team chooses (memory, timeout, reserved concurrency: Pulsar's resources, timeoutMs,
parallelism), and lets the stack's dispatcher invoke it (a resource-based permission naming the
dispatcher's role). The function is then registered with its ARN and without code:

    magnetar functions create --name excl --classname exclamation.ExclamationFunction \\
        --inputs in --output out --function-arn <the construct's function_arn>

    from magnetar_cdk.magnetar_function import MagnetarFunction
    MagnetarFunction(self, "Exclamation", magnetar=magnetar_stack, code="fns/exclamation.py",
                     memory_size=512, timeout=Duration.seconds(30), reserved_concurrency=2)

The dispatcher invokes the ARN with the registered configuration; the runtime loads the packaged
code (`code`: a `.py` file or a `.zip` in Pulsar's layout) once per execution environment.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from magnetar.config import ENV_FUNCTION_PACKAGED_CODE

from .nag import acknowledge
from .observability import log_group
from .pulsar_functions import grant_runtime_access
from .settings import ARCHITECTURE, FUNCTIONS_DIR, METRICS_NAMESPACE, RUNTIME

PACKAGED_DIR = "function"  # where the team's code sits in the package


def stage_package(code: Path) -> Path:
    """A directory holding the runtime's handler and `code` under `function/`, named by the hash of
    both (the same inputs stage to the same directory, so the asset hash is stable)."""
    if not code.is_file() or code.suffix not in (".py", ".zip"):
        raise ValueError(f"MagnetarFunction code must be a .py or .zip file: {code}")
    runtime = sorted(p for p in (FUNCTIONS_DIR / "function_runtime").glob("*.py"))
    digest = hashlib.sha256()
    for path in [*runtime, code]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    staged = Path(tempfile.gettempdir()) / "magnetar-function-packages" / digest.hexdigest()[:20]
    if not (staged / PACKAGED_DIR / code.name).is_file():
        building = staged.with_name(staged.name + ".tmp")
        shutil.rmtree(building, ignore_errors=True)
        (building / PACKAGED_DIR).mkdir(parents=True)
        for path in runtime:
            shutil.copy2(path, building / path.name)
        shutil.copy2(code, building / PACKAGED_DIR / code.name)
        shutil.rmtree(staged, ignore_errors=True)
        building.rename(staged)
    return staged


class MagnetarFunction(Construct):
    """A Pulsar function's Lambda function on a Magnetar stack (the module's docstring).

    `magnetar`: the MagnetarStack (its layer, dispatcher, table, configuration store and the
    environment its runtime needs); `code`: the function's `.py` or `.zip`; `reserved_concurrency`:
    Pulsar's parallelism (None: no reservation); `log_retention_days`: the stack's by default."""

    def __init__(self, scope: Construct, construct_id: str, *, magnetar: Any, code: str | Path,
                 memory_size: int = 1024, timeout: Duration | None = None, reserved_concurrency: int | None = 1,
                 environment: dict[str, str] | None = None, log_retention_days: int | None = None) -> None:
        super().__init__(scope, construct_id)
        code_path = Path(code)
        retention = log_retention_days or magnetar.log_retention_days
        self.log_group = log_group(self, "Logs", retention)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description=f"Magnetar function {construct_id}: its log group, state and the schemas")
        grant_runtime_access(self.role, table_arn=magnetar.table.table_arn,
                             schema_table_arns=magnetar.config_table_arns(), bucket=None, group=self.log_group)
        self.function = lambda_.Function(
            self, "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            code=lambda_.Code.from_asset(str(stage_package(code_path))),
            handler="handler.handler",
            layers=[magnetar.layer],
            memory_size=memory_size,
            timeout=timeout or Duration.seconds(60),
            reserved_concurrent_executions=reserved_concurrency,
            role=self.role,
            log_group=self.log_group,
            environment={**magnetar.function_environment, **(environment or {}),
                         ENV_FUNCTION_PACKAGED_CODE: f"{PACKAGED_DIR}/{code_path.name}",
                         "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
                         "POWERTOOLS_SERVICE_NAME": construct_id},
        )
        dispatcher_role = magnetar.function_dispatcher.role
        assert dispatcher_role is not None
        self.function.add_permission("MagnetarDispatcher", principal=iam.ArnPrincipal(dispatcher_role.role_arn),
                                     action="lambda:InvokeFunction")
        acknowledge(self.function, "AwsSolutions-L1",
                    "python3.12 on purpose: the Magnetar core layer's compiled wheels are built for CPython 3.12.")

    @property
    def function_arn(self) -> str:
        """The ARN to register the function with (`--function-arn`)."""
        return self.function.function_arn
