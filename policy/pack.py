"""The registry as CrossGuard policies. Builds ``pulumi_policy`` objects; never constructs the pack
(``PolicyPack(...)`` starts a server and blocks, so only ``policy/__main__.py`` calls it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from policy.facts import EngineProps, Resource, StackFacts
from policy.findings import Finding
from policy.registry import ADVICE_POLICY_ID, REGISTRY, PolicyDef

PACK_NAME = "gpu-driver-upgrade"

# CrossGuard has one enforcement level per policy, but a rule's findings are of two kinds: violations
# (at the policy's level) and advice (an operator release listing only the branch, a timeout of 0, a
# held pool on an unlisted driver, a fact the rule cannot see or an UNKNOWN compatibility answer). The
# registry's policies report only their violations; this one pack-only advisory policy reports the advice
# of every rule, each message prefixed with the rule's id. It is not in the registry: `gpu-rollout plan`
# shows the same advice under each rule's own id.
ADVICE_POLICY = ADVICE_POLICY_ID
ADVICE_DESCRIPTION = (
    "Reports the advice of every policy of the pack (branch-only operator support, zero timeouts, held pools, "
    "facts a rule cannot see, unknown compatibility answers), prefixed with the policy id."
)


def _report(findings: list[Finding], report: ReportViolation, *, advice: bool, prefix: str = "") -> None:
    for finding in findings:
        if finding.advisory != advice:
            continue
        urn = finding.resource.urn if finding.resource is not None and finding.resource.urn else None
        report(prefix + finding.message, urn)


def _resource_validator(policy: PolicyDef) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if args.resource_type not in policy.resource_types:
            return
        resource = Resource(args.resource_type, args.name, EngineProps(args.props), args.urn)
        _report(policy.findings(StackFacts([resource])), report, advice=False)

    return validate


def _stack_facts(args: StackValidationArgs) -> StackFacts:
    """The facts of the stack the engine hands one policy. The engine deserialises the stack's resources
    anew for each stack policy it calls (pulumi_policy's AnalyzeStack), so each call reads them once and
    hands them to its rule; the advice policy reads them once for every rule."""
    return StackFacts(Resource(r.resource_type, r.name, EngineProps(r.props), r.urn) for r in args.resources)


# The settings the engine configured for each configurable policy (``args.get_config()``), as its validator
# last received them. The advice policy is handed only its own config, yet it runs every rule: it reads the
# others' settings here. The engine calls a pack's stack policies one after the other in the order the pack
# lists them (pulumi_policy's AnalyzeStack), and the advice policy is listed last, so each configured rule has
# recorded its settings by then. A configured policy that is disabled never runs, and its advice is computed
# on no settings.
_CONFIGURED: dict[str, Mapping[str, Any]] = {}


def _findings(policy: PolicyDef, stack: StackFacts, entry: Mapping[str, Any] | None) -> list[Finding]:
    """The policy's findings; settings its config reader refuses are one finding naming them (the engine's own
    schema check of the pack config lets through what JSON Schema cannot say, e.g. a key id that does not match
    its key)."""
    try:
        return policy.findings(stack, entry)
    except ValueError as error:
        if policy.config is None:
            raise
        return [Finding(f"pack config {policy.id}: {error}")]


def _stack_validator(policy: PolicyDef) -> Callable[[StackValidationArgs, ReportViolation], None]:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        entry = dict(args.get_config()) if policy.config is not None else None
        if entry is not None:
            _CONFIGURED[policy.id] = entry
        _report(_findings(policy, _stack_facts(args), entry), report, advice=False)

    return validate


def _advice_validator(args: StackValidationArgs, report: ReportViolation) -> None:
    stack = _stack_facts(args)
    for policy in REGISTRY.values():
        entry = _CONFIGURED.get(policy.id, {}) if policy.config is not None else None
        _report(_findings(policy, stack, entry), report, advice=True, prefix=f"[{policy.id}] ")


def _common(policy: PolicyDef) -> dict[str, Any]:
    schema = None
    if policy.config is not None:
        properties = {name: dict(schema) for name, schema in policy.config.properties.items()}
        schema = PolicyConfigSchema(properties=properties, required=list(policy.config.required) or None)
    return {
        "name": policy.id,
        "config_schema": schema,
        "description": policy.description,
        "enforcement_level": EnforcementLevel(policy.level.value),
        "severity": Severity[policy.severity.name],
        "tags": list(policy.topics),
        "remediation_steps": policy.remediation,
    }


def build_policy(policy: PolicyDef) -> Policy:
    if policy.stack_rule is not None:
        return StackValidationPolicy(validate=_stack_validator(policy), **_common(policy))
    return ResourceValidationPolicy(validate=_resource_validator(policy), **_common(policy))


def build_advice_policy() -> Policy:
    return StackValidationPolicy(
        name=ADVICE_POLICY,
        description=ADVICE_DESCRIPTION,
        enforcement_level=EnforcementLevel.ADVISORY,
        severity=Severity.LOW,
        tags=["advice"],
        remediation_steps="Read each message: it names the policy whose section in docs/policies.md says what to do.",
        validate=_advice_validator,
    )


def build_policies() -> list[Policy]:
    """The registry's policies, in its order, then the pack-only advice policy."""
    return [*(build_policy(policy) for policy in REGISTRY.values()), build_advice_policy()]
