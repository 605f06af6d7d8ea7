"""Rules for the change process around an upgrade: a prod change names its approved change ticket."""

from __future__ import annotations

from collections.abc import Iterator

from policy.facts import StackFacts
from policy.findings import Finding, advice
from policy.metadata import Severity, stack_policy
from spec.base import Stage


@stack_policy(
    "change-ticket",
    "Checks that the prod stage names a change ticket.",
    severity=Severity.MEDIUM, topics=("process",),
    remediation="Set changeTicket in the prod stack to the approved change.",
)
def change_ticket(stack: StackFacts) -> Iterator[Finding]:
    """The prod stage names a change ticket."""
    if not stack.stage_stated:
        yield advice("the stack's stage is not visible on its resources; cannot check the change ticket")
    elif stack.stage is Stage.PROD and not stack.change_ticket:
        yield Finding("the prod stage must name a change ticket (changeTicket)")
