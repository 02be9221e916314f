"""cdk-nag acknowledgements: every acknowledged AwsSolutions finding goes through here, with its reason.

The reasons stay next to the resources they excuse (storage, functions, apis, observability); cdk-nag 3
records them as construct metadata (`aws:cdk:acknowledged-rules`), which tests/infra checks.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on `construct` (and its children), with its reason."""
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))


def acknowledge_all(construct: IConstruct, findings: tuple[tuple[str, str], ...]) -> None:
    """Acknowledge each (rule, reason) of `findings` on `construct`, in order."""
    for rule, reason in findings:
        acknowledge(construct, rule, reason)
