"""How faithfully the local stack imitates AWS: service limits and modeled latency.

One settings object for the whole local runtime: the emulator process enforces the AWS
service limits at its endpoint (Kinesis, DynamoDB, S3: `magnetar.local.aws_limits`) and adds
modeled service latency; the runtime enforces Lambda's, API Gateway's and the WebSocket API's
limits and adds Lambda's invocation overhead. `magnetar local up --aws-limits on|off
--aws-latency` sets it; docs/architecture.md says what each setting enforces and approximates.
"""

from __future__ import annotations

from dataclasses import dataclass

# A new account's Lambda concurrency quota per region (AWS documents 1,000; accounts created
# recently may start lower until AWS raises them).
DEFAULT_LAMBDA_CONCURRENCY = 1000


@dataclass(frozen=True)
class AwsFidelity:
    limits: bool = False  # enforce AWS's documented service limits, with AWS's errors
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


EMULATOR_AS_IS = AwsFidelity()  # no limits, no modeled latency
