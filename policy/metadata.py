"""A policy's metadata, declared on its rule function: ``@stack_policy(...)`` or ``@resource_policy(...)``.

The decorator keeps the function as it is (tests call rules directly) and records its ``PolicyDef`` on it;
``policy.registry`` gathers the definitions of the rule modules, in their order, and guards them. So a
policy's id, description, severity, topics, remediation and default enforcement are written where its rule
is, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from policy.findings import Finding, Level

if TYPE_CHECKING:
    from policy.facts import Resource, StackFacts

ResourceRule = Callable[["Resource"], Iterable[Finding]]
StackRule = Callable[["StackFacts"], Iterable[Finding]]
Rule = TypeVar("Rule", bound=Callable[..., Iterable[Finding]])

DEFINITION = "__policy__"  # the attribute of a rule function that holds its PolicyDef


class Severity(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


@dataclass(frozen=True)
class PolicyDef:
    id: str
    description: str
    severity: Severity
    topics: tuple[str, ...]
    remediation: str
    level: Level  # default enforcement; the stage's pack config overrides it
    resource_rule: ResourceRule | None = None
    stack_rule: StackRule | None = None
    resource_types: tuple[str, ...] = ()  # which resources a resource rule looks at

    def findings(self, stack: StackFacts) -> list[Finding]:
        """What the rule finds in a stack: a stack rule over its facts, a resource rule on each resource
        of its types."""
        if self.stack_rule is not None:
            return list(self.stack_rule(stack))
        assert self.resource_rule is not None
        return [f for r in stack.resources if r.type in self.resource_types for f in self.resource_rule(r)]


def definition(rule: object) -> PolicyDef | None:
    """The PolicyDef declared on a rule function, if it is one."""
    found = getattr(rule, DEFINITION, None)
    return found if isinstance(found, PolicyDef) else None


def stack_policy(
    id: str, description: str, *, severity: Severity, topics: tuple[str, ...], remediation: str,
    level: Level = Level.MANDATORY,
) -> Callable[[Rule], Rule]:
    """Declare the decorated function a stack rule: it reads the facts of the whole stack."""

    def declare(rule: Rule) -> Rule:
        setattr(rule, DEFINITION, PolicyDef(id, description, severity, tuple(topics), remediation, level, stack_rule=rule))
        return rule

    return declare


def resource_policy(
    id: str, description: str, *, resource_types: tuple[str, ...], severity: Severity, topics: tuple[str, ...],
    remediation: str, level: Level = Level.MANDATORY,
) -> Callable[[Rule], Rule]:
    """Declare the decorated function a resource rule: it reads one resource of ``resource_types`` at a time."""

    def declare(rule: Rule) -> Rule:
        setattr(rule, DEFINITION, PolicyDef(
            id, description, severity, tuple(topics), remediation, level, resource_rule=rule,
            resource_types=tuple(resource_types),
        ))
        return rule

    return declare
