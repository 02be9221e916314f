"""cdk-nag acknowledgements: every acknowledged AwsSolutions finding goes through here, with its reason.

The reasons stay next to the resources they excuse (storage, functions, apis, observability); cdk-nag 3
records them as construct metadata (`aws:cdk:acknowledged-rules`), which tests/infra checks.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stack, Token, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on `construct` (and its children), with its reason."""
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))


def acknowledge_all(construct: IConstruct, findings: tuple[tuple[str, str], ...]) -> None:
    """Acknowledge each (rule, reason) of `findings` on `construct`, in order."""
    for rule, reason in findings:
        acknowledge(construct, rule, reason)


def region_account(construct: IConstruct) -> str:
    """`<region>:<account>` of an ARN that Stack.format_arn builds in `construct`'s stack, as cdk-nag
    writes it in a finding's id: the pseudo parameters of an environment-agnostic stack, else the
    stack's own region (and account)."""
    stack = Stack.of(construct)
    region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
    account = "<AWS::AccountId>" if Token.is_unresolved(stack.account) else stack.account
    return f"{region}:{account}"
