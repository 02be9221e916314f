"""`FunctionDeployer` on Lambda: each registered function is a Lambda function of its own.

The broker creates it when the function is registered (CreateFunction), brings it to the
function's settings on updates and restarts (UpdateFunctionConfiguration, UpdateFunctionCode
after a stack upgrade changed the runtime's package, PutFunctionConcurrency) and deletes it with the
function (DeleteFunction). What every such Lambda function is made of comes from the broker's
environment, which the stack sets (infra/magnetar_cdk/pulsar_functions.py):

- the code: the function runtime's package (functions/function_runtime, a CDK asset in S3,
  `MAGNETAR_FUNCTION_CODE` = "<bucket>/<key>") on the core layer (`MAGNETAR_FUNCTION_LAYERS`); the
  user's code stays in the cluster's bucket, read once per execution environment and code hash;
- the role: one execution role all of them share (`MAGNETAR_FUNCTION_ROLE`), which may read the
  code objects and the schemas and read and write the functions' state, nothing else;
- the logs: one log group (`MAGNETAR_FUNCTION_LOG_GROUP`, JSON lines naming the function);
- the resource names the runtime needs (table, bucket, stream, cluster, configuration store).

Locally the same calls reach the local runtime's emulated Lambda API (magnetar.local.lambda_api).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from magnetar.adapters.aws.clients import client
from magnetar.adapters.aws.functions import function_lambda_name
from magnetar.config import (
    ENV_BUCKET,
    ENV_CLUSTER_NAME,
    ENV_CONFIG_REGION,
    ENV_CONFIG_TABLE,
    ENV_FUNCTION_CODE,
    ENV_FUNCTION_FQFN,
    ENV_FUNCTION_LAYERS,
    ENV_FUNCTION_LOG_GROUP,
    ENV_FUNCTION_ROLE,
    ENV_STREAM,
    ENV_TABLE,
)
from magnetar.core.errors import Conflict, InvalidInput, RetryableError
from magnetar.core.ports.functions import DeployedFunction, FunctionDeployment

RUNTIME = "python3.12"  # as the stack's functions (infra/magnetar_cdk/settings.py), whose layer it uses
ARCHITECTURE = "arm64"
HANDLER = "handler.handler"
ENV_RUNTIME_CODE = "MAGNETAR_RUNTIME_CODE"  # on the function: the runtime package it was deployed with
ENV_RESTART = "MAGNETAR_RESTARTED"  # on the function: a new value starts new execution environments
FORWARDED_ENV = (ENV_TABLE, ENV_BUCKET, ENV_STREAM, ENV_CLUSTER_NAME, ENV_CONFIG_TABLE, ENV_CONFIG_REGION)
READY_WAIT_S = 15.0  # how long a deploy waits for an update in progress to end (within API Gateway's 30 s)


@dataclass(frozen=True)
class DeploymentSettings:
    """What every registered function's Lambda function is made of (the module's docstring)."""

    role_arn: str
    code_bucket: str
    code_key: str
    layers: tuple[str, ...] = ()
    log_group: str = ""
    environment: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> DeploymentSettings | None:
        """From the broker's environment; None when it names no role (the broker deploys nothing)."""
        role = os.environ.get(ENV_FUNCTION_ROLE, "").strip()
        if not role:
            return None
        bucket, _, key = os.environ.get(ENV_FUNCTION_CODE, "").strip().partition("/")
        layers = tuple(a.strip() for a in os.environ.get(ENV_FUNCTION_LAYERS, "").split(",") if a.strip())
        environment = {name: os.environ[name] for name in FORWARDED_ENV if os.environ.get(name)}
        return cls(role, bucket, key, layers, os.environ.get(ENV_FUNCTION_LOG_GROUP, "").strip(), environment)

    @property
    def code_ref(self) -> str:
        return f"{self.code_bucket}/{self.code_key}"


def _deployed(fqfn: str, configuration: dict[str, Any], concurrency: int | None) -> DeployedFunction:
    reason = configuration.get("StateReason") or configuration.get("LastUpdateStatusReason") or ""
    return DeployedFunction(fqfn, str(configuration.get("FunctionArn", "")), str(configuration.get("State") or "Active"),
                            str(configuration.get("LastUpdateStatus") or "Successful"),
                            int(configuration.get("MemorySize") or 128), int(configuration.get("Timeout") or 3),
                            concurrency, str(reason))


def _error(exc: ClientError, fqfn: str) -> Exception:
    code = exc.response.get("Error", {}).get("Code", "")
    message = exc.response.get("Error", {}).get("Message", "") or str(exc)
    if code in ("InvalidParameterValueException", "ValidationException"):
        return InvalidInput(f"Lambda refused the function's settings: {message}")
    if code == "ResourceConflictException":
        return Conflict(f"The Lambda function of {fqfn} is being changed; retry: {message}")
    if code == "AccessDeniedException":
        return RetryableError(f"The broker may not manage the Lambda function of {fqfn} (the stack's grants): {message}")
    return RetryableError(f"Lambda answered {code} for the function {fqfn}: {message}")


class LambdaFunctionDeployer:
    def __init__(self, settings: DeploymentSettings, lambda_client: Any = None) -> None:
        self.settings = settings
        self._client = lambda_client

    @property
    def lam(self) -> Any:
        return self._client or client("lambda")

    def _configuration(self, deployment: FunctionDeployment, current: dict[str, Any] | None) -> dict[str, Any]:
        variables = {**self.settings.environment, ENV_FUNCTION_FQFN: deployment.fqfn,
                     ENV_RUNTIME_CODE: self.settings.code_ref, "POWERTOOLS_SERVICE_NAME": deployment.fqfn}
        restarted = deployment.restart or ((current or {}).get("Environment", {}).get("Variables", {}).get(ENV_RESTART))
        if restarted:
            variables[ENV_RESTART] = restarted
        settings: dict[str, Any] = {
            "Role": self.settings.role_arn, "Handler": HANDLER, "Runtime": RUNTIME,
            "MemorySize": deployment.memory_mb, "Timeout": deployment.timeout_s, "Layers": list(self.settings.layers),
            "Environment": {"Variables": variables}, "Description": f"Pulsar function {deployment.fqfn} (Magnetar)"}
        if self.settings.log_group:
            settings["LoggingConfig"] = {"LogFormat": "JSON", "LogGroup": self.settings.log_group}
        return settings

    def _get(self, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.lam.get_function(FunctionName=name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return None
            raise
        return found

    def _wait_ready(self, name: str, configuration: dict[str, Any]) -> dict[str, Any]:
        """The configuration once no creation or update of the function is in progress."""
        deadline = time.monotonic() + READY_WAIT_S
        while configuration.get("State") == "Pending" or configuration.get("LastUpdateStatus") == "InProgress":
            if time.monotonic() > deadline:
                raise Conflict(f"The Lambda function {name} is still being created or updated; retry")
            time.sleep(0.5)
            configuration = self.lam.get_function_configuration(FunctionName=name)
        return configuration

    @staticmethod
    def _differs(configuration: dict[str, Any], wanted: dict[str, Any]) -> bool:
        layers = [layer.get("Arn") for layer in configuration.get("Layers") or []]
        return (configuration.get("Role") != wanted["Role"] or configuration.get("Handler") != wanted["Handler"]
                or configuration.get("Runtime") != wanted["Runtime"] or configuration.get("MemorySize") != wanted["MemorySize"]
                or configuration.get("Timeout") != wanted["Timeout"] or layers != wanted["Layers"]
                or configuration.get("Environment", {}).get("Variables", {}) != wanted["Environment"]["Variables"]
                or ("LoggingConfig" in wanted
                    and configuration.get("LoggingConfig", {}).get("LogGroup") != wanted["LoggingConfig"]["LogGroup"]))

    def deploy(self, deployment: FunctionDeployment) -> DeployedFunction:
        name = function_lambda_name(deployment.fqfn)
        try:
            return self._deploy(name, deployment)
        except ClientError as exc:
            raise _error(exc, deployment.fqfn) from None

    def _deploy(self, name: str, deployment: FunctionDeployment) -> DeployedFunction:
        current = self._get(name)
        if current is None:
            try:
                configuration = self.lam.create_function(
                    FunctionName=name, Code={"S3Bucket": self.settings.code_bucket, "S3Key": self.settings.code_key},
                    Architectures=[ARCHITECTURE], Tags={"magnetar:fqfn": deployment.fqfn},
                    **self._configuration(deployment, None))
                reserved = None
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ResourceConflictException":
                    raise
                current = self._get(name)  # created meanwhile (a concurrent deploy): updated below
                if current is None:
                    raise
        if current is not None:
            configuration = self._wait_ready(name, current["Configuration"])
            reserved = current.get("Concurrency", {}).get("ReservedConcurrentExecutions")
            deployed_code = configuration.get("Environment", {}).get("Variables", {}).get(ENV_RUNTIME_CODE)
            if deployed_code != self.settings.code_ref:  # the stack's runtime package changed
                configuration = self._wait_ready(name, self.lam.update_function_code(
                    FunctionName=name, S3Bucket=self.settings.code_bucket, S3Key=self.settings.code_key))
            wanted = self._configuration(deployment, configuration)
            if deployed_code != self.settings.code_ref or self._differs(configuration, wanted):
                configuration = self.lam.update_function_configuration(FunctionName=name, **wanted)
        if reserved != deployment.concurrency:
            self.lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=deployment.concurrency)
        return _deployed(deployment.fqfn, configuration, deployment.concurrency)

    def describe(self, fqfn: str) -> DeployedFunction | None:
        try:
            found = self._get(function_lambda_name(fqfn))
        except ClientError as exc:
            raise _error(exc, fqfn) from None
        if found is None:
            return None
        return _deployed(fqfn, found["Configuration"], found.get("Concurrency", {}).get("ReservedConcurrentExecutions"))

    def remove(self, fqfn: str) -> bool:
        try:
            self.lam.delete_function(FunctionName=function_lambda_name(fqfn))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return False
            raise _error(exc, fqfn) from None
        return True


def build_deployer() -> LambdaFunctionDeployer | None:
    """The broker's deployer, from its environment (None: it deploys nothing)."""
    settings = DeploymentSettings.from_env()
    return LambdaFunctionDeployer(settings) if settings is not None else None
