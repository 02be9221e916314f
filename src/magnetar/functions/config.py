"""A function's configuration: Pulsar's FunctionConfig (its JSON names, as `pulsar-admin functions`
and `/admin/v3/functions` take them), the subset Magnetar serves."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from magnetar.core.naming import check_entity


class ProcessingGuarantees(StrEnum):
    ATLEAST_ONCE = "ATLEAST_ONCE"
    ATMOST_ONCE = "ATMOST_ONCE"
    EFFECTIVELY_ONCE = "EFFECTIVELY_ONCE"


class SubscriptionPosition(StrEnum):
    Latest = "Latest"
    Earliest = "Earliest"


class Resources(BaseModel):
    """Pulsar's function resources: `ram` (bytes) and `cpu` (cores) size the function's Lambda
    memory (core/functions/deployment.py checks and converts them); `disk` is not used."""

    model_config = ConfigDict(extra="ignore")
    cpu: float | None = None
    ram: int | None = None
    disk: int | None = None


DEFAULT_MAX_MESSAGE_RETRIES = -1  # Pulsar's default: retry without end (no dead-letter topic)


class FunctionConfig(BaseModel):
    """Pulsar's FunctionConfig. Unknown Pulsar fields (jar, go, runtime flags...) are accepted and
    ignored; `py` names the code file; the code itself travels apart (multipart `data`)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    tenant: str = "public"
    namespace: str = "default"
    name: str
    className: str = ""  # "module.Class" or "module.function"
    py: str | None = None  # the code file's name ("exclamation.py" or a .zip)
    inputs: list[str] = Field(default_factory=list)
    topicsPattern: str | None = None
    output: str | None = None
    logTopic: str | None = None
    processingGuarantees: ProcessingGuarantees = ProcessingGuarantees.ATLEAST_ONCE
    parallelism: int = 1  # the function's reserved concurrency (core/functions/deployment.py checks it)
    userConfig: dict[str, Any] = Field(default_factory=dict)
    secrets: dict[str, Any] = Field(default_factory=dict)
    retainOrdering: bool = False
    retainKeyOrdering: bool = False
    maxMessageRetries: int = Field(default=DEFAULT_MAX_MESSAGE_RETRIES, ge=-1)
    deadLetterTopic: str | None = None
    subName: str | None = None
    subscriptionPosition: SubscriptionPosition = SubscriptionPosition.Latest
    timeoutMs: int | None = Field(default=None, ge=1)  # localrun: the ack timeout; registered: the Lambda's
    autoAck: bool = True
    resources: Resources = Field(default_factory=Resources)
    functionArn: str | None = None  # a Lambda function of the user's (MagnetarFunction) the dispatcher invokes

    @field_validator("tenant", "namespace", "name")
    @classmethod
    def _entity(cls, value: str) -> str:
        return check_entity("name", value)

    @property
    def fqfn(self) -> str:
        """Pulsar's fully qualified function name: tenant/namespace/name."""
        return f"{self.tenant}/{self.namespace}/{self.name}"

    @property
    def subscription(self) -> str:
        """The function's subscription on its inputs: `subName`, else Pulsar's default, the fqfn,
        written `tenant.namespace.name` (a Magnetar subscription name has no "/")."""
        return (self.subName or self.fqfn).replace("/", ".")

    @property
    def subscription_type(self) -> str:
        """Shared; Failover to keep order (retainOrdering); Key_Shared to keep it per key."""
        if self.retainOrdering:
            return "Failover"
        return "Key_Shared" if self.retainKeyOrdering else "Shared"
