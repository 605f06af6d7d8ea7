"""A policy's metadata, declared on its rule function: ``@stack_policy(...)`` or ``@resource_policy(...)``.

The decorator keeps the function as it is (tests call rules directly) and records its ``PolicyDef`` on it
(:data:`POLICIES`, the declarations mechanism of :mod:`vocabulary.declarations` the check catalogue uses too);
``policy.registry`` gathers the definitions of the rule modules, in their order, and guards them. So a
policy's description, severity, topics, remediation and default enforcement are written where its rule
is, and nowhere else; its id comes from :class:`vocabulary.policy_ids.PolicyId`.

A policy may also take settings from its pack config entry beside ``enforcementLevel`` (``policy/<stage>.json``:
``"canary-attested": {"enforcementLevel": "mandatory", "trustedKeys": [...]}``), as AWSGuard's configurable
policies do: it declares them with ``config=PolicyConfig(...)`` (their JSON Schema, which the CrossGuard pack
hands the engine as the policy's ``configSchema``, and the reader that checks them), and its rule takes the
read settings as a second argument. The pack hands the rule what the engine configured (``args.get_config()``),
`gpu-rollout plan` what the stage's json file holds: one path for both (``PolicyDef.findings``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar, cast

from policy.findings import Finding, Level
from vocabulary.declarations import Declarations

if TYPE_CHECKING:
    from policy.facts import Resource, StackFacts

ResourceRule = Callable[["Resource"], Iterable[Finding]]
StackRule = Callable[["StackFacts"], Iterable[Finding]]
ConfiguredStackRule = Callable[["StackFacts", Any], Iterable[Finding]]  # the facts and its read settings
Rule = TypeVar("Rule", bound=Callable[..., Iterable[Finding]])

class Severity(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


ENFORCEMENT_LEVEL = "enforcementLevel"  # the one key of a pack config entry that is no setting


@dataclass(frozen=True)
class PolicyConfig:
    """The settings a policy takes from its pack config entry: each one's JSON Schema (``properties``, what
    CrossGuard's ``PolicyConfigSchema`` holds) and ``read``, which checks the entry's settings and returns the
    value the rule takes (a ValueError names the setting and what is wrong)."""

    properties: Mapping[str, Mapping[str, Any]]
    read: Callable[[Mapping[str, Any]], Any]
    required: tuple[str, ...] = ()

    def settings(self, entry: Mapping[str, Any] | None) -> Any:
        """The read settings of a pack config entry (its keys but ``enforcementLevel``); unknown keys are refused."""
        given = {k: v for k, v in (entry or {}).items() if k != ENFORCEMENT_LEVEL}
        unknown = sorted(set(given) - set(self.properties))
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: unknown setting (it takes: {', '.join(sorted(self.properties))})")
        missing = [k for k in self.required if k not in given]
        if missing:
            raise ValueError(f"{', '.join(missing)}: required")
        return self.read(given)


@dataclass(frozen=True)
class PolicyDef:
    id: str  # a PolicyId's string (the decorators take the PolicyId)
    description: str
    severity: Severity
    topics: tuple[str, ...]
    remediation: str
    level: Level  # default enforcement; the stage's pack config overrides it
    # The stack-config keys (docs/config.md paths, ``nodePools[].rollout.released``) a violation is fixed by
    # editing; empty when the fix is not in the stack file (facts-readable: the pack).
    config_keys: tuple[str, ...] = ()
    resource_rule: ResourceRule | None = None
    stack_rule: StackRule | ConfiguredStackRule | None = None  # configured (two arguments) when ``config`` is set
    resource_types: tuple[str, ...] = ()  # which resources a resource rule looks at
    config: PolicyConfig | None = None  # settings beside its enforcement level (stack rules only)

    def findings(self, stack: StackFacts, entry: Mapping[str, Any] | None = None) -> list[Finding]:
        """What the rule finds in a stack: a stack rule over its facts (with the settings of its pack config
        ``entry`` where it declares some), a resource rule on each resource of its types."""
        if self.stack_rule is not None:
            if self.config is not None:
                return list(cast(ConfiguredStackRule, self.stack_rule)(stack, self.config.settings(entry)))
            return list(cast(StackRule, self.stack_rule)(stack))
        assert self.resource_rule is not None
        return [f for r in stack.resources if r.type in self.resource_types for f in self.resource_rule(r)]


# The PolicyDefs declared on rule functions (under their attribute ``__policy__``).
POLICIES: Declarations[PolicyDef] = Declarations("__policy__", PolicyDef)


def definition(rule: object) -> PolicyDef | None:
    """The PolicyDef declared on a rule function, if it is one."""
    return POLICIES.of(rule)


def stack_policy(
    id: str, description: str, *, severity: Severity, topics: tuple[str, ...], remediation: str,
    config_keys: tuple[str, ...], level: Level = Level.MANDATORY, config: PolicyConfig | None = None,
) -> Callable[[Rule], Rule]:
    """Declare the decorated function a stack rule: it reads the facts of the whole stack (and, with
    ``config``, the settings of its pack config entry as its second argument)."""

    def declare(rule: Rule) -> Rule:
        return POLICIES.declare(rule, PolicyDef(str(id), description, severity, tuple(topics), remediation, level,
                                                stack_rule=rule, config=config, config_keys=tuple(config_keys)))

    return declare


def resource_policy(
    id: str, description: str, *, resource_types: tuple[str, ...], severity: Severity, topics: tuple[str, ...],
    remediation: str, config_keys: tuple[str, ...], level: Level = Level.MANDATORY,
) -> Callable[[Rule], Rule]:
    """Declare the decorated function a resource rule: it reads one resource of ``resource_types`` at a time."""

    def declare(rule: Rule) -> Rule:
        return POLICIES.declare(rule, PolicyDef(
            str(id), description, severity, tuple(topics), remediation, level, resource_rule=rule,
            resource_types=tuple(resource_types), config_keys=tuple(config_keys),
        ))

    return declare
